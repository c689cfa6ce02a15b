"""What ``judgegraph eval`` shows while it runs and when it ends: a rich
progress display (items, then a bar per batch state) and the summary lines."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from ._recorder import JobProgress, JobSummary
from ._summary_corrected import corrected_lines

__all__ = ["BATCH_ENDS", "BATCH_STATES", "JobBars", "print_summary", "progress_display"]

BATCH_STATES = ("submitting", "validating", "in_progress", "finalizing", "completed")
BATCH_ENDS = ("failed", "expired", "cancelled")


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        if "batch" in task.fields:
            return Text("")
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f} it/s" if speed else "-- it/s", style="progress.data.speed")


class _CostColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        f = task.fields
        if "batch" in f:
            return Text(f"{f['batch']:,} requests", style="progress.data")
        cost = f.get("cost")
        text = f"${cost:,.4f}" if cost else f"{f.get('tokens', 0):,} tok"
        return Text(text, style="green")


class _ErrorColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        f = task.fields
        if "batch" in f:
            return Text("")
        n = f.get("failed", 0) + f.get("invalid", 0)
        return Text(
            f"{f.get('failed', 0)} failed, {f.get('invalid', 0)} invalid", style="red" if n else "progress.data"
        )


def progress_display(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
        _CostColumn(),
        _ErrorColumn(),
        console=console,
        refresh_per_second=4,
    )


class JobBars:
    """The job's progress callback: one bar for the items, and once batches
    exist, a bar per batch state with its batches (and requests) in it."""

    def __init__(self, bar: Progress | None) -> None:
        self.bar = bar
        self.task_id: Any = None
        self.batch_tasks: dict[str, Any] = {}

    def start(self) -> None:
        if self.bar is not None:
            self.bar.start()
            self.task_id = self.bar.add_task("judging", total=None, cost=0.0, tokens=0, failed=0, invalid=0)

    def __call__(self, p: JobProgress) -> None:
        bar = self.bar
        if bar is None or self.task_id is None:
            return
        bar.update(
            self.task_id,
            completed=p.done,
            total=p.total,
            cost=p.cost_usd if p.priced else None,  # a partial sum would understate an unpriced run
            tokens=p.tokens,
            failed=p.failed,
            invalid=p.invalid,
        )
        if p.batches:
            total = sum(p.batches.values())
            shown = [*BATCH_STATES[1:], *(s for s in (*BATCH_ENDS, "submitting") if p.batches.get(s))]
            for state in shown:
                if state not in self.batch_tasks:
                    self.batch_tasks[state] = bar.add_task(f"batches {state.replace('_', ' ')}", total=total, batch=0)
                n = p.batches.get(state, 0)
                bar.update(self.batch_tasks[state], completed=n, total=total, batch=p.batch_requests.get(state, 0))


def _cost(usd: float | None) -> str:
    return "unpriced" if usd is None else f"${usd:.4f}"


def print_summary(out: Console, err: Console, s: JobSummary) -> int:
    """The run's summary: its counts, its judge-corrected rates when rows
    carry human labels, and where its report is on ``out`` (stdout: the
    result, for a pipe), the rows that failed on ``err`` (diagnostics).
    Returns how many rows failed or were invalid."""
    out.print(
        f"run [bold]{s.run_id}[/bold] in {s.store}: {s.rows} rows, {s.judged} judged now, "
        f"{s.cached} already done; ok {s.ok}, unparsed {s.unparsed}, error {s.errors}, invalid {s.invalid}; "
        f"cost {_cost(s.cost_usd)} ({s.tokens:,} tokens)",
        highlight=False,
        soft_wrap=True,
    )
    for line in corrected_lines(s.corrected or []):
        out.print(escape(line), highlight=False, soft_wrap=True)
    if s.corrected == []:
        err.print("  no judge-corrected rates: they need human labels on at least two rows with a usable verdict")
    for p in s.problems[:20]:
        err.print(f"  [red]•[/red] {escape(p)}", highlight=False, soft_wrap=True)
    if s.problems_total > 20:
        err.print(f"  … and {s.problems_total - 20} more (see the report)")
    out.print(
        f"report: judgegraph report {escape(s.run_id)} --store {escape(s.store)}", highlight=False, soft_wrap=True
    )
    return s.unparsed + s.errors + s.invalid
