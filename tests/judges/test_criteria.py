"""Prebuilt criteria: each renders its own criterion, parses and scores
through a real OpenAI-compatible loopback server, and refuses input it cannot
grade (a -ref form without a reference, groundedness without a context)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from judgegraph import JudgeInputError, OpenAIBackend, PointwiseJudge, Status
from judgegraph._criteria import CRITERIA
from judgegraph.judges import list_templates
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

IDS = [s.name for s in CRITERIA] + [s.name + "-ref" for s in CRITERIA if s.reference_form]
QUESTION = {s.name: s.question for s in CRITERIA}
ITEM = {
    "instruction": "Book a table for two in Paris tonight.",
    "response": 'search_restaurants(city="Paris", party=2)',
    "reference": 'search_restaurants(city="Paris", party=2); book(id=..., time="tonight")',
    "context": "Tools: search_restaurants(city, party), book(id, time). Paris has many bistros.",
}


def _grade(req: LoopbackRequest) -> Reply:
    """Score 4 when the prompt states a known criterion, 1 when it also shows a reference."""
    p = req.prompt
    if not any(q in p for q in QUESTION.values()):
        return Reply("Which criterion? No verdict.")
    score = 1 if "⟦begin reference answer⟧" in p else 4
    if req.body.get("response_format"):
        return Reply(f'{{"feedback": "Judged.", "score": {score}}}')
    return Reply(f"Judged against the criterion. [RESULT] {score}")


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(_grade) as s:
        yield s


def test_all_criteria_are_listed() -> None:
    listed = {t.id for t in list_templates()}
    assert set(IDS) <= listed
    assert {"correctness", "groundedness", "answer-relevance", "helpfulness", "harmlessness"} <= listed
    assert {"conciseness", "instruction-following", "tool-call-correctness", "correctness-ref"} <= listed


@pytest.mark.parametrize("template", IDS)
async def test_criterion_renders_parses_and_scores(server: LoopbackServer, template: str) -> None:
    backend = OpenAIBackend("judge", base_url=server.url + "/v1", api_key="x", structured_output=False)
    judge = PointwiseJudge(backend, template=template)
    needs = judge.template.requires
    item: dict[str, Any] = {k: v for k, v in ITEM.items() if k in ("instruction", "response", *needs)}
    v = await judge.ajudge(item)
    assert v.status is Status.OK, v.reason
    assert v.score == (1 if template.endswith("-ref") else 4)
    assert v.provenance is not None and (v.provenance.template_id, v.provenance.template_version) == (template, 1)
    # The rendered prompt carries the criterion and, where needed, its sources.
    prompt = judge.template.render({**item, "examples": None}, scale=judge.scale, structured=False)[1].content
    assert QUESTION[template.removesuffix("-ref")] in prompt
    assert ("⟦begin context⟧" in prompt) == ("context" in needs)
    assert ("⟦begin reference answer⟧" in prompt) == template.endswith("-ref")


async def test_structured_mode_through_the_server(server: LoopbackServer) -> None:
    backend = OpenAIBackend("judge", base_url=server.url + "/v1", api_key="x")
    v = await PointwiseJudge(backend, template="groundedness").ajudge(ITEM | {"reference": None})
    assert v.status is Status.OK and v.score == 4 and v.rationale == "Judged."


async def test_missing_fields_are_named_before_any_call(server: LoopbackServer) -> None:
    backend = OpenAIBackend("judge", base_url=server.url + "/v1", api_key="x")
    before = sum(server.calls.values())
    base = {"instruction": "q", "response": "r"}
    with pytest.raises(JudgeInputError, match=r"^reference: template 'correctness-ref'"):
        await PointwiseJudge(backend, template="correctness-ref").ajudge(base)
    with pytest.raises(JudgeInputError, match=r"^context: template 'groundedness'"):
        await PointwiseJudge(backend, template="groundedness").ajudge(base)
    # A context given to a template without a place for it is not dropped silently.
    with pytest.raises(JudgeInputError, match=r"^context: template 'pointwise-rubric' has no place"):
        await PointwiseJudge(backend).ajudge(base | {"context": "some passage"})
    # In a batch the item with the missing field fails in place; the rest are judged.
    out = await PointwiseJudge(backend, template="correctness-ref").ajudge_many([base, base | {"reference": "r"}])
    assert isinstance(out[0], JudgeInputError) and str(out[0]).startswith("item 0: reference:")
    assert not isinstance(out[1], JudgeInputError) and out[1].status is Status.OK
    assert sum(server.calls.values()) == before + 1


def test_cli_lists_criteria_with_their_needs() -> None:
    from typer.testing import CliRunner

    from judgegraph.cli import app

    out = CliRunner().invoke(app, ["templates"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    line = next(row for row in out.output.splitlines() if "groundedness" in row)
    assert "context" in line
