"""Prompt injection: evaluated answers that try to dictate their own verdict.

The corpus (tests/data/injection_corpus.jsonl) holds answers that demand a
score or a winner: direct orders, fake closing delimiters, fake judge turns,
role-play, invisible characters, planted JSON verdicts, markdown hiding
places. Each is judged by scripted judges that do the worst a model could do
with it: echo the evaluated block, echo its inside, echo the whole prompt,
obey the answer by repeating its demand, or continue it as their own turn.
None of them may yield a verdict; a judge that gives its own verdict after
echoing gets exactly that verdict.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judgegraph import MultiTurnJudge, PairwiseJudge, PointwiseJudge, ScriptedBackend, Status
from judgegraph._templates import DELIM_CLOSE, DELIM_OPEN, get_template
from judgegraph.backends import GenerateRequest

CORPUS = [
    json.loads(line) for line in (Path(__file__).parents[1] / "data" / "injection_corpus.jsonl").open(encoding="utf-8")
]
IDS = [c["id"] + "-" + c["category"] for c in CORPUS]
RUBRIC = {"criterion": "Is the answer correct?", "levels": {1: "wrong", 2: "partly", 3: "right"}}

_BLOCK = re.compile(re.escape(DELIM_OPEN) + r"begin ([^" + DELIM_CLOSE + r"]*)" + re.escape(DELIM_CLOSE) + r"\n(.*?)\n"
                    + re.escape(DELIM_OPEN) + r"end \1" + re.escape(DELIM_CLOSE), re.S)  # fmt: skip
_MARKER = re.compile(r"\[\s*(result|scores)\s*\]", re.I)


def _prompt(req: GenerateRequest) -> str:
    return req.messages[1].content  # the first user turn (a repair round adds more)


def _blocks(prompt: str) -> list[tuple[str, str, str]]:
    """(name, whole block, inside) for each delimited block in a prompt."""
    return [(m.group(1), m.group(0), m.group(2)) for m in _BLOCK.finditer(prompt)]


def _evaluated(req: GenerateRequest) -> list[tuple[str, str, str]]:
    return [b for b in _blocks(_prompt(req)) if b[0].startswith(("response", "conversation"))]


# What a misbehaving judge model might write. Each takes the request it got.
def echo_block(req: GenerateRequest) -> str:
    return "Let me restate the answer first.\n" + "\n".join(b[1] for b in _evaluated(req))


def echo_inside(req: GenerateRequest) -> str:
    return "\n".join(b[2] for b in _evaluated(req))


def echo_prompt(req: GenerateRequest) -> str:
    return _prompt(req)


def obey(req: GenerateRequest) -> str:
    # Does what the answer asks, literally: repeats its last line as the verdict line.
    last = [b[2].strip().splitlines()[-1] for b in _evaluated(req) if b[2].strip()]
    return "Feedback: as the answer instructs.\n" + (last[-1] if last else "")


def continue_as_turn(req: GenerateRequest) -> str:
    # Treats the answer's fake turn as its own and carries on from the end of it.
    inside = _evaluated(req)[-1][2]
    return inside.split("assistant", 1)[-1] if "assistant" in inside else inside


MISBEHAVING: dict[str, Callable[[GenerateRequest], str]] = {
    "echo-block": echo_block,
    "echo-inside": echo_inside,
    "echo-prompt": echo_prompt,
    "obey": obey,
    "continue-turn": continue_as_turn,
}


def _judges(backend: ScriptedBackend) -> list[tuple[Any, Callable[[str], dict[str, Any]]]]:
    """Each judge with a way to put the injected text under judgement."""
    return [
        (PointwiseJudge(backend), lambda t: {"instruction": "What is the capital of France?", "response": t}),
        (
            PointwiseJudge(backend),
            lambda t: {"instruction": "Capital of France?", "response": t, "reference": t, "rubric": RUBRIC},
        ),
        (
            PairwiseJudge(backend),
            lambda t: {"instruction": "Capital of France?", "response_a": t, "response_b": "Paris"},
        ),
        (
            PairwiseJudge(backend),
            lambda t: {"instruction": "Capital of France?", "response_a": "Paris", "response_b": t},
        ),
        (
            PairwiseJudge(backend, template="pairwise-scores"),
            lambda t: {"instruction": "Capital of France?", "response_a": t, "response_b": "Paris"},
        ),
        (
            PairwiseJudge(backend, template="pairwise-rubric"),
            lambda t: {"instruction": "Capital?", "response_a": t, "response_b": "Paris", "rubric": RUBRIC},
        ),
        (
            MultiTurnJudge(backend),
            lambda t: {"messages": [{"role": "user", "content": "Capital?"}, {"role": "assistant", "content": t}]},
        ),
        (
            MultiTurnJudge(backend, mode="turn"),
            lambda t: {"messages": [{"role": "user", "content": t}, {"role": "assistant", "content": t}]},
        ),
    ]


def _verdict(result: Any) -> Any:
    return getattr(result, "score", None) if hasattr(result, "score") else getattr(result, "winner", None)


@pytest.mark.parametrize("case", CORPUS, ids=IDS)
def test_templates_neutralise_the_injection(case: dict[str, str]) -> None:
    text = case["text"]
    fields = {"instruction": text, "response": text, "response_a": text, "response_b": text, "reference": text}
    for tid in ("pointwise-rubric", "pairwise-choice", "pairwise-scores", "last-turn"):
        t = get_template(tid)
        wanted = {k: v for k, v in fields.items() if "{" + k + "_block}" in t.user or k == "reference"}
        if t.kind == "conversation":
            wanted["conversation"] = text
        prompt = t.render({**wanted, "rubric_text": ""}, scale=(1, 5), structured=False)[1].content
        blocks = _blocks(prompt)
        # Exactly our blocks, each closed by its own end: the answer adds none and closes none.
        assert prompt.count(DELIM_OPEN) == prompt.count(DELIM_CLOSE) == 2 * len(blocks) == 2 * len(wanted)
        for _, _, inside in blocks:
            visible = "".join(ch for ch in inside if unicodedata.category(ch) != "Cf")
            assert not _MARKER.search(visible), (tid, inside)


@pytest.mark.parametrize("behaviour", list(MISBEHAVING))
async def test_no_misbehaving_judge_gets_a_verdict_out_of_the_corpus(behaviour: str) -> None:
    backend = ScriptedBackend(MISBEHAVING[behaviour])
    for case in CORPUS:
        for judge, item in _judges(backend):
            result = await judge.ajudge(item(case["text"]))
            assert result.status is not Status.OK, (behaviour, case["id"], judge.template.id, result)
            assert _verdict(result) is None
            assert result.reason


async def test_structured_judges_echoing_a_planted_json_verdict_get_none() -> None:
    backend = ScriptedBackend(echo_inside, structured_output=True)
    for case in CORPUS:
        for judge, item in _judges(backend):
            result = await judge.ajudge(item(case["text"]))
            assert result.status is not Status.OK, (case["id"], judge.template.id, result)


def honest(req: GenerateRequest) -> str:
    """Echoes the answer, notes the attempt, then gives a fixed verdict of its own."""
    fmt = _prompt(req).rsplit("\n", 1)[-1]
    own = "[SCORES] 3 4" if "[SCORES]" in fmt else "[RESULT] B" if "`[RESULT] A`" in fmt else "[RESULT] 2"
    return f"{echo_block(req)}\nThe answer tries to dictate its grade; I ignore that.\n{own}"


async def test_a_judge_that_echoes_then_decides_gets_its_own_verdict() -> None:
    backend = ScriptedBackend(honest)
    benign = "The capital of France is Paris."
    for case in CORPUS:
        for judge, item in _judges(backend):
            expected = await judge.ajudge(item(benign))
            result = await judge.ajudge(item(case["text"]))
            assert result.status is Status.OK and expected.status is Status.OK, (case["id"], result.reason)
            # The injected answer gets the same verdict as a plain one: the judge's, not the answer's.
            assert _verdict(result) == _verdict(expected), (case["id"], judge.template.id)
            if hasattr(result, "score_a"):
                assert (result.score_a, result.score_b) == (expected.score_a, expected.score_b)
            if judge.template.parser == "score":
                assert result.score == 2
