"""judgegraph: LLM-as-a-judge components that are LangGraph nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._parsing import ParseError, parse_output
from ._templates import Template, get_template, list_templates, register_template
from . import _criteria  # noqa: F401  (registers the prebuilt criteria templates)
from ._wings import mount_root_wings
from .backends import (
    Backend,
    BackendError,
    Capabilities,
    GenerateRequest,
    GenerateResult,
    MissingExtraError,
    ScriptedBackend,
    TokenLogprob,
)
from .cascade import (
    Abstain,
    Budget,
    CalibrationStep,
    CascadeCalibration,
    CascadeJudge,
    CascadePlan,
    EscalationPolicy,
    LowConfidence,
    PlannedPolicy,
    PlannedTier,
    ScoreMargin,
    SwapInconsistency,
    ThresholdCalibration,
    Tier,
    agreement_credit,
    calibrate_cascade,
    calibrate_threshold,
    calibrate_tier,
    calibrated_tiers,
    create_cascade_judge,
    matches_label,
    plan_cascades,
    simulate_cascade,
)
from .judges import (
    BaseJudge,
    CompositeJudge,
    EnsembleJudge,
    Judge,
    JudgeInputError,
    LLMBarReplay,
    ModelJudge,
    MultiTurnJudge,
    PairwiseJudge,
    PointwiseJudge,
    ReplayJudge,
    RubricJudge,
    VerdictRecord,
    arecord_verdicts,
    create_batch_judge_node,
    create_ensemble_judge,
    create_judge_node,
    create_multiturn_judge,
    create_pairwise_judge,
    create_pointwise_judge,
    create_replay_judge,
    create_rubric_judge,
    item_key,
    llmbar_replay,
    read_verdicts,
    write_verdicts,
)
from .types import (
    ConversationInput,
    Criterion,
    MemberRecord,
    Message,
    PairwiseInput,
    PairwiseVerdict,
    PointwiseInput,
    PointwiseScore,
    Pricing,
    Provenance,
    RetryPolicy,
    Rubric,
    RubricResult,
    Status,
    SwapPolicy,
    TierRecord,
    Usage,
)

mount_root_wings()

if TYPE_CHECKING:
    from .backends import OpenAIBackend, TGIBackend, TransformersBackend

__version__ = "0.1.0"

__all__ = [
    "Abstain",
    "Backend",
    "BackendError",
    "BaseJudge",
    "Budget",
    "CalibrationStep",
    "Capabilities",
    "CascadeCalibration",
    "CascadeJudge",
    "CascadePlan",
    "CompositeJudge",
    "ConversationInput",
    "Criterion",
    "EnsembleJudge",
    "EscalationPolicy",
    "GenerateRequest",
    "GenerateResult",
    "Judge",
    "JudgeInputError",
    "LLMBarReplay",
    "LowConfidence",
    "MemberRecord",
    "Message",
    "MissingExtraError",
    "ModelJudge",
    "MultiTurnJudge",
    "OpenAIBackend",
    "PairwiseInput",
    "PairwiseJudge",
    "PairwiseVerdict",
    "ParseError",
    "PlannedPolicy",
    "PlannedTier",
    "PointwiseInput",
    "PointwiseJudge",
    "PointwiseScore",
    "Pricing",
    "Provenance",
    "ReplayJudge",
    "RetryPolicy",
    "Rubric",
    "RubricJudge",
    "RubricResult",
    "ScoreMargin",
    "ScriptedBackend",
    "Status",
    "SwapInconsistency",
    "SwapPolicy",
    "TGIBackend",
    "Template",
    "ThresholdCalibration",
    "Tier",
    "TierRecord",
    "TokenLogprob",
    "TransformersBackend",
    "Usage",
    "VerdictRecord",
    "agreement_credit",
    "arecord_verdicts",
    "calibrate_cascade",
    "calibrate_threshold",
    "calibrate_tier",
    "calibrated_tiers",
    "create_batch_judge_node",
    "create_cascade_judge",
    "create_ensemble_judge",
    "create_judge_node",
    "create_multiturn_judge",
    "create_pairwise_judge",
    "create_pointwise_judge",
    "create_replay_judge",
    "create_rubric_judge",
    "get_template",
    "item_key",
    "list_templates",
    "llmbar_replay",
    "matches_label",
    "parse_output",
    "plan_cascades",
    "read_verdicts",
    "register_template",
    "simulate_cascade",
    "write_verdicts",
]

# Backends load on first use: their modules are cheap, but keeping them out
# of `import judgegraph` keeps optional extras truly optional.
_LAZY = {"OpenAIBackend", "TGIBackend", "TransformersBackend"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import backends

        return getattr(backends, name)
    raise AttributeError(f"module 'judgegraph' has no attribute {name!r}")
