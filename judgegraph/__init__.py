"""judgegraph: LLM-as-a-judge components that are LangGraph nodes.

The top level holds what a first program needs: the judges, the node
factory, backends and model ids, inputs, results and the few policies.
Everything else lives in its own package: :mod:`judgegraph.judges` (ensembles,
trajectories, replays, templates), :mod:`judgegraph.backends`,
:mod:`judgegraph.cascade`, :mod:`judgegraph.metrics`, :mod:`judgegraph.jobs`,
:mod:`judgegraph.graphs`, :mod:`judgegraph.finetune`, :mod:`judgegraph.types`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import (
    _criteria,  # noqa: F401  (registers the prebuilt criteria templates)
    _wings,
)
from .backends import Backend, BackendError, ScriptedBackend, resolve_model
from .judges import (
    Judge,
    JudgeInputError,
    MultiTurnJudge,
    PairwiseJudge,
    PointwiseJudge,
    RubricJudge,
    create_judge_node,
    from_context,
)
from .types import (
    ConversationInput,
    Criterion,
    Message,
    PairwiseInput,
    PairwiseVerdict,
    PointwiseInput,
    PointwiseScore,
    Provenance,
    RetryPolicy,
    Rubric,
    RubricResult,
    Status,
    SwapPolicy,
)

_wings.mount_root_wings()

if TYPE_CHECKING:
    from .backends import OpenAIBackend, TransformersBackend

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendError",
    "ConversationInput",
    "Criterion",
    "Judge",
    "JudgeInputError",
    "Message",
    "MultiTurnJudge",
    "OpenAIBackend",
    "PairwiseInput",
    "PairwiseJudge",
    "PairwiseVerdict",
    "PointwiseInput",
    "PointwiseJudge",
    "PointwiseScore",
    "Provenance",
    "RetryPolicy",
    "Rubric",
    "RubricJudge",
    "RubricResult",
    "ScriptedBackend",
    "Status",
    "SwapPolicy",
    "TransformersBackend",
    "create_judge_node",
    "from_context",
    "resolve_model",
]

# Backends load on first use: their modules are cheap, but keeping them out
# of `import judgegraph` keeps optional extras truly optional.
_LAZY = {"OpenAIBackend", "TransformersBackend"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import backends

        return getattr(backends, name)
    raise AttributeError(f"module 'judgegraph' has no attribute {name!r}")
