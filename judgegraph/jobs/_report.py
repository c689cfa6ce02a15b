"""``judgegraph report RUN``: one self-contained HTML file with plots, plus
JSON and Markdown summaries, built from a run in the store.

Rows are streamed from the store; only compact per-row values (verdict,
label, confidence, lengths) are kept for the statistics, which come from
:mod:`judgegraph.metrics`.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from judgegraph._internal.text_files import open_text

from ..types import Status
from ._report_data import ReportComparison, ReportData, _Acc, _cascade_curve, _confusion, corrected_estimates
from ._report_render import render_html, render_markdown
from ._store import Store

__all__ = ["build_report", "read_labels", "write_report"]


class _LabelRecord(BaseModel):
    """One line of a labels file: the item's id (the source's id field) and its human label."""

    model_config = ConfigDict(extra="ignore")

    id: str
    label: str | float | int | bool


def read_labels(path: str | Path) -> dict[str, Any]:
    """Human labels by item id from a JSONL file (``{"id": ..., "label": ...}`` per line) or a CSV
    file with ``id`` and ``label`` columns (by its ``.csv`` suffix)."""
    p = Path(path)
    out: dict[str, Any] = {}
    with open_text(p, newline="") as fp:
        raw: list[Any]
        if p.suffix.lower() == ".csv":
            raw = list(csv.DictReader(fp))
        else:
            raw = []
            for n, line in enumerate(fp, 1):
                if line.strip():
                    try:
                        raw.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{p}: line {n} is not JSON: {exc.msg}") from None
    for n, rec in enumerate(raw, 1):
        try:
            r = _LabelRecord.model_validate(rec)
        except ValidationError as exc:
            raise ValueError(f"{p}: record {n} needs an id and a label ({exc.error_count()} problems)") from None
        out[r.id] = r.label
    return out


def build_report(store: Store, run_id: str, *, human_labels: Mapping[str, Any] | None = None) -> ReportData:
    """The report's figures. ``human_labels``: human labels by item id (e.g. from :func:`read_labels`),
    used, beside the labels in the store, for the judge-corrected estimates."""
    from .. import metrics

    info = store.run(run_id)
    kind = info.kind
    acc = _Acc(kind)
    for r in store.rows(run_id, with_input=True):
        acc.add(r)
    counts = store.counts(run_id)
    labels, confusion = _confusion(kind, acc.preds, acc.refs) if acc.refs else ([], [])
    meta = None
    cal = None
    if acc.refs:
        mkind: Literal["pairwise", "pointwise"] = "pairwise" if kind == "pairwise" else "pointwise"
        has_cats = any(c is not None for c in acc.cats)
        report = metrics.summarize(
            acc.preds,
            acc.refs,
            name=run_id,
            kind=mkind,
            categories=[c or "(none)" for c in acc.cats] if has_cats else None,
            lengths_a=acc.len_a if acc.len_a else None,
            lengths_b=acc.len_b if kind == "pairwise" and acc.len_b else None,
            confidences=acc.conf if any(c is not None for c in acc.conf) else None,
        )
        meta = report.model_dump(mode="json")
        if acc.swapped and report.swap is None:
            # The labelled rows whose verdict carries both orders: each order's accuracy, their mean
            # and both-orders accuracy, with their intervals (its counts say how many rows that is).
            first, second, refs = (list(col) for col in zip(*acc.swapped, strict=True))
            meta["swap"] = metrics.swap_accuracy(first, refs, second=second).model_dump(mode="json")
        if report.calibration is not None:
            cal = report.calibration.model_dump(mode="json")
        elif any(c is not None for c in acc.conf):
            if kind == "rubric":  # weighted scores are not classes: compare on deciles
                refs = [round(float(v) * 10) / 10 for v in acc.refs]
                preds = [p if isinstance(p, Status) else round(float(p) * 10) / 10 for p in acc.preds]
            else:
                refs, preds = acc.refs, acc.preds
            cal = metrics.calibration(preds, refs, confidences=acc.conf).model_dump(mode="json")
    position = None
    pos_cat: dict[str, dict[str, int]] = {}
    if acc.first:
        position = metrics.position_consistency(acc.first, acc.second).model_dump(mode="json")
        for a, b, c in zip(acc.first, acc.second, acc.first_cat, strict=True):
            if isinstance(a, Status) or isinstance(b, Status):
                continue
            row = pos_cat.setdefault(c or "(none)", {"consistent": 0, "inconsistent": 0})
            row["consistent" if a == b else "inconsistent"] += 1
    by_category: dict[str, dict[str, Any]] = {}
    for cat, cnt in sorted(acc.by_cat.items()):
        by_category[cat] = {
            "rows": cnt["rows"],
            "ok": cnt["ok"],
            "failed": cnt["unparsed"] + cnt["error"],
            "labeled": cnt["labeled"],
            "accuracy": cnt["correct"] / cnt["labeled_ok"] if cnt["labeled_ok"] else None,
        }
    dist: dict[str, dict[str, int]] = {k: dict(v) for k, v in acc.dist.items() if v}
    for name, cnt in acc.crit_dist.items():
        dist[f"criterion: {name}"] = dict(cnt)
    judge = info.spec.get("judge", {})
    return ReportData(
        run_id=run_id,
        kind=kind,
        config_hash=info.config_hash,
        state=info.state,
        judge=judge if isinstance(judge, dict) else {},
        created_at=info.created_at,
        generated_at=time.time(),
        counts=counts,
        cost_usd=acc.cost if acc.priced else None,
        tokens={"prompt": acc.prompt_tokens, "completion": acc.completion_tokens},
        n_labeled=len(acc.refs),
        labels=labels,
        confusion=confusion,
        score_distribution=dist,
        metrics=meta,
        calibration=cal,
        position=position,
        position_by_category=pos_cat,
        by_category=by_category,
        cascade=_cascade_curve(acc),
        problems=acc.problems,
        problem_kinds=dict(acc.problem_kinds.most_common()),
        corrected=_corrected(kind, acc, human_labels),
    )


def _corrected(kind: str, acc: _Acc, labels: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if labels is not None and not {i for i, _, _ in acc.judged if i is not None} & set(labels):
        raise ValueError("no row's id matches the labels file (labels are matched by the source's id field)")
    return corrected_estimates(kind, acc.judged, labels)


def write_report(
    store: Store,
    run_id: str,
    out: str | Path,
    *,
    human_labels: Mapping[str, Any] | None = None,
    comparison: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``report.html``, ``summary.json`` and ``summary.md`` under ``out``.

    ``comparison``: other judges on the same items, shown first (fields of ``ReportComparison``:
    ``title``, ``columns``, ``rows`` of ``name``/``agreement``/``low``/``high``/``cost_per_1k``/``cells``,
    ``mark``, ``notes``); validated here, so a bad one fails before anything is written.
    """
    extra = None if comparison is None else ReportComparison.model_validate(comparison)
    d = build_report(store, run_id, human_labels=human_labels)
    if extra is not None:
        d = d.model_copy(update={"comparison": extra})
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"html": folder / "report.html", "json": folder / "summary.json", "markdown": folder / "summary.md"}
    paths["html"].write_text(render_html(d), encoding="utf-8")
    paths["json"].write_text(json.dumps(d.model_dump(mode="json"), indent=2, allow_nan=False), encoding="utf-8")
    paths["markdown"].write_text(render_markdown(d), encoding="utf-8")
    return paths
