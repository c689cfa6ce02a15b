"""The quickstart's result as a rich table and as Markdown."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from judgegraph.metrics import PairedDifference, proportion_interval

from ._budget import escalation_rule
from ._models import QuickstartResult, TableRow

__all__ = ["difference_sentence", "print_result", "report_comparison", "result_markdown", "result_table"]

INTERVALS = "95% intervals in brackets: Wilson for shares, paired bootstrap (BCa) for the difference"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _cost(row: TableRow) -> str:
    c = row.cost_per_1k
    return "n/a (unpriced)" if c is None else f"${c:.4f}"


def _band(successes: int, n: int) -> str:
    ci = proportion_interval(successes, n)
    return "" if ci is None else f" [{100 * ci.low:.1f}–{100 * ci.high:.1f}]"


def _agreement(row: TableRow) -> str:
    failed = f", {row.failed} failed" if row.failed else ""
    return f"{_pct(row.agreement)} ({row.correct}/{row.items}{failed}){_band(row.correct, row.items)}"


def _escalated(row: TableRow) -> str:
    if row.escalated_share in (0, 1):  # all or nothing by construction, not a sampled share
        return _pct(row.escalated_share)
    return f"{_pct(row.escalated_share)}{_band(round(row.escalated_share * row.items), row.items)}"


def difference_sentence(d: PairedDifference | None) -> str:
    """What the held-out run showed about the cascade against the teacher, no more than its interval supports."""
    if d is None or d.difference is None or d.interval is None:
        return "Cascade vs teacher: no paired difference could be computed."
    lo, hi = 100 * d.interval.low, 100 * d.interval.high
    figures = (
        f"cascade minus teacher agreement {100 * d.difference:+.1f} points "
        f"({d.interval.describe()} {lo:+.1f} to {hi:+.1f}, {d.counts.used} items)"
    )
    if d.interval.low > 0:
        return f"The cascade agreed with the humans more often than the teacher: {figures}."
    if d.interval.high < 0:
        return f"The cascade agreed with the humans less often than the teacher: {figures}."
    return f"This run cannot tell the cascade from the teacher: {figures}; the interval includes 0."


COLUMNS = ("judge", "agreement with human majority", "escalated", "cost per 1k items")


def _cells(row: TableRow) -> list[str]:
    return [row.name, _agreement(row), _escalated(row), _cost(row)]


def report_comparison(
    rows: list[TableRow], difference: PairedDifference | None, *, items: int, cascade: str
) -> dict[str, Any]:
    """The terminal table for the HTML report (``write_report(comparison=...)``): the same cells and
    intervals, with each judge's agreement interval and cost for the plots; ``cascade`` names the row
    of the report's own run."""
    out = []
    for row in rows:
        ci = proportion_interval(row.correct, row.items)
        out.append(
            {
                "name": row.name,
                "agreement": row.agreement,
                "low": None if ci is None else ci.low,
                "high": None if ci is None else ci.high,
                "cost_per_1k": row.cost_per_1k,
                "cells": _cells(row),
            }
        )
    return {
        "title": f"Local, teacher and cascade on every item, each judged out of fold ({items} items)",
        "columns": list(COLUMNS),
        "rows": out,
        "mark": cascade,
        "notes": [difference_sentence(difference), INTERVALS + "."],
    }


def result_table(result: QuickstartResult) -> Table:
    table = Table(
        *COLUMNS,
        title=f"{result.items} items, each judged by a head and a budget fitted on the other folds",
        caption=INTERVALS,
    )
    for row in result.rows:
        table.add_row(*_cells(row))
    return table


def _budget_lines(result: QuickstartResult) -> list[str]:
    lines = [
        "Budget, per fold: the planner picks it on the other folds' items (out-of-fold verdicts, human labels), "
        "never on the fold's own; on the fold's batch at most floor(budget x items) go up, the least confident first."
    ]
    for plan in result.folds:
        b = plan.budget
        capped = " (capped)" if plan.threshold != b.threshold else ""
        lines.append(
            f"  fold {plan.fold} ({plan.items} items): {b.policy} (agreement on the other folds "
            f"{_pct(b.calibration_agreement)}; local alone {_pct(b.calibration_local)}, teacher alone "
            f"{_pct(b.calibration_teacher)}); escalate {escalation_rule(plan.threshold)}{capped}"
        )
    return lines


def print_result(result: QuickstartResult, console: Console) -> None:
    console.print(f"[bold]{difference_sentence(result.cascade_minus_teacher)}[/]")
    console.print(result_table(result))
    console.print(
        f"[bold]Tier 1[/] {result.local_judge}" + (" (reused from an earlier run)" if result.reused_judge else "")
    )
    console.print(f"[bold]Tier 2[/] {result.teacher}")
    for line in _budget_lines(result):
        console.print(line, markup=False, highlight=False)
    console.print(f"Split: {result.split}")
    for note in result.notes:
        console.print(f"Note: {note}")
    console.print(f"[bold]Report:[/] {result.report}")
    console.print(f"Per-item results: {result.store}; summary: {result.summary}")
    runs = " ".join(row.run_id for row in result.rows)
    console.print(f"Runs in that store: {runs} (judgegraph report RUN --store {result.store})")


def result_markdown(result: QuickstartResult) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    for row in result.rows:
        lines.append("| " + " | ".join(_cells(row)) + " |")
    lines += ["", f"{INTERVALS}. {difference_sentence(result.cascade_minus_teacher)}"]
    return "\n".join(lines) + "\n"
