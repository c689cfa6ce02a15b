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
from ._judge import BaseJudge, JudgeInputError
from ._node import create_batch_judge_node, create_judge_node
from ._pairwise import PairwiseJudge, create_pairwise_judge
from ._parsing import ParseError, parse_output
from ._pointwise import MultiTurnJudge, PointwiseJudge, create_multiturn_judge, create_pointwise_judge
from ._rubric import RubricJudge, create_rubric_judge
from ._scripted_backend import ScriptedBackend
from ._templates import Template, get_template, list_templates, register_template
from .types import (
    ConversationInput,
    Criterion,
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
    Usage,
)

if TYPE_CHECKING:
    from ._openai_backend import OpenAIBackend
    from ._tgi_backend import TGIBackend
    from ._transformers_backend import TransformersBackend

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendError",
    "BaseJudge",
    "Capabilities",
    "ConversationInput",
    "Criterion",
    "GenerateRequest",
    "GenerateResult",
    "JudgeInputError",
    "Message",
    "MissingExtraError",
    "MultiTurnJudge",
    "OpenAIBackend",
    "PairwiseInput",
    "PairwiseJudge",
    "PairwiseVerdict",
    "ParseError",
    "PointwiseInput",
    "PointwiseJudge",
    "PointwiseScore",
    "Pricing",
    "Provenance",
    "RetryPolicy",
    "Rubric",
    "RubricJudge",
    "RubricResult",
    "ScriptedBackend",
    "Status",
    "SwapPolicy",
    "TGIBackend",
    "Template",
    "TokenLogprob",
    "TransformersBackend",
    "Usage",
    "create_batch_judge_node",
    "create_judge_node",
    "create_multiturn_judge",
    "create_pairwise_judge",
    "create_pointwise_judge",
    "create_rubric_judge",
    "get_template",
    "list_templates",
    "parse_output",
    "register_template",
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
