"""judgegraph: LLM-as-a-judge components that are LangGraph nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._backend import (
    Backend,
    BackendError,
    Capabilities,
    GenerateRequest,
    GenerateResult,
    MissingExtraError,
    TokenLogprob,
)
from ._calibration import (
    CalibrationStep,
    CascadeCalibration,
    ThresholdCalibration,
    agreement_credit,
    calibrate_cascade,
    calibrate_threshold,
    calibrate_tier,
    calibrated_tiers,
    matches_label,
)
from ._cascade import (
    Abstain,
    Budget,
    CascadeJudge,
    EscalationPolicy,
    LowConfidence,
    ScoreMargin,
    SwapInconsistency,
    Tier,
    create_cascade_judge,
)
from ._ensemble import CompositeJudge, EnsembleJudge, create_ensemble_judge
from ._judge import BaseJudge, JudgeInputError
from ._node import create_batch_judge_node, create_judge_node
from ._pairwise import PairwiseJudge, create_pairwise_judge
from ._parsing import ParseError, parse_output
from ._planner import CascadePlan, PlannedPolicy, PlannedTier, plan_cascades, simulate_cascade
from ._pointwise import MultiTurnJudge, PointwiseJudge, create_multiturn_judge, create_pointwise_judge
from ._replay import (
    LLMBarReplay,
    ReplayJudge,
    VerdictRecord,
    arecord_verdicts,
    create_replay_judge,
    item_key,
    llmbar_replay,
    read_verdicts,
    write_verdicts,
)
from ._rubric import RubricJudge, create_rubric_judge
from ._scripted_backend import ScriptedBackend
from ._templates import Template, get_template, list_templates, register_template
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

if TYPE_CHECKING:
    from ._openai_backend import OpenAIBackend
    from ._tgi_backend import TGIBackend
    from ._transformers_backend import TransformersBackend

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
    "JudgeInputError",
    "LLMBarReplay",
    "LowConfidence",
    "MemberRecord",
    "Message",
    "MissingExtraError",
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
_LAZY = {
    "OpenAIBackend": "._openai_backend",
    "TGIBackend": "._tgi_backend",
    "TransformersBackend": "._transformers_backend",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'judgegraph' has no attribute {name!r}")
