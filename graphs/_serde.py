"""A checkpoint serializer that knows judgegraph's types.

LangGraph's msgpack serializer warns on every type it was not told about,
and will refuse them in strict mode. Graph state here holds judge inputs and
results, so a checkpointer for these graphs should be built with this.
"""

from __future__ import annotations

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from judgegraph import types as jt

from .batch import ItemError
from .guardrail import GuardrailDecision
from .multiturn import ConversationVerdict, TurnVerdict

__all__ = ["checkpoint_serde"]

# Every public model and enum in judgegraph.types (Winner is a Literal alias, not a type).
_TYPES: tuple[type, ...] = (
    *(t for t in (getattr(jt, n) for n in jt.__all__) if isinstance(t, type)),
    ConversationVerdict,
    GuardrailDecision,
    ItemError,
    TurnVerdict,
)


def checkpoint_serde(*extra: type) -> JsonPlusSerializer:
    """``AsyncSqliteSaver(conn, serde=checkpoint_serde())``. Pass the result
    and input types of your own judges (e.g. an ensemble's) as ``extra``."""
    return JsonPlusSerializer(allowed_msgpack_modules=[*_TYPES, *extra])
