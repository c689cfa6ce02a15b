"""The one judge contract (issue 24): every kind of judge satisfies
``AsyncJudge`` with its capabilities declared, not probed; a user's object
with only ``ajudge`` gets them declared once at the boundary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judgegraph.backends import ScriptedBackend
from judgegraph.cascade import Budget, CascadeJudge, LowConfidence, Tier
from judgegraph.judges import (
    AsyncJudge,
    EnsembleJudge,
    Judge,
    PairwiseJudge,
    PointwiseJudge,
    ReplayJudge,
    TrajectoryMatchJudge,
    as_async_judge,
)
from judgegraph.pytest_plugin._cassette import CassetteFile, CassetteJudge
from judgegraph.types import JudgeResult, PairwiseInput, PairwiseVerdict, PointwiseScore, Status, SwapPolicy

SCORE = ScriptedBackend(lambda req: "[RESULT] 4")
PAIR = PairwiseInput(instruction="q", response_a="long answer", response_b="short")


def _judges(tmp_path: Path) -> list[Judge[Any, Any]]:
    point = PointwiseJudge(SCORE)
    replay = ReplayJudge({"k": PointwiseScore(status=Status.OK, score=3, scale=(1, 5))}, key=lambda item: "k")
    cassette = CassetteJudge(point, cassette=CassetteFile(tmp_path / "c.json"), mode="replay", test="t")
    return [
        point,
        PairwiseJudge(SCORE),
        EnsembleJudge([point, PointwiseJudge(SCORE, name="second")]),
        CascadeJudge([point, point]),
        replay,
        cassette,
        TrajectoryMatchJudge(),
    ]


def test_every_kind_of_judge_is_the_contract(tmp_path: Path) -> None:
    for judge in _judges(tmp_path):
        assert isinstance(judge, AsyncJudge), type(judge).__name__
        assert as_async_judge(judge) is judge  # declared itself: nothing wraps it
        assert judge.needs_batch is False
        assert judge.config_fingerprint() is None


def test_capabilities_are_declared() -> None:
    budget = CascadeJudge([Tier(PointwiseJudge(SCORE), (Budget(fraction=0.5),)), PointwiseJudge(SCORE)])
    assert budget.needs_batch is True
    assert (
        CascadeJudge([Tier(PointwiseJudge(SCORE), (LowConfidence(threshold=0.5),)), PointwiseJudge(SCORE)]).needs_batch
        is False
    )
    single = SwapPolicy(mode="single")
    assert PairwiseJudge(SCORE, swap=single).order_policy == single
    assert PointwiseJudge(SCORE).order_policy is None
    both = PairwiseJudge(SCORE, swap=single).with_order_policy(SwapPolicy())
    assert both.order_policy == SwapPolicy() and isinstance(both, PairwiseJudge)


class LengthJudge:
    """A user's pairwise judge with only ``ajudge``: prefers the longer answer."""

    async def ajudge(self, value: Any, *, context: Any = None) -> PairwiseVerdict:
        a, b = len(value.response_a), len(value.response_b)
        return PairwiseVerdict(status=Status.OK, winner="A" if a > b else "B" if b > a else "tie")


async def test_a_users_object_gets_the_capabilities_declared_once() -> None:
    judge = as_async_judge(LengthJudge())
    assert isinstance(judge, AsyncJudge)
    assert (judge.name, judge.input_model, judge.needs_batch, judge.order_policy) == ("LengthJudge", None, False, None)
    judge.check_context(None)  # nothing it needs
    # One order of a pair, stated for the original order: the swapped pair's "A" is the original's "B".
    assert (await judge.ajudge_order(PAIR, swapped=False)).winner == "A"
    assert (await judge.ajudge_order(PAIR, swapped=True)).winner == "A"
    with pytest.raises(TypeError, match="has no async ajudge"):
        as_async_judge(object())


def test_results_are_judge_results() -> None:
    for result in (
        PointwiseScore(status=Status.OK, score=3, scale=(1, 5)),
        PairwiseVerdict(status=Status.ERROR, reason="down"),
    ):
        assert isinstance(result, JudgeResult)
    assert not isinstance({"status": "ok"}, JudgeResult)
