"""``judgegraph quickstart``: the main job from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["quickstart_command"]

console = Console()


def quickstart_command(
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
            "--teacher",
            "--escalate",
            help="tier 2: replay (recorded gpt-3.5-turbo verdicts, the default) or an endpoint as for --judge, "
            "e.g. openai:gpt-4o-mini; an API key in the environment is used only when an endpoint is named here",
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
            help="the most the cascade may send to the teacher, as a share of items: per fold, the planner's "
            "threshold escalates at most this share of the other folds' items, and of the fold's own batch at "
            "most floor(budget x items) go up, the least confident first",
        ),
    ] = 0.5,
    pick: Annotated[
        str,
        typer.Option(
            help="most-agreeing: the budget with the best calibration agreement within --budget; "
            "cheapest: the cheapest budget reaching --target"
        ),
    ] = "most-agreeing",
    target: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=1.0, help="with --pick cheapest: agreement to reach (default: the teacher's, on calibration)"
        ),
    ] = None,
    folds: Annotated[
        int,
        typer.Option(min=2, max=10, help="folds by prompt: each item is judged, and its budget picked, on the others"),
    ] = 5,
    merge: Annotated[
        bool, typer.Option(help="merge an escalated item's teacher verdict with the local judge's probabilities")
    ] = True,
    seed: Annotated[int, typer.Option(help="seed of the folds")] = 0,
    train_labels: Annotated[
        str,
        typer.Option(help="what the local judge learns: teacher (the recorded verdicts) or human (majority of 3)"),
    ] = "teacher",
) -> None:
    """The main job: train a local judge on bundled traces, judge every pair in a graph with
    escalation to a teacher (each pair out of fold), and measure everything against human labels."""
    from pydantic import ValidationError

    from . import QuickstartOptions, print_result, run_quickstart

    try:
        opts = QuickstartOptions(
            workdir=workdir,
            judge=judge,
            escalate=escalate,
            limit=limit,
            budget=budget,
            pick=pick,  # type: ignore[arg-type]  # validated by pydantic
            target=target,
            folds=folds,
            merge=merge,
            seed=seed,
            train_labels=train_labels,  # type: ignore[arg-type]  # validated by pydantic
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        console.print(f"[red]quickstart: {escape(str(first['loc'][0]))}: {escape(first['msg'])}[/]")
        raise typer.Exit(2) from None
    result = run_quickstart(opts, log=lambda line: console.print(line, markup=False, highlight=False))
    print_result(result, console)
