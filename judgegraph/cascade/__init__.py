"""Cascades: escalation policies, calibrated thresholds and the planner."""

from __future__ import annotations

from ._cascade import (
    Abstain,
    Budget,
    CascadeJudge,
    EscalationPolicy,
    LowConfidence,
    ScoreMargin,
    SwapInconsistency,
    Tier,
    certainty,
    create_cascade_judge,
    decide_tier,
    score_margin,
)
from ._planner import CascadePlan, PlannedPolicy, PlannedTier, describe_policy, plan_cascades, simulate_cascade
from ._thresholds import (
    CalibrationStep,
    CascadeCalibration,
    Label,
    ThresholdCalibration,
    agreement_credit,
    calibrate_cascade,
    calibrate_threshold,
    calibrate_tier,
    calibrated_tiers,
    matches_label,
)

__all__ = [
    "Abstain",
    "Budget",
    "CalibrationStep",
    "CascadeCalibration",
    "CascadeJudge",
    "CascadePlan",
    "EscalationPolicy",
    "Label",
    "LowConfidence",
    "PlannedPolicy",
    "PlannedTier",
    "ScoreMargin",
    "SwapInconsistency",
    "ThresholdCalibration",
    "Tier",
    "agreement_credit",
    "calibrate_cascade",
    "calibrate_threshold",
    "calibrate_tier",
    "calibrated_tiers",
    "certainty",
    "create_cascade_judge",
    "decide_tier",
    "describe_policy",
    "matches_label",
    "plan_cascades",
    "score_margin",
    "simulate_cascade",
]
