"""A guardrail applies its declared policy to every score it cannot use, from
any judge, a model's or a custom one: missing, not a number, not finite, or
off the judge's scale (issue 26's open class). Before, NaN blocked under a
fail-open policy, 7 on a 1-5 scale passed, and a custom judge's ``score=None``
raised as if the judge were of the wrong kind."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import Status
from judgegraph.graphs import create_guardrail_graph

ASK = {"instruction": "How do I reset my password?", "answer": "Use the emailed link."}


@dataclass
class _Verdict:
    """What a user's judge may return: any object with a status and a score."""

    score: Any
    status: Status = Status.OK
    rationale: str | None = None


class _Custom:
    """A user's judge on a declared 1-5 scale that answers whatever it is given."""

    name = "custom"
    scale = (1, 5)

    def __init__(self, score: Any) -> None:
        self.score = score

    async def ajudge(self, value: Any, *, context: Any = None) -> Any:
        del value, context
        return _Verdict(score=self.score)


def _usable(score: Any) -> bool:
    return isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score) and 1 <= score <= 5


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf, 7, 0, None, True, "5"])
@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_an_unusable_score_gets_the_declared_policy(score: Any, policy: Any) -> None:
    graph = create_guardrail_graph(threshold=4, fail_policy=policy, judge=_Custom(score))
    decision = (await graph.ainvoke(dict(ASK)))["decision"]
    assert decision.fail_policy_applied, decision
    assert decision.action == ("pass" if policy == "open" else "block"), decision
    assert "cannot be held against the threshold" in decision.reason and decision.score is None


_SCORES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-10, 10),
    st.none(),
    st.booleans(),
    st.text(max_size=3),
)


@settings(max_examples=80)
@given(score=_SCORES, threshold=st.sampled_from([2, 3, 4, 5]), policy=st.sampled_from(["open", "closed"]))
async def test_every_score_is_compared_or_gets_the_policy(score: Any, threshold: int, policy: Any) -> None:
    graph = create_guardrail_graph(threshold=threshold, fail_policy=policy, judge=_Custom(score))
    decision = (await graph.ainvoke(dict(ASK)))["decision"]
    if _usable(score):
        assert not decision.fail_policy_applied, decision
        assert decision.action == ("pass" if score >= threshold else "block"), decision
        assert decision.score == float(score)
    else:
        assert decision.fail_policy_applied and decision.score is None, decision
        assert decision.action == ("pass" if policy == "open" else "block"), decision
