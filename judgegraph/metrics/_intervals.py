"""Confidence intervals for the metrics: proportions (Wilson / Clopper–Pearson, from scipy),
Cohen's kappa (scipy's BCa bootstrap), and the paired bootstrap for the difference between
two judges scored on the same items (items resampled jointly).

Every interval says its level and its method, and every bootstrap takes ``seed=`` so that a
result reproduces exactly.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from judgegraph.types import FrozenModel

from ._inputs import (
    PRED_WRONG,
    REF_WRONG,
    Failure,
    Interval,
    ItemCounts,
    UnparsedPolicy,
    extract,
    resolve_columns,
)

__all__ = [
    "DEFAULT_LEVEL",
    "DEFAULT_RESAMPLES",
    "PairedDifference",
    "ProportionMethod",
    "TieCredit",
    "accuracy_credit",
    "bool_flags",
    "bootstrap_interval",
    "check_ties",
    "kappa_codes",
    "mean_interval",
    "mean_statistic",
    "paired_difference",
    "proportion_interval",
    "vectorized_kappa",
]

ProportionMethod = Literal["wilson", "exact"]
KappaWeights = Literal["linear", "quadratic"]
DifferenceMetric = Literal["accuracy", "cohen_kappa"]
TieCredit = Literal["exact", "half"]

DEFAULT_LEVEL = 0.95
# 2,000 resamples keep a bootstrap bound's Monte Carlo error near 0.5 point at n ≈ 1,000
# while a summary stays well under a second; pass n_resamples= for more.
DEFAULT_RESAMPLES = 2000
BCA_MAX_ITEMS = 2000
BATCH_CELLS = 2_000_000


def _check_level(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    return float(level)


def proportion_interval(
    successes: int, n: int, *, level: float = DEFAULT_LEVEL, method: ProportionMethod = "wilson"
) -> Interval | None:
    """Interval for ``successes / n`` (scipy's ``binomtest(...).proportion_ci``); None when n is 0."""
    from scipy import stats

    _check_level(level)
    if method not in ("wilson", "exact"):
        raise ValueError(f"method must be 'wilson' or 'exact', got {method!r}")
    if n <= 0:
        return None
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=level, method=method)
    return Interval(low=float(ci.low), high=float(ci.high), level=level, method=method)


def mean_interval(values: NDArray[np.float64], *, level: float = DEFAULT_LEVEL) -> Interval | None:
    """Normal (CLT) interval for the mean of ``values``; Wilson when they are all 0 or 1."""
    from scipy import stats

    _check_level(level)
    n = int(values.size)
    if n == 0:
        return None
    if np.all((values == 0) | (values == 1)):
        return proportion_interval(int(values.sum()), n, level=level)
    se = float(np.std(values, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    z = float(stats.norm.ppf(0.5 + level / 2))
    m = float(values.mean())
    return Interval(low=m - z * se, high=m + z * se, level=level, method="normal")


def bootstrap_interval(
    data: Sequence[NDArray[Any]],
    statistic: Callable[..., NDArray[np.float64]],
    *,
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
    method_name: str = "bootstrap-bca",
    paired: bool = True,
) -> Interval | None:
    """scipy's BCa bootstrap over items, the arrays in ``data`` resampled jointly (paired).

    ``statistic(*arrays, axis=-1)`` must be vectorized. Falls back to the percentile interval
    when BCa is undefined (every resample gives the same value, e.g. perfect agreement), and
    gives None when the statistic itself is undefined in the resamples. ``paired=False``
    resamples each array on its own, keeping its size: a stratified bootstrap whose strata
    are the arrays (``auroc`` resamples correct and wrong verdicts so). None when an array
    holds fewer than two items.
    """
    from scipy import stats

    _check_level(level)
    if not data or min(int(d.size) for d in data) < 2:
        return None
    n = int(data[0].size) if paired else sum(int(d.size) for d in data)  # values per resample
    rng = np.random.default_rng(seed)
    # BCa's jackknife costs n statistics over n − 1 items (n² work): past BCA_MAX_ITEMS the
    # percentile interval, whose skew error shrinks with n anyway, keeps a big report fast.
    methods = ("BCa", "percentile") if n <= BCA_MAX_ITEMS else ("percentile",)
    batch = max(1, min(500, BATCH_CELLS // n))  # resamples per batch: bounds memory at ~BATCH_CELLS values
    for method in methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DegenerateDataWarning / all-NaN slices: judged below
            res = stats.bootstrap(
                tuple(data),
                statistic,
                n_resamples=n_resamples,
                paired=paired,
                vectorized=True,
                confidence_level=level,
                method=method,
                rng=rng,
                batch=batch,
            )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            name = method_name if method == "BCa" else method_name.replace("bca", "percentile")
            return Interval(low=low, high=high, level=level, method=name)
    return None


def mean_statistic(x: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
    """The mean along ``axis``: ``bootstrap_interval``'s statistic for a mean of per-item scores."""
    return np.asarray(x.mean(axis=axis), dtype=float)


def check_ties(ties: str) -> TieCredit:
    if ties not in ("exact", "half"):
        raise ValueError(f"ties must be 'exact' or 'half', got {ties!r}")
    return ties  # type: ignore[return-value]


def accuracy_credit(
    pred: NDArray[np.int64], ref: NDArray[np.int64], *, tie_code: int | None, ties: TieCredit
) -> NDArray[np.float64]:
    """Per-item accuracy credit from label codes (negative codes: failed items kept as wrong).

    1 for an exact match. Under ``ties="half"``, 0.5 where one side is the tie label and the
    other a decisive label (not the tie, not a failure), as a win rate counts a tie half a win;
    0 otherwise. A failure kept under ``unparsed="wrong"`` is never decisive: it earns nothing.
    """
    exact = (pred == ref) & (pred >= 0) & (ref >= 0)
    credit = np.asarray(exact, dtype=float)
    if ties == "half" and tie_code is not None:
        p_tie, r_tie = pred == tie_code, ref == tie_code
        half = (p_tie & (ref >= 0) & ~r_tie) | (r_tie & (pred >= 0) & ~p_tie)
        credit[half] = 0.5
    return credit


def _weight_matrix(k: int, weights: KappaWeights | None) -> NDArray[np.float64]:
    """Disagreement weights as scikit-learn defines them: 1 − I, |i − j| or (i − j)²."""
    i, j = np.indices((k, k))
    if weights is None:
        return np.asarray(i != j, dtype=float)
    if weights == "linear":
        return np.asarray(np.abs(i - j), dtype=float)
    return np.asarray((i - j) ** 2, dtype=float)


def vectorized_kappa(
    ref: NDArray[np.int64], pred: NDArray[np.int64], *, k: int, weights: KappaWeights | None = None, axis: int = -1
) -> NDArray[np.float64]:
    """Cohen's kappa of codes in ``0..k-1`` along ``axis``, for many resamples at once.

    kappa = 1 − observed disagreement / disagreement expected from the margins (the formula of
    ``sklearn.metrics.cohen_kappa_score``, which a test checks this against); sklearn itself
    takes one pair of label lists per call, far too slow inside a bootstrap.
    """
    ref = np.moveaxis(ref, axis, -1)
    pred = np.moveaxis(pred, axis, -1)
    w = _weight_matrix(k, weights)
    observed = w[pred, ref].mean(axis=-1)
    p = np.stack([(pred == c).mean(axis=-1) for c in range(k)], axis=-1)
    q = np.stack([(ref == c).mean(axis=-1) for c in range(k)], axis=-1)
    expected = np.einsum("...i,ij,...j->...", p, w, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(1.0 - observed / expected, dtype=float)


def kappa_codes(columns: Sequence[Sequence[int]]) -> tuple[list[NDArray[np.int64]], int]:
    """Integer label codes (forced-wrong codes included) renumbered to ``0..k-1`` for ``vectorized_kappa``."""
    seen = sorted({c for col in columns for c in col})
    index = {c: i for i, c in enumerate(seen)}
    return [np.asarray([index[c] for c in col], dtype=np.int64) for col in columns], len(seen)


class PairedDifference(FrozenModel):
    """Judge A's figure minus judge B's on the same items, with a paired-bootstrap interval."""

    metric: str
    a: float | None
    b: float | None
    difference: float | None
    interval: Interval | None = Field(description="bootstrap over items, A and B resampled together")
    counts: ItemCounts


def paired_difference(
    predictions_a: Sequence[Any],
    predictions_b: Sequence[Any],
    references: Sequence[Any],
    *,
    metric: DifferenceMetric = "accuracy",
    unparsed: UnparsedPolicy = "exclude",
    tie_label: Any = "tie",
    ties: TieCredit = "exact",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> PairedDifference:
    """``metric(A, references) − metric(B, references)`` with a paired bootstrap interval.

    Items are resampled jointly (A's and B's verdicts on an item and its reference stay
    together), which is what makes the interval narrower than two separate ones when the
    judges err on the same items. An item failed by either judge is handled by ``unparsed``
    for both, so that the two figures are computed on the same items.

    ``ties="half"`` (accuracy only) scores as ``accuracy(..., ties="half")`` does: an item
    where one side is ``tie_label`` and the other a decisive label earns half credit, as a
    win rate counts a tie; exact matches earn 1. Kappa has no half agreement: refused.
    """
    if metric not in ("accuracy", "cohen_kappa"):
        raise ValueError(f"metric must be 'accuracy' or 'cohen_kappa', got {metric!r}")
    ties = check_ties(ties)
    if ties == "half" and metric != "accuracy":
        raise ValueError(
            "ties='half' is defined for metric='accuracy' only: kappa's chance correction has no half agreement"
        )
    res = resolve_columns([predictions_a, predictions_b, references], unparsed=unparsed, tie_label=tie_label)
    cols = res.columns
    if not res.index:
        return PairedDifference(metric=metric, a=None, b=None, difference=None, interval=None, counts=res.counts)
    # Codes: labels by sorted order; a failed prediction kept under "wrong" agrees with nothing.
    seen = sorted({v for col in cols for v in col if not isinstance(v, Failure)}, key=repr)
    index = {v: i for i, v in enumerate(seen)}

    def code(v: Any, wrong: int) -> int:
        return wrong if isinstance(v, Failure) else index[v]

    a_codes = [code(v, PRED_WRONG) for v in cols[0]]
    b_codes = [code(v, PRED_WRONG - 10) for v in cols[1]]  # A's and B's failures differ from each other too
    r_codes = [code(v, REF_WRONG) for v in cols[2]]

    data: list[NDArray[Any]]
    va: float | None
    vb: float | None
    stat: Callable[..., NDArray[np.float64]]
    if metric == "accuracy":
        # Per-item credit (1 / 0, or 0.5 for a tie against a decisive label under "half"):
        # the difference of mean credits, resampled jointly.
        tie_code = index.get(tie_label)
        ca, cb = (
            accuracy_credit(
                np.asarray(x, dtype=np.int64), np.asarray(r_codes, dtype=np.int64), tie_code=tie_code, ties=ties
            )
            for x in (a_codes, b_codes)
        )
        va, vb = float(ca.mean()), float(cb.mean())
        data = [ca, cb]

        def credit_diff(cax: NDArray[np.float64], cbx: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
            return np.asarray(cax.mean(axis=axis) - cbx.mean(axis=axis), dtype=float)

        stat = credit_diff

    else:
        (a, b, r), k = kappa_codes([a_codes, b_codes, r_codes])
        data = [a, b, r]

        def kappa_diff(
            ax: NDArray[np.int64], bx: NDArray[np.int64], rx: NDArray[np.int64], axis: int = -1
        ) -> NDArray[np.float64]:
            return vectorized_kappa(rx, ax, k=k, axis=axis) - vectorized_kappa(rx, bx, k=k, axis=axis)

        stat = kappa_diff

        ka, kb = float(vectorized_kappa(r, a, k=k)), float(vectorized_kappa(r, b, k=k))
        va, vb = (ka if math.isfinite(ka) else None), (kb if math.isfinite(kb) else None)

    diff = None if va is None or vb is None else va - vb
    interval = (
        bootstrap_interval(
            data, stat, level=level, n_resamples=n_resamples, seed=seed, method_name="paired-bootstrap-bca"
        )
        if diff is not None
        else None
    )
    name = metric if metric == "accuracy" else "cohen_kappa"
    return PairedDifference(metric=name, a=va, b=vb, difference=diff, interval=interval, counts=res.counts)


def bool_flags(values: Sequence[Any]) -> tuple[list[bool], int, int]:
    """Booleans from ``values``; failed entries (None, NaN, failed results) dropped and counted."""
    kept: list[bool] = []
    n_unparsed = n_error = 0
    for v in values:
        x = extract(v)
        if isinstance(x, Failure):
            n_error += x is Failure.ERROR
            n_unparsed += x is Failure.UNPARSED
            continue
        if x not in (0, 1):  # True/False and 0/1 only: anything else is a caller's mistake
            raise ValueError(f"expected booleans, got {v!r}")
        kept.append(bool(x))
    return kept, n_unparsed, n_error
