"""A guardrail threshold off its judge's scale is refused, naming the option and the scale.

``threshold=0.75`` on a 1-5 judge passes every verdict; it used to be
accepted. The class: every threshold the guardrail is given (at build, or
from the run's context) is checked against the scale of the judge it applies
to (the judge's own, a rubric's levels, 0-1 for rubric judges): outside
``(low, high]`` is a ValueError before anything is judged; inside, an answer
passes exactly when its score reaches the threshold.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import Criterion, PointwiseJudge, Rubric, RubricJudge, ScriptedBackend
from judgegraph.graphs import create_guardrail_graph
from judgegraph.judges import create_pointwise_judge

ASK = {"instruction": "How do I reset my password?", "answer": "Use the emailed link."}


def test_a_fraction_as_threshold_on_a_one_to_five_judge_is_refused_at_build() -> None:
    judge = PointwiseJudge(ScriptedBackend(lambda r: "[RESULT] 1"))
    with pytest.raises(ValueError, match=r"threshold = 0\.75 is outside the score scale 1 to 5") as info:
        create_guardrail_graph(threshold=0.75, fail_policy="closed", judge=judge)
    assert "passes every verdict" in str(info.value)


async def test_a_context_judge_is_checked_on_the_first_call_before_judging() -> None:
    backend = ScriptedBackend(lambda r: "[RESULT] 1")
    graph = create_guardrail_graph(threshold=0.75, fail_policy="open")
    with pytest.raises(ValueError, match=r"threshold = 0\.75 is outside the score scale 1 to 5"):
        await graph.ainvoke(ASK, context={"judge": create_pointwise_judge(), "backend": backend})
    assert backend.calls == []


async def test_a_threshold_read_from_the_context_is_checked_too() -> None:
    backend = ScriptedBackend(lambda r: "[RESULT] 5")
    graph = create_guardrail_graph(
        threshold=4, threshold_from=lambda c: c["threshold"], fail_policy="open", judge=PointwiseJudge(backend)
    )
    with pytest.raises(ValueError, match=r"threshold_from\(context\) = 6 is outside"):
        await graph.ainvoke(ASK, context={"threshold": 6})
    assert backend.calls == []


# ---------------------------------------------------------------- the class


@st.composite
def _setup(draw: st.DrawFn) -> tuple[str, tuple[int, int], Any]:
    """A judge kind, its score scale, and the rubric that sets it (if any)."""
    kind = draw(st.sampled_from(["own-scale", "rubric", "rubric-judge"]))
    lo = draw(st.integers(-3, 3))
    hi = lo + draw(st.integers(1, 6))
    rubric = {"criterion": "Helpful?", "levels": {k: f"level {k}" for k in range(lo, hi + 1)}}
    return kind, (lo, hi), rubric


def _judge(kind: str, scale: tuple[int, int], rubric: Any, score: int) -> tuple[Any, Any, tuple[float, float]]:
    """The judge, the rubric the guardrail passes, and the scale its threshold is on."""
    backend = ScriptedBackend(lambda r: f"Reason. [RESULT] {score}")
    if kind == "own-scale":
        return PointwiseJudge(backend, scale=scale, structured=False), None, scale
    if kind == "rubric":
        return PointwiseJudge(backend, structured=False), rubric, scale
    crit = [Criterion(name="helpful", rubric=Rubric.model_validate(rubric), weight=1)]
    return RubricJudge(backend, criteria=crit, structured=False), None, (0.0, 1.0)


@settings(max_examples=60)
@given(
    setup=_setup(),
    offset=st.one_of(st.floats(-2.5, 2.5), st.sampled_from([0.0, 1.0, -0.001, 0.001])),
    at_bottom=st.booleans(),
    from_context=st.booleans(),
    data=st.data(),
)
async def test_a_threshold_is_accepted_exactly_inside_the_judges_scale(
    setup: tuple[str, tuple[int, int], Any], offset: float, at_bottom: bool, from_context: bool, data: st.DataObject
) -> None:
    kind, scale, rubric = setup
    score = data.draw(st.integers(*scale), label="score")
    judge, given_rubric, (lo, hi) = _judge(kind, scale, rubric, score)
    # Thresholds near either end of the scale, on both sides of it.
    threshold = (lo if at_bottom else hi) + offset * (hi - lo) / 4
    inside = lo < threshold <= hi
    if from_context:
        graph = create_guardrail_graph(
            threshold=1.0, threshold_from=lambda c: c["t"], fail_policy="closed", judge=judge, rubric=given_rubric
        )
        context: Any = {"t": threshold}
    elif not inside:  # the judge is known at build: refused there
        with pytest.raises(ValueError, match=r"threshold = \S+ is outside the score scale") as info:
            create_guardrail_graph(threshold=threshold, fail_policy="closed", judge=judge, rubric=given_rubric)
        assert f"threshold = {threshold:g} is outside the score scale {lo:g} to {hi:g}" in str(info.value)
        return
    else:
        graph = create_guardrail_graph(threshold=threshold, fail_policy="closed", judge=judge, rubric=given_rubric)
        context = None
    run = graph.ainvoke(ASK, context=context)
    if not inside:
        with pytest.raises(ValueError, match=f"is outside the score scale {lo:g} to {hi:g}"):
            await run
        return
    out = await run
    got = out["decision"].score
    assert out["decision"].action == ("pass" if got >= threshold else "block")
    assert not out["decision"].fail_policy_applied
