"""Verdict and score builders shared by the metrics tests."""

from __future__ import annotations

from judgegraph.types import PairwiseVerdict, PointwiseScore, Status


def ok(winner: str, confidence: float | None = None, orders: tuple[PairwiseVerdict, ...] = ()) -> PairwiseVerdict:
    return PairwiseVerdict(status=Status.OK, winner=winner, confidence=confidence, orders=orders)  # type: ignore[arg-type]


UNPARSED = PairwiseVerdict(status=Status.UNPARSED, reason="no verdict", raw_text="hmm")
ERROR = PairwiseVerdict(status=Status.ERROR, reason="timeout")


def score(value: int | None, expected: float | None = None) -> PointwiseScore:
    if value is None:
        return PointwiseScore(status=Status.UNPARSED, scale=(1, 5), reason="no score")
    return PointwiseScore(status=Status.OK, score=value, scale=(1, 5), expected_score=expected)


def two_orders(first: str | None, second: str | None) -> PairwiseVerdict:
    o1 = UNPARSED if first is None else ok(first)
    o2 = UNPARSED if second is None else ok(second)
    if first is None or second is None:
        return PairwiseVerdict(status=Status.UNPARSED, reason="an order failed", orders=(o1, o2))
    winner = first if first == second else "tie"
    return ok(winner, orders=(o1, o2))
