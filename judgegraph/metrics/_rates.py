"""Plain rates with their intervals: a share of flagged items (escalation share, pass rate)
and a pairwise win rate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ._inputs import Failure, ItemCounts, MetricResult, UnparsedPolicy, check_policy, extract
from ._intervals import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    ProportionMethod,
    bool_flags,
    bootstrap_interval,
    proportion_interval,
)

__all__ = ["escalation_share", "proportion", "win_rate"]

TiePolicy = Literal["half", "exclude"]


def proportion(
    flags: Sequence[Any],
    *,
    name: str = "proportion",
    interval: ProportionMethod | None = "wilson",
    level: float = DEFAULT_LEVEL,
) -> MetricResult:
    """Share of True among ``flags`` (booleans or 0/1) with a binomial interval.

    Failed entries (None, NaN, failed results) are excluded and counted, as everywhere here.
    """
    kept, n_unparsed, n_error = bool_flags(flags)
    counts = ItemCounts(
        policy="exclude",
        total=len(flags),
        used=len(kept),
        unparsed=n_unparsed,
        error=n_error,
        excluded=len(flags) - len(kept),
    )
    if not kept:
        return MetricResult(name=name, value=None, counts=counts)
    hits = sum(kept)
    ci = proportion_interval(hits, len(kept), level=level, method=interval) if interval else None
    return MetricResult(name=name, value=hits / len(kept), counts=counts, interval=ci)


def escalation_share(
    escalated: Sequence[Any], *, interval: ProportionMethod | None = "wilson", level: float = DEFAULT_LEVEL
) -> MetricResult:
    """Share of items a cascade escalated (``escalated[i]`` True when item i went to the big judge)."""
    return proportion(escalated, name="escalation_share", interval=interval, level=level)


def win_rate(
    verdicts: Sequence[Any],
    *,
    side: Any = "A",
    other: Any = "B",
    tie_label: Any = "tie",
    ties: TiePolicy = "half",
    unparsed: UnparsedPolicy = "exclude",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> MetricResult:
    """How often ``side`` wins, from pairwise verdicts (results or plain labels).

    ``ties="half"``: a tie counts half a win (the usual win rate; bootstrap BCa interval, since
    the score is no longer a count of successes). ``ties="exclude"``: wins among decisive
    verdicts (Wilson interval). Failed verdicts: ``unparsed="exclude"`` drops them, ``"tie"``
    counts them as ties; ``"wrong"`` has no meaning without a reference.
    """
    policy = check_policy(unparsed, allowed=("exclude", "tie"), why="a win rate has no reference to be wrong against")
    if ties not in ("half", "exclude"):
        raise ValueError(f"ties must be 'half' or 'exclude', got {ties!r}")
    scores: list[float] = []
    n_unparsed = n_error = n_ties = 0
    for v in verdicts:
        x = extract(v)
        if isinstance(x, Failure):
            n_error += x is Failure.ERROR
            n_unparsed += x is Failure.UNPARSED
            if policy == "exclude":
                continue
            x = tie_label
        if x == side:
            scores.append(1.0)
        elif x == other:
            scores.append(0.0)
        elif x == tie_label:
            if ties == "exclude":
                n_ties += 1
                continue
            scores.append(0.5)
        else:
            raise ValueError(f"verdict {x!r} is none of side={side!r}, other={other!r}, tie_label={tie_label!r}")
    counts = ItemCounts(
        policy=policy,
        total=len(verdicts),
        used=len(scores),
        unparsed=n_unparsed,
        error=n_error,
        excluded=len(verdicts) - len(scores),
        dropped_ties=n_ties,
    )
    name = "win_rate" if ties == "half" else "win_rate_without_ties"
    if not scores:
        return MetricResult(name=name, value=None, counts=counts)
    values = np.asarray(scores)
    value = float(values.mean())
    if ties == "exclude" or not np.any(values == 0.5):
        ci = proportion_interval(int(values.sum()), values.size, level=level)
    else:

        def mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
            return np.asarray(x.mean(axis=axis))

        ci = bootstrap_interval([values], mean, level=level, n_resamples=n_resamples, seed=seed)
    return MetricResult(name=name, value=value, counts=counts, interval=ci)
