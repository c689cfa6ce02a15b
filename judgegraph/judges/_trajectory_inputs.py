"""Inputs of the trajectory judges: an agent's run as messages, with tool calls.

Every message field takes what :class:`~judgegraph.ConversationInput` takes
(LangChain messages and their dict forms, OpenAI-style dicts, Message
objects, a ``{"messages": [...]}`` state), so an agent's ``MessagesState``
validates as it is. A malformed run is a :class:`~judgegraph.JudgeInputError`
naming the field, the message index and what is wrong with it.
"""

from __future__ import annotations

from typing import Any

from pydantic import field_validator, model_validator

from judgegraph._messages import normalize_messages
from judgegraph.types import FrozenModel, Message, Rubric, check_messages

__all__ = ["TrajectoryInput", "TrajectoryMatchInput", "TrajectoryPairInput"]


def _reference_run(messages: list[Message] | None) -> None:
    if messages is not None:
        check_messages(messages, "reference_trajectory")


class TrajectoryInput(FrozenModel):
    """One agent run. ``reference_trajectory`` is a run that does the task
    well; ``reference`` the expected final answer; ``rubric`` what to grade."""

    messages: list[Message]
    reference_trajectory: list[Message] | None = None
    reference: str | None = None
    rubric: Rubric | None = None

    @field_validator("messages", "reference_trajectory", mode="before")
    @classmethod
    def _convert(cls, v: Any, info: Any) -> Any:
        return None if v is None else normalize_messages(v, field=info.field_name)

    @model_validator(mode="after")
    def _valid(self) -> TrajectoryInput:
        check_messages(self.messages, "messages")
        _reference_run(self.reference_trajectory)
        return self


class TrajectoryMatchInput(TrajectoryInput):
    """A run and the reference trajectory it is matched against (required)."""

    reference_trajectory: list[Message]


class TrajectoryPairInput(FrozenModel):
    """Two agent runs on the same task, for a pairwise comparison."""

    messages_a: list[Message]
    messages_b: list[Message]
    reference_trajectory: list[Message] | None = None
    reference: str | None = None
    rubric: Rubric | None = None

    @field_validator("messages_a", "messages_b", "reference_trajectory", mode="before")
    @classmethod
    def _convert(cls, v: Any, info: Any) -> Any:
        return None if v is None else normalize_messages(v, field=info.field_name)

    @model_validator(mode="after")
    def _valid(self) -> TrajectoryPairInput:
        check_messages(self.messages_a, "messages_a")
        check_messages(self.messages_b, "messages_b")
        _reference_run(self.reference_trajectory)
        return self

    def swapped(self) -> TrajectoryPairInput:
        return self.model_copy(update={"messages_a": self.messages_b, "messages_b": self.messages_a})
