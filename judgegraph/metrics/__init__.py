"""Meta-evaluation: how well a judge agrees with humans, and how it is biased.

Every function takes plain values or our result objects (``PairwiseVerdict``,
``PointwiseScore``, ``RubricResult``), predictions first and references second.
Failed items (status ``unparsed``/``error``; ``None`` or NaN in plain lists) are
handled by an explicit ``unparsed=`` policy — ``"exclude"``, ``"wrong"`` or
``"tie"`` — and counted in every result's ``counts``.

Rates carry a confidence interval (``MetricResult.interval``, with its level and method):
Wilson for accuracy, agreement, escalation share, win rates and position consistency, a seeded
BCa bootstrap for kappa, position bias, half-credit accuracy and AUROC, and ``paired_difference``
for two judges on the same items (items resampled jointly).
``ppi_mean`` / ``ppi_difference`` (prediction-powered) and ``rogan_gladen`` correct a judged rate
for the judge's own errors from human labels on a random subset, beside the naive figure.

Needs the ``metrics`` extra (scipy, scikit-learn, krippendorff).
"""

from __future__ import annotations

from importlib.util import find_spec as _find_spec

# scipy / scikit-learn / krippendorff are imported lazily, inside the functions that use
# them, so importing this package stays cheap; fail early here if the extra is missing.
if any(_find_spec(_m) is None for _m in ("scipy", "sklearn", "krippendorff")):  # pragma: no cover
    from judgegraph.types import MissingExtraError

    raise MissingExtraError("judgegraph.metrics", "metrics")

from ._agreement import (
    ClassificationResult,
    LabelScores,
    accuracy,
    agreement,
    classification_scores,
    cohen_kappa,
    krippendorff_alpha,
)
from ._bias import (
    LengthBiasResult,
    PositionResult,
    SwapAccuracyResult,
    length_bias,
    length_correlation,
    position_consistency,
    split_orders,
    swap_accuracy,
)
from ._breakdown import Breakdown, breakdown
from ._calibration import (
    CalibrationResult,
    ReliabilityBin,
    auroc,
    calibration,
    expected_calibration_error,
    reliability_curve,
)
from ._corrected import CorrectedEstimate, ppi_difference, ppi_mean, rogan_gladen
from ._correlation import CorrelationResult, Correlations, correlation, correlations, kendall, pearson, spearman
from ._inputs import UNPARSED_POLICIES, Interval, ItemCounts, MetricResult, UnparsedPolicy
from ._intervals import PairedDifference, paired_difference, proportion_interval
from ._rates import escalation_share, proportion, win_rate
from ._report import MetaEvalReport, PolicyFigures, summarize

__all__ = [
    "UNPARSED_POLICIES",
    "Breakdown",
    "CalibrationResult",
    "ClassificationResult",
    "CorrectedEstimate",
    "CorrelationResult",
    "Correlations",
    "Interval",
    "ItemCounts",
    "LabelScores",
    "LengthBiasResult",
    "MetaEvalReport",
    "MetricResult",
    "PairedDifference",
    "PolicyFigures",
    "PositionResult",
    "ReliabilityBin",
    "SwapAccuracyResult",
    "UnparsedPolicy",
    "accuracy",
    "agreement",
    "auroc",
    "breakdown",
    "calibration",
    "classification_scores",
    "cohen_kappa",
    "correlation",
    "correlations",
    "escalation_share",
    "expected_calibration_error",
    "kendall",
    "krippendorff_alpha",
    "length_bias",
    "length_correlation",
    "paired_difference",
    "pearson",
    "position_consistency",
    "ppi_difference",
    "ppi_mean",
    "proportion",
    "proportion_interval",
    "reliability_curve",
    "rogan_gladen",
    "spearman",
    "split_orders",
    "summarize",
    "swap_accuracy",
    "win_rate",
]
