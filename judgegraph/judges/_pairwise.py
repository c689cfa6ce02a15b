"""Pairwise judging with position-swap debiasing."""

from __future__ import annotations

import asyncio
import copy
from typing import Unpack

from judgegraph._score_distribution import pair_winner_distribution
from judgegraph._templates import rubric_text
from judgegraph.backends import Backend
from judgegraph.rules import SWAPPED_WINNER, combine_orders, combine_provenance
from judgegraph.types import PairwiseInput, PairwiseVerdict, Status, SwapPolicy, Winner, worst_status

from ._base import CONTEXT_BACKEND, FromContext
from ._contract import Context
from ._model import ModelJudge, ModelJudgeOptions, Outcome, spell_out_options

__all__ = ["PairwiseJudge", "create_pairwise_judge"]


class PairwiseJudge(ModelJudge[PairwiseInput, PairwiseVerdict]):
    """Which of two responses is better.

    Templates: ``pairwise-scores`` (two 1-10 scores, the default),
    ``pairwise-choice`` (A/B/tie) and ``pairwise-rubric`` (relative grading).
    With ``SwapPolicy(mode="both")`` both orders run concurrently; each order's
    raw verdict is kept in ``orders`` (second order already mapped back).
    """

    input_model = PairwiseInput
    default_template = "pairwise-scores"
    template_kind = "pairwise"  # the template kind this judge renders

    @spell_out_options(ModelJudgeOptions)
    def __init__(
        self,
        backend: Backend | str | FromContext = CONTEXT_BACKEND,
        *,
        swap: SwapPolicy | None = None,
        **options: Unpack[ModelJudgeOptions],
    ) -> None:
        super().__init__(backend, **options)
        if self.template.kind != self.template_kind:
            raise ValueError(f"template {self.template.id!r} is not a {self.template_kind} template")
        self.swap = swap or SwapPolicy()

    @property
    def order_policy(self) -> SwapPolicy:
        """Declared (see :attr:`AsyncJudge.order_policy`): each answer order
        is a call of its own (:meth:`ajudge_order`), merged under ``swap``."""
        return self.swap

    def with_order_policy(self, policy: SwapPolicy) -> PairwiseJudge:
        clone = copy.copy(self)
        clone.swap = policy
        return clone

    async def _judge(self, item: PairwiseInput, backend: Backend) -> PairwiseVerdict:
        if self.swap.mode == "both":
            orders = list(
                await asyncio.gather(
                    self.ajudge_order(item, swapped=False, backend=backend),
                    self.ajudge_order(item, swapped=True, backend=backend),
                )
            )
        else:
            orders = [await self.ajudge_order(item, swapped=False, backend=backend)]
        status = worst_status([o.status for o in orders])
        prov = combine_provenance([o.provenance for o in orders], status=status, timing="concurrent")
        return combine_orders(orders, policy=self.swap, provenance=prov)

    async def ajudge_order(
        self, item: PairwiseInput, *, swapped: bool, backend: Backend | None = None, context: Context = None
    ) -> PairwiseVerdict:
        """One answer order as one model call: the verdict on ``item`` as
        given, or with ``swapped=True`` on its swapped pair, stated for the
        original order. Graphs fan the two orders out through this."""
        b = self.resolve_backend(backend, context)
        outcome = await self._call(b, self._fields(item.swapped() if swapped else item), self.scale)
        verdict = self._order_verdict(outcome, swapped=swapped)
        prov = self._provenance(b, [outcome], verdict.status, outcome.latency_s)
        return verdict.model_copy(update={"provenance": prov})

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


@spell_out_options(ModelJudgeOptions)
def create_pairwise_judge(
    backend: Backend | str | FromContext = CONTEXT_BACKEND,
    *,
    swap: SwapPolicy | None = None,
    **options: Unpack[ModelJudgeOptions],
) -> PairwiseJudge:
    """A :class:`PairwiseJudge`; every option is its constructor's (template
    ``pairwise-scores`` unless given)."""
    return PairwiseJudge(backend, swap=swap, **options)
