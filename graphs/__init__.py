"""Prebuilt evaluation graphs. Installed as ``judgegraph.graphs``.

Every ``create_*_graph`` factory returns a *compiled* graph: invoke it,
stream it, or add it to your own graph as a node (a subgraph). Judges come
from the run's context (``judge=from_context("judge")`` by default, then
``context={"judge": ..., "backend": ...}``), so one graph serves any backend,
ensemble or cascade. Options are
keyword-only; pass ``checkpointer=`` to persist runs, and ``cache=`` with
``cache_policy=`` for LangGraph's node cache on the nodes that call a judge.
LangGraph keys that cache on the node's input alone, not on the judge or
backend in the context: use one cache per judge setup, or wrap the backend
in :class:`~judgegraph.backends.CachedBackend`, whose key includes the model
and server.
"""

from ._context import JudgeContext, JudgeLike, JudgeSpec
from ._serde import checkpoint_serde
from .batch import ItemError, create_batch_graph
from .guardrail import GuardrailDecision, create_guardrail_graph
from .multiturn import ConversationVerdict, TurnVerdict, create_multiturn_graph
from .pairwise import create_pairwise_graph
from .pointwise import create_pointwise_graph
from .rubric import create_rubric_graph

__all__ = [
    "ConversationVerdict",
    "GuardrailDecision",
    "ItemError",
    "JudgeContext",
    "JudgeLike",
    "JudgeSpec",
    "TurnVerdict",
    "checkpoint_serde",
    "create_batch_graph",
    "create_guardrail_graph",
    "create_multiturn_graph",
    "create_pairwise_graph",
    "create_pointwise_graph",
    "create_rubric_graph",
]
