"""Axis labels as a reader wants them: whole counts, dollars, percentages.
Pure functions, so the formats are testable without a plotting library."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

__all__ = ["AxisKind", "axis_labels", "money"]

AxisKind = Literal["count", "money", "share", "plain"]
"""What an axis measures: ``count`` (whole numbers), ``money`` (USD), ``share`` (0-1 as %), ``plain``."""

_MAX_DECIMALS = 12


def _money_decimals(v: float) -> int:
    """Two significant digits below a dollar (``$0.0062``), cents above."""
    v = abs(v)
    if v == 0 or v >= 1:
        return 2
    return min(_MAX_DECIMALS, max(2, 1 - math.floor(math.log10(v))))


def money(value: float, *, decimals: int | None = None) -> str:
    """USD as ``$1,234.50`` or ``$0.0062``: never scientific notation."""
    if value == 0:
        return "$0"
    d = _money_decimals(value) if decimals is None else decimals
    text = f"{abs(value):,.{d}f}"
    return f"-${text}" if value < 0 and float(text.replace(",", "")) != 0 else f"${text}"


def _plain(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.6f}".rstrip("0").rstrip(".")


def _decimals_for(values: Sequence[float], *, least: int) -> int:
    """The fewest decimals (at least ``least``) that write every value exactly enough to tell ticks apart."""
    finite = [v for v in values if math.isfinite(v)]
    steps = [abs(b - a) for a, b in itertools.pairwise(finite) if b != a]
    step = min(steps) if steps else max((abs(v) for v in finite), default=1.0) or 1.0
    for d in range(least, _MAX_DECIMALS + 1):
        # A tick is exact at d decimals when rounding moves it by a sliver of the step.
        if all(abs(round(v, d) - v) <= step * 1e-6 for v in finite):
            return d
    return _MAX_DECIMALS


def axis_labels(kind: AxisKind, values: Sequence[float]) -> list[str]:
    """The tick labels for ``values`` on an axis of ``kind`` (all ticks at once, so they share decimals)."""
    if kind == "count":
        return [f"{v:,.0f}" for v in values]
    if kind == "money":
        d = _decimals_for(values, least=2)
        return [money(v, decimals=d) for v in values]
    if kind == "share":
        d = max(0, _decimals_for([100 * v for v in values], least=0))
        return [f"{100 * v:.{min(d, 2)}f}%" for v in values]
    return [_plain(v) for v in values]
