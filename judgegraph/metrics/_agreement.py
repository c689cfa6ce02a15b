"""Agreement between a judge and references (or between two judges or raters).

Argument order everywhere: ``predictions`` (the judge) first, ``references``
(gold / humans / the other judge) second. Statistics come from scikit-learn
and the ``krippendorff`` package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from judgegraph.types import FrozenModel

from ._inputs import (
    Failure,
    Interval,
    ItemCounts,
    MetricResult,
    ScoreField,
    UnparsedPolicy,
    check_policy,
    encode,
    extract,
    label_order,
    resolve,
)
from ._intervals import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    ProportionMethod,
    TieCredit,
    accuracy_credit,
    bootstrap_interval,
    check_ties,
    kappa_codes,
    mean_statistic,
    proportion_interval,
    vectorized_kappa,
)

__all__ = [
    "ClassificationResult",
    "LabelScores",
    "accuracy",
    "agreement",
    "classification_scores",
    "cohen_kappa",
    "krippendorff_alpha",
]

KappaWeights = Literal["linear", "quadratic"]
AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]


def _finite(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def accuracy(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    unparsed: UnparsedPolicy = "exclude",
    tie_label: Any = "tie",
    score_field: ScoreField = "score",
    ties: TieCredit = "exact",
    interval: ProportionMethod | None = "wilson",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> MetricResult:
    """Share of items where the prediction equals the reference, with a binomial interval
    (``interval="wilson"`` or ``"exact"`` (Clopper–Pearson) at ``level``; None for none).

    ``ties="half"``: an item where one side is ``tie_label`` and the other a decisive label
    earns half credit, as a win rate counts a tie half a win (``paired_difference`` takes the
    same option, so one judge's figure and a difference agree). When some item earns half
    credit the score is no longer a count of successes and the interval is a seeded BCa
    bootstrap over items (``n_resamples``, ``seed``), as ``win_rate``'s; otherwise the
    result is exactly ``ties="exact"``'s.
    """
    return _share(
        "accuracy",
        predictions,
        references,
        unparsed=unparsed,
        tie_label=tie_label,
        score_field=score_field,
        ties=check_ties(ties),
        interval=interval,
        level=level,
        n_resamples=n_resamples,
        seed=seed,
    )


def _share(
    name: str,
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    unparsed: UnparsedPolicy,
    tie_label: Any,
    score_field: ScoreField = "score",
    drop_ties: bool = False,
    ties: TieCredit = "exact",
    interval: ProportionMethod | None,
    level: float,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> MetricResult:
    """Accuracy and agreement are one rule: matching items over items used, binomial interval
    (under ``ties="half"`` with half credit given: mean credit, bootstrap interval)."""
    from sklearn.metrics import accuracy_score

    res = resolve(
        predictions, references, unparsed=unparsed, tie_label=tie_label, score_field=score_field, drop_ties=drop_ties
    )
    if not res.left:
        return MetricResult(name=name, value=None, counts=res.counts)
    pred, ref, order = encode(res)
    if ties == "half":
        tie_code = order.index(tie_label) if tie_label in order else None
        credit = accuracy_credit(np.asarray(pred), np.asarray(ref), tie_code=tie_code, ties="half")
        if np.any(credit == 0.5):
            ci = (
                bootstrap_interval([credit], mean_statistic, level=level, n_resamples=n_resamples, seed=seed)
                if interval
                else None
            )
            return MetricResult(name=name, value=float(credit.mean()), counts=res.counts, interval=ci)
    value = float(accuracy_score(ref, pred))
    hits = sum(p == r for p, r in zip(pred, ref, strict=True))
    ci = proportion_interval(hits, len(pred), level=level, method=interval) if interval else None
    return MetricResult(name=name, value=value, counts=res.counts, interval=ci)


def agreement(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    include_ties: bool = True,
    unparsed: UnparsedPolicy = "exclude",
    tie_label: Any = "tie",
    interval: ProportionMethod | None = "wilson",
    level: float = DEFAULT_LEVEL,
) -> MetricResult:
    """Raw agreement rate. With ``include_ties=False`` items where either side is a tie are
    dropped (MT-Bench's "without tie" setup) and counted in ``counts.dropped_ties``.
    ``interval``/``level`` as for ``accuracy``."""
    name = "agreement" if include_ties else "agreement_without_ties"
    return _share(
        name,
        predictions,
        references,
        unparsed=unparsed,
        tie_label=tie_label,
        drop_ties=not include_ties,
        interval=interval,
        level=level,
    )


def cohen_kappa(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    weights: KappaWeights | None = None,
    labels: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    tie_label: Any = "tie",
    score_field: ScoreField = "score",
    interval: Literal["bootstrap"] | None = "bootstrap",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> MetricResult:
    """Cohen's kappa (scikit-learn), with a BCa bootstrap interval over items (scipy; ``seed``
    makes it reproduce; ``interval=None`` skips it). ``weights`` gives linear or quadratic weighted kappa, whose
    distances follow the order of ``labels`` (default: sorted labels; for pairwise verdicts pass
    ``labels=("A", "tie", "B")``). Under ``unparsed="wrong"`` a failed item is its own category
    that agrees with nothing, which has no place on an ordinal scale, so weighted kappa refuses it.
    """
    from sklearn.metrics import cohen_kappa_score

    allowed = ("exclude", "tie") if weights else ("exclude", "wrong", "tie")
    why = "a failed item has no position on a weighted scale" if weights else ""
    res = resolve(
        predictions,
        references,
        unparsed=unparsed,
        tie_label=tie_label,
        score_field=score_field,
        allowed=allowed,
        why=why,
    )
    name = f"cohen_kappa_{weights}" if weights else "cohen_kappa"
    if not res.left:
        return MetricResult(name=name, value=None, counts=res.counts)
    pred, ref, order = encode(res, labels)
    # Weighted: the label order is the scale. Unweighted: every code seen, forced-wrong ones included.
    kappa_labels = list(range(len(order))) if weights else sorted(set(pred) | set(ref))
    if len(set(pred) | set(ref)) < 2:
        return MetricResult(name=name, value=None, counts=res.counts)  # one category: chance agreement is 1
    with np.errstate(divide="ignore", invalid="ignore"):
        value = cohen_kappa_score(ref, pred, labels=kappa_labels, weights=weights)
    kappa = _finite(value)
    ci = None
    if interval and kappa is not None:
        ci = _kappa_interval(ref, pred, kappa_labels, weights=weights, level=level, n_resamples=n_resamples, seed=seed)
    return MetricResult(name=name, value=kappa, counts=res.counts, interval=ci)


def _kappa_interval(
    ref: list[int],
    pred: list[int],
    kappa_labels: list[int],
    *,
    weights: KappaWeights | None,
    level: float,
    n_resamples: int,
    seed: int | None,
) -> Interval | None:
    if weights:  # the codes are already the scale's positions 0..k-1
        r, p, k = np.asarray(ref), np.asarray(pred), len(kappa_labels)
    else:
        (r, p), k = kappa_codes([ref, pred])
        k = max(k, len(kappa_labels))

    def stat(rx: np.ndarray, px: np.ndarray, axis: int = -1) -> np.ndarray:
        return vectorized_kappa(rx, px, k=k, weights=weights, axis=axis)

    return bootstrap_interval([r, p], stat, level=level, n_resamples=n_resamples, seed=seed)


def krippendorff_alpha(
    ratings: Sequence[Sequence[Any]],
    *,
    level: AlphaLevel = "nominal",
    labels: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    tie_label: Any = "tie",
    score_field: ScoreField = "score",
) -> MetricResult:
    """Krippendorff's alpha over ``ratings[rater][item]`` (the ``krippendorff`` package).

    Failed cells are missing values under ``exclude`` (alpha handles missing data natively)
    or the tie label under ``tie``; ``wrong`` has no meaning without a reference. Counts are
    per cell. Non-numeric labels are coded by ``labels`` order (sorted by default), which is
    what ``ordinal`` uses; ``interval``/``ratio`` need numbers.
    """
    import krippendorff

    policy = check_policy(unparsed, allowed=("exclude", "tie"), why="alpha has no reference to be wrong against")
    rows = [[extract(v, score_field=score_field) for v in rater] for rater in ratings]
    if len(rows) < 2:
        raise ValueError("krippendorff_alpha needs at least two raters")
    n_items = len(rows[0])
    if any(len(r) != n_items for r in rows):
        raise ValueError("every rater needs one value per item")
    n_unparsed = sum(v is Failure.UNPARSED for r in rows for v in r)
    n_error = sum(v is Failure.ERROR for r in rows for v in r)
    if policy == "tie":
        rows = [[tie_label if isinstance(v, Failure) else v for v in r] for r in rows]
    flat = [v for r in rows for v in r if not isinstance(v, Failure)]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in flat)
    if level in ("interval", "ratio") and not numeric:
        raise ValueError(f"level={level!r} needs numeric ratings")
    if numeric and labels is None and level != "nominal":
        coded = [[math.nan if isinstance(v, Failure) else float(v) for v in r] for r in rows]
    else:
        index = {label: float(i) for i, label in enumerate(label_order(flat, labels))}
        coded = [[math.nan if isinstance(v, Failure) else index[v] for v in r] for r in rows]
    data = np.asarray(coded, dtype=float)
    used = int(np.sum(~np.isnan(data)))
    counts = ItemCounts(
        policy=policy,
        total=int(data.size),
        used=used,
        unparsed=n_unparsed,
        error=n_error,
        excluded=int(data.size) - used,
    )
    name = f"krippendorff_alpha_{level}"
    values = set(data[~np.isnan(data)].tolist())
    pairable = bool(np.any(np.sum(~np.isnan(data), axis=0) >= 2))
    if len(values) < 2 or not pairable:
        return MetricResult(name=name, value=None, counts=counts)
    value = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    return MetricResult(name=name, value=_finite(value), counts=counts)


class LabelScores(FrozenModel):
    precision: float
    recall: float
    f1: float
    support: int = Field(description="reference items with this label")


class ClassificationResult(FrozenModel):
    """Accuracy and averaged precision / recall / F1 (scikit-learn), with per-label scores."""

    average: str
    labels: list[str]
    accuracy: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    per_label: dict[str, LabelScores]
    counts: ItemCounts


def classification_scores(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    average: Literal["macro", "micro", "weighted"] = "macro",
    labels: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    tie_label: Any = "tie",
    zero_division: float = 0.0,
) -> ClassificationResult:
    """Precision, recall and F1 averaged over ``labels`` (default: every label seen on either side).

    Under ``unparsed="wrong"`` a failed prediction is a miss for its reference's label and a
    false positive for no label, so it lowers recall but not precision.
    """
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    res = resolve(predictions, references, unparsed=unparsed, tie_label=tie_label)
    if not res.left:
        names = [str(x) for x in labels] if labels is not None else []
        return ClassificationResult(
            average=average,
            labels=names,
            accuracy=None,
            precision=None,
            recall=None,
            f1=None,
            per_label={},
            counts=res.counts,
        )
    pred, ref, order = encode(res, labels)
    codes = list(range(len(order)))
    p, r, f, _ = precision_recall_fscore_support(ref, pred, labels=codes, average=average, zero_division=zero_division)
    pl, rl, fl, sl = precision_recall_fscore_support(ref, pred, labels=codes, average=None, zero_division=zero_division)
    per_label = {
        str(label): LabelScores(precision=float(pl[i]), recall=float(rl[i]), f1=float(fl[i]), support=int(sl[i]))
        for i, label in enumerate(order)
    }
    return ClassificationResult(
        average=average,
        labels=[str(x) for x in order],
        accuracy=float(accuracy_score(ref, pred)),
        precision=float(p),
        recall=float(r),
        f1=float(f),
        per_label=per_label,
        counts=res.counts,
    )
