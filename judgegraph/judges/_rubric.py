"""Several criteria, each scored by a pointwise judge, then a weighted aggregate."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Unpack

from judgegraph.backends import Backend
from judgegraph.rules import aggregate_rubric, combine_provenance, validate_criteria, weighted_score
from judgegraph.types import Criterion, PointwiseInput, PointwiseScore, RubricResult, worst_status

from ._base import CONTEXT_BACKEND, FromContext
from ._model import ModelJudge, ModelJudgeOptions, spell_out_options
from ._pointwise import PointwiseJudge

__all__ = ["RubricJudge", "create_rubric_judge", "weighted_score"]


class RubricJudge(ModelJudge[PointwiseInput, RubricResult]):
    """Score a response against each criterion concurrently.

    The aggregate is only given when every criterion was scored: a missing
    criterion would silently shift the weights. Otherwise the result takes
    the worst status and names the failed criteria (see
    :func:`judgegraph.rules.aggregate_rubric`, which the rubric graph uses too).
    """

    input_model = PointwiseInput
    default_template = "pointwise-rubric"

    @spell_out_options(ModelJudgeOptions)
    def __init__(
        self,
        backend: Backend | str | FromContext = CONTEXT_BACKEND,
        *,
        criteria: Sequence[Criterion],
        max_concurrency: int | None = None,
        **options: Unpack[ModelJudgeOptions],
    ) -> None:
        super().__init__(backend, **options)
        self.criteria = validate_criteria(criteria)
        self.max_concurrency = max_concurrency
        # Each criterion is one pointwise judgement with this judge's options.
        per_criterion: ModelJudgeOptions = {**options, "template": self.template}
        self._pointwise = PointwiseJudge(backend, **per_criterion)

    async def _judge(self, item: PointwiseInput, backend: Backend) -> RubricResult:
        sem = asyncio.Semaphore(self.max_concurrency or len(self.criteria))

        async def one(c: Criterion) -> PointwiseScore:
            async with sem:
                return await self._pointwise.ajudge(item.model_copy(update={"rubric": c.rubric}), backend=backend)

        results = await asyncio.gather(*(one(c) for c in self.criteria))
        scores = {c.name: r for c, r in zip(self.criteria, results, strict=True)}
        status = worst_status([r.status for r in results])
        prov = combine_provenance([r.provenance for r in results], status=status, timing="concurrent", judge=self.name)
        return aggregate_rubric(self.criteria, scores, provenance=prov)


@spell_out_options(ModelJudgeOptions)
def create_rubric_judge(
    backend: Backend | str | FromContext = CONTEXT_BACKEND,
    *,
    criteria: Sequence[Criterion],
    max_concurrency: int | None = None,
    **options: Unpack[ModelJudgeOptions],
) -> RubricJudge:
    """A :class:`RubricJudge`; every option is its constructor's."""
    return RubricJudge(backend, criteria=criteria, max_concurrency=max_concurrency, **options)
