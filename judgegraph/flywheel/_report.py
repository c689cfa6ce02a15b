"""The flywheel's report: per round, held-out agreement, escalation share at the
calibrated threshold, and teacher cost; as a table, Markdown and a self-contained
HTML page with inline SVG plots (judgegraph.reporting's matplotlib charts and style).

Everything is read back from the work folder, so a report needs neither the
teacher nor the trainer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from judgegraph.reporting import RENDER_CHECK_JS, REPORT_CSS, bar_chart, line_chart, money

from ._records import FlywheelState, RoundRecord

__all__ = [
    "FlywheelReport",
    "RoundRow",
    "build_flywheel_report",
    "render_flywheel_html",
    "render_flywheel_markdown",
    "write_flywheel_report",
]


class RoundRow(BaseModel):
    """One finished round's figures, as the report shows them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int
    served_by: int | None = Field(description="the round whose local judge judged this batch; None: the teacher alone")
    batch_items: int
    batch_escalation_share: float | None
    audited: int
    audit_agreement: float | None
    drift: bool | None
    teacher_calls: int
    cost_usd: float | None
    training_traces: int
    challenger_agreement: float | None
    champion_agreement: float | None
    promoted: bool
    reason: str
    in_service: int | None = Field(description="the local judge serving after this round")
    local_agreement: float | None = Field(description="held-out: the local judge in service, alone")
    threshold: float | None
    escalation_share: float | None = Field(
        description="held-out: share escalated at the calibrated threshold (1.0: none kept)"
    )
    cascade_agreement: float | None = Field(description="held-out: local on kept items, teacher on the rest")
    equal_agreement_escalation: float | None = Field(
        description="held-out, in-sample: the least escalation at which the cascade matches the teacher's agreement"
    )
    teacher_agreement: float | None = Field(description="held-out: the teacher alone")


class FlywheelReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    workdir: str
    heldout_n: int
    alpha: float | None
    delta: float | None
    calibrate_on: Literal["heldout", "traces"] = "heldout"
    champion: int | None
    rows: list[RoundRow]
    pending: str | None = Field(description="an unfinished round, if any")
    events: list[str]
    generated_at: float


def _row(rec: RoundRecord) -> RoundRow:
    b, t, d = rec.batch, rec.training, rec.decision
    assert d is not None
    now = rec.in_service()
    return RoundRow(
        round=rec.round,
        served_by=b.champion if b else None,
        batch_items=b.items if b else 0,
        batch_escalation_share=b.escalation_share if b and b.items else None,
        audited=b.audited if b else 0,
        audit_agreement=b.audit_agreement if b else None,
        drift=b.drift if b else None,
        teacher_calls=b.teacher_calls if b else 0,
        cost_usd=b.cost_usd if b else 0.0,
        training_traces=t.traces if t else 0,
        challenger_agreement=rec.challenger.local_agreement if rec.challenger else None,
        champion_agreement=rec.champion.local_agreement if rec.champion else None,
        promoted=d.promoted,
        reason=d.reason,
        in_service=d.champion_after,
        local_agreement=now.local_agreement if now else None,
        threshold=now.threshold if now else None,
        escalation_share=now.escalation_share if now else (1.0 if rec.teacher_heldout_agreement is not None else None),
        cascade_agreement=now.cascade_agreement if now else rec.teacher_heldout_agreement,
        equal_agreement_escalation=now.equal_agreement_escalation if now else None,
        teacher_agreement=rec.teacher_heldout_agreement,
    )


def build_flywheel_report(workdir: str | Path) -> FlywheelReport:
    w = Path(workdir)
    records = [
        RoundRecord.model_validate_json(f.read_text(encoding="utf-8"))
        for f in sorted(w.glob("rounds/round-*/round.json"))
    ]
    state = FlywheelState.model_validate_json((w / "state.json").read_text(encoding="utf-8"))
    done = [r for r in records if r.stage == "done"]
    pending = next((f"round {r.round} stopped after stage {r.stage}" for r in records if r.stage != "done"), None)
    heldout = sum(1 for line in (w / "heldout.jsonl").read_text(encoding="utf-8").splitlines() if line.strip())
    last = records[-1].settings if records else None
    events = [
        f"{'round ' + str(e.round) if e.round is not None else 'rollback'}: {e.action}, "
        f"champion {e.champion if e.champion is not None else 'none'}" + (f" ({e.note})" if e.note else "")
        for e in state.events
    ]
    return FlywheelReport(
        workdir=str(w),
        heldout_n=heldout,
        alpha=last.alpha if last else None,
        delta=last.delta if last else None,
        calibrate_on=last.calibrate_on if last else "heldout",
        champion=state.champion,
        rows=[_row(r) for r in done],
        pending=pending,
        events=events,
        generated_at=time.time(),
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _usd(x: float | None) -> str:
    # Two significant figures however small: a fixed $x.4f wrote a $0.00002 round as $0.0000.
    return "unpriced" if x is None else money(x)


def _thr(x: float | None) -> str:
    return "none kept" if x is None else f"{x:.3f}"


_HEAD = (
    "| round | served by | batch | escalated (batch) | audited | audit agrees | teacher calls | cost | "
    "trained on | challenger | champion | decision | in service | local alone | threshold | "
    "escalated (held-out) | cascade | teacher alone | escalated at teacher's agreement |"
)


def _where(r: FlywheelReport) -> str:
    if r.calibrate_on == "traces":
        return "on each round's cross-fitted training traces (measured on the held-out set)"
    return "on the held-out set"


def render_flywheel_markdown(r: FlywheelReport) -> str:
    lines = [
        "## Flywheel rounds",
        "",
        f"Held-out set: {r.heldout_n} labelled items "
        f"(thresholds calibrated {_where(r)} at alpha {r.alpha}, delta {r.delta}). "
        f"Champion now: {'round ' + str(r.champion) if r.champion is not None else 'none'}."
        + (f" Unfinished: {r.pending}." if r.pending else ""),
        "",
        _HEAD,
        "|" + "---|" * (_HEAD.count("|") - 1),
    ]
    for x in r.rows:
        lines.append(
            f"| {x.round} | {x.served_by if x.served_by is not None else 'teacher'} | {x.batch_items} | "
            f"{_pct(x.batch_escalation_share)} | {x.audited} | {_pct(x.audit_agreement)}"
            f"{' (drift)' if x.drift else ''} | {x.teacher_calls} | {_usd(x.cost_usd)} | {x.training_traces} | "
            f"{_pct(x.challenger_agreement)} | {_pct(x.champion_agreement)} | "
            f"{'promoted' if x.promoted else 'kept'} | {x.in_service if x.in_service is not None else 'none'} | "
            f"{_pct(x.local_agreement)} | {_thr(x.threshold)} | {_pct(x.escalation_share)} | "
            f"{_pct(x.cascade_agreement)} | {_pct(x.teacher_agreement)} | {_pct(x.equal_agreement_escalation)} |"
        )
    lines += [
        "",
        "Columns: *escalated (batch)* is the share of the round's batch the serving cascade sent to the teacher; "
        "*challenger* / *champion* are the local judges' held-out agreement (verdict equals the label) that the "
        "promotion rule compares; *local alone*, *threshold*, *escalated (held-out)* and *cascade* describe the local "
        f"judge in service after the round, at its threshold calibrated {_where(r)} (guaranteed: "
        "disagreement <= alpha with those labels on kept items, with probability >= 1 - delta). "
        "*escalated at teacher's agreement* is "
        "in-sample and carries no guarantee: the least escalation at which the cascade's held-out agreement still "
        "matches the teacher's alone.",
    ]
    if r.events:
        lines += ["", "Events:", ""] + [f"- {e}" for e in r.events]
    return "\n".join(lines) + "\n"


def _figures(r: FlywheelReport) -> list[tuple[str, str, str]]:
    rows = r.rows
    out: list[tuple[str, str, str]] = []
    if not rows:
        return out

    def pts(attr: str) -> list[tuple[float, float]]:
        return [(float(x.round), float(v)) for x in rows if (v := getattr(x, attr)) is not None]

    first, last = min(x.round for x in rows), max(x.round for x in rows)
    x_range = (first, last) if last > first else (first - 0.5, first + 0.5)
    champion = next(
        (
            (float(x.round), float(x.cascade_agreement))
            for x in rows
            if x.round == r.champion and x.cascade_agreement is not None
        ),
        None,
    )
    agree = {
        "cascade": pts("cascade_agreement"),
        "local alone": pts("local_agreement"),
        "teacher alone": pts("teacher_agreement"),
    }
    out.append(
        (
            "agreement",
            line_chart(
                "Held-out agreement after each round",
                {k: v for k, v in agree.items() if v},
                x_label="round",
                y_label="agreement with labels",
                x_range=x_range,
                y_range=(0.0, 1.0),
                kind="flywheel-agreement",
                x_axis="count",
                y_axis="share",
                mark=champion,
                mark_label=f"champion: round {r.champion}",
            ),
            "Cascade: the local judge in service at its calibrated threshold, the teacher on the rest.",
        )
    )
    esc = {
        "calibrated": pts("escalation_share"),
        "batch served": pts("batch_escalation_share"),
        "teacher-level": pts("equal_agreement_escalation"),
    }
    out.append(
        (
            "escalation",
            line_chart(
                "Escalation share by round",
                {k: v for k, v in esc.items() if v},
                x_label="round",
                y_label="share sent to the teacher",
                x_range=x_range,
                y_range=(0.0, 1.0),
                kind="flywheel-escalation",
                x_axis="count",
                y_axis="share",
            ),
            "calibrated: held-out, after the round, at the judge's calibrated threshold. batch served: what the "
            "cascade serving the round escalated. teacher-level: held-out, in-sample, the least escalation at "
            "which the cascade still matches the teacher's agreement (no guarantee).",
        )
    )
    priced = all(x.cost_usd is not None for x in rows)
    series: dict[str, Sequence[float]] = (
        {"USD": [x.cost_usd or 0.0 for x in rows]}
        if priced
        else {"teacher calls": [float(x.teacher_calls) for x in rows]}
    )
    out.append(
        (
            "cost",
            bar_chart(
                "Teacher cost per round" if priced else "Teacher calls per round",
                [str(x.round) for x in rows],
                series,
                x_label="round",
                y_label="USD" if priced else "calls",
                kind="flywheel-cost",
                value_axis="money" if priced else "count",
            ),
            "Escalations plus audit calls on the round's batch.",
        )
    )
    return out


def render_flywheel_html(r: FlywheelReport) -> str:
    figs = "".join(
        f'<figure id="fig-{escape(fid)}">{svg}<figcaption>{escape(cap)}</figcaption></figure>'
        for fid, svg, cap in _figures(r)
    )
    head = [
        "round",
        "served by",
        "batch",
        "escalated (batch)",
        "audited",
        "audit agrees",
        "teacher calls",
        "cost",
        "trained on",
        "challenger",
        "champion",
        "decision",
        "in service",
        "local alone",
        "threshold",
        "escalated (held-out)",
        "cascade",
        "teacher alone",
        "escalated at teacher's agreement",
    ]
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(str(c))}</td>"
            for c in (
                x.round,
                x.served_by if x.served_by is not None else "teacher",
                x.batch_items,
                _pct(x.batch_escalation_share),
                x.audited,
                _pct(x.audit_agreement) + (" (drift)" if x.drift else ""),
                x.teacher_calls,
                _usd(x.cost_usd),
                x.training_traces,
                _pct(x.challenger_agreement),
                _pct(x.champion_agreement),
                "promoted" if x.promoted else "kept",
                x.in_service if x.in_service is not None else "none",
                _pct(x.local_agreement),
                _thr(x.threshold),
                _pct(x.escalation_share),
                _pct(x.cascade_agreement),
                _pct(x.teacher_agreement),
                _pct(x.equal_agreement_escalation),
            )
        )
        + "</tr>"
        for x in r.rows
    )
    reasons = "".join(f"<li>round {x.round}: {escape(x.reason)}</li>" for x in r.rows)
    events = "".join(f"<li>{escape(e)}</li>" for e in r.events)
    pending = f"<p>Unfinished: {escape(r.pending)}</p>" if r.pending else ""
    champion = f"round {r.champion}" if r.champion is not None else "none"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>judgegraph flywheel</title><style>{REPORT_CSS}</style></head>
<body><header><h1>Judge flywheel</h1>
<p>{escape(r.workdir)} · held-out {r.heldout_n} items · alpha {r.alpha} · delta {r.delta} ·
champion {escape(champion)} · generated {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(r.generated_at))}</p></header>
<main>{pending}
<p id="render-check" data-plots="0" data-rendered="0">plots not checked (scripts off)</p>
<div class="grid">{figs}</div>
<h2>Rounds</h2><table><tr>{"".join(f"<th>{escape(h)}</th>" for h in head)}</tr>{body}</table>
<h2>Decisions</h2><ul>{reasons}</ul>
<h2>Events</h2><ul>{events}</ul>
</main><script>{RENDER_CHECK_JS}</script></body></html>
"""


def write_flywheel_report(workdir: str | Path, out: str | Path | None = None) -> dict[str, Path]:
    """Write ``report.html``, ``report.md`` and ``report.json`` (under ``out``, default the work folder)."""
    r = build_flywheel_report(workdir)
    folder = Path(out) if out is not None else Path(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"html": folder / "report.html", "markdown": folder / "report.md", "json": folder / "report.json"}
    paths["html"].write_text(render_flywheel_html(r), encoding="utf-8")
    paths["markdown"].write_text(render_flywheel_markdown(r), encoding="utf-8")
    paths["json"].write_text(r.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return paths
