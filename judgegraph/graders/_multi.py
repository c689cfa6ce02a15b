"""A ``multi`` grader: its graders run concurrently on the same input, then
``calculate_output`` combines their scores (see :mod:`._formula`)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from judgegraph.backends import Backend
from judgegraph.judges import Judge, ModelJudge
from judgegraph.types import Status, worst_status

from ._config import MultiConfig
from ._formula import FormulaError, compile_formula
from ._inputs import GraderInput, GraderResult

__all__ = ["MultiGrader"]


class MultiGrader(Judge[GraderInput, GraderResult]):
    """The formula's value over the graders' scores, their results kept in
    ``sub_results``. When any grader fails, so does the whole (status the
    worst of theirs, no score): a formula over a missing score would be a
    number nobody graded."""

    input_model = GraderInput
    grader_type = "multi"

    def __init__(self, config: MultiConfig, graders: Mapping[str, Judge[GraderInput, GraderResult]]) -> None:
        self.config = config
        self.name = config.name or self.grader_type
        self.graders = dict(graders)
        self.formula = compile_formula(config.calculate_output, set(self.graders))

    def check_context(self, context: Any) -> None:
        for g in self.graders.values():
            g.check_context(context)

    def with_backends(self, wrap: Callable[[Backend], Backend]) -> MultiGrader:
        clone = copy.copy(self)
        clone.graders = {k: g.with_backends(wrap) for k, g in self.graders.items()}
        return clone

    def _runner(self, backend: Backend | None, context: Any) -> Callable[[GraderInput], Awaitable[GraderResult]]:
        # ``backend`` goes to the model graders only; the others take none.
        if not any(isinstance(g, ModelJudge) for g in self.graders.values()):
            self._refuse_backend(backend)
        runs = {k: g._runner(backend if isinstance(g, ModelJudge) else None, context) for k, g in self.graders.items()}

        async def run(item: GraderInput) -> GraderResult:
            results = await asyncio.gather(*(r(item) for r in runs.values()))
            return self._combine(dict(zip(runs, results, strict=True)))

        return run

    def _combine(self, subs: dict[str, GraderResult]) -> GraderResult:
        common: dict[str, Any] = {"grader": self.name, "type": self.grader_type, "sub_results": subs}
        failed = {k: r for k, r in subs.items() if r.status is not Status.OK}
        if failed:
            why = "; ".join(f"{k}: [{r.status.value}] {r.reason}" for k, r in failed.items())
            status = worst_status([r.status for r in failed.values()])
            return GraderResult(status=status, reason=f"graders failed: {why}", **common)
        try:
            score = self.formula({k: r.score for k, r in subs.items() if r.score is not None})
        except FormulaError as exc:
            return GraderResult(status=Status.ERROR, reason=str(exc), **common)
        return GraderResult(status=Status.OK, score=score, **common)
