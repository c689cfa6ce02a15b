"""Several criteria, each scored by a pointwise judge, then a weighted aggregate."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from judgegraph._templates import Template
from judgegraph.backends import Backend
from judgegraph.rules import aggregate_rubric, combine_provenance, validate_criteria, weighted_score
from judgegraph.types import Criterion, PointwiseInput, PointwiseScore, RubricResult, worst_status

from ._base import CONTEXT_BACKEND, FromContext
from ._model import ModelJudge
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

    def __init__(
        self,
        backend: Backend | str | FromContext = CONTEXT_BACKEND,
        *,
        criteria: Sequence[Criterion],
        max_concurrency: int | None = None,
        name: str | None = None,
        template: str | Template | None = None,
        scale: tuple[int, int] | None = None,
        structured: bool | None = None,
        max_tokens: int = 512,
        top_logprobs: int = 10,
        repair: bool = True,
    ) -> None:
        super().__init__(
            backend,
            name=name,
            template=template,
            scale=scale,
            structured=structured,
            max_tokens=max_tokens,
            top_logprobs=top_logprobs,
            repair=repair,
        )
        self.criteria = validate_criteria(criteria)
        self.max_concurrency = max_concurrency
        # Each criterion is one pointwise judgement with this judge's options.
        self._pointwise = PointwiseJudge(
            backend,
            name=name,
            template=self.template,
            scale=scale,
            structured=structured,
            max_tokens=max_tokens,
            top_logprobs=top_logprobs,
            repair=repair,
        )

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


def create_rubric_judge(
    backend: Backend | str | FromContext = CONTEXT_BACKEND,
    *,
    criteria: Sequence[Criterion],
    max_concurrency: int | None = None,
    name: str | None = None,
    template: str | Template | None = None,
    scale: tuple[int, int] | None = None,
    structured: bool | None = None,
    max_tokens: int = 512,
    top_logprobs: int = 10,
    repair: bool = True,
) -> RubricJudge:
    """A :class:`RubricJudge`; every option is its constructor's."""
    return RubricJudge(
        backend,
        criteria=criteria,
        max_concurrency=max_concurrency,
        name=name,
        template=template,
        scale=scale,
        structured=structured,
        max_tokens=max_tokens,
        top_logprobs=top_logprobs,
        repair=repair,
    )
