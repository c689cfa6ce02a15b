"""The end-of-session summary table and the JUnit XML properties: one row per assertion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Row", "junit_properties", "render_table"]


@dataclass(frozen=True, slots=True)
class Row:
    test: str
    judge: str
    kind: str  # "score" or "not_worse"
    score: str
    threshold: str
    outcome: str  # pass, fail, unreadable, missing, error (a bad argument or setting: nothing judged)
    spread: str
    cost_usd: float | None  # spent in this session; 0 for replayed verdicts, None when unpriced
    source: str  # replayed, recorded, replayed+recorded, live


def _cost(c: float | None) -> str:
    return "-" if c is None else f"${c:.4f}"


def junit_properties(row: Row) -> list[tuple[str, str]]:
    """The row's fields as ``record_property`` pairs (they land in JUnit XML)."""
    return [
        ("judge", row.judge),
        ("judge_kind", row.kind),
        ("judge_score", row.score),
        ("judge_threshold", row.threshold),
        ("judge_result", row.outcome),
        ("judge_spread", row.spread),
        ("judge_cost_usd", "" if row.cost_usd is None else f"{row.cost_usd:.6f}"),
        ("judge_source", row.source),
    ]


def render_table(rows: Sequence[Row], *, mode: str) -> list[str]:
    """A plain-text table: test, judge, score, threshold, result, cost, source,
    spread. Test ids are never cut: they are what a reader acts on."""
    head = ("test", "judge", "score", "threshold", "result", "cost", "source", "spread")
    body = [
        (r.test, r.judge, r.score, r.threshold, r.outcome, _cost(r.cost_usd), r.source, r.spread or "-") for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(head), line(["-" * w for w in widths]), *(line(b) for b in body)]
    counts = {k: sum(r.outcome == k for r in rows) for k in ("pass", "fail", "unreadable", "missing", "error")}
    # An error row judged nothing: it is neither spent nor unpriced.
    judged = [r for r in rows if r.outcome != "error"]
    spent = [r.cost_usd for r in judged if r.cost_usd is not None]
    total = f"${sum(spent):.4f}" if spent else "unpriced"
    if spent and len(spent) < len(judged):
        total += " (some calls unpriced: set judge_price_in / judge_price_out)"
    tally = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    out.append(f"{len(rows)} judged assertion(s): {tally}; cost this session {total}; cassette mode {mode}")
    return out
