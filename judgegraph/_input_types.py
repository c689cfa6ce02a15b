"""Judge inputs: what a judge is given. Re-exported by :mod:`judgegraph.types`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ._core_types import FrozenModel, require_text
from ._messages import check_tool_links, normalize_messages

__all__ = [
    "ConversationInput",
    "Criterion",
    "Message",
    "PairwiseInput",
    "PointwiseInput",
    "Rubric",
    "ToolCall",
    "check_messages",
]


class Rubric(FrozenModel):
    """A criterion and what each score level means (Prometheus style)."""

    criterion: str
    levels: dict[int, str] = Field(description="score level -> description")

    @field_validator("criterion")
    @classmethod
    def _criterion(cls, v: str) -> str:
        return require_text(v, "criterion")

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: dict[int, str]) -> dict[int, str]:
        if len(v) < 2:
            raise ValueError("levels needs at least two score levels")
        keys = sorted(v)
        if keys != list(range(keys[0], keys[-1] + 1)):
            raise ValueError(f"levels must be consecutive integers, got {keys}")
        for k, text in v.items():
            require_text(text, f"levels[{k}]")
        return dict(sorted(v.items()))

    @property
    def scale(self) -> tuple[int, int]:
        keys = list(self.levels)
        return keys[0], keys[-1]


class PointwiseInput(FrozenModel):
    """One answer to grade. ``context`` is source material the answer must
    rest on (retrieved passages for RAG, the tools on offer); only templates
    that name a context block accept it."""

    instruction: str
    response: str
    reference: str | None = None
    rubric: Rubric | None = None
    context: str | None = None

    @field_validator("instruction", "response")
    @classmethod
    def _nonempty(cls, v: str, info: Any) -> str:
        return require_text(v, info.field_name)


class PairwiseInput(FrozenModel):
    instruction: str
    response_a: str
    response_b: str
    reference: str | None = None
    rubric: Rubric | None = None

    @field_validator("instruction", "response_a", "response_b")
    @classmethod
    def _nonempty(cls, v: str, info: Any) -> str:
        return require_text(v, info.field_name)

    def swapped(self) -> PairwiseInput:
        return self.model_copy(update={"response_a": self.response_b, "response_b": self.response_a})


class ToolCall(FrozenModel):
    """A tool call an assistant message made; ``error`` when its arguments did not parse."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    error: str | None = None


class Message(FrozenModel):
    """A chat message. Prompts to judge models use system/user/assistant with
    text; conversations and agent runs also carry tool calls and tool results."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # on a tool result: the call it answers
    name: str | None = None
    error: bool = False  # a tool result that reports a failure


def check_messages(messages: list[Message], field: str) -> list[Message]:
    """``messages`` if they make a judgeable run, else ValueError naming the index and field."""
    if not messages:
        raise ValueError(f"{field} must not be empty")
    for i, m in enumerate(messages):
        # An assistant step that only calls tools, or a tool with no output, may be empty.
        if not m.content.strip() and not m.tool_calls and m.role != "tool":
            raise ValueError(f"{field}[{i}].content must be a non-empty string")
    check_tool_links([m.model_dump() for m in messages], field=field)
    if not any(m.role == "assistant" for m in messages):
        raise ValueError(f"{field} has no assistant turn to judge")
    return messages


class ConversationInput(FrozenModel):
    """A conversation: LangChain messages, their dict forms, OpenAI-style
    dicts or :class:`Message` objects; a ``{"messages": [...]}`` state
    (``MessagesState``) validates as it is."""

    messages: list[Message]
    reference: str | None = None
    rubric: Rubric | None = None

    @field_validator("messages", mode="before")
    @classmethod
    def _convert(cls, v: Any) -> Any:
        return normalize_messages(v)

    @model_validator(mode="after")
    def _has_assistant(self) -> ConversationInput:
        check_messages(self.messages, "messages")
        return self


class Criterion(FrozenModel):
    """One rubric criterion for RubricJudge, with its weight in the aggregate."""

    name: str
    rubric: Rubric
    weight: float = Field(default=1.0, gt=0)
