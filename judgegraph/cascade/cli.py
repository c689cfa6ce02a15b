"""``judgegraph cascade ...``: cascade planning from the command line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from judgegraph.judges import VerdictRecord, read_verdicts
from judgegraph.types import Winner

from ._planner import CascadePlan, MissingCostError, PlannedPolicy, plan_cascades

__all__ = ["cascade_app"]

cascade_app = typer.Typer(
    name="cascade", help="Plan judge cascades from recorded verdicts.", no_args_is_help=True, add_completion=False
)


@cascade_app.callback()
def _group() -> None:
    """Plan judge cascades from recorded verdicts."""  # a callback keeps `plan` a subcommand


class _LabelRow(BaseModel):
    model_config = ConfigDict(extra="ignore")

    key: str
    label: Winner | int


def _read_labels(path: Path) -> dict[str, Winner | int]:
    out: dict[str, Winner | int] = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = _LabelRow.model_validate_json(line)
            except ValidationError as exc:
                first = exc.errors()[0]
                raise typer.BadParameter(
                    f"{path}:{n}: not a label row ({'.'.join(map(str, first['loc']))}: {first['msg']})",
                    param_hint="--labels",
                ) from None
            out[row.key] = row.label
    return out


def _parse_costs(items: list[str]) -> dict[str, float]:
    costs: dict[str, float] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            costs[name] = float(value)
        except ValueError:
            raise typer.BadParameter(f"expected JUDGE=COST, got {item!r}", param_hint="--cost") from None
    return costs


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _table(plan: CascadePlan, rows: list[PlannedPolicy]) -> Table:
    table = Table(title=f"Cascade policies on {plan.n_items} labelled items (tie credit {plan.tie_credit:g})")
    table.add_column("", no_wrap=True)
    table.add_column("policy")
    table.add_column("agreement", justify="right")
    table.add_column("strict", justify="right")
    table.add_column("cost/item", justify="right")
    table.add_column("reach by tier", justify="right")
    table.add_column("failed", justify="right")
    frontier = {p.name for p in plan.frontier}
    rec = plan.recommended.name if plan.recommended else None
    for p in rows:
        mark = ("*" if p.name == rec else "") + ("f" if p.name in frontier else "")
        style = "bold green" if p.name == rec else None
        table.add_row(
            mark,
            escape(p.name),
            _pct(p.agreement),
            _pct(p.strict_agreement),
            f"{p.cost_per_item:.4g}",
            " > ".join(_pct(r) for r in p.reach),
            _pct(p.failed),
            style=style,
        )
    return table


@cascade_app.command("plan")
def plan(
    records: Annotated[
        list[Path],
        typer.Argument(
            help="JSONL files of recorded verdicts (one VerdictRecord per line)", exists=True, dir_okay=False
        ),
    ],
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            help="JSONL of {key, label}; default: the labels carried by the records",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    cost: Annotated[list[str] | None, typer.Option("--cost", help="JUDGE=COST per item (repeatable)")] = None,
    target: Annotated[float | None, typer.Option("--target", help="target agreement, e.g. 0.95")] = None,
    budget: Annotated[float | None, typer.Option("--budget", help="maximum cost per item")] = None,
    max_tiers: Annotated[int, typer.Option("--max-tiers", min=1, max=4)] = 2,
    tie_credit: Annotated[float, typer.Option("--tie-credit", min=0.0, max=1.0)] = 0.5,
    show_all: Annotated[bool, typer.Option("--all", help="list every candidate, not just the frontier")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole plan as JSON")] = False,
) -> None:
    """Simulate cascade policies over recorded verdicts; print the
    cost-agreement frontier and the recommended policy."""
    rows: list[VerdictRecord] = []
    for path in records:
        try:
            rows += read_verdicts(path)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="RECORDS") from None
    try:
        result = plan_cascades(
            rows,
            labels=_read_labels(labels) if labels else None,
            costs=_parse_costs(cost or []) or None,
            target_agreement=target,
            max_cost=budget,
            max_tiers=max_tiers,
            tie_credit=tie_credit,
        )
    except MissingCostError as exc:
        flags = " ".join(f"--cost {shlex.quote(j + '=COST')}" for j in exc.judges)
        typer.echo(f"error: no cost for judges {exc.judges} (their recordings carry none): pass {flags}", err=True)
        raise typer.Exit(1) from None
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
        return
    console = Console()
    console.print(_table(result, list(result.candidates if show_all else result.frontier)))
    console.print("[dim]* recommended   f on the cost-agreement frontier   (measured on the given labels)[/dim]")
    if result.recommended is not None:
        r = result.recommended
        console.print(
            f"Recommended ({escape(result.recommendation)}): [bold]{escape(r.name)}[/bold]: "
            f"agreement {_pct(r.agreement)}, "
            f"cost {r.cost_per_item:.4g} per item, reach {' > '.join(_pct(x) for x in r.reach)}"
        )
    else:
        console.print(f"No recommendation: {escape(result.recommendation)}")
