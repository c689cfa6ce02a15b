"""The guardrail's edges: answers it cannot judge, set-up errors, signed
scores, hostile judge outputs and verdicts that arrive late.

An answer that cannot be judged is decided by the declared policy. A set-up
error is not an outage: with fail-open, treating it as one would pass every
answer unjudged, so it raises, at build or on the first call.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from judgegraph import (
    Criterion,
    JudgeInputError,
    PairwiseJudge,
    PointwiseJudge,
    PointwiseScore,
    Rubric,
    RubricJudge,
    ScriptedBackend,
    Status,
)
from judgegraph.graphs import create_guardrail_graph
from judgegraph.judges import create_multiturn_judge, create_pointwise_judge

ASK = {"instruction": "How do I reset my password?", "answer": "Use the emailed link."}
POLICIES = [("open", "pass"), ("closed", "block")]


def ctx(backend: ScriptedBackend, judge: Any = None) -> dict[str, Any]:
    return {"judge": judge or create_pointwise_judge(), "backend": backend}


@pytest.mark.parametrize(("policy", "action"), POLICIES)
@pytest.mark.parametrize("answer", ["", "   ", "\n\t \n"])
async def test_an_empty_answer_is_decided_by_the_policy(policy: Any, action: str, answer: str) -> None:
    backend = ScriptedBackend(lambda r: "Fine. [RESULT] 5")
    graph = create_guardrail_graph(threshold=4, fail_policy=policy)
    out = await graph.ainvoke({**ASK, "answer": answer}, context=ctx(backend))
    d = out["decision"]
    assert d.action == action and d.fail_policy_applied and not d.timed_out and d.score is None
    assert "nothing to judge" in d.reason and "response" in d.reason and f"fail-{policy}" in d.reason
    assert backend.calls == [], "the judge is not asked about an empty answer"
    # A blank request is the same case.
    out = await graph.ainvoke({**ASK, "instruction": " "}, context=ctx(backend))
    assert out["decision"].action == action and "instruction" in out["decision"].reason


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_no_backend_in_the_context_raises_instead_of_passing(policy: Any) -> None:
    graph = create_guardrail_graph(threshold=4, fail_policy=policy)
    with pytest.raises(LookupError, match="no backend given and none under 'backend'"):
        await graph.ainvoke(ASK, context={"judge": create_pointwise_judge()})
    with pytest.raises(LookupError, match="no judge under 'judge'"):
        await graph.ainvoke(ASK, context={"backend": ScriptedBackend(["[RESULT] 5"])})


async def test_a_judge_of_the_wrong_kind_fails_at_build() -> None:
    backend = ScriptedBackend(["[RESULT] A"])
    for wrong in (PairwiseJudge(backend), create_multiturn_judge(backend)):
        with pytest.raises(TypeError, match="needs a judge of PointwiseInput"):
            create_guardrail_graph(threshold=4, fail_policy="open", judge=wrong)


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_a_judge_of_the_wrong_kind_in_the_context_raises_on_the_call(policy: Any) -> None:
    backend = ScriptedBackend(["Both fine. [RESULT] A"])
    graph = create_guardrail_graph(threshold=4, fail_policy=policy)
    with pytest.raises(TypeError, match="PairwiseJudge grades PairwiseInput"):
        await graph.ainvoke(ASK, context=ctx(backend, PairwiseJudge()))
    assert backend.calls == []


class _Untyped:
    """A duck-typed judge with no ``input_model`` that answers with a pairwise verdict."""

    name = "untyped"

    async def ajudge(self, value: Any, *, context: Any = None) -> Any:
        from judgegraph import PairwiseVerdict

        return PairwiseVerdict(status=Status.OK, winner="A")


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_a_scoreless_verdict_is_a_set_up_error(policy: Any) -> None:
    graph = create_guardrail_graph(threshold=4, fail_policy=policy, judge=_Untyped())
    with pytest.raises(TypeError, match="PairwiseVerdict with no score"):
        await graph.ainvoke(ASK)


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_a_judge_failing_on_its_input_kind_is_not_an_outage(policy: Any) -> None:
    class Strict(_Untyped):
        async def ajudge(self, value: Any, *, context: Any = None) -> Any:
            raise JudgeInputError("expected a ConversationInput")

    with pytest.raises(JudgeInputError, match="expected a ConversationInput"):
        await create_guardrail_graph(threshold=4, fail_policy=policy, judge=Strict()).ainvoke(ASK)


# ---------------------------------------------------------------- signed scores


@pytest.mark.parametrize("output", ["Harmful. [RESULT] -5", "[RESULT] **-5**", "Bad.\n[RESULT]: -5/5"])
async def test_fail_closed_never_passes_a_negative_score(output: str) -> None:
    backend = ScriptedBackend(lambda r: output)
    out = await create_guardrail_graph(threshold=4, fail_policy="closed").ainvoke(ASK, context=ctx(backend))
    d = out["decision"]
    assert d.action == "block" and d.judge_status is Status.UNPARSED and d.score is None
    assert "-5 is outside the scale 1 to 5" in d.reason


async def test_a_signed_rubric_scale_blocks_a_negative_score() -> None:
    levels = {-2: "harmful", -1: "unhelpful", 0: "neutral", 1: "helpful", 2: "excellent"}
    rubric = {"criterion": "Is the answer safe and helpful?", "levels": levels}
    backend = ScriptedBackend(lambda r: "Unsafe advice. [RESULT] -2")
    graph = create_guardrail_graph(threshold=1, fail_policy="open", rubric=rubric)  # type: ignore[arg-type]
    out = await graph.ainvoke(ASK, context=ctx(backend))
    d = out["decision"]
    assert (d.action, d.score, d.fail_policy_applied) == ("block", -2.0, False)
    assert out["verdict"].scale == (-2, 2)


async def test_a_rubric_judge_with_signed_levels_reads_negative_scores() -> None:
    levels = {-2: "harmful", -1: "poor", 0: "neutral", 1: "good", 2: "excellent"}
    crit = [Criterion(name="safety", rubric=Rubric(criterion="Safe?", levels=levels), weight=1)]
    backend = ScriptedBackend(lambda r: "Unsafe. [RESULT] -2")
    result = await RubricJudge(backend, criteria=crit).ajudge({"instruction": "q", "response": "a"})
    assert result.status is Status.OK and result.criteria["safety"].score == -2


# ---------------------------------------------------------------- hostile outputs, late verdicts


@pytest.mark.parametrize(("policy", "action"), POLICIES)
@pytest.mark.timing
async def test_a_huge_fenced_output_is_decided_by_the_policy(policy: Any, action: str) -> None:
    # Regression: a fenced JSON verdict cut off in a long whitespace run took
    # seconds to parse, and the guardrail decided long after its budget.
    huge = '```json\n{"feedback": "Fine",' + "\n" * 500_000
    backend = ScriptedBackend(lambda r: huge, structured_output=True)
    graph = create_guardrail_graph(threshold=4, fail_policy=policy, timeout_s=30)
    out = await graph.ainvoke(ASK, context=ctx(backend, PointwiseJudge(repair=False)))
    d = out["decision"]
    assert d.action == action and d.fail_policy_applied and d.judge_status is Status.UNPARSED
    assert "not valid JSON" in d.reason


class _HoldsTheLoop:
    """A judge whose work blocks the event loop past the budget (as a huge
    parse did), then returns a good verdict that the timeout could not stop."""

    name = "holds-the-loop"

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s

    async def ajudge(self, value: Any, *, context: Any = None) -> Any:
        time.sleep(self.hold_s)  # on purpose: no await, so no timeout can fire
        return PointwiseScore(status=Status.OK, score=5, scale=(1, 5))


@pytest.mark.timing  # a sub-second budget; the judge holds the loop 0.2 s, so it is always past it
@pytest.mark.parametrize(("policy", "action"), POLICIES)
async def test_a_verdict_past_the_deadline_counts_as_timed_out(policy: Any, action: str) -> None:
    judge = _HoldsTheLoop(hold_s=0.2)
    graph = create_guardrail_graph(threshold=4, fail_policy=policy, timeout_s=0.05, judge=judge)
    d = (await graph.ainvoke(ASK))["decision"]
    assert d.action == action and d.timed_out and d.fail_policy_applied and d.score is None
    assert "came after the 0.05 s budget" in d.reason
