"""``judgegraph flywheel ...``: rounds of judge → collect → train → calibrate → promote."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from . import Flywheel
    from ._config import FlywheelConfig

__all__ = ["flywheel_app"]

flywheel_app = typer.Typer(
    name="flywheel",
    help="Turn escalations into training data: rounds that retrain, recalibrate and promote the local judge.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()

_CONFIG_COPY = "config.json"

Workdir = Annotated[Path, typer.Option(help="the flywheel's folder (rounds, models, traces, state)")]


@flywheel_app.callback()
def _group() -> None:
    """Turn escalations into training data."""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _rounds_table(workdir: Path) -> Table:
    from . import build_flywheel_report

    r = build_flywheel_report(workdir)
    table = Table(
        "round",
        "served by",
        "batch escalated",
        "teacher calls",
        "cost",
        "challenger / champion",
        "decision",
        "held-out: local / cascade",
        "held-out escalated",
        title=f"flywheel {workdir} (held-out {r.heldout_n} items, alpha {r.alpha})",
    )
    for x in r.rows:
        table.add_row(
            str(x.round),
            "teacher" if x.served_by is None else f"round {x.served_by}",
            f"{_pct(x.batch_escalation_share)} of {x.batch_items}",
            str(x.teacher_calls),
            "unpriced" if x.cost_usd is None else f"${x.cost_usd:.4f}",
            f"{_pct(x.challenger_agreement)} / {_pct(x.champion_agreement)}",
            "[green]promoted[/]" if x.promoted else "[yellow]kept[/]",
            f"{_pct(x.local_agreement)} / {_pct(x.cascade_agreement)}",
            _pct(x.escalation_share),
        )
    if r.pending:
        table.caption = f"unfinished: {r.pending}"
    return table


def _load(workdir: Path, config: Path | None) -> tuple[FlywheelConfig, Flywheel]:
    from ._config import load_config, open_flywheel

    copy = workdir / _CONFIG_COPY
    if config is None:
        if not copy.exists():
            raise typer.BadParameter(
                f"{workdir} has no {_CONFIG_COPY}: give --config for the first run", param_hint="--config"
            )
        config = copy
    try:
        cfg = load_config(config)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None
    try:
        fw = open_flywheel(cfg, workdir, log=lambda s: console.print(escape(s)))
    except (OSError, ValueError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from None
    if config.resolve() != copy.resolve():
        copy.write_text(cfg.model_dump_json(indent=2) + "\n", encoding="utf-8")  # paths already absolute
    return cfg, fw


@flywheel_app.command()
def run(
    workdir: Workdir,
    config: Annotated[
        Path | None, typer.Option(help="flywheel config (JSON); default: the copy kept in the work folder")
    ] = None,
    rounds: Annotated[int, typer.Option(min=0, help="new rounds to run after finishing an interrupted one")] = 1,
    stop_after: Annotated[
        str | None, typer.Option(help="end the call after this stage of the last round: judged, trained or evaluated")
    ] = None,
) -> None:
    """Finish an interrupted round, then run ROUNDS new ones over the next batches of the item stream."""
    from . import FlywheelError
    from ._config import next_batch

    if stop_after not in (None, "judged", "trained", "evaluated"):
        raise typer.BadParameter("use judged, trained or evaluated", param_hint="--stop-after")
    cfg, fw = _load(workdir, config)
    try:
        if fw.pending() is not None:
            rec = fw.run_round(stop_after=stop_after if rounds == 0 else None)  # type: ignore[arg-type]
        for k in range(rounds):
            batch = next_batch(fw, cfg)
            if not batch:
                console.print("[yellow]the item stream is used up: no new round[/]")
                break
            last = k == rounds - 1
            rec = fw.run_round(batch, stop_after=stop_after if last else None)  # type: ignore[arg-type]
            if rec.stage != "done":
                console.print(f"round {rec.round} stopped after stage {rec.stage}; run again to resume")
    except FlywheelError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from None
    console.print(_rounds_table(workdir))


@flywheel_app.command()
def status(workdir: Workdir) -> None:
    """The rounds so far and the local judge in service."""
    if not (workdir / "state.json").exists():
        raise typer.BadParameter(f"{workdir} is not a flywheel folder", param_hint="--workdir")
    console.print(_rounds_table(workdir))


@flywheel_app.command()
def rollback(
    workdir: Workdir,
    to: Annotated[
        int | None, typer.Option(help="the round whose local judge serves again; default: the previous champion")
    ] = None,
    drop_traces: Annotated[bool, typer.Option(help="later rounds' traces stop training future rounds")] = False,
    config: Annotated[Path | None, typer.Option(help="flywheel config; default: the copy in the work folder")] = None,
) -> None:
    """Put an earlier round's local judge back in service (one command; the records stay)."""
    from . import FlywheelError

    _, fw = _load(workdir, config)
    before = fw.state.champion
    try:
        state = fw.rollback(to, drop_traces=drop_traces)
    except FlywheelError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2) from None
    dropped = f"; traces of rounds {list(state.excluded_rounds)} no longer train" if state.excluded_rounds else ""
    console.print(f"champion: round {before} -> round {state.champion}{dropped}")


@flywheel_app.command()
def report(
    workdir: Workdir,
    out: Annotated[Path | None, typer.Option(help="folder for report.html/.md/.json; default: the work folder")] = None,
) -> None:
    """Write the per-round report (HTML with plots, Markdown, JSON)."""
    from . import write_flywheel_report

    if not (workdir / "state.json").exists():
        raise typer.BadParameter(f"{workdir} is not a flywheel folder", param_hint="--workdir")
    paths = write_flywheel_report(workdir, out)
    for kind, p in paths.items():
        console.print(f"{kind}: {p}")


if __name__ == "__main__":
    flywheel_app()
