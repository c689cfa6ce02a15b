"""Pure rules for a jury's votes: rounding an aggregate, and how much the votes agree with it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["round_half_up", "spread_agreement"]


def round_half_up(x: float) -> int:
    """3.5 -> 4, -2.5 -> -2: halves go up, whatever the sign."""
    return math.floor(x + 0.5)


def spread_agreement(scores: Sequence[float], centre: float, scale: tuple[int, int]) -> float:
    """Agreement of scores with an aggregate of them that need not be a vote.

    1 minus the scores' mean distance from ``centre``, over half the scale's
    width (the most that distance can be for a mean or a median): 1 when all
    agree, 0 when they split between the two ends. Votes of 4 and 5 on 1-5
    give a mean of 4.5 and 0.75; a share of votes would say 0, since no one
    voted 4.5.
    """
    if not scores:
        raise ValueError("no scores to agree")
    half_width = (scale[1] - scale[0]) / 2
    if half_width <= 0:
        return 1.0
    spread = statistics.fmean(abs(s - centre) for s in scores)
    return max(0.0, 1.0 - spread / half_width)
