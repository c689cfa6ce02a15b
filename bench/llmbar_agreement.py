"""LLMBar's recorded evaluator runs: accuracy per answer order, positional agreement and
Cohen's kappa, each with its 95% interval (issue 28), recomputed from the recorded verdicts.

    .venv/bin/python bench/llmbar_agreement.py [--data ../shared/data/llmbar] [--update bench/results/metrics.md]

The point values are those ``tests/metrics/test_published_numbers.py`` checks against each run's
``statistics.json`` (LLMBar's own figures): an unparsed order matches no label and two unparsed
orders agree (our "tie" policy). Intervals: Wilson for the accuracies and the positional
agreement (``proportion_interval`` on their counts: ``swap_accuracy`` and ``position_consistency``
return none themselves), the seeded BCa bootstrap for kappa (``cohen_kappa``); the average of the
two orders is a mean of two rates on the same items and gets none. ``--update`` replaces the
LLMBar table in the given results file, keeping its row order.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judgegraph.metrics import Interval, MetricResult, cohen_kappa, proportion_interval, swap_accuracy

HEADER = (
    "| subset | evaluator | strategy | n | acc. order 1 [95% Wilson] | acc. order 2 [95% Wilson] | average "
    "| both orders [95% Wilson] | positional agreement [95% Wilson] | matches statistics.json | unparsed items "
    "| first-shown won both / second-shown won both | κ order 1 vs gold [95% bootstrap, BCa] "
    "| κ order 2 vs gold [95% bootstrap, BCa] | κ order 1 vs order 2 [95% bootstrap, BCa] "
    "| file's kappa_False / kappa_True / kappa_agreement |"
)
SEPARATOR = "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _percent(field: str) -> float:
    """'70 / 100 = 70.0%' or '74.0%' -> 70.0 / 74.0."""
    m = re.search(r"([-\d.]+)%$", field.strip())
    if not m:
        raise ValueError(f"not a percentage: {field!r}")
    return float(m.group(1))


def _orders(run: Path) -> tuple[list[str], list[str | None], list[str | None]]:
    rows = _load(run / "result.json")
    gold = [str(r["label"]) for r in rows]
    first = [r["results"][-1]["swap = False"]["winner"] for r in rows]
    second = [r["results"][-1]["swap = True"]["winner"] for r in rows]
    return gold, first, second


def _ci(ci: Interval | None, scale: float, digits: int) -> str:
    return f" [{scale * ci.low:.{digits}f}, {scale * ci.high:.{digits}f}]" if ci is not None else ""


def _rate(r: MetricResult) -> str:
    assert r.value is not None
    # swap_accuracy's results carry no interval (a gap in the metrics API, reported with issue 28):
    # the Wilson interval of the same count over the items it used.
    ci = r.interval or proportion_interval(round(r.value * r.counts.used), r.counts.used)
    return f"{100 * r.value:.2f}{_ci(ci, 100, 1)}"


def _kappa(r: MetricResult) -> str:
    return "–" if r.value is None else f"{r.value:.3f}{_ci(r.interval, 1, 3)}"


def row(data: Path, run: Path) -> tuple[tuple[str, str, str], str]:
    """((subset, evaluator, strategy), the table row) for one recorded run."""
    stats = _load(run / "statistics.json")
    gold, first, second = _orders(run)
    res = swap_accuracy(first, gold, second=second, unparsed="tie", a_label="1", b_label="2")
    pos = res.position
    assert res.average is not None and pos.consistency is not None
    matches = all(
        math.isclose(100 * value, _percent(stats[field]), abs_tol=1e-6)
        for value, field in [
            (res.first_order.value or 0.0, "correct_False"),
            (res.second_order.value or 0.0, "correct_True"),
            (res.average, "correct_average"),
            (res.both.value or 0.0, "correct_both"),
            (pos.consistency, "equal"),
        ]
    )
    agreement = proportion_interval(pos.n_consistent, len(gold))
    unparsed = sum(f is None or s is None for f, s in zip(first, second, strict=True))
    k1 = cohen_kappa(first, gold, unparsed="wrong")
    k2 = cohen_kappa(second, gold, unparsed="wrong")
    k12 = cohen_kappa(first, second, unparsed="tie")
    subset, evaluator, strategy = run.parts[-4], run.parts[-2], run.parts[-1]
    text = (
        f"| {subset} | {evaluator} | {strategy} | {len(gold)} | {_rate(res.first_order)} | {_rate(res.second_order)} "
        f"| {100 * res.average:.2f} | {_rate(res.both)} | {100 * pos.consistency:.2f}{_ci(agreement, 100, 1)} "
        f"| {'yes' if matches else '**no**'} | {unparsed} "
        f"| {pos.n_prefer_first_position} / {pos.n_prefer_second_position} "
        f"| {_kappa(k1)} | {_kappa(k2)} | {_kappa(k12)} "
        f"| {stats['kappa_False']:.3f} / {stats['kappa_True']:.3f} / {stats['kappa_agreement']:.3f} |"
    )
    return (subset, evaluator, strategy), text


def runs(data: Path) -> list[Path]:
    return sorted(p.parent for p in data.glob("**/evaluators/*/*/statistics.json"))


def table(data: Path, order: Sequence[tuple[str, str, str]] = ()) -> list[str]:
    """The table, rows in ``order`` where given (the results file's), else by path."""
    rows = dict(row(data, r) for r in runs(data))
    keys = [k for k in order if k in rows] + sorted(k for k in rows if k not in set(order))
    return [HEADER, SEPARATOR, *(rows[k] for k in keys)]


def update(path: Path, lines: Sequence[str]) -> None:
    """Replace the LLMBar table (the one whose header starts with '| subset | evaluator | strategy | n |')."""
    text = path.read_text(encoding="utf-8").split("\n")
    start = next(i for i, line in enumerate(text) if line.startswith("| subset | evaluator | strategy | n |"))
    end = start
    while end < len(text) and text[end].startswith("|"):
        end += 1
    path.write_text("\n".join([*text[:start], *lines, *text[end:]]), encoding="utf-8")


def existing_order(path: Path) -> list[tuple[str, str, str]]:
    keys = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        cells = [c.strip() for c in line.split("|")[1:4]]
        if len(cells) == 3 and cells[0] in {"Natural", "FairEval", "LLMEval^2", "MT-Bench"}:
            keys.append((cells[0], cells[1], cells[2]))
    return keys


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "llmbar")
    ap.add_argument("--update", type=Path, default=None, help="results file whose LLMBar table to replace")
    args = ap.parse_args()
    order = existing_order(args.update) if args.update else []
    lines = table(args.data, order)
    if args.update:
        update(args.update, lines)
    print("\n".join(lines))
