"""A pointwise judge backed by a regression head: the cheap guardrail judge.

:func:`train_classifier` with ``task="pointwise"`` trains a one-output head
that maps (instruction, response) to the training scale. This judge serves
it: ``expected_score`` is the head's output (held to the scale), ``score``
that value rounded to the nearest whole point, so thresholds and metrics
written for generative pointwise judges apply unchanged. A prediction that
is not a finite number is an ``error`` verdict, never a default score.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from judgegraph.judges import FromContext, Judge, JudgeInputError, coerce_input
from judgegraph.types import PointwiseInput, PointwiseScore, Provenance, Status

from ._classifier_judge import not_a_model

__all__ = ["ScoreRegressor", "ScoreRegressorJudge", "create_score_judge"]


@runtime_checkable
class ScoreRegressor(Protocol):
    """What the judge needs from a model: :class:`SequenceClassifier` with a
    pointwise head has it."""

    name: str
    model: str
    scale: tuple[int, int] | None

    def predict_scores(self, items: Sequence[tuple[str, str]]) -> list[float]: ...


_CONTEXT_REGRESSOR = FromContext("regressor")


class ScoreRegressorJudge(Judge[PointwiseInput, PointwiseScore]):
    """Score single answers with a :class:`ScoreRegressor`. Same API as the
    other judges (``ajudge``, ``ajudge_many``, ``ainvoke``; a LangGraph node
    through ``create_judge_node``; the guardrail graph's ``judge``).
    ``regressor`` may be ``from_context(key)``, taken from the run's context
    like a backend (the default: ``from_context("regressor")``).

    A rubric on the input must use the head's training scale: the head was
    trained on one scale and cannot read another.
    """

    input_model = PointwiseInput

    def __init__(
        self, regressor: ScoreRegressor | FromContext = _CONTEXT_REGRESSOR, *, name: str | None = None
    ) -> None:
        if isinstance(regressor, str):  # untyped callers: a string was once a context key
            raise not_a_model("ScoreRegressorJudge", "regressor", regressor)
        self.regressor = regressor
        self.name = name or type(self).__name__
        if not isinstance(regressor, FromContext):
            self._check(regressor)

    async def ajudge_many(
        self,
        values: Sequence[PointwiseInput | Mapping[str, Any]],
        *,
        max_concurrency: int = 16,
        backend: Any = None,
        context: Any = None,
    ) -> list[PointwiseScore | JudgeInputError]:
        """Judge many answers in one batched pass (``max_concurrency`` is
        accepted for API compatibility; the head batches instead)."""
        self._refuse_backend(backend)
        regressor = self._regressor(context)
        out: list[PointwiseScore | JudgeInputError | None] = [None] * len(values)
        good: list[tuple[int, PointwiseInput]] = []
        for i, v in enumerate(values):
            try:
                good.append((i, self._item(v, regressor, where=f"item {i}: ")))
            except JudgeInputError as exc:
                out[i] = exc
        for (i, _), score in zip(good, await self._score([it for _, it in good], regressor), strict=True):
            out[i] = score
        return [r for r in out if r is not None]

    def check_context(self, context: Any) -> None:
        self._regressor(context)

    async def _ajudge_item(self, item: PointwiseInput, context: Any) -> PointwiseScore:
        regressor = self._regressor(context)
        return (await self._score([self._item(item, regressor)], regressor))[0]

    def _regressor(self, context: Any) -> ScoreRegressor:
        found = self.regressor
        if isinstance(found, FromContext):
            key, found = found.key, found.lookup(context)
            if found is None:
                raise LookupError(f"{self.name}: no regressor given and none under {key!r} in the runtime context")
        return self._check(found)

    @staticmethod
    def _item(value: Any, regressor: ScoreRegressor, *, where: str = "") -> PointwiseInput:
        item = coerce_input(PointwiseInput, value, where=where)
        if item.rubric is not None and item.rubric.scale != regressor.scale:
            raise JudgeInputError(
                f"{where}rubric scale {item.rubric.scale} differs from the head's training scale {regressor.scale}"
            )
        return item

    def _check(self, found: Any) -> ScoreRegressor:
        if not isinstance(found, ScoreRegressor):
            raise TypeError(f"{self.name}: expected a score regressor (predict_scores), got {type(found).__name__}")
        if found.scale is None:
            raise ValueError(f"{self.name}: {found.model} has no score scale: it is not a pointwise regression head")
        return found

    async def _score(self, items: list[PointwiseInput], regressor: ScoreRegressor) -> list[PointwiseScore]:
        if not items:
            return []
        assert regressor.scale is not None
        scale = regressor.scale
        started = time.perf_counter()
        try:
            values = await asyncio.to_thread(regressor.predict_scores, [(it.instruction, it.response) for it in items])
        except Exception as exc:  # a model failure is a verdict with a status, as for generative judges
            reason = f"{type(exc).__name__}: {exc}"
            latency = time.perf_counter() - started
            return [self._failed(regressor, scale, reason, latency) for _ in items]
        latency = (time.perf_counter() - started) / len(items)
        return [self._verdict(v, regressor, scale, latency) for v in values]

    def _failed(self, regressor: ScoreRegressor, scale: tuple[int, int], reason: str, latency: float) -> PointwiseScore:
        prov = self._prov(regressor, Status.ERROR, latency)
        return PointwiseScore(status=Status.ERROR, scale=scale, reason=reason, provenance=prov)

    def _verdict(
        self, value: float, regressor: ScoreRegressor, scale: tuple[int, int], latency: float
    ) -> PointwiseScore:
        if not math.isfinite(value):
            return self._failed(regressor, scale, f"the head predicted {value!r}, not a score", latency)
        lo, hi = scale
        held = min(max(value, lo), hi)  # the head is trained on the scale; its output can overshoot a little
        return PointwiseScore(
            status=Status.OK,
            score=math.floor(held + 0.5),
            scale=scale,
            expected_score=held,
            rationale=f"regression head: {value:.3f} on {lo}-{hi}",
            provenance=self._prov(regressor, Status.OK, latency),
        )

    def _prov(self, regressor: ScoreRegressor, status: Status, latency: float) -> Provenance:
        return Provenance(
            judge=self.name or type(self).__name__,
            backend=regressor.name,
            model=regressor.model,
            template_id=regressor.name,
            template_version=1,
            latency_s=latency,
            status=status,
        )


def create_score_judge(
    regressor: ScoreRegressor | str | Path | FromContext = _CONTEXT_REGRESSOR, *, name: str | None = None
) -> ScoreRegressorJudge:
    """A :class:`ScoreRegressorJudge`; ``regressor`` is a loaded head, a
    directory saved by ``train_classifier(task="pointwise")`` (loaded here),
    or ``from_context(key)``."""
    if isinstance(regressor, Path) or (isinstance(regressor, str) and Path(regressor).is_dir()):
        from ._classifier import SequenceClassifier

        regressor = SequenceClassifier.load(regressor)
    if isinstance(regressor, str):
        raise not_a_model("ScoreRegressorJudge", "regressor", regressor)
    return ScoreRegressorJudge(regressor, name=name)
