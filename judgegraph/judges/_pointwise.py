"""Absolute-scale judges: one response, or a conversation, scored on a scale."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal, Unpack

from judgegraph._templates import generic_rubric, rubric_text
from judgegraph.backends import Backend
from judgegraph.types import ConversationInput, PointwiseInput, PointwiseScore, Rubric, Status

from ._base import CONTEXT_BACKEND, FromContext, JudgeInputError, coerce_input
from ._contract import Context
from ._model import ModelJudge, ModelJudgeOptions, Outcome, spell_out_options
from ._transcript import render_message, render_transcript

__all__ = [
    "MultiTurnJudge",
    "PointwiseJudge",
    "create_multiturn_judge",
    "create_pointwise_judge",
]


class _ScoreJudge(ModelJudge[Any, PointwiseScore]):
    def _scale_for(self, rubric: Rubric | None) -> tuple[int, int]:
        return rubric.scale if rubric is not None else self.scale

    def _rubric_text(self, rubric: Rubric | None, scale: tuple[int, int]) -> str:
        return rubric_text(rubric) if rubric is not None else generic_rubric(scale)

    def _score(self, o: Outcome, scale: tuple[int, int], backend: Backend, started: float) -> PointwiseScore:
        prov = self._provenance(backend, [o], o.status, time.perf_counter() - started)
        if o.status is not Status.OK or o.parsed is None:
            return PointwiseScore(status=o.status, scale=scale, reason=o.reason, raw_text=o.raw_text, provenance=prov)
        assert isinstance(o.parsed.value, int)
        dist = {int(k): v for k, v in o.distribution.items()} if o.distribution else None
        return PointwiseScore(
            status=Status.OK,
            score=o.parsed.value,
            scale=scale,
            expected_score=sum(k * p for k, p in dist.items()) if dist else None,
            distribution=dist,
            confidence=dist.get(o.parsed.value, 0.0) if dist else None,
            rationale=o.parsed.rationale,
            raw_text=o.raw_text,
            provenance=prov,
        )


class PointwiseJudge(_ScoreJudge):
    """Score one response on an absolute scale (default 1-5), Prometheus style:
    feedback first, then ``[RESULT] n``. A rubric's levels set the scale."""

    input_model = PointwiseInput
    default_template = "pointwise-rubric"

    @spell_out_options(ModelJudgeOptions)
    def __init__(
        self, backend: Backend | str | FromContext = CONTEXT_BACKEND, **options: Unpack[ModelJudgeOptions]
    ) -> None:
        super().__init__(backend, **options)
        if self.template.kind != "pointwise":
            raise ValueError(f"template {self.template.id!r} is not a pointwise template")

    async def _judge(self, item: PointwiseInput, backend: Backend) -> PointwiseScore:
        started = time.perf_counter()
        scale = self._scale_for(item.rubric)
        fields: dict[str, str | None] = {
            "instruction": item.instruction,
            "response": item.response,
            "reference": item.reference,
            "context": item.context,
            "rubric_text": self._rubric_text(item.rubric, scale),
        }
        return self._score(await self._call(backend, fields, scale), scale, backend, started)


class MultiTurnJudge(_ScoreJudge):
    """Score a conversation.

    ``mode="conversation"`` grades the assistant across the whole dialogue;
    ``mode="turn"`` grades one assistant turn (the last, or ``turn=i`` in
    :meth:`ajudge_turn`) with the turns before it as context.
    """

    input_model = ConversationInput
    default_template = "conversation"

    @spell_out_options(ModelJudgeOptions)
    def __init__(
        self,
        backend: Backend | str | FromContext = CONTEXT_BACKEND,
        *,
        mode: Literal["conversation", "turn"] = "conversation",
        **options: Unpack[ModelJudgeOptions],
    ) -> None:
        if options.get("template") is None:
            options["template"] = "conversation" if mode == "conversation" else "last-turn"
        super().__init__(backend, **options)
        if self.template.kind != "conversation":
            raise ValueError(f"template {self.template.id!r} is not a conversation template")
        self.mode = mode

    async def _judge(self, item: ConversationInput, backend: Backend) -> PointwiseScore:
        if self.mode == "conversation":
            return await self._judge_conversation(item, backend)
        last = max(i for i, m in enumerate(item.messages) if m.role == "assistant")
        return await self._judge_turn(item, last, backend)

    async def ajudge_turn(
        self,
        value: ConversationInput | Mapping[str, object],
        turn: int,
        *,
        backend: Backend | None = None,
        context: Context = None,
    ) -> PointwiseScore:
        """Judge the assistant message at index ``turn`` in its context."""
        item = coerce_input(ConversationInput, value)
        if not 0 <= turn < len(item.messages) or item.messages[turn].role != "assistant":
            raise JudgeInputError(f"turn: messages[{turn}] is not an assistant message")
        return await self._judge_turn(item, turn, self.resolve_backend(backend, context))

    async def _judge_conversation(self, item: ConversationInput, backend: Backend) -> PointwiseScore:
        started = time.perf_counter()
        scale = self._scale_for(item.rubric)
        fields: dict[str, str | None] = {
            "conversation": render_transcript(item.messages),
            "reference": item.reference,
            "rubric_text": self._rubric_text(item.rubric, scale),
        }
        return self._score(await self._call(backend, fields, scale), scale, backend, started)

    async def _judge_turn(self, item: ConversationInput, turn: int, backend: Backend) -> PointwiseScore:
        started = time.perf_counter()
        scale = self._scale_for(item.rubric)
        fields: dict[str, str | None] = {
            "conversation": render_transcript(item.messages[:turn]) or "(no earlier turns)",
            "response": render_message(item.messages[turn]),
            "reference": item.reference,
            "rubric_text": self._rubric_text(item.rubric, scale),
        }
        return self._score(await self._call(backend, fields, scale), scale, backend, started)


@spell_out_options(ModelJudgeOptions)
def create_pointwise_judge(
    backend: Backend | str | FromContext = CONTEXT_BACKEND, **options: Unpack[ModelJudgeOptions]
) -> PointwiseJudge:
    """A :class:`PointwiseJudge`; every option is its constructor's (template
    ``pointwise-rubric`` unless given)."""
    return PointwiseJudge(backend, **options)


@spell_out_options(ModelJudgeOptions)
def create_multiturn_judge(
    backend: Backend | str | FromContext = CONTEXT_BACKEND,
    *,
    mode: Literal["conversation", "turn"] = "conversation",
    **options: Unpack[ModelJudgeOptions],
) -> MultiTurnJudge:
    """A :class:`MultiTurnJudge`; every option is its constructor's."""
    return MultiTurnJudge(backend, mode=mode, **options)
