"""Several criteria, each scored by a pointwise judge, then a weighted aggregate."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from ._backend import Backend
from ._judge import BaseJudge, worst
from ._pointwise import PointwiseJudge
from .types import Criterion, PointwiseInput, PointwiseScore, RubricResult, Status, Usage

__all__ = ["RubricJudge", "create_rubric_judge", "weighted_score"]


def weighted_score(criteria: Sequence[Criterion], scores: dict[str, PointwiseScore]) -> float:
    """Weighted mean of each criterion's score, normalised to 0-1 by its own
    scale, so criteria on different scales can be combined."""
    total = sum(c.weight for c in criteria)
    acc = 0.0
    for c in criteria:
        s = scores[c.name]
        assert s.score is not None
        lo, hi = s.scale
        acc += c.weight * (s.score - lo) / (hi - lo)
    return acc / total


class RubricJudge(BaseJudge[PointwiseInput, RubricResult]):
    """Score a response against each criterion concurrently.

    The aggregate is only given when every criterion was scored: a missing
    criterion would silently shift the weights. Otherwise the result takes
    the worst status and names the failed criteria.
    """

    input_model = PointwiseInput
    default_template = "pointwise-rubric"

    def __init__(
        self,
        backend: Backend | str = "backend",
        *,
        criteria: Sequence[Criterion],
        max_concurrency: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(backend, **kwargs)
        if not criteria:
            raise ValueError("criteria must not be empty")
        names = [c.name for c in criteria]
        if len(set(names)) != len(names):
            raise ValueError(f"criteria names must be unique, got {names}")
        self.criteria = list(criteria)
        self.max_concurrency = max_concurrency
        self._pointwise = PointwiseJudge(backend, **kwargs)

    async def _judge(self, item: PointwiseInput, backend: Backend) -> RubricResult:
        started = time.perf_counter()
        sem = asyncio.Semaphore(self.max_concurrency or len(self.criteria))

        async def one(c: Criterion) -> PointwiseScore:
            async with sem:
                return await self._pointwise.ajudge(item.model_copy(update={"rubric": c.rubric}), backend=backend)

        results = await asyncio.gather(*(one(c) for c in self.criteria))
        scores = {c.name: r for c, r in zip(self.criteria, results, strict=True)}
        status = worst([r.status for r in results])
        usage = Usage()
        for r in results:
            if r.provenance is not None:
                usage = usage + r.provenance.usage
        prov = self._provenance(backend, [], status, time.perf_counter() - started).model_copy(
            update={
                "usage": usage,
                "attempts": sum(r.provenance.attempts for r in results if r.provenance),
                "cost_usd": backend.pricing.cost(usage) if backend.pricing else None,
            }
        )
        if status is not Status.OK:
            failed = [f"{n}: {s.reason}" for n, s in scores.items() if s.status is not Status.OK]
            return RubricResult(status=status, criteria=scores, reason="; ".join(failed), provenance=prov)
        confidences = [r.confidence for r in results if r.confidence is not None]
        return RubricResult(
            status=Status.OK,
            criteria=scores,
            weighted_score=weighted_score(self.criteria, scores),
            rationale="\n".join(f"{n}: {s.rationale}" for n, s in scores.items() if s.rationale),
            confidence=min(confidences) if len(confidences) == len(results) else None,
            provenance=prov,
        )


def create_rubric_judge(
    backend: Backend | str = "backend", *, criteria: Sequence[Criterion], **kwargs: Any
) -> RubricJudge:
    return RubricJudge(backend, criteria=criteria, **kwargs)
