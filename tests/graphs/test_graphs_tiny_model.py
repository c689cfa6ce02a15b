"""Every graph end to end with a real in-process model: the tiny model
taught to answer ``Fine. [RESULT] n`` (the ``format_model`` fixture)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judgegraph import Criterion, Rubric, Status
from judgegraph.graphs import (
    create_batch_graph,
    create_guardrail_graph,
    create_multiturn_graph,
    create_pairwise_graph,
    create_pointwise_graph,
    create_rubric_graph,
)
from judgegraph.judges import create_multiturn_judge, create_pairwise_judge, create_pointwise_judge


@pytest.fixture(scope="module")
def backend(format_model: Path) -> Any:
    from judgegraph import TransformersBackend

    return TransformersBackend(format_model)


def ctx(backend: Any, **judges: Any) -> dict[str, Any]:
    return {"judge": create_pointwise_judge(max_tokens=16), "backend": backend, **judges}


def assert_model_score(v: Any) -> None:
    """An ok score on the scale, with the model's own token distribution."""
    assert v.status is Status.OK and v.raw_text and "[RESULT]" in v.raw_text
    assert v.scale[0] <= v.score <= v.scale[1]
    assert v.distribution and abs(sum(v.distribution.values()) - 1) < 0.05
    assert v.provenance.backend == "transformers"


async def test_pointwise_and_rubric_graphs(backend: Any) -> None:
    out = await create_pointwise_graph().ainvoke({"instruction": "q", "response": "answer 7"}, context=ctx(backend))
    assert_model_score(out["verdict"])
    criteria = [Criterion(name=n, rubric=Rubric(criterion=n, levels={1: "bad", 2: "ok", 3: "good"})) for n in "xy"]
    graph = create_rubric_graph(criteria=criteria)
    out = await graph.ainvoke({"instruction": "q", "response": "r"}, context=ctx(backend))
    v = out["verdict"]
    # The model has only been taught the marker: a score outside a 1-3 rubric is flagged, never clipped.
    for s in v.criteria.values():
        assert s.status is Status.OK or (s.status is Status.UNPARSED and s.reason)
    assert (v.weighted_score is not None) == (v.status is Status.OK)


async def test_multiturn_graph(backend: Any) -> None:
    messages = [
        {"role": "user", "content": "question 1"},
        {"role": "assistant", "content": "answer 1"},
        {"role": "user", "content": "question 2"},
        {"role": "assistant", "content": "answer 2"},
    ]
    judges = {
        "turn_judge": create_multiturn_judge(mode="turn", max_tokens=16),
        "conversation_judge": create_multiturn_judge(mode="conversation", max_tokens=16),
    }
    graph = create_multiturn_graph(turn_policy="mean")
    out = await graph.ainvoke({"messages": messages}, context=ctx(backend, **judges))
    v = out["verdict"]
    assert [t.turn for t in v.turns] == [1, 3]
    for t in v.turns:
        assert_model_score(t.verdict)
    assert v.turn_score == sum(t.verdict.score for t in v.turns) / 2
    assert v.conversation is not None and v.conversation.provenance.template_id == "conversation"


async def test_pairwise_graph_flags_a_model_that_cannot_answer_the_format(backend: Any) -> None:
    # Taught only "[RESULT] n", the model cannot write "[SCORES] a b": both orders
    # run, the repair round is tried, and the verdict says why there is no winner.
    judge = create_pairwise_judge(max_tokens=16)
    out = await create_pairwise_graph().ainvoke(
        {"instruction": "q", "response_a": "answer 1", "response_b": "answer 2"}, context=ctx(backend, judge=judge)
    )
    v = out["verdict"]
    assert v.status is Status.UNPARSED and v.winner is None
    assert v.reason.startswith("order A/B: no [SCORES] marker")
    assert len(v.orders) == 2 and all(o.provenance.attempts == 2 for o in v.orders)


@pytest.mark.timing
async def test_guardrail_and_batch_graphs(backend: Any) -> None:
    # The lowest threshold the 1-5 scale allows: a threshold of 1 would pass every score, and is refused.
    guard = create_guardrail_graph(threshold=2, fail_policy="closed", timeout_s=60)
    out = await guard.ainvoke({"instruction": "q", "answer": "answer 3"}, context=ctx(backend))
    decision = out["decision"]
    assert decision.judge_status is Status.OK and not decision.fail_policy_applied
    assert decision.action == ("pass" if out["verdict"].score >= 2 else "block")
    assert_model_score(out["verdict"])

    items = [{"instruction": "q", "response": f"answer {i}"} for i in range(5)]
    items[2] = {"instruction": "q", "response": ""}
    out = await create_batch_graph().ainvoke({"items": items}, {"max_concurrency": 4}, context=ctx(backend))
    results = out["results"]
    assert [r.status for r in results] == [Status.OK, Status.OK, Status.ERROR, Status.OK, Status.OK]
    assert "item 2" in results[2].reason and "response" in results[2].reason
    for r in results[:2] + results[3:]:
        assert_model_score(r)
