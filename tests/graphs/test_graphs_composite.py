"""The graphs take ensemble and cascade judges from the context like any other."""

from __future__ import annotations

import pytest

from judgegraph import ScriptedBackend, Status, from_context
from judgegraph.backends import GenerateRequest
from judgegraph.cascade import Budget, LowConfidence, create_cascade_judge
from judgegraph.graphs import create_batch_graph, create_guardrail_graph, create_pointwise_graph
from judgegraph.judges import create_ensemble_judge, create_pointwise_judge

ITEM = {"instruction": "Summarise the memo.", "response": "It asks for budgets by Friday."}


def fixed(score: int) -> ScriptedBackend:
    return ScriptedBackend(lambda r: f"Seen. [RESULT] {score}")


async def test_pointwise_graph_with_an_ensemble_judge() -> None:
    jury = create_ensemble_judge(
        [
            create_pointwise_judge(from_context("small"), name="small"),
            create_pointwise_judge(from_context("big"), name="big"),
        ],
        aggregation="mean",
    )
    out = await create_pointwise_graph().ainvoke(ITEM, context={"judge": jury, "small": fixed(2), "big": fixed(5)})
    v = out["verdict"]
    assert v.status is Status.OK and v.expected_score == 3.5
    assert sorted(m.judge for m in v.members) == ["big", "small"]


async def test_guardrail_with_a_cascade_escalates_then_passes() -> None:
    def unsure(req: GenerateRequest) -> str:
        return "Probably fine. [RESULT] 2"  # no token probabilities: confidence unknown, so it escalates

    cascade = create_cascade_judge(
        [
            create_pointwise_judge(from_context("local"), name="local"),
            create_pointwise_judge(from_context("api"), name="api"),
        ],
        escalate=LowConfidence(threshold=0.8),
    )
    local, api = ScriptedBackend(unsure), fixed(5)
    graph = create_guardrail_graph(threshold=4, fail_policy="closed")
    out = await graph.ainvoke(
        {"instruction": ITEM["instruction"], "answer": ITEM["response"]},
        context={"judge": cascade, "local": local, "api": api},
    )
    assert out["decision"].action == "pass" and out["decision"].score == 5
    assert (len(local.calls), len(api.calls)) == (1, 1)
    assert [t.judge for t in out["verdict"].tiers] == ["local", "api"]


async def test_batch_graph_with_an_ensemble_and_a_batch_only_cascade() -> None:
    jury = create_ensemble_judge(
        [create_pointwise_judge(from_context("a"), name="a"), create_pointwise_judge(from_context("b"), name="b")]
    )
    out = await create_batch_graph().ainvoke(
        {"items": [ITEM, {"instruction": "q"}]}, context={"judge": jury, "a": fixed(4), "b": fixed(4)}
    )
    assert [r.status for r in out["results"]] == [Status.OK, Status.ERROR]
    assert out["results"][0].score == 4

    ranked = create_cascade_judge(
        [create_pointwise_judge(from_context("a"), name="a"), create_pointwise_judge(from_context("b"), name="b")],
        escalate=Budget(fraction=0.5),
    )
    with pytest.raises(ValueError, match="create_batch_judge_node"):
        await create_batch_graph().ainvoke({"items": [ITEM]}, context={"judge": ranked, "a": fixed(4), "b": fixed(4)})
