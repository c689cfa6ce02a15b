"""The one place where chat messages from outside become judgegraph's shape.

Judges take conversations and agent runs as LangChain messages
(``HumanMessage``, ``AIMessage`` with ``tool_calls``, ``ToolMessage``,
``SystemMessage``), their dict forms (``model_dump()`` and
``messages_to_dict()``), OpenAI-style dicts (``tool_calls[].function.arguments``
as a JSON string), ``(role, content)`` tuples, judgegraph ``Message`` objects,
or a ``MessagesState``-shaped ``{"messages": [...]}``. :func:`normalize_messages`
turns any of these into plain dicts with the fields of
:class:`judgegraph.types.Message`, and names the message index and field of
anything it cannot read. LangChain's own ``convert_to_messages`` does the
parsing of foreign shapes, so its aliases (``human``/``ai``/``developer``...)
are accepted exactly as LangChain accepts them.

This module sits below ``types`` and imports nothing from judgegraph but its
strict JSON reader (``_json``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._internal.strict_json import DuplicateKeyError, loads_unique

__all__ = ["check_tool_links", "last_exchange", "message_text", "normalize_messages"]

_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "system": "system"}
_ROLES |= {"developer": "system", "tool": "tool", "function": "tool"}
_OWN_FIELDS = {"role", "content", "tool_calls", "tool_call_id", "name", "error"}
_OWN_CALL_FIELDS = {"name", "args", "id", "error", "type"}


def normalize_messages(value: Any, *, field: str = "messages") -> Any:
    """``value`` as a list of Message-shaped dicts; anything that is not a
    list of messages (or a state holding one) is returned as is, for pydantic
    to reject with its own error."""
    value = _unwrap(value)
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        return value
    return [_one(m, f"{field}[{i}]") for i, m in enumerate(value)]


def _unwrap(value: Any) -> Any:
    if isinstance(value, Mapping) and "messages" in value and "role" not in value and "type" not in value:
        return value["messages"]  # a MessagesState-shaped state
    return value


def message_text(value: Any, *, field: str) -> Any:
    """A single message (an ``AIMessage``, a message dict) as its text; anything
    else as is. ValueError, naming ``field``, when the message has no text to judge."""
    if isinstance(value, str) or not (isinstance(value, Mapping) or hasattr(value, "content")):
        return value
    if isinstance(value, Mapping) and "messages" in value:
        return value  # a state: last_exchange reads it
    message, has_text = _read(value, field)
    if not has_text:
        raise ValueError(f"{field}.content: {_no_text(message)}")
    return message["content"]


def last_exchange(value: Any, *, field: str = "messages") -> tuple[str, str, list[dict[str, Any]]]:
    """The exchange a single-answer judge grades in a conversation: the text of
    its last assistant message, the last user message before it, and the turns
    before that. ValueError, naming the message, when there is no such pair."""
    raw = _unwrap(value)
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence) or not raw:
        raise ValueError(f"{field}: expected a non-empty list of messages or a state holding one")
    read = [_read(m, f"{field}[{i}]") for i, m in enumerate(raw)]
    messages = [m for m, _ in read]
    check_tool_links(messages, field=field)
    last = len(messages) - 1
    answer, has_text = read[last]
    if answer.get("role") != "assistant":
        raise ValueError(f"{field}[{last}]: the last message is a {answer.get('role')} message, not an answer to judge")
    if not has_text:
        raise ValueError(f"{field}[{last}].content: {_no_text(answer)}")
    for i in range(last - 1, -1, -1):
        if messages[i].get("role") == "user" and messages[i].get("content", "").strip():
            return messages[i]["content"], answer["content"], messages[:i]
    raise ValueError(f"{field}: no user message before the answer at [{last}]")


def _no_text(answer: Mapping[str, Any]) -> str:
    """Why an answer without text is refused. Its stand-ins for images or
    reasoning are not text: judging them would score an answer nobody read."""
    if answer.get("tool_calls"):
        return "the last answer has only tool calls; judge an agent run with a trajectory judge"
    if answer.get("content", "").strip():
        return "the last answer has no text, only non-text content (images, reasoning...): nothing to judge"
    return "the last answer has no text: nothing to judge"


def check_tool_links(messages: Sequence[Mapping[str, Any]], *, field: str = "messages") -> None:
    """Raise ValueError when a tool result names a call that no earlier
    assistant message made: the run is out of order or spliced."""
    made: set[str] = set()
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or ():
            if call.get("id"):
                made.add(call["id"])
        link = m.get("tool_call_id")
        if m.get("role") == "tool" and link and link not in made:
            raise ValueError(f"{field}[{i}].tool_call_id: {link!r} answers no earlier tool call")


def _one(message: Any, where: str) -> Any:
    return _read(message, where)[0]


def _read(message: Any, where: str) -> tuple[dict[str, Any], bool]:
    """The message in judgegraph's shape, and whether its content holds any
    text (blocks that only stand in for images or reasoning do not count)."""
    from langchain_core.messages import BaseMessage, convert_to_messages, messages_from_dict

    if isinstance(message, BaseMessage):
        return _from_langchain(message, where)
    if hasattr(message, "model_dump") and hasattr(message, "role"):
        own: dict[str, Any] = message.model_dump()  # judgegraph's own Message
        return own, bool(own["content"].strip())
    if isinstance(message, Mapping):
        if "data" in message and "type" in message and isinstance(message["data"], Mapping):
            return _from_langchain(_lc(lambda: messages_from_dict([dict(message)])[0], where), where)
        if _is_own_shape(message):
            calls = [{k: v for k, v in c.items() if k != "type"} for c in message.get("tool_calls") or ()]
            out = {**message, "tool_calls": calls} if calls else dict(message)
            return out, bool(out["content"].strip())
        message = _check_openai_calls(message, where)
    elif not isinstance(message, tuple | list | str):
        raise ValueError(
            f"{where}: expected a message (LangChain message, dict or tuple), got {type(message).__name__}"
        )
    return _from_langchain(_lc(lambda: convert_to_messages([message])[0], where), where)  # type: ignore[list-item]


def _is_own_shape(message: Mapping[str, Any]) -> bool:
    """A dict already in judgegraph's Message shape (e.g. ``Message.model_dump()``)."""
    if message.get("role") not in ("system", "user", "assistant", "tool") or not isinstance(
        message.get("content"), str
    ):
        return False
    if not set(message) <= _OWN_FIELDS:
        return False
    calls = message.get("tool_calls") or ()
    return isinstance(calls, list | tuple) and all(
        isinstance(c, Mapping) and set(c) <= _OWN_CALL_FIELDS and c.get("type", "tool_call") == "tool_call"
        for c in calls
    )


def _lc(convert: Any, where: str) -> Any:
    try:
        return convert()
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        first = str(exc).split("\n", 1)[0]
        raise ValueError(f"{where}: not a readable message: {first}") from None


def _check_openai_calls(message: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """OpenAI-style tool calls carry their arguments as JSON text; read them
    here so a bad one is reported with its place, not as a bare JSON error."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    if not isinstance(calls, Sequence) or isinstance(calls, str):
        raise ValueError(f"{where}.tool_calls: expected a list of tool calls")
    fixed = []
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls[{j}]"
        if not isinstance(call, Mapping):
            raise ValueError(f"{at}: expected a mapping, got {type(call).__name__}")
        fn = call.get("function")
        if fn is None:
            if not isinstance(call.get("name"), str) or not call["name"].strip():
                raise ValueError(f"{at}.name: must be a non-empty string")
            if not isinstance(call.get("args", {}), Mapping):
                raise ValueError(f"{at}.args: must be a mapping of argument names to values")
            fixed.append({"type": "tool_call", "args": {}, **call})
            continue
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"].strip():
            raise ValueError(f"{at}.function.name: must be a non-empty string")
        raw = fn.get("arguments") or "{}"
        try:
            args = loads_unique(raw) if isinstance(raw, str) else raw
        except DuplicateKeyError as exc:
            raise ValueError(f"{at}.function.arguments: ambiguous, {exc} (given twice in one object)") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{at}.function.arguments: not valid JSON ({exc.msg} at char {exc.pos})") from None
        if not isinstance(args, Mapping):
            raise ValueError(f"{at}.function.arguments: must be a JSON object, got {type(args).__name__}")
        fixed.append({"name": fn["name"], "args": dict(args), "id": call.get("id"), "type": "tool_call"})
    return {**message, "tool_calls": fixed, "content": message.get("content") or ""}


# Block types that carry text (LangChain's, and OpenAI Responses' input/output parts).
_TEXT_BLOCKS = {"text", "output_text", "input_text"}


def _text(content: Any) -> tuple[str, bool]:
    """The content as the judge reads it, and whether any of it is text."""
    if isinstance(content, str):
        return content, bool(content.strip())
    parts: list[str] = []
    has_text = False
    for block in content or ():
        text: str | None = None
        if isinstance(block, str):
            text = block
        elif isinstance(block, Mapping) and block.get("type") in _TEXT_BLOCKS:
            text = str(block.get("text", ""))
        elif isinstance(block, Mapping):
            # Images, audio, files, reasoning: the judge sees that they were
            # there, but a stand-in is not text to judge.
            parts.append(f"({block.get('type', 'non-text')} content not shown)")
        if text is not None:
            parts.append(text)
            has_text = has_text or bool(text.strip())
    return "\n".join(p for p in parts if p), has_text


def _from_langchain(message: Any, where: str) -> tuple[dict[str, Any], bool]:
    kind = message.type
    if kind == "chat":
        kind = getattr(message, "role", "")
    if kind == "remove":
        raise ValueError(f"{where}: a RemoveMessage is a state-reducer instruction, not a message")
    role = _ROLES.get(kind)
    if role is None:
        raise ValueError(f"{where}.role: {kind!r} is not a chat role (system, user, assistant or tool)")
    content, has_text = _text(message.content)
    out: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        found = getattr(message, "tool_calls", None) or ()
        calls = [{"name": c["name"], "args": dict(c.get("args") or {}), "id": c.get("id")} for c in found]
        for c in getattr(message, "invalid_tool_calls", None) or ():
            # The agent asked for a call whose arguments did not parse: that
            # is part of the run to judge, not malformed input.
            calls.append(
                {
                    "name": c.get("name") or "(unnamed)",
                    "args": {},
                    "id": c.get("id"),
                    "error": f"arguments are not valid JSON: {str(c.get('args'))[:200]!r}",
                }
            )
        for j, c in enumerate(calls):
            if not isinstance(c["name"], str) or not c["name"].strip():
                raise ValueError(f"{where}.tool_calls[{j}].name: must be a non-empty string")
        if calls:
            out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = getattr(message, "tool_call_id", None) or None
        out["error"] = getattr(message, "status", "success") == "error"
    name = getattr(message, "name", None)
    if name and role in ("tool", "assistant", "user"):
        out["name"] = name
    return out, has_text
