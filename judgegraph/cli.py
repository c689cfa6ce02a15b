"""The ``judgegraph`` command line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(no_args_is_help=True, add_completion=False, help="LLM-as-a-judge components for LangGraph.")
console = Console()


def _version(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"judgegraph {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """LLM-as-a-judge components for LangGraph."""


def main() -> None:
    """The console script: expected failures (a missing extra, a store that
    cannot be opened or written, bad input) end in one line on stderr and a
    non-zero exit code, never a traceback."""
    import sys

    from .jobs import StoreError

    try:
        app()
    except ImportError as exc:  # MissingExtraError names the extra to install
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except StoreError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(3)


@app.command()
def templates() -> None:
    """List the registered prompt templates."""
    from ._templates import list_templates

    table = Table("id", "version", "kind", "output")
    for t in list_templates():
        table.add_row(t.id, str(t.version), t.kind, t.parser)
    console.print(table)


@app.command()
def quickstart(
    workdir: Annotated[Path, typer.Option(help="where models and results go")] = Path(".judgegraph/quickstart"),
    judge: Annotated[
        str | None,
        typer.Option(
            help="tier 1 endpoint instead of training the local judge: openai:MODEL[@URL], vllm:MODEL@URL, tgi:URL"
        ),
    ] = None,
    escalate: Annotated[
        str | None,
        typer.Option(
            help="tier 2: replay (recorded gpt-3.5-turbo verdicts) or an endpoint as for --judge; "
            "default: openai:gpt-4o-mini when OPENAI_API_KEY is set, else replay"
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "--size", min=10, help="reduced run: about this many items")
    ] = None,
    budget: Annotated[
        float,
        typer.Option(
            min=0.01,
            max=1.0,
            help="the largest share of calibration items the planner may escalate when it picks the confidence "
            "threshold; held-out items then follow that threshold, so their escalated share can differ "
            "(not a cap on held-out escalations)",
        ),
    ] = 0.5,
    target: Annotated[
        float | None,
        typer.Option(min=0.0, max=1.0, help="agreement the planner aims for (default: the teacher's, on calibration)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the split")] = 0,
    train_labels: Annotated[
        str,
        typer.Option(help="what the local judge learns: teacher (the recorded verdicts) or human (majority of 3)"),
    ] = "teacher",
) -> None:
    """The main job: train a local judge on bundled traces, judge held-out pairs in a graph with
    escalation to a teacher, and measure everything against human labels."""
    from pydantic import ValidationError

    from .quickstart import QuickstartOptions, print_result, run_quickstart

    try:
        opts = QuickstartOptions(
            workdir=workdir,
            judge=judge,
            escalate=escalate,
            limit=limit,
            budget=budget,
            target=target,
            seed=seed,
            train_labels=train_labels,  # type: ignore[arg-type]  # validated by pydantic
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        console.print(f"[red]quickstart: {escape(str(first['loc'][0]))}: {escape(first['msg'])}[/]")
        raise typer.Exit(2) from None
    result = run_quickstart(opts, log=lambda line: console.print(line, markup=False, highlight=False))
    print_result(result, console)


@app.command()
def smoke(
    workdir: Annotated[Path, typer.Option(help="where the tiny model is built")] = Path(".judgegraph/smoke"),
) -> None:
    """Check the in-process judging path on a tiny untrained model (expect unparsed)."""
    from ._smoke import run_smoke

    rows = asyncio.run(run_smoke(workdir))
    table = Table("judge", "status", "verdict", "reason", title="SMOKE RUN (untrained tiny model)")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print("[bold yellow]This was a smoke run of the plumbing on an untrained tiny model.[/]")


def _wire() -> None:
    # Sub-commands live beside the code they drive; they register here.
    from judgegraph.finetune._cli import app as finetune_app

    from ._cli_cascade import cascade_app
    from ._cli_eval import eval_command, report_command
    from ._cli_flywheel import flywheel_app

    app.command("eval")(eval_command)
    app.command("report")(report_command)
    app.add_typer(cascade_app, name="cascade")
    app.add_typer(finetune_app, name="finetune")
    app.add_typer(flywheel_app, name="flywheel")


_wire()
