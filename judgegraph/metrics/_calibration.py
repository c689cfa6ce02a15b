"""Calibration of judge confidence: reliability curve, ECE, MCE and Brier score.

Binning uses ``scipy.stats.binned_statistic`` (bins are half-open except the last,
which includes 1.0); the Brier score is scikit-learn's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from judgegraph.types import FrozenModel

from ._inputs import ItemCounts, ScoreField, UnparsedPolicy, check_policy, resolve_columns

__all__ = [
    "CalibrationResult",
    "ReliabilityBin",
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
) -> CalibrationResult:
    """Calibration of the judge's confidence in its own verdict.

    Confidence comes from ``confidences`` or else from each result's ``confidence`` field;
    an item is correct when its prediction equals the reference. Items without a
    confidence are dropped and counted (``n_without_confidence``). A failed item is
    dropped (``exclude``), counted incorrect (``wrong``) or compared as a tie (``tie``) —
    in the last two cases only if a confidence was supplied for it.
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
    )
