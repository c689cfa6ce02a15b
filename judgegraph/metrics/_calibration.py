"""Calibration of judge confidence: reliability curve, ECE, MCE and Brier score, and AUROC
(how well the confidence separates the judge's correct verdicts from its wrong ones).

Binning uses ``scipy.stats.binned_statistic`` (bins are half-open except the last,
which includes 1.0); the Brier score and AUROC are scikit-learn's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from judgegraph.types import FrozenModel

from ._inputs import (
    ItemCounts,
    MetricResult,
    ScoreField,
    UnparsedPolicy,
    check_policy,
    resolve_columns,
)
from ._intervals import DEFAULT_LEVEL, DEFAULT_RESAMPLES, bootstrap_interval

__all__ = [
    "CalibrationResult",
    "ReliabilityBin",
    "auroc",
    "calibration",
    "expected_calibration_error",
    "reliability_curve",
]

Strategy = Literal["uniform", "quantile"]


class ReliabilityBin(FrozenModel):
    lower: float
    upper: float
    count: int
    mean_confidence: float | None = Field(description="None for an empty bin")
    accuracy: float | None = Field(description="share correct in the bin; None for an empty bin")


class CalibrationResult(FrozenModel):
    ece: float | None = Field(description="expected calibration error: count-weighted |accuracy − confidence|")
    mce: float | None = Field(description="maximum calibration error over non-empty bins")
    brier: float | None
    mean_confidence: float | None
    accuracy: float | None
    bins: list[ReliabilityBin]
    n_bins: int
    strategy: Strategy
    n_without_confidence: int = Field(description="items dropped because they carry no confidence")
    counts: ItemCounts
    auroc: MetricResult | None = Field(
        default=None,
        description="AUROC of the confidence for correct vs wrong verdicts, over the same items (see ``auroc``)",
    )


def _edges(conf: np.ndarray, n_bins: int, strategy: Strategy) -> np.ndarray:
    if n_bins < 1:
        raise ValueError("n_bins must be at least 1")
    if strategy == "uniform":
        return np.linspace(0.0, 1.0, n_bins + 1)
    edges = np.quantile(conf, np.linspace(0.0, 1.0, n_bins + 1))
    edges[0], edges[-1] = 0.0, 1.0
    return np.unique(edges)


def reliability_curve(
    confidences: Sequence[float],
    correct: Sequence[bool | int | float],
    *,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
) -> list[ReliabilityBin]:
    """Per-bin mean confidence and accuracy (empty bins kept, with None)."""
    from scipy import stats

    conf = np.asarray(confidences, dtype=float)
    hit = np.asarray(correct, dtype=float)
    if conf.shape != hit.shape:
        raise ValueError("confidences and correct must be equally long")
    if conf.size and (conf.min() < 0 or conf.max() > 1):
        raise ValueError("confidences must lie in [0, 1]")
    edges = _edges(conf, n_bins, strategy)
    if conf.size == 0:
        return [
            ReliabilityBin(lower=float(lo), upper=float(hi), count=0, mean_confidence=None, accuracy=None)
            for lo, hi in itertools.pairwise(edges)
        ]
    count = stats.binned_statistic(conf, hit, statistic="count", bins=edges).statistic
    acc = stats.binned_statistic(conf, hit, statistic="mean", bins=edges).statistic
    mconf = stats.binned_statistic(conf, conf, statistic="mean", bins=edges).statistic
    return [
        ReliabilityBin(
            lower=float(edges[i]),
            upper=float(edges[i + 1]),
            count=int(count[i]),
            mean_confidence=None if count[i] == 0 else float(mconf[i]),
            accuracy=None if count[i] == 0 else float(acc[i]),
        )
        for i in range(len(edges) - 1)
    ]


def expected_calibration_error(
    confidences: Sequence[float],
    correct: Sequence[bool | int | float],
    *,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
) -> float | None:
    """ECE: sum over bins of (bin share) × |bin accuracy − bin mean confidence|."""
    bins = reliability_curve(confidences, correct, n_bins=n_bins, strategy=strategy)
    total = sum(b.count for b in bins)
    if total == 0:
        return None
    return float(
        sum(
            b.count / total * abs(b.accuracy - b.mean_confidence)
            for b in bins
            if b.accuracy is not None and b.mean_confidence is not None
        )
    )


def _confidence(v: Any) -> float | None:
    c = getattr(v, "confidence", None)
    return None if c is None else float(c)


def calibration(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    confidences: Sequence[float | None] | None = None,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    unparsed: UnparsedPolicy = "exclude",
    tie_label: Any = "tie",
    score_field: ScoreField = "score",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> CalibrationResult:
    """Calibration of the judge's confidence in its own verdict.

    Confidence comes from ``confidences`` or else from each result's ``confidence`` field;
    an item is correct when its prediction equals the reference. Items without a
    confidence are dropped and counted (``n_without_confidence``). A failed item is
    dropped (``exclude``), counted incorrect (``wrong``) or compared as a tie (``tie``) —
    in the last two cases only if a confidence was supplied for it.

    ``auroc``: :func:`auroc` over the same confidences and correctness, so the two figures
    describe one set of items (its interval at ``level``, ``n_resamples``, ``seed``; its
    ``counts`` are this result's). Its value is None when every item is right, or every one wrong.
    """
    from sklearn.metrics import brier_score_loss

    policy = check_policy(unparsed)
    if len(predictions) != len(references):
        raise ValueError("predictions and references must be equally long")
    conf_in = list(confidences) if confidences is not None else [_confidence(v) for v in predictions]
    if len(conf_in) != len(predictions):
        raise ValueError("confidences must be as long as predictions")
    res = resolve_columns([predictions, references], unparsed=policy, tie_label=tie_label, score_field=score_field)
    conf: list[float] = []
    hit: list[float] = []
    n_noconf = 0
    for i, p, r, failed in zip(res.index, *res.columns, res.wrong, strict=True):
        c = conf_in[i]
        if c is None or (isinstance(c, float) and math.isnan(c)):
            n_noconf += 1
            continue
        conf.append(float(c))
        hit.append(float(not failed and p == r))
    counts = res.counts.model_copy(update={"used": len(conf), "excluded": res.counts.excluded + n_noconf})
    bins = reliability_curve(conf, hit, n_bins=n_bins, strategy=strategy)
    gaps = [
        abs(b.accuracy - b.mean_confidence) for b in bins if b.accuracy is not None and b.mean_confidence is not None
    ]
    empty = not conf
    return CalibrationResult(
        ece=expected_calibration_error(conf, hit, n_bins=n_bins, strategy=strategy),
        mce=max(gaps) if gaps else None,
        brier=None if empty else float(brier_score_loss(np.asarray(hit, dtype=int), conf, pos_label=1)),
        mean_confidence=None if empty else float(np.mean(conf)),
        accuracy=None if empty else float(np.mean(hit)),
        bins=bins,
        n_bins=n_bins,
        strategy=strategy,
        n_without_confidence=n_noconf,
        counts=counts,
        auroc=auroc(conf, hit, level=level, n_resamples=n_resamples, seed=seed).model_copy(update={"counts": counts}),
    )


def _rank_auc(correct_conf: np.ndarray, wrong_conf: np.ndarray, axis: int = -1) -> np.ndarray:
    """AUROC along ``axis`` from the Mann–Whitney U: P(correct's confidence > wrong's), ties
    counted half (average ranks), which is what ``roc_auc_score`` computes. Vectorized over
    resamples for ``bootstrap_interval``; a test checks it against scikit-learn."""
    from scipy import stats

    x = np.moveaxis(correct_conf, axis, -1)
    y = np.moveaxis(wrong_conf, axis, -1)
    n1, n0 = x.shape[-1], y.shape[-1]
    ranks = stats.rankdata(np.concatenate([x, y], axis=-1), axis=-1)
    return np.asarray((ranks[..., :n1].sum(axis=-1) - n1 * (n1 + 1) / 2) / (n1 * n0), dtype=float)


def auroc(
    confidences: Sequence[Any],
    correct: Sequence[Any],
    *,
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> MetricResult:
    """Area under the ROC curve of the judge's confidence as a detector of its own correct
    verdicts (``sklearn.metrics.roc_auc_score`` with ``correct`` as the positive class).

    0.5: the confidence says nothing about which verdicts are right; 1: every correct verdict
    is more confident than every wrong one. Unlike ECE it ignores the confidence's scale (any
    real score works), only its ranking. Items whose confidence or correctness is missing
    (None, NaN, a failed result) are excluded and counted. ``value`` is None unless both
    correct and wrong verdicts remain (AUROC is undefined with one class).

    The interval is a seeded bootstrap over items (BCa at ``level``), stratified: correct and
    wrong verdicts are resampled separately, each group keeping its size. A plain resample of
    items can draw only one class (likely when the judge is rarely wrong), where AUROC is
    undefined; dropping such resamples would bias the interval and keeping them would make it
    NaN. Fixing the class sizes, as pROC's default bootstrap and DeLong's interval do, treats
    AUROC as conditional on the judge's observed number of errors. None when either class has
    fewer than two items, where no resample can say how the other ranks around it.
    """
    from sklearn.metrics import roc_auc_score

    if len(confidences) != len(correct):
        raise ValueError("confidences and correct must be equally long")
    res = resolve_columns([confidences, correct], unparsed="exclude")
    conf: list[float] = []
    hit: list[bool] = []
    for c, y in zip(*res.columns, strict=True):
        if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c):
            raise ValueError(f"a confidence must be a finite number, got {c!r}")
        if y not in (0, 1):  # True/False and 0/1 only, as bool_flags reads them
            raise ValueError(f"correct must hold booleans, got {y!r}")
        conf.append(float(c))
        hit.append(bool(y))
    counts = res.counts
    y_true = np.asarray(hit, dtype=int)
    scores = np.asarray(conf, dtype=float)
    if y_true.size == 0 or y_true.min() == y_true.max():
        return MetricResult(name="auroc", value=None, counts=counts)
    value = float(roc_auc_score(y_true, scores))
    ci = bootstrap_interval(
        [scores[y_true == 1], scores[y_true == 0]],
        _rank_auc,
        level=level,
        n_resamples=n_resamples,
        seed=seed,
        method_name="stratified-bootstrap-bca",
        paired=False,
    )
    return MetricResult(name="auroc", value=value, counts=counts, interval=ci)
