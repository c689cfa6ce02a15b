"""A run's stored per-item results read back: verdicts and labels for the planner, and result table rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from judgegraph.types import PairwiseVerdict, Status

from ._models import TableRow

if TYPE_CHECKING:
    from judgegraph.metrics import PairedDifference

__all__ = ["paired_agreement", "table_row"]


def _stored_results(store: Any, run_id: str) -> tuple[dict[str, PairwiseVerdict], dict[str, str]]:
    results: dict[str, PairwiseVerdict] = {}
    labels: dict[str, str] = {}
    for r in store.rows(run_id):
        if r.unreadable is not None:
            raise RuntimeError(f"run {run_id}: {r.unreadable}")
        if r.item_hash is None or r.result is None:
            raise RuntimeError(f"run {run_id}: row {r.row} has no stored result")
        results[r.item_hash] = PairwiseVerdict.model_validate(r.result)
        if r.label is not None:
            labels[r.item_hash] = r.label
    return results, labels


def _prediction(r: Any) -> Any:
    """A stored row's winner, or its failure status (which agreement counts as wrong)."""
    if r.status == "ok":
        return (r.result or {}).get("winner")
    return Status(r.status) if r.status in ("unparsed", "error") else Status.ERROR


def paired_agreement(store: Any, run_a: str, run_b: str, *, seed: int = 0) -> PairedDifference:
    """Agreement with the human majority of run A minus run B's, on the items both judged, with a
    paired bootstrap interval (:func:`judgegraph.metrics.paired_difference`; failed verdicts wrong)."""
    from judgegraph import metrics

    b_rows = {r.item_hash: r for r in store.rows(run_b)}
    preds_a: list[Any] = []
    preds_b: list[Any] = []
    refs: list[Any] = []
    for r in store.rows(run_a):
        other = b_rows.get(r.item_hash)
        if other is None:
            continue
        preds_a.append(_prediction(r))
        preds_b.append(_prediction(other))
        refs.append(r.label)
    return metrics.paired_difference(preds_a, preds_b, refs, unparsed="wrong", seed=seed)


def table_row(
    store: Any, run_id: str, *, name: str, judge: str, escalation: Literal["none", "all", "tiers"]
) -> TableRow:
    """A table row recomputed from the stored per-item results of a run, with
    :func:`judgegraph.metrics.accuracy` (failed verdicts count as wrong)."""
    from judgegraph import metrics

    preds: list[Any] = []
    refs: list[Any] = []
    escalated = 0
    costs: list[float | None] = []
    rows = list(store.rows(run_id))
    for r in rows:
        res = r.result or {}
        preds.append(_prediction(r))
        refs.append(r.label)
        costs.append(r.cost_usd)
        if escalation == "all":
            escalated += 1
        elif escalation == "tiers":
            escalated += len(res.get("tiers") or ()) > 1
    if not rows:
        raise RuntimeError(f"run {run_id} has no rows")
    acc = metrics.accuracy(preds, refs, unparsed="wrong")
    failed = sum(isinstance(p, Status) for p in preds)
    correct = sum(p == r for p, r in zip(preds, refs, strict=True) if not isinstance(p, Status))
    total = None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))
    return TableRow(
        name=name,
        judge=judge,
        run_id=run_id,
        items=len(rows),
        agreement=acc.value,
        correct=correct,
        failed=failed,
        escalated_share=escalated / len(rows),
        cost_usd=total,
    )
