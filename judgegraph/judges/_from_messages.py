"""Chat state in, judge input out: a ``MessagesState`` (or its message list)
given where a pointwise or pairwise input is expected.

The judged answer is the conversation's last assistant message; the request
is the last user message before it. Earlier turns are not dropped: they go
into the instruction as a transcript, rendered (and neutralised per message)
by the transcript renderer multi-turn judges use. Two runs to compare come as
``messages_a`` / ``messages_b``: they must answer the same request.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from judgegraph._messages import last_exchange, message_text
from judgegraph.types import Message, PairwiseInput, PointwiseInput

from ._transcript import render_transcript

__all__ = ["from_chat_state", "state_chat_key"]


def _instruction(request: str, earlier: list[dict[str, Any]]) -> str:
    if not earlier:
        return request
    transcript = render_transcript([Message.model_validate(m) for m in earlier])
    return f"(The conversation so far)\n\n{transcript}\n\n(The request to answer)\n\n{request}"


def state_chat_key(model: type[Any], given: Collection[str]) -> str | None:
    """The key a chat comes under for ``model`` when the fields ``given`` do
    not already hold the answer: ``messages`` for a pointwise input without a
    ``response`` (an answer given directly wins); else None."""
    if model is PointwiseInput and "response" not in given:
        return "messages"
    return None


def _pointwise(value: Any) -> Any:
    if isinstance(value, Mapping):
        key = state_chat_key(PointwiseInput, value)
        if key is None or key not in value:
            return value
        rest = {k: v for k, v in value.items() if k != key}
        source = value[key]
    elif isinstance(value, list | tuple) and value:
        rest, source = {}, value  # a bare message list
    else:
        return value
    request, answer, earlier = last_exchange(source, field="messages")
    return {**rest, "instruction": _instruction(request, earlier), "response": answer}


def _pairwise(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    out = dict(value)
    for side in ("a", "b"):
        key = f"response_{side}"
        if key in out:
            out[key] = message_text(out[key], field=key)  # an AIMessage as its text
    if "messages_a" not in out and "messages_b" not in out:
        return out
    if "messages_a" not in out or "messages_b" not in out:
        raise ValueError("messages_a and messages_b: give both runs to compare, or neither")
    req_a, ans_a, before_a = last_exchange(out.pop("messages_a"), field="messages_a")
    req_b, ans_b, before_b = last_exchange(out.pop("messages_b"), field="messages_b")
    if req_a != req_b or before_a != before_b:
        raise ValueError(
            "messages_a, messages_b: the two runs answer different conversations; compare runs of one request"
        )
    return {**out, "instruction": _instruction(req_a, before_a), "response_a": ans_a, "response_b": ans_b}


def from_chat_state(model: type[Any], value: Any) -> Any:
    """``value`` with a chat state turned into ``model``'s fields, when ``model``
    is a pointwise or pairwise input; otherwise ``value`` unchanged. ValueError
    (naming the message) when the state holds no answer to judge."""
    if model is PointwiseInput:
        return _pointwise(value)
    if model is PairwiseInput:
        return _pairwise(value)
    return value
