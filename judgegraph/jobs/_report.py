"""``judgegraph report RUN``: one self-contained HTML file with plots, plus
JSON and Markdown summaries, built from a run in the store.

Rows are streamed from the store; only compact per-row values (verdict,
label, confidence, lengths) are kept for the statistics, which come from
:mod:`judgegraph.metrics`.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..types import Status
from ._plots import bar_chart, heatmap, line_chart
from ._store import Store, StoredRow

__all__ = ["CascadePoint", "ReportData", "build_report", "render_html", "render_markdown", "write_report"]


class _M(BaseModel):
    model_config = ConfigDict(frozen=True)


class CascadePoint(_M):
    escalated_share: float
    cost_per_item: float | None
    accuracy: float | None
    actual: bool = Field(default=False, description="the run's own operating point")


class ReportData(_M):
    """Everything the report shows, JSON-ready (this is ``summary.json``)."""

    schema_version: int = 1
    run_id: str
    kind: str
    config_hash: str
    state: str
    judge: dict[str, Any]
    created_at: float
    generated_at: float
    counts: dict[str, int]
    cost_usd: float | None
    tokens: dict[str, int]
    n_labeled: int
    labels: list[str] = Field(description="row/column order of the confusion matrix")
    confusion: list[list[int]] = Field(description="rows: human label, columns: judge verdict")
    score_distribution: dict[str, dict[str, int]] = Field(description="series -> value -> count")
    metrics: dict[str, Any] | None = Field(description="judgegraph.metrics.summarize over labeled rows")
    calibration: dict[str, Any] | None
    position: dict[str, Any] | None
    position_by_category: dict[str, dict[str, int]]
    by_category: dict[str, dict[str, Any]]
    cascade: dict[str, Any] | None
    problems: list[dict[str, Any]]
    problem_kinds: dict[str, int]


_PAIR_LABELS = ["A", "B", "tie"]
_MAX_PROBLEMS = 50


def _fail_marker(status: str | None) -> Status:
    return Status.ERROR if status == "error" else Status.UNPARSED


def _prediction(kind: str, r: StoredRow) -> Any:
    """The verdict as a plain value, or the Status of a failure."""
    res = r.result or {}
    if r.status != "ok":
        return _fail_marker(r.status)
    if kind == "pairwise":
        return res.get("winner")
    if kind == "rubric":
        return res.get("weighted_score")
    return res.get("score")


def _problem_kind(reason: str | None) -> str:
    if not reason:
        return "unknown"
    text = reason.split(": ", 1)[1] if reason.startswith("order ") else reason
    for needle, name in _KINDS:
        if needle in text:
            return name
    return text[:40]


_KINDS = (
    ("HTTP 429", "rate limited (HTTP 429)"),
    ("HTTP 5", "server error (HTTP 5xx)"),
    ("HTTP 4", "request refused (HTTP 4xx)"),
    ("timed out", "timeout"),
    ("connection", "connection failed"),
    ("malformed", "malformed response"),
    ("missing", "missing field"),
    ("not valid JSON", "unreadable record"),
    ("label", "label not readable"),
    ("no [", "no verdict marker"),
    ("cut off", "cut off at max_tokens"),
)


class _Acc:
    """Streaming accumulator over a run's rows."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.preds: list[Any] = []
        self.refs: list[Any] = []
        self.cats: list[str | None] = []
        self.conf: list[float | None] = []
        self.len_a: list[int] = []
        self.len_b: list[int] = []
        self.first: list[Any] = []
        self.second: list[Any] = []
        self.first_cat: list[str | None] = []
        self.dist: dict[str, Counter[str]] = {"judge": Counter(), "human": Counter()}
        self.crit_dist: dict[str, Counter[str]] = {}
        self.by_cat: dict[str, Counter[str]] = {}
        self.cost = 0.0
        self.priced = True
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.problems: list[dict[str, Any]] = []
        self.problem_kinds: Counter[str] = Counter()
        self.casc: list[tuple[Any, float | None, float | None, bool, Any, float | None, Any]] = []

    def add(self, r: StoredRow) -> None:
        where = f"row {r.row}" if r.file == 0 else f"file {r.file} row {r.row}"
        if r.problem:
            self._problem(where, "invalid" if r.item_hash is None else "warning", r.problem)
        if r.item_hash is None or r.status is None:
            return
        cat = r.category or "(none)"
        c = self.by_cat.setdefault(cat, Counter())
        c["rows"] += 1
        c[r.status] += 1
        res = r.result or {}
        if r.cost_usd is None:
            self.priced = False
        self.cost += r.cost_usd or 0.0
        self.prompt_tokens += r.prompt_tokens
        self.completion_tokens += r.completion_tokens
        if r.status != "ok":
            self._problem(where, r.status, r.reason or "")
        pred = _prediction(self.kind, r)
        if r.status == "ok":
            self.dist["judge"][self._bucket(pred)] += 1
            for name, s in (res.get("criteria") or {}).items():
                if s.get("status") == "ok":
                    self.crit_dist.setdefault(name, Counter())[str(s.get("score"))] += 1
        if r.label is not None:
            self.dist["human"][self._bucket(r.label)] += 1
            self.preds.append(pred)
            self.refs.append(r.label)
            self.cats.append(r.category)
            self.conf.append(res.get("confidence") if r.status == "ok" else None)
            if r.status == "ok":
                c["labeled_ok"] += 1
                c["correct"] += pred == r.label
            c["labeled"] += 1
            inp = r.input or {}
            if self.kind == "pairwise":
                self.len_a.append(len(str(inp.get("response_a", ""))))
                self.len_b.append(len(str(inp.get("response_b", ""))))
            else:
                self.len_a.append(len(str(inp.get("response", ""))))
        orders: list[dict[str, Any]] = list(res.get("orders") or ())
        if self.kind == "pairwise" and len(orders) == 2:
            self.first.append(
                orders[0].get("winner") if orders[0].get("status") == "ok" else _fail_marker(orders[0].get("status"))
            )
            self.second.append(
                orders[1].get("winner") if orders[1].get("status") == "ok" else _fail_marker(orders[1].get("status"))
            )
            self.first_cat.append(r.category)
        tiers = res.get("tiers") or ()
        if tiers:
            t0 = tiers[0]
            total = sum(t.get("cost_usd") or 0.0 for t in tiers)
            unpriced = any(t.get("cost_usd") is None for t in tiers)
            v0: Any = t0.get("verdict") if t0.get("status") == "ok" else None
            if v0 is not None and self.kind != "pairwise":
                try:
                    v0 = float(v0)
                except ValueError:
                    v0 = None
            self.casc.append(
                (
                    v0,
                    t0.get("confidence"),
                    None if unpriced else t0.get("cost_usd"),
                    not t0.get("decided", False),
                    pred if r.status == "ok" else None,
                    None if unpriced else total,
                    r.label,
                )
            )

    def _bucket(self, v: Any) -> str:
        if isinstance(v, float) and self.kind == "rubric":
            return f"{math.floor(v * 10) / 10:.1f}"
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)

    def _problem(self, where: str, kind: str, text: str) -> None:
        self.problem_kinds[f"{kind}: {_problem_kind(text)}"] += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append({"where": where, "kind": kind, "reason": text})


def _confusion(kind: str, preds: list[Any], refs: list[Any]) -> tuple[list[str], list[list[int]]]:
    if kind == "pairwise":
        labels = list(_PAIR_LABELS)
    else:
        vals = {str(round(float(v))) for v in [*refs, *preds] if isinstance(v, int | float)}
        labels = sorted(vals, key=float)
        if kind == "rubric":  # weighted scores in 0-1: deciles
            labels = [f"{k / 10:.1f}" for k in range(11)]
    cols = [*labels, "failed"]
    index = {k: i for i, k in enumerate(cols)}
    matrix = [[0] * len(cols) for _ in labels]

    def key(v: Any) -> str:
        if isinstance(v, Status):
            return "failed"
        if kind == "pairwise":
            return str(v)
        x = float(v)
        return f"{round(x * 10) / 10:.1f}" if kind == "rubric" else str(round(x))

    for p, r in zip(preds, refs, strict=True):
        rk = key(r)
        if rk in index and rk != "failed":
            matrix[labels.index(rk)][index[key(p)]] += 1
    return cols, matrix


def _cascade_curve(acc: _Acc) -> dict[str, Any] | None:
    if not acc.casc:
        return None
    items = acc.casc
    n = len(items)
    labeled = [it for it in items if it[6] is not None]
    priced = all(it[2] is not None and it[5] is not None for it in items)
    escalated = [i for i, it in enumerate(items) if it[3]]

    def point(demote: set[int], actual: bool) -> CascadePoint:
        cost = 0.0
        correct = used = 0
        for i, (v0, _, c0, esc, final, total, label) in enumerate(items):
            low = i in demote or not esc
            verdict = v0 if low and esc else final
            if priced:
                cost += (c0 or 0.0) if (low and esc) else (total or 0.0)
            if label is not None:
                used += 1
                correct += verdict is not None and verdict == label
        share = (len(escalated) - len(demote)) / n
        return CascadePoint(
            escalated_share=share,
            cost_per_item=cost / n if priced else None,
            accuracy=correct / used if used else None,
            actual=actual,
        )

    # Demote the escalated items one confidence level at a time, most confident first.
    def conf(i: int) -> float:
        c = items[i][1]
        return -1.0 if c is None else float(c)

    order = sorted(escalated, key=lambda i: -conf(i))
    points = [point(set(), True)]
    demoted: set[int] = set()
    steps = max(1, len(order) // 20)
    for k in range(0, len(order), steps):
        demoted.update(order[k : k + steps])
        points.append(point(set(demoted), False))
    points.reverse()
    tiers: Counter[str] = Counter()
    for it in items:
        tiers["escalated" if it[3] else "decided at tier 0"] += 1
    return {
        "points": [p.model_dump() for p in points],
        "x": "cost_per_item" if priced else "escalated_share",
        "n_items": n,
        "n_labeled": len(labeled),
        "tier_use": dict(tiers),
        "note": "Points left of the run's own operating point are what escalating fewer items "
        "(the least confident first) would have given; further right needs a run that sends every item up.",
    }


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


# ------------------------------------------------------------------ rendering


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * float(x):.1f}%"


def _num(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{float(x):.{digits}f}"


def _metric(meta: dict[str, Any] | None, *path: str) -> Any:
    cur: Any = meta
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def _sorted_keys(keys: Iterable[str]) -> list[str]:
    def k(s: str) -> tuple[int, float | str]:
        try:
            return (0, float(s))
        except ValueError:
            return (1, s)

    return sorted(keys, key=k)


def _figures(d: ReportData) -> list[tuple[str, str, str]]:
    """(id, html, caption) for each figure; a figure that does not apply says why."""
    figs: list[tuple[str, str, str]] = []
    if d.confusion:
        figs.append(
            (
                "confusion",
                heatmap(
                    "Confusion matrix",
                    d.labels[:-1],
                    d.labels,
                    d.confusion,
                    row_label="human label",
                    col_label="judge verdict",
                    kind="confusion",
                ),
                f"{d.n_labeled} labeled rows; 'failed' = unparsed or error.",
            )
        )
    else:
        figs.append(("confusion", "", "No confusion matrix: the run has no human labels (map one with --label)."))
    if d.score_distribution:
        series = {k: v for k, v in d.score_distribution.items() if not k.startswith("criterion: ")}
        cats = _sorted_keys({x for v in series.values() for x in v})
        figs.append(
            (
                "scores",
                bar_chart(
                    "Score distribution",
                    cats,
                    {k: [v.get(c, 0) for c in cats] for k, v in series.items()},
                    x_label="verdict" if d.kind == "pairwise" else "score",
                    kind="scores",
                ),
                "Judge verdicts (ok rows) and human labels.",
            )
        )
        for name, v in d.score_distribution.items():
            if name.startswith("criterion: "):
                cats = _sorted_keys(v)
                figs.append(
                    (
                        f"scores-{name}",
                        bar_chart(name, cats, {"judge": [v[c] for c in cats]}, x_label="score", kind="scores"),
                        "",
                    )
                )
    cal = d.calibration
    if cal and any(b.get("count") for b in cal.get("bins", [])):
        pts = [(b["mean_confidence"], b["accuracy"]) for b in cal["bins"] if b.get("count")]
        figs.append(
            (
                "calibration",
                line_chart(
                    "Calibration (reliability)",
                    {"judge": pts},
                    x_label="confidence",
                    y_label="accuracy",
                    x_range=(0, 1),
                    y_range=(0, 1),
                    diagonal=True,
                    kind="calibration",
                ),
                f"ECE {_num(cal.get('ece'))} over {_metric(cal, 'counts', 'used')} rows; "
                "the diagonal is perfect calibration.",
            )
        )
    else:
        figs.append(
            (
                "calibration",
                "",
                "No calibration curve: needs human labels and judge confidences "
                "(token probabilities, or swap agreement for pairwise).",
            )
        )
    casc = d.cascade
    if casc:
        xkey = casc["x"]
        pts = [(p[xkey], p["accuracy"]) for p in casc["points"] if p["accuracy"] is not None and p[xkey] is not None]
        if pts:
            figs.append(
                (
                    "cascade",
                    line_chart(
                        "Cost vs agreement (cascade)",
                        {"cascade": pts},
                        x_label="USD per item" if xkey == "cost_per_item" else "share escalated",
                        y_label="agreement with labels",
                        y_range=(0.0, 1.0),
                        kind="cascade",
                    ),
                    casc["note"],
                )
            )
        else:
            figs.append(("cascade", "", "Cascade run without human labels: no agreement to plot."))
    else:
        figs.append(("cascade", "", "Not a cascade run: no cost–agreement curve."))
    if d.position_by_category:
        cats = sorted(d.position_by_category)
        figs.append(
            (
                "position",
                bar_chart(
                    "Position consistency",
                    cats,
                    {
                        "consistent": [d.position_by_category[c]["consistent"] for c in cats],
                        "inconsistent": [d.position_by_category[c]["inconsistent"] for c in cats],
                    },
                    x_label="category",
                    kind="position",
                ),
                f"Same winner in both orders: {_pct(_metric(d.position, 'consistency'))}; first-shown answer won "
                f"both orders {_metric(d.position, 'n_prefer_first_position')}×, second-shown "
                f"{_metric(d.position, 'n_prefer_second_position')}×.",
            )
        )
    else:
        figs.append(("position", "", "No position consistency: needs a pairwise run with both orders (swap=both)."))
    return figs


def _headline(d: ReportData) -> list[tuple[str, str]]:
    m = d.metrics
    out = [
        ("rows", f"{d.counts.get('rows', 0):,}"),
        ("ok", f"{d.counts.get('ok', 0):,}"),
        ("unparsed", f"{d.counts.get('unparsed', 0):,}"),
        ("error", f"{d.counts.get('error', 0):,}"),
        ("invalid input", f"{d.counts.get('invalid', 0):,}"),
        ("pending", f"{d.counts.get('pending', 0):,}"),
        ("cost", "unpriced" if d.cost_usd is None else f"${d.cost_usd:,.4f}"),
        ("tokens", f"{d.tokens['prompt'] + d.tokens['completion']:,}"),
    ]
    if m:
        out.append(("accuracy", _pct(_metric(m, "accuracy", "value"))))
        out.append(("Cohen's κ", _num(_metric(m, "cohen_kappa", "value"))))
        if d.kind != "pairwise":
            out.append(("Spearman ρ", _num(_metric(m, "correlations", "spearman", "value"))))
    if d.position:
        out.append(("position consistency", _pct(d.position.get("consistency"))))
    return out


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:18px 28px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c5cbd6}main{padding:20px 28px;max-width:1400px}
.kpis{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:18px}
.kpi{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:8px 14px;min-width:96px}
.kpi b{display:block;font-size:18px}.kpi span{color:#5b6576;font-size:12px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:16px}
figure{background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:0;padding:10px}
figcaption{color:#5b6576;font-size:12px;margin-top:6px}.na{color:#8a93a3;font-style:italic;padding:30px 10px}
table{border-collapse:collapse;background:#fff;margin:8px 0 18px}td,th{border:1px solid #dde1e7;padding:4px 10px;
text-align:left}th{background:#eef1f5}h2{font-size:16px;margin:22px 0 8px}
svg .axis{stroke:#333}svg .grid{stroke:#e3e6ea}svg .diag{stroke:#999;stroke-dasharray:4 4}
svg text{font-family:inherit}svg .tick{font-size:10px;fill:#444}svg .label{font-size:11px;fill:#333}
svg .ptitle{font-size:13px;font-weight:600;fill:#1d2430}svg .cell{font-size:12px}
"""

# Runs when the page is opened: records that every plot was laid out with a
# size, so a headless browser can confirm the report rendered.
_CHECK = """
window.addEventListener('load',function(){var s=document.querySelectorAll('svg.plot'),ok=0;
s.forEach(function(e){var b=e.getBoundingClientRect();
if(b.width>0&&b.height>0&&e.querySelectorAll('rect,circle,polyline').length>0)ok++;});
var el=document.getElementById('render-check');el.setAttribute('data-plots',String(s.length));
el.setAttribute('data-rendered',String(ok));el.textContent=ok+' of '+s.length+' plots rendered';});
"""


_NONE = '<tr><td colspan="3">none</td></tr>'


def render_html(d: ReportData) -> str:
    model = _metric(d.judge, "backend", "model") or ""
    judge = d.judge.get("judge", d.judge)
    kpis = "".join(f'<div class="kpi"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for k, v in _headline(d))
    figs = []
    for fid, svg, cap in _figures(d):
        body = svg if svg else f'<div class="na">{escape(cap)}</div>'
        caption = f"<figcaption>{escape(cap)}</figcaption>" if svg and cap else ""
        figs.append(f'<figure id="fig-{escape(fid)}">{body}{caption}</figure>')
    cats = "".join(
        f"<tr><td>{escape(c)}</td><td>{v['rows']}</td><td>{v['ok']}</td><td>{v['failed']}</td>"
        f"<td>{v['labeled']}</td><td>{_pct(v['accuracy'])}</td></tr>"
        for c, v in d.by_category.items()
    )
    probs = "".join(
        f"<tr><td>{escape(p['where'])}</td><td>{escape(p['kind'])}</td><td>{escape(p['reason'])}</td></tr>"
        for p in d.problems
    )
    kinds = "".join(f"<tr><td>{escape(k)}</td><td>{n}</td></tr>" for k, n in d.problem_kinds.items())
    meta_md = ""
    if d.metrics:
        rows = [
            ("accuracy", _pct(_metric(d.metrics, "accuracy", "value"))),
            ("agreement without ties", _pct(_metric(d.metrics, "agreement_without_ties", "value"))),
            ("Cohen's kappa", _num(_metric(d.metrics, "cohen_kappa", "value"))),
            ("weighted kappa", _num(_metric(d.metrics, "weighted_kappa", "value"))),
            ("Krippendorff's alpha", _num(_metric(d.metrics, "krippendorff_alpha", "value"))),
            ("Pearson", _num(_metric(d.metrics, "correlations", "pearson", "value"))),
            ("Spearman", _num(_metric(d.metrics, "correlations", "spearman", "value"))),
            ("Kendall", _num(_metric(d.metrics, "correlations", "kendall", "value"))),
            ("longer answer wins", _pct(_metric(d.metrics, "length", "longer_win_rate"))),
        ]
        meta_md = "".join(f"<tr><td>{k}</td><td>{escape(v)}</td></tr>" for k, v in rows if v != "n/a")
        meta_md = f"<h2>Agreement with human labels ({d.n_labeled} rows)</h2><table>{meta_md}</table>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>judgegraph report: {escape(d.run_id)}</title><style>{_CSS}</style></head>
<body><header><h1>Run {escape(d.run_id)}</h1>
<p>{escape(d.kind)} judge · {escape(str(judge.get("name") or judge.get("kind") or ""))} {escape(str(model))}
· config {escape(d.config_hash[:12])} · {escape(d.state)} ·
generated {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(d.generated_at))}</p></header>
<main><div class="kpis">{kpis}</div>
<p id="render-check" data-plots="0" data-rendered="0">plots not checked (scripts off)</p>
<div class="grid">{"".join(figs)}</div>
{meta_md}
<h2>By category</h2><table><tr><th>category</th><th>rows</th><th>ok</th><th>failed</th><th>labeled</th>
<th>accuracy (ok rows)</th></tr>{cats}</table>
<h2>Problems by kind</h2><table><tr><th>kind</th><th>rows</th></tr>{kinds or _NONE}</table>
<h2>First problems</h2><table><tr><th>where</th><th>kind</th><th>reason</th></tr>{probs or _NONE}
</table></main><script>{_CHECK}</script></body></html>
"""


def render_markdown(d: ReportData) -> str:
    lines = [f"# Run {d.run_id}", "", f"{d.kind} judge, config `{d.config_hash[:12]}`, {d.state}.", ""]
    lines += ["| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _headline(d)]
    if d.metrics:
        from ..metrics import MetaEvalReport

        lines += ["", MetaEvalReport.model_validate(d.metrics).to_markdown()]
    if d.confusion:
        lines += ["", "## Confusion matrix (rows: human, columns: judge)", ""]
        lines += ["| human \\ judge | " + " | ".join(d.labels) + " |", "|---" * (len(d.labels) + 1) + "|"]
        for lab, row in zip(d.labels, d.confusion, strict=False):
            lines.append(f"| {lab} | " + " | ".join(str(x) for x in row) + " |")
    if d.cascade:
        lines += [
            "",
            "## Cascade",
            "",
            f"Tier use: {d.cascade['tier_use']}",
            "",
            "| escalated | USD/item | accuracy | |",
            "|---|---|---|---|",
        ]
        for p in d.cascade["points"]:
            lines.append(
                f"| {_pct(p['escalated_share'])} | {_num(p['cost_per_item'], 6)} | {_pct(p['accuracy'])} "
                f"| {'this run' if p['actual'] else ''} |"
            )
    if d.problem_kinds:
        lines += ["", "## Problems by kind", "", "| kind | rows |", "|---|---|"]
        lines += [f"| {k} | {n} |" for k, n in d.problem_kinds.items()]
    return "\n".join(lines) + "\n"


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
