"""Held-out evaluation of a judge: agreement with the labels, and swap consistency."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from judgegraph.judges import JudgeInputError
from judgegraph.types import PairwiseVerdict, PointwiseInput, PointwiseScore

from ._traces import PairwiseTrace, PointwiseTrace

__all__ = ["EvalReport", "aevaluate_judge", "evaluate_judge"]


class EvalReport(BaseModel):
    """``agreement``: share of items whose verdict equals the label (a failed
    verdict counts as a disagreement). Pairwise only: ``agreement_per_order``
    averages each order's own accuracy; ``swap_consistency`` is the share of
    judged items whose two orders picked the same winner. Pointwise only:
    ``mean_abs_error`` and ``within_one``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    n: int
    judged: int
    agreement: float
    agreement_per_order: float | None = None
    swap_consistency: float | None = None
    mean_abs_error: float | None = None
    within_one: float | None = None
    failed: dict[str, int] = {}
    confusion: dict[str, dict[str, int]] = {}

    def summary(self) -> str:
        parts = [f"{self.kind}: n={self.n}", f"agreement {self.agreement:.3f}"]
        if self.agreement_per_order is not None:
            parts.append(f"per-order {self.agreement_per_order:.3f}")
        if self.swap_consistency is not None:
            parts.append(f"swap consistency {self.swap_consistency:.3f}")
        if self.mean_abs_error is not None:
            parts.append(f"MAE {self.mean_abs_error:.3f}, within one {self.within_one:.3f}")
        if self.failed:
            parts.append("failed " + ", ".join(f"{k} {v}" for k, v in self.failed.items()))
        return "; ".join(parts)


def _pairwise_report(traces: Sequence[PairwiseTrace], results: Sequence[Any]) -> EvalReport:
    n = len(traces)
    agree = judged = consistent = with_orders = 0
    order_hits = order_total = 0
    failed: Counter[str] = Counter()
    confusion: dict[str, Counter[str]] = {}
    for t, r in zip(traces, results, strict=True):
        if isinstance(r, JudgeInputError) or not isinstance(r, PairwiseVerdict):
            failed["input"] += 1
            continue
        if not r.ok:
            failed[r.status.value] += 1
            continue
        judged += 1
        agree += r.winner == t.winner
        confusion.setdefault(t.winner, Counter())[str(r.winner)] += 1
        if len(r.orders) == 2:
            with_orders += 1
            consistent += not r.inconsistent
            for o in r.orders:
                order_total += 1
                order_hits += o.ok and o.winner == t.winner
    return EvalReport(
        kind="pairwise",
        n=n,
        judged=judged,
        agreement=agree / n,
        agreement_per_order=order_hits / order_total if order_total else None,
        swap_consistency=consistent / with_orders if with_orders else None,
        failed=dict(failed),
        confusion={k: dict(v) for k, v in sorted(confusion.items())},
    )


def _pointwise_report(traces: Sequence[PointwiseTrace], results: Sequence[Any]) -> EvalReport:
    n = len(traces)
    errors: list[int] = []
    failed: Counter[str] = Counter()
    for t, r in zip(traces, results, strict=True):
        if not isinstance(r, PointwiseScore):
            failed["input"] += 1
        elif not r.ok or r.score is None:
            failed[r.status.value] += 1
        else:
            errors.append(abs(r.score - t.score))
    return EvalReport(
        kind="pointwise",
        n=n,
        judged=len(errors),
        agreement=sum(e == 0 for e in errors) / n,
        mean_abs_error=sum(errors) / len(errors) if errors else None,
        within_one=sum(e <= 1 for e in errors) / n,
        failed=dict(failed),
    )


async def aevaluate_judge(
    judge: Any,
    traces: Sequence[PairwiseTrace | PointwiseTrace],
    *,
    backend: Any = None,
    context: Any = None,
    max_concurrency: int = 16,
) -> EvalReport:
    """Run ``judge`` (any judgegraph judge with ``ajudge_many``) over held-out
    traces of one kind. For swap consistency give a pairwise judge
    ``SwapPolicy(mode="both")`` (the default)."""
    if not traces:
        raise ValueError("no traces to evaluate on")
    kinds = {t.kind for t in traces}
    if len(kinds) != 1:
        raise ValueError("evaluate one kind of trace at a time (pairwise or pointwise)")
    inputs: list[Any]
    if kinds == {"pairwise"}:
        inputs = [t.to_input() for t in traces if isinstance(t, PairwiseTrace)]
    else:
        inputs = []
        for t in traces:
            assert isinstance(t, PointwiseTrace)
            if t.rubric is None and tuple(getattr(judge, "scale", t.scale)) != t.scale:
                raise ValueError(f"trace {t.id}: scale {t.scale} differs from the judge's scale {judge.scale}")
            inputs.append(
                PointwiseInput(instruction=t.instruction, response=t.response, reference=t.reference, rubric=t.rubric)
            )
    results = await judge.ajudge_many(inputs, max_concurrency=max_concurrency, backend=backend, context=context)
    if kinds == {"pairwise"}:
        return _pairwise_report(traces, results)  # type: ignore[arg-type]
    return _pointwise_report(traces, results)  # type: ignore[arg-type]


def evaluate_judge(
    judge: Any,
    traces: Sequence[PairwiseTrace | PointwiseTrace],
    *,
    backend: Any = None,
    context: Any = None,
    max_concurrency: int = 16,
) -> EvalReport:
    """Synchronous :func:`aevaluate_judge`, for scripts and the CLI."""
    return asyncio.run(
        aevaluate_judge(judge, traces, backend=backend, context=context, max_concurrency=max_concurrency)
    )
