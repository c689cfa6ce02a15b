"""The ``judgegraph`` command line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(no_args_is_help=True, add_completion=False, help="LLM-as-a-judge components for LangGraph.")
console = Console()


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
) -> None:
    """The main job. For now a smoke run of the in-process judging path."""
    smoke(workdir)


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
    from ._cli_cascade import cascade_app
    from ._cli_eval import eval_command, report_command

    app.command("eval")(eval_command)
    app.command("report")(report_command)
    app.add_typer(cascade_app, name="cascade")


_wire()
