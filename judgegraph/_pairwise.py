"""Pairwise judging with position-swap debiasing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ._backend import Backend
from ._judge import BaseJudge, Outcome, worst
from ._score_distribution import pair_winner_distribution
from ._templates import Template, rubric_text
from .types import PairwiseInput, PairwiseVerdict, Status, SwapPolicy, Winner

__all__ = ["PairwiseJudge", "create_pairwise_judge"]

# The same verdict seen from the other answer order.
SWAPPED_WINNER: dict[str, Winner] = {"A": "B", "B": "A", "tie": "tie"}


class PairwiseJudge(BaseJudge[PairwiseInput, PairwiseVerdict]):
    """Which of two responses is better.

    Templates: ``pairwise-scores`` (two 1-10 scores, the default),
    ``pairwise-choice`` (A/B/tie) and ``pairwise-rubric`` (relative grading).
    With ``SwapPolicy(mode="both")`` both orders run concurrently; each order's
    raw verdict is kept in ``orders`` (second order already mapped back).
    """

    input_model = PairwiseInput
    default_template = "pairwise-scores"

    def __init__(self, backend: Backend | str = "backend", *, swap: SwapPolicy | None = None, **kwargs: Any) -> None:
        super().__init__(backend, **kwargs)
        if self.template.kind != "pairwise":
            raise ValueError(f"template {self.template.id!r} is not a pairwise template")
        self.swap = swap or SwapPolicy()

    async def _judge(self, item: PairwiseInput, backend: Backend) -> PairwiseVerdict:
        started = time.perf_counter()
        orders: tuple[PairwiseVerdict, ...]
        if self.swap.mode == "both":
            first, second = await asyncio.gather(
                self._call(backend, self._fields(item), self.scale),
                self._call(backend, self._fields(item.swapped()), self.scale),
            )
            outcomes = [first, second]
            orders = (self._order_verdict(first, swapped=False), self._order_verdict(second, swapped=True))
        else:
            first = await self._call(backend, self._fields(item), self.scale)
            outcomes = [first]
            orders = (self._order_verdict(first, swapped=False),)
        status = worst([o.status for o in orders])
        latency = time.perf_counter() - started
        prov = self._provenance(backend, outcomes, status, latency)
        if status is not Status.OK:
            bad = next(i for i, o in enumerate(orders) if o.status is not Status.OK)
            label = ("A/B", "B/A")[bad]
            return PairwiseVerdict(
                status=status,
                reason=f"order {label}: {orders[bad].reason}",
                raw_text=orders[bad].raw_text,
                orders=orders if len(orders) > 1 else (),
                provenance=prov,
            )
        if len(orders) == 1:
            return orders[0].model_copy(update={"provenance": prov})
        return self._combine(orders[0], orders[1]).model_copy(update={"provenance": prov})

    def _fields(self, item: PairwiseInput) -> dict[str, str | None]:
        return {
            "instruction": item.instruction,
            "response_a": item.response_a,
            "response_b": item.response_b,
            "reference": item.reference,
            "rubric_text": rubric_text(item.rubric) if item.rubric else None,
        }

    def _order_verdict(self, o: Outcome, *, swapped: bool) -> PairwiseVerdict:
        if o.status is not Status.OK or o.parsed is None:
            return PairwiseVerdict(status=o.status, reason=o.reason, raw_text=o.raw_text)
        score_a = score_b = None
        dist = o.distribution
        if isinstance(o.parsed.value, tuple):
            score_a, score_b = float(o.parsed.value[0]), float(o.parsed.value[1])
            winner: Winner = "A" if score_a > score_b else "B" if score_b > score_a else "tie"
        else:
            winner = o.parsed.value  # type: ignore[assignment]
        if swapped:
            winner, score_a, score_b = SWAPPED_WINNER[winner], score_b, score_a
            if dist is not None:
                dist = {SWAPPED_WINNER.get(str(k), k): v for k, v in dist.items()}
        confidence = None
        choice_dist = None
        expected: tuple[float, float] | tuple[None, None] = (None, None)
        if dist is not None and not isinstance(o.parsed.value, tuple):
            choice_dist = {str(k): v for k, v in dist.items()}
            confidence = float(choice_dist.get(winner, 0.0))
        elif dist is not None and o.second_distribution is not None:
            # JudgeLM-style pair: P(winner) from the two score distributions.
            choice_dist, ea, eb = pair_winner_distribution(dist, o.second_distribution)
            expected = (eb, ea) if swapped else (ea, eb)
            if swapped:
                choice_dist = {SWAPPED_WINNER[k]: v for k, v in choice_dist.items()}  # type: ignore[index]
            confidence = float(choice_dist.get(winner, 0.0))
        return PairwiseVerdict(
            status=Status.OK,
            winner=winner,
            score_a=score_a,
            score_b=score_b,
            expected_score_a=expected[0],
            expected_score_b=expected[1],
            rationale=o.parsed.rationale,
            confidence=confidence,
            distribution=choice_dist,
            raw_text=o.raw_text,
        )

    def _combine(self, ab: PairwiseVerdict, ba: PairwiseVerdict) -> PairwiseVerdict:
        consistent = ab.winner == ba.winner
        score_a = score_b = None
        if ab.score_a is not None and ba.score_a is not None:
            score_a = (ab.score_a + ba.score_a) / 2
            score_b = (ab.score_b or 0.0) / 2 + (ba.score_b or 0.0) / 2
        winner: Winner | None
        if consistent:
            winner = ab.winner
        elif self.swap.on_inconsistent == "tie":
            winner = "tie"
        elif score_a is not None and score_b is not None:
            winner = "A" if score_a > score_b else "B" if score_b > score_a else "tie"
        else:
            winner = ab.winner
        distribution = None
        if ab.distribution is not None and ba.distribution is not None:
            # Token-probability confidence: how much the two orders together back the call.
            keys = set(ab.distribution) | set(ba.distribution)
            distribution = {k: (ab.distribution.get(k, 0.0) + ba.distribution.get(k, 0.0)) / 2 for k in sorted(keys)}
            confidence = distribution.get(winner or "tie", 0.0)
        else:
            confidence = 1.0 if consistent else 0.5  # swap agreement
        expected_a = expected_b = None
        if ab.expected_score_a is not None and ba.expected_score_a is not None:
            expected_a = (ab.expected_score_a + ba.expected_score_a) / 2
            expected_b = ((ab.expected_score_b or 0.0) + (ba.expected_score_b or 0.0)) / 2
        return PairwiseVerdict(
            status=Status.OK,
            winner=winner,
            score_a=score_a,
            score_b=score_b,
            expected_score_a=expected_a,
            expected_score_b=expected_b,
            rationale=ab.rationale,
            confidence=confidence,
            distribution=distribution,
            inconsistent=not consistent,
            orders=(ab, ba),
        )


def create_pairwise_judge(
    backend: Backend | str = "backend",
    *,
    template: str | Template = "pairwise-scores",
    swap: SwapPolicy | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> PairwiseJudge:
    return PairwiseJudge(backend, template=template, swap=swap, name=name, **kwargs)
