"""Position and length bias of pairwise judges.

Position: a pairwise judge run in both answer orders should name the same
winner. ``first`` holds the verdicts with the answers as given (A shown
first); ``second`` the verdicts with the answers swapped, already mapped back
to the original names (as ``PairwiseVerdict.orders[1]`` is). A judge that
picks A in the first order and B in the second chose whatever was shown first
both times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from judgegraph.types import FrozenModel

from ..types import PairwiseVerdict
from ._correlation import CorrelationResult, correlation
from ._inputs import (
    Failure,
    Interval,
    ItemCounts,
    MetricResult,
    UnparsedPolicy,
    check_policy,
    extract,
    resolve,
    resolve_columns,
)
from ._intervals import DEFAULT_LEVEL, DEFAULT_RESAMPLES, bootstrap_interval, mean_statistic, proportion_interval

__all__ = [
    "LengthBiasResult",
    "PositionResult",
    "SwapAccuracyResult",
    "length_bias",
    "length_correlation",
    "position_consistency",
    "split_orders",
    "swap_accuracy",
]


class PositionResult(FrozenModel):
    """Consistency across answer orders, and which way the inconsistent items lean."""

    consistency: float | None = Field(description="share of items with the same winner in both orders")
    consistency_interval: Interval | None = Field(
        default=None, description="Wilson interval of consistency (n_consistent of the items used)"
    )
    n_consistent: int
    n_prefer_first_position: int = Field(description="first-shown answer won in both orders")
    n_prefer_second_position: int = Field(description="second-shown answer won in both orders")
    n_other_inconsistent: int = Field(description="a tie against a winner, or a failed order under 'wrong'")
    position_bias: float | None = Field(
        description="(prefer first − prefer second) / items; > 0 favours the first-shown answer"
    )
    position_bias_interval: Interval | None = Field(
        default=None,
        description="bootstrap over items (BCa): both shares come from the same items, so items are resampled",
    )
    first_slot_win_rate: float | None = Field(
        description="of all decisive single-order verdicts, the share naming the first-shown answer"
    )
    n_decisive_verdicts: int
    counts: ItemCounts


def split_orders(verdicts: Sequence[PairwiseVerdict]) -> tuple[list[PairwiseVerdict], list[PairwiseVerdict]]:
    """The per-order verdicts of swapped runs (``orders``), as two aligned lists."""
    first: list[PairwiseVerdict] = []
    second: list[PairwiseVerdict] = []
    for i, v in enumerate(verdicts):
        if not isinstance(v, PairwiseVerdict) or len(v.orders) != 2:
            raise ValueError(
                f"item {i} has no two-order record; run the judge with SwapPolicy(mode='both') "
                "or pass the second-order verdicts as second="
            )
        first.append(v.orders[0])
        second.append(v.orders[1])
    return first, second


def position_consistency(
    first: Sequence[Any],
    second: Sequence[Any] | None = None,
    *,
    unparsed: UnparsedPolicy = "exclude",
    a_label: Any = "A",
    b_label: Any = "B",
    tie_label: Any = "tie",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> PositionResult:
    """Position consistency and bias from swapped runs.

    Either two aligned sequences (``second`` mapped back to the original names) or one
    sequence of ``PairwiseVerdict`` that carry both ``orders``. Under ``unparsed="tie"``
    two failed orders count as consistent (both ties), as LLMBar's ``equal`` counts them;
    under ``"wrong"`` a failed order makes the item inconsistent.

    Intervals at ``level``: Wilson for ``consistency`` (a count of consistent items), and a
    seeded BCa bootstrap over items for ``position_bias``, a difference of two shares of the
    same items: each item scores +1 (first-shown won both orders), −1 (second-shown did) or
    0, and the bias is their mean.
    """
    if second is None:
        first, second = split_orders(first)
    res = resolve(first, second, unparsed=unparsed, tie_label=tie_label)
    n_consistent = n_first = n_second = n_other = 0
    slot1 = decisive = 0
    lean: list[float] = []  # per item: +1 prefer first position, −1 prefer second, 0 otherwise
    for a, b, wrong in zip(res.left, res.right, res.wrong, strict=True):
        for order, w in ((0, a), (1, b)):
            if isinstance(w, Failure) or w == tie_label:
                continue
            decisive += 1
            shown_first = a_label if order == 0 else b_label
            slot1 += w == shown_first
        item_lean = 0.0
        if wrong:
            n_other += 1
        elif a == b:
            n_consistent += 1
        elif a == a_label and b == b_label:
            n_first += 1
            item_lean = 1.0
        elif a == b_label and b == a_label:
            n_second += 1
            item_lean = -1.0
        else:
            n_other += 1
        lean.append(item_lean)
    n = len(res.left)
    bias_ci = (
        bootstrap_interval(
            [np.asarray(lean, dtype=float)], mean_statistic, level=level, n_resamples=n_resamples, seed=seed
        )
        if n
        else None
    )
    return PositionResult(
        consistency=n_consistent / n if n else None,
        consistency_interval=proportion_interval(n_consistent, n, level=level),
        n_consistent=n_consistent,
        n_prefer_first_position=n_first,
        n_prefer_second_position=n_second,
        n_other_inconsistent=n_other,
        position_bias=(n_first - n_second) / n if n else None,
        position_bias_interval=bias_ci,
        first_slot_win_rate=slot1 / decisive if decisive else None,
        n_decisive_verdicts=decisive,
        counts=res.counts,
    )


class LengthBiasResult(FrozenModel):
    """How often the longer answer wins, for the judge and (when given) the references."""

    longer_win_rate: float | None = Field(description="judge: share of decisive verdicts naming the longer answer")
    n: int = Field(description="decisive judge verdicts on pairs of different length")
    p_value: float | None = Field(description="two-sided binomial test of longer_win_rate against 0.5")
    reference_longer_win_rate: float | None = None
    n_reference: int = 0
    excess: float | None = Field(default=None, description="longer_win_rate − reference_longer_win_rate")
    counts: ItemCounts


def _length(x: Any) -> float:
    if isinstance(x, str):
        return float(len(x.split()))
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise ValueError(f"a length must be a number or the text itself, got {x!r}")
    return float(x)


def _longer_wins(
    winners: Sequence[Any], la: Sequence[float], lb: Sequence[float], a_label: Any, b_label: Any
) -> tuple[int, int]:
    wins = n = 0
    for w, x, y in zip(winners, la, lb, strict=True):
        if isinstance(w, Failure) or w not in (a_label, b_label) or x == y:
            continue
        n += 1
        wins += (w == a_label) == (x > y)
    return wins, n


def length_bias(
    predictions: Sequence[Any],
    lengths_a: Sequence[Any],
    lengths_b: Sequence[Any],
    *,
    references: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    a_label: Any = "A",
    b_label: Any = "B",
    tie_label: Any = "tie",
) -> LengthBiasResult:
    """Does the judge prefer longer answers, beyond what the references do?

    Lengths are numbers or the answer texts themselves (counted in whitespace-separated
    words). Ties and pairs of equal length say nothing about length and are skipped; failed
    verdicts are counted and never count as preferring either answer (policies ``exclude``
    and ``tie`` give the same rate; ``wrong`` is refused as meaningless here).
    """
    from scipy import stats

    la = [_length(x) for x in lengths_a]
    lb = [_length(x) for x in lengths_b]
    if not len(predictions) == len(la) == len(lb):
        raise ValueError("predictions, lengths_a and lengths_b must be equally long")
    res = resolve(
        predictions,
        list(range(len(predictions))),
        unparsed=unparsed,
        tie_label=tie_label,
        allowed=("exclude", "tie"),
        why="a failed verdict prefers neither length",
    )
    kept = res.right  # indices of kept items
    wins, n = _longer_wins(res.left, [la[i] for i in kept], [lb[i] for i in kept], a_label, b_label)
    rate = wins / n if n else None
    p = float(stats.binomtest(wins, n, 0.5).pvalue) if n else None
    ref_rate: float | None = None
    n_ref = 0
    if references is not None:
        if len(references) != len(la):
            raise ValueError("references must be as long as predictions")
        ref_w = [extract(r) for r in references]
        ref_wins, n_ref = _longer_wins(ref_w, la, lb, a_label, b_label)
        ref_rate = ref_wins / n_ref if n_ref else None
    excess = rate - ref_rate if rate is not None and ref_rate is not None else None
    return LengthBiasResult(
        longer_win_rate=rate,
        n=n,
        p_value=None if p is None or math.isnan(p) else p,
        reference_longer_win_rate=ref_rate,
        n_reference=n_ref,
        excess=excess,
        counts=res.counts,
    )


def length_correlation(
    scores: Sequence[Any],
    lengths: Sequence[Any],
    *,
    method: Literal["pearson", "spearman", "kendall"] = "spearman",
    unparsed: UnparsedPolicy = "exclude",
    fill: float | None = None,
) -> CorrelationResult:
    """Length bias of a pointwise judge: correlation of its scores with answer length."""
    return correlation(scores, [_length(x) for x in lengths], method=method, unparsed=unparsed, fill=fill)


class SwapAccuracyResult(FrozenModel):
    """Accuracy of a judge run in both answer orders (LLMBar's reporting)."""

    first_order: MetricResult = Field(description="accuracy in the first order, with a Wilson interval")
    second_order: MetricResult = Field(description="accuracy in the swapped order, with a Wilson interval")
    average: float | None = Field(description="mean of the two orders' accuracies")
    average_interval: Interval | None = Field(
        default=None, description="paired bootstrap (BCa) over items: both orders resampled together"
    )
    both: MetricResult = Field(description="share of items correct in both orders, with a Wilson interval")
    position: PositionResult


def swap_accuracy(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    second: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    a_label: Any = "A",
    b_label: Any = "B",
    tie_label: Any = "tie",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> SwapAccuracyResult:
    """Per-order accuracy, their average, accuracy in both orders, and position consistency.

    ``predictions`` are the first-order verdicts with ``second`` the swapped-order ones
    (mapped back), or verdicts that carry both ``orders``. An item counts as failed when
    either order or its reference failed; the policy then applies to the whole item
    (``exclude`` drops it from every figure, ``wrong`` makes each failed order incorrect,
    ``tie`` reads a failed order as a tie).

    Intervals at ``level``: Wilson for each order's accuracy and for both-orders accuracy
    (counts of correct items); for ``average`` a seeded paired BCa bootstrap over items, the
    two orders of an item resampled together since they judge the same items.
    """
    policy = check_policy(unparsed)
    if second is None:
        first_list, second_list = split_orders(predictions)
    else:
        first_list, second_list = list(predictions), list(second)
    if not len(first_list) == len(second_list) == len(references):
        raise ValueError("both orders and references must be equally long")
    res = resolve_columns([first_list, second_list, references], unparsed=policy, tie_label=tie_label)
    kept_f, kept_s, refs = res.columns

    def hit(v: Any, r: Any) -> bool:
        # Under "wrong" a failed value is still a Failure marker here: incorrect, per order.
        return not isinstance(v, Failure) and not isinstance(r, Failure) and v == r

    hits_f = [hit(f, r) for f, r in zip(kept_f, refs, strict=True)]
    hits_s = [hit(s, r) for s, r in zip(kept_s, refs, strict=True)]
    counts = res.counts

    def share(name: str, hits: list[bool]) -> MetricResult:
        value = float(np.mean(hits)) if hits else None
        ci = proportion_interval(sum(hits), len(hits), level=level)
        return MetricResult(name=name, value=value, counts=counts, interval=ci)

    first_order = share("accuracy_first_order", hits_f)
    second_order = share("accuracy_second_order", hits_s)
    both = share("accuracy_both_orders", [a and b for a, b in zip(hits_f, hits_s, strict=True)])
    acc_f, acc_s = first_order.value, second_order.value
    average = None if acc_f is None or acc_s is None else (acc_f + acc_s) / 2

    def mean_of_orders(f: NDArray[np.float64], s: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
        return np.asarray((f.mean(axis=axis) + s.mean(axis=axis)) / 2, dtype=float)

    average_ci = (
        bootstrap_interval(
            [np.asarray(hits_f, dtype=float), np.asarray(hits_s, dtype=float)],
            mean_of_orders,
            level=level,
            n_resamples=n_resamples,
            seed=seed,
            method_name="paired-bootstrap-bca",
        )
        if average is not None
        else None
    )
    position = position_consistency(
        [Failure.UNPARSED if isinstance(v, Failure) else v for v in kept_f],
        [Failure.UNPARSED if isinstance(v, Failure) else v for v in kept_s],
        unparsed="wrong" if policy == "wrong" else "exclude",
        a_label=a_label,
        b_label=b_label,
        tie_label=tie_label,
        level=level,
        n_resamples=n_resamples,
        seed=seed,
    )
    position = position.model_copy(update={"counts": counts})
    return SwapAccuracyResult(
        first_order=first_order,
        second_order=second_order,
        average=average,
        average_interval=average_ci,
        both=both,
        position=position,
    )
