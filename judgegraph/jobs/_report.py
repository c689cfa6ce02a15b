"""``judgegraph report RUN``: one self-contained HTML file with plots, plus
JSON and Markdown summaries, built from a run in the store.

Rows are streamed from the store; only compact per-row values (verdict,
label, confidence, lengths) are kept for the statistics, which come from
:mod:`judgegraph.metrics`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

from ..types import Status
from ._report_data import ReportData, _Acc, _cascade_curve, _confusion
from ._report_render import render_html, render_markdown
from ._store import Store

__all__ = ["build_report", "write_report"]


def build_report(store: Store, run_id: str) -> ReportData:
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
    )


def write_report(store: Store, run_id: str, out: str | Path) -> dict[str, Path]:
    """Write ``report.html``, ``summary.json`` and ``summary.md`` under ``out``."""
    d = build_report(store, run_id)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"html": folder / "report.html", "json": folder / "summary.json", "markdown": folder / "summary.md"}
    paths["html"].write_text(render_html(d), encoding="utf-8")
    paths["json"].write_text(json.dumps(d.model_dump(mode="json"), indent=2, allow_nan=False), encoding="utf-8")
    paths["markdown"].write_text(render_markdown(d), encoding="utf-8")
    return paths
