"""Rendering a :class:`ReportData`: the self-contained HTML page with its figures, and Markdown."""

from __future__ import annotations

import time
from collections.abc import Iterable
from html import escape
from typing import Any

from judgegraph.reporting import RENDER_CHECK_JS, REPORT_CSS, bar_chart, heatmap, interval_chart, line_chart, money

from ._report_data import ReportData, shown_as_share

__all__ = ["render_html", "render_markdown"]


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * float(x):.1f}%"


def _num(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{float(x):.{digits}f}"


def _with_interval(value: Any, interval: dict[str, Any] | None, pct: bool) -> str:
    fmt = _pct if pct else _num
    band = f" [{fmt(interval['low'])} – {fmt(interval['high'])}]" if interval else ""
    return f"{fmt(value)}{band}"


def _intervals_note(*intervals: dict[str, Any] | None) -> str:
    """The level and method of the intervals a caption or table shows, said once:
    ``Intervals: 95% Wilson; 95% bootstrap (BCa).`` (empty when none is shown)."""
    from ..metrics import Interval

    methods = sorted({Interval.model_validate(ci).describe() for ci in intervals if ci})
    return f"Intervals: {'; '.join(methods)}." if methods else ""


CORRECTED_NOTE = (
    "Naive: the judge alone over every judged row (its interval ignores the judge's errors). Corrected: "
    "prediction-powered (the judge's mean plus its average error on the labelled rows). Intervals 95%: "
    "Wilson for shares, normal (CLT) for means and for the corrected figure."
)


def _corrected_rows(d: ReportData) -> list[tuple[str, str, str, str]]:
    """(figure, naive, corrected, human only) for each corrected estimate."""
    rows = []
    for e in d.corrected:
        pct = shown_as_share(e["name"])
        naive, human = e["naive"], e["human_only"]
        rows.append(
            (
                e["name"],
                f"{_with_interval(naive['value'], naive['interval'], pct)} ({e['n_items']} rows)",
                _with_interval(e["estimate"], e["interval"], pct),
                f"{_with_interval(human['value'], human['interval'], pct)} ({e['n_labelled']} labelled)",
            )
        )
    return rows


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
                    x_axis="share",
                    y_axis="share",
                ),
                _calibration_caption(cal),
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
        usable = [p for p in casc["points"] if p["accuracy"] is not None and p[xkey] is not None]
        pts = [(p[xkey], p["accuracy"]) for p in usable]
        if pts:
            own = next((p for p in usable if p["actual"]), None)
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
                        x_axis="money" if xkey == "cost_per_item" else "share",
                        y_axis="share",
                        mark=None if own is None else (own[xkey], own["accuracy"]),
                        mark_label="" if own is None else f"this run: {_pct(own['escalated_share'])} escalated",
                    ),
                    _cascade_caption(casc, own),
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
                    y_label="items with both orders read",
                    kind="position",
                    stacked=True,
                ),
                _position_caption(d),
            )
        )
    else:
        figs.append(("position", "", "No position consistency: needs a pairwise run with both orders (swap=both)."))
    return figs


def _calibration_caption(cal: dict[str, Any]) -> str:
    """ECE, and the AUROC of the confidence for correct vs wrong verdicts with its interval."""
    out = f"ECE {_num(cal.get('ece'))} over {_metric(cal, 'counts', 'used')} rows"
    auc = cal.get("auroc") or {}
    if auc.get("value") is not None:
        out += (
            f"; AUROC of the confidence, correct vs wrong verdicts: "
            f"{_with_interval(auc['value'], auc.get('interval'), pct=False)}"
        )
    note = _intervals_note(auc.get("interval"))
    return f"{out}; the diagonal is perfect calibration.{' ' + note if note else ''}"


def _position_caption(d: ReportData) -> str:
    """Consistency and position bias, each with its interval, and what they are shares of."""
    p = d.position or {}
    consistency = _with_interval(p.get("consistency"), p.get("consistency_interval"), pct=True)
    bias = _with_interval(p.get("position_bias"), p.get("position_bias_interval"), pct=True)
    note = _intervals_note(p.get("consistency_interval"), p.get("position_bias_interval"))
    return (
        f"Same winner in both orders: {consistency} ({_position_basis(d)}); first-shown answer won "
        f"both orders {p.get('n_prefer_first_position')}×, second-shown {p.get('n_prefer_second_position')}× "
        f"(position bias, first-shown − second-shown, of the items: {bias}).{' ' + note if note else ''}"
    )


def _cascade_caption(casc: dict[str, Any], own: dict[str, Any] | None) -> str:
    if own is None:
        return str(casc["note"])
    cost = "" if own["cost_per_item"] is None else f", {money(own['cost_per_item'])} per item"
    return (
        f"Ringed: this run ({_pct(own['escalated_share'])} escalated{cost}, agreement {_pct(own['accuracy'])} "
        f"on {casc['n_labeled']} labelled of {casc['n_items']} items). {casc['note']}"
    )


def _labelled_basis(d: ReportData) -> str:
    """What accuracy and kappa are shares of: the labelled rows whose verdict was read."""
    counts = _metric(d.metrics, "accuracy", "counts") or {}
    used, total = counts.get("used"), counts.get("total")
    if used is None or total is None:
        return f"{d.n_labeled} labelled rows"
    judged = _judged_rows(d)
    out = f"{used} of {total} labelled rows with a verdict"
    return out if total == judged else f"{out}; {judged} rows judged"


def _judged_rows(d: ReportData) -> int:
    return sum(d.counts.get(k, 0) for k in ("ok", "unparsed", "error"))


def _position_basis(d: ReportData) -> str:
    """What position consistency is a share of: the items whose two orders were both read, and
    how many judged rows that leaves out."""
    p = d.position or {}
    counts = p.get("counts") or {}
    used, total = int(counts.get("used", 0)), int(counts.get("total", 0))
    out = f"{p.get('n_consistent', 0)} of {used} items with both orders read"
    failed = total - used
    if failed:
        out += f"; {failed} with a failed order left out"
    judged = _judged_rows(d)
    if judged > total:
        out += f"; {judged - total} of {judged} judged rows without two orders"
    return out


def _interval_entry(name: str, ci: dict[str, Any] | None, *, pct: bool) -> list[tuple[str, str]]:
    """A headline entry for a figure's interval, labelled with its level and method."""
    if not ci:
        return []
    fmt = _pct if pct else _num
    return [(f"{name}: {100 * ci['level']:g}% interval ({ci['method']})", f"{fmt(ci['low'])} – {fmt(ci['high'])}")]


def _headline(d: ReportData) -> list[tuple[str, str]]:
    m = d.metrics
    out = [
        ("rows", f"{d.counts.get('rows', 0):,}"),
        ("ok", f"{d.counts.get('ok', 0):,}"),
        ("unparsed", f"{d.counts.get('unparsed', 0):,}"),
        ("error", f"{d.counts.get('error', 0):,}"),
        ("invalid input", f"{d.counts.get('invalid', 0):,}"),
        ("pending", f"{d.counts.get('pending', 0):,}"),
        *([("unreadable stored rows", f"{d.counts['unreadable']:,}")] if d.counts.get("unreadable") else []),
        ("cost", "unpriced" if d.cost_usd is None else f"${d.cost_usd:,.4f}"),
        ("tokens", f"{d.tokens['prompt'] + d.tokens['completion']:,}"),
    ]
    if m:
        out.append((f"accuracy ({_labelled_basis(d)})", _pct(_metric(m, "accuracy", "value"))))
        out += _interval_entry("accuracy", _metric(m, "accuracy", "interval"), pct=True)
        out.append(("Cohen's κ", _num(_metric(m, "cohen_kappa", "value"))))
        out += _interval_entry("Cohen's κ", _metric(m, "cohen_kappa", "interval"), pct=False)
        if d.kind != "pairwise":
            out.append(("Spearman ρ", _num(_metric(m, "correlations", "spearman", "value"))))
    if d.position:
        out.append((f"position consistency ({_position_basis(d)})", _pct(d.position.get("consistency"))))
        out += _interval_entry("position consistency", d.position.get("consistency_interval"), pct=True)
    return out


_NONE = '<tr><td colspan="3">none</td></tr>'


def _comparison_html(d: ReportData) -> str:
    """The compared judges: their table as the terminal shows it, agreement with its interval, and cost."""
    c = d.comparison
    if c is None:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in c.columns)
    body = "".join(
        ('<tr class="mark">' if r.name == c.mark else "<tr>")
        + "".join(f"<td>{escape(x)}</td>" for x in r.cells)
        + "</tr>"
        for r in c.rows
    )
    figs = []
    scored = [(r.name, r.agreement, r.low, r.high) for r in c.rows if r.agreement is not None]
    if scored:
        svg = interval_chart(
            "Agreement with the human labels",
            scored,
            x_label="agreement (95% interval)",
            kind="comparison-agreement",
            mark=c.mark,
        )
        figs.append(f'<figure id="fig-comparison-agreement">{svg}</figure>')
    priced = [r for r in c.rows if r.cost_per_1k is not None]
    if priced:
        svg = bar_chart(
            "Cost per 1,000 items",
            [r.name for r in priced],
            {"USD per 1k items": [float(r.cost_per_1k or 0.0) for r in priced]},
            y_label="USD per 1,000 items",
            kind="comparison-cost",
            value_axis="money",
            mark=c.mark,
            label_values=True,
        )
        figs.append(f'<figure id="fig-comparison-cost">{svg}</figure>')
    notes = "".join(f"<p>{escape(n)}</p>" for n in c.notes)
    return (
        f'<section id="comparison"><h2>{escape(c.title)}</h2><table><tr>{head}</tr>{body}</table>{notes}'
        f'<div class="grid">{"".join(figs)}</div><h2>The run below: {escape(d.run_id)}</h2></section>'
    )


def _result(*path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (value, interval) paths of a MetricResult in summarize's dump."""
    return (*path, "value"), (*path, "interval")


# (figure, path to its value and to its interval in summarize's dump, shown as a share)
_AGREEMENT_ROWS: tuple[tuple[str, tuple[tuple[str, ...], tuple[str, ...] | None], bool], ...] = (
    ("accuracy", _result("accuracy"), True),
    ("agreement without ties", _result("agreement_without_ties"), True),
    ("Cohen's kappa", _result("cohen_kappa"), False),
    ("weighted kappa", _result("weighted_kappa"), False),
    ("Krippendorff's alpha", _result("krippendorff_alpha"), False),
    ("Pearson", _result("correlations", "pearson"), False),
    ("Spearman", _result("correlations", "spearman"), False),
    ("Kendall", _result("correlations", "kendall"), False),
    ("accuracy, first order", _result("swap", "first_order"), True),
    ("accuracy, second order", _result("swap", "second_order"), True),
    ("accuracy, mean of the two orders", (("swap", "average"), ("swap", "average_interval")), True),
    ("accuracy in both orders", _result("swap", "both"), True),
    ("longer answer wins", (("length", "longer_win_rate"), None), True),
)


def _agreement_rows(meta: dict[str, Any]) -> tuple[list[tuple[str, str]], list[dict[str, Any] | None]]:
    """The agreement table's (figure, value with its interval) rows, and the intervals shown."""
    rows: list[tuple[str, str]] = []
    shown: list[dict[str, Any] | None] = []
    for label, (value_path, ci_path), pct in _AGREEMENT_ROWS:
        value = _metric(meta, *value_path)
        if value is None:
            continue
        ci = _metric(meta, *ci_path) if ci_path else None
        rows.append((label, _with_interval(value, ci, pct)))
        shown.append(ci)
    return rows, shown


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
        rows, shown = _agreement_rows(d.metrics)
        meta_md = "".join(f"<tr><td>{k}</td><td>{escape(v)}</td></tr>" for k, v in rows)
        note = _intervals_note(*shown)
        meta_md = f"<h2>Agreement with human labels ({d.n_labeled} rows)</h2><table>{meta_md}</table>" + (
            f"<p>{escape(note)}</p>" if note else ""
        )
    if d.corrected:
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in _corrected_rows(d)
        )
        meta_md += (
            f"<h2>Corrected for the judge's errors</h2><p>{escape(CORRECTED_NOTE)}</p><table><tr><th>figure</th>"
            f"<th>naive (judge)</th><th>corrected</th><th>human labels only</th></tr>{body}</table>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>judgegraph report: {escape(d.run_id)}</title><style>{REPORT_CSS}</style></head>
<body><header><h1>Run {escape(d.run_id)}</h1>
<p>{escape(d.kind)} judge · {escape(str(judge.get("name") or judge.get("kind") or ""))} {escape(str(model))}
· config {escape(d.config_hash[:12])} · {escape(d.state)} ·
generated {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(d.generated_at))}</p></header>
<main><p id="render-check" data-plots="0" data-rendered="0">plots not checked (scripts off)</p>
{_comparison_html(d)}<div class="kpis">{kpis}</div>
<div class="grid">{"".join(figs)}</div>
{meta_md}
<h2>By category</h2><table><tr><th>category</th><th>rows</th><th>ok</th><th>failed</th><th>labeled</th>
<th>accuracy (ok rows)</th></tr>{cats}</table>
<h2>Problems by kind</h2><table><tr><th>kind</th><th>rows</th></tr>{kinds or _NONE}</table>
<h2>First problems</h2><table><tr><th>where</th><th>kind</th><th>reason</th></tr>{probs or _NONE}
</table></main><script>{RENDER_CHECK_JS}</script></body></html>
"""


def render_markdown(d: ReportData) -> str:
    lines = [f"# Run {d.run_id}", "", f"{d.kind} judge, config `{d.config_hash[:12]}`, {d.state}.", ""]
    if d.comparison is not None:
        c = d.comparison
        lines += [f"## {c.title}", "", "| " + " | ".join(c.columns) + " |", "|---" * len(c.columns) + "|"]
        lines += ["| " + " | ".join(r.cells) + " |" for r in c.rows]
        lines += ["", *c.notes, ""] if c.notes else [""]
    lines += ["| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _headline(d)]
    if d.metrics:
        from ..metrics import MetaEvalReport

        lines += ["", MetaEvalReport.model_validate(d.metrics).to_markdown()]
    if d.corrected:
        lines += ["", "## Corrected for the judge's errors", "", CORRECTED_NOTE, ""]
        lines += ["| figure | naive (judge) | corrected | human labels only |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {e} |" for a, b, c, e in _corrected_rows(d)]
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
            usd = "unpriced" if p["cost_per_item"] is None else money(p["cost_per_item"])
            lines.append(
                f"| {_pct(p['escalated_share'])} | {usd} | {_pct(p['accuracy'])} "
                f"| {'this run' if p['actual'] else ''} |"
            )
    if d.problem_kinds:
        lines += ["", "## Problems by kind", "", "| kind | rows |", "|---|---|"]
        lines += [f"| {k} | {n} |" for k, n in d.problem_kinds.items()]
    return "\n".join(lines) + "\n"
