"""The ``judgegraph`` command line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# -h beside --help, on every sub-command too (click passes context settings down).
app = typer.Typer(
    add_completion=False,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="LLM-as-a-judge components for LangGraph.",
)
console = Console()


def _version(value: bool) -> None:
    if value:
        from . import __version__

        typer.echo(f"judgegraph {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """LLM-as-a-judge components for LangGraph."""
    # A bare `judgegraph` asks what there is: that is help, and not an error.
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


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

    found = list_templates()
    table = Table()
    # An id is what users copy into code: never cut short, whatever the terminal's
    # width; the other columns wrap rather than lose text.
    table.add_column("id", no_wrap=True, min_width=max((len(t.id) for t in found), default=2))
    for name in ("version", "kind", "output", "needs"):
        table.add_column(name, overflow="fold")
    for t in found:
        table.add_row(t.id, str(t.version), t.kind, t.parser, ", ".join(t.requires))
    console.print(table)


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
    from judgegraph.cascade.cli import cascade_app
    from judgegraph.finetune.cli import app as finetune_app
    from judgegraph.flywheel.cli import flywheel_app
    from judgegraph.jobs.cli import eval_command, report_command
    from judgegraph.quickstart.cli import quickstart_command

    app.command("quickstart")(quickstart_command)
    app.command("eval")(eval_command)
    app.command("report")(report_command)
    app.add_typer(cascade_app, name="cascade")
    app.add_typer(finetune_app, name="finetune")
    app.add_typer(flywheel_app, name="flywheel")


_wire()
