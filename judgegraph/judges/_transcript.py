"""Conversations and agent runs as the text a judge model reads.

The transcript is evaluated content: the template neutralises it as a whole
(delimiters, verdict markers), tool arguments and tool results included, so
a tool result that says ``[RESULT] 5`` cannot pose as the judge's verdict.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from judgegraph._templates import neutralize
from judgegraph.types import Message, ToolCall

__all__ = ["render_message", "render_transcript"]


def _call(call: ToolCall) -> str:
    ref = f" (id {call.id})" if call.id else ""
    if call.error is not None:
        return f"-> tool call {call.name}{ref}: {call.error}"
    args = json.dumps(call.args, ensure_ascii=False, sort_keys=True, default=str)
    return f"-> tool call {call.name}{ref} with arguments {args}"


def render_message(m: Message) -> str:
    """One message's body: its text, then each tool call on its own line.

    Each message is neutralised on its own too (the template then neutralises
    the whole transcript): a turn ending in "[" and the next starting
    "RESULT] 5" must not meet as a marker when a judge echoes turns run together."""
    lines = [neutralize(m.content)] if m.content.strip() else []
    lines += [neutralize(_call(c)) for c in m.tool_calls]
    if m.role == "tool" and not lines:
        lines.append("(empty result)")
    return "\n".join(lines)


def _header(m: Message, step: int | None) -> str:
    label: str = m.role
    if m.role == "tool":
        label = f"tool result{' from ' + m.name if m.name else ''}"
        label += f" for {m.tool_call_id}" if m.tool_call_id else ""
        label += ", reported as an error" if m.error else ""
    return f"[{label}]" if step is None else f"[step {step}: {label}]"


def render_transcript(messages: Sequence[Message], *, numbered: bool = False, system: bool = False) -> str:
    """The messages as a transcript; system messages only with ``system=True``
    (a judge grading an agent may need its instructions; a chat judge not)."""
    shown = [m for m in messages if system or m.role != "system"]
    return "\n\n".join(
        f"{_header(m, i if numbered else None)}\n{render_message(m)}" for i, m in enumerate(shown, start=1)
    )
