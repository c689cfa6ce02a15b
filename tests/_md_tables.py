"""Markdown tables read the way the bench results write them, and the issue-28 rule over their
headers: a table of rates (agreement, accuracy, kappa, escalation share, win rate) names its
interval ("95%", "CI" or "interval") in its header, so its level and method are said once."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

RATE = re.compile(r"agree|accura|kappa|escalat|\bwin", re.IGNORECASE)
INTERVAL = re.compile(r"95\s?%|\bCI\b|interval", re.IGNORECASE)
# An interval as the bench tables print one: [low, high], signed or not, e.g. [-8.0, +0.0].
BRACKETED = re.compile(r"\[[-+]?\d+(\.\d+)?, [-+]?\d+(\.\d+)?\]")
# A separator row: cells of dashes with optional alignment colons, e.g. |---|:--:|---:|
SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


@dataclass(frozen=True)
class Table:
    path: str
    line: int  # 1-based line of the header row
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...] = ()

    def column(self, name_part: str) -> list[tuple[str, list[str]]]:
        """(header, cells) of every column whose header contains ``name_part``."""
        return [
            (h, [r[i] if i < len(r) else "" for r in self.rows]) for i, h in enumerate(self.header) if name_part in h
        ]

    @property
    def key(self) -> tuple[str, str]:
        return self.path, " | ".join(self.header)


def cells(row: str) -> tuple[str, ...]:
    """The cells of one Markdown table row; an escaped pipe (\\|) stays inside its cell."""
    inner = row.strip().removeprefix("|")
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return tuple(c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner))


def tables(text: str, path: str) -> list[Table]:
    """Every table in a Markdown text: a row of cells directly followed by a separator row."""
    lines = text.splitlines()
    found = []
    for i, (head, sep) in enumerate(itertools.pairwise(lines)):
        if head.lstrip().startswith("|") and SEPARATOR.match(sep.strip()):
            body = itertools.takewhile(lambda row: row.lstrip().startswith("|"), lines[i + 2 :])
            found.append(Table(path, i + 1, cells(head), tuple(cells(row) for row in body)))
    return found


def missing_interval(table: Table) -> bool:
    """A table of rates whose header names no interval."""
    header = " ".join(table.header)
    return bool(RATE.search(header)) and not INTERVAL.search(header)
