"""Judging an agent's run: its messages, tool calls and tool results.

- :class:`TrajectoryJudge`: a model grades one run against a rubric
  (template ``trajectory``), optionally beside a reference trajectory.
- :class:`PairwiseTrajectoryJudge`: a model compares two runs, both orders
  side by side, merged by the pairwise rules in :mod:`judgegraph.rules`
  (template ``trajectory-pairwise``).
- :class:`~judgegraph.judges.TrajectoryMatchJudge`: no model; the run's
  tool calls against a reference trajectory (strict, unordered, subset,
  superset).

:func:`create_trajectory_judge` makes any of the three.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal, overload

from judgegraph._templates import Template, rubric_text
from judgegraph.backends import Backend
from judgegraph.types import Message, PointwiseScore, SwapPolicy

from ._base import CONTEXT_BACKEND, FromContext
from ._pairwise import PairwiseJudge
from ._pointwise import _ScoreJudge
from ._trajectory_inputs import TrajectoryInput, TrajectoryPairInput
from ._trajectory_match import ArgsMode, ArgsOverride, MatchMode, TrajectoryMatchJudge
from ._transcript import render_transcript

__all__ = ["PairwiseTrajectoryJudge", "TrajectoryJudge", "create_trajectory_judge"]


def _run(messages: list[Message] | None) -> str | None:
    # Numbered steps, system prompt included: how the agent was told to work is part of its run.
    return None if messages is None else render_transcript(messages, numbered=True, system=True)


class TrajectoryJudge(_ScoreJudge):
    """Grade an agent's run (default 1-5). A rubric's levels set the scale."""

    input_model = TrajectoryInput
    default_template = "trajectory"

    def __init__(
        self,
        backend: Backend | str | FromContext = CONTEXT_BACKEND,
        *,
        name: str | None = None,
        template: str | Template | None = None,
        scale: tuple[int, int] | None = None,
        structured: bool | None = None,
        max_tokens: int = 512,
        top_logprobs: int = 10,
        repair: bool = True,
    ) -> None:
        super().__init__(
            backend,
            name=name,
            template=template,
            scale=scale,
            structured=structured,
            max_tokens=max_tokens,
            top_logprobs=top_logprobs,
            repair=repair,
        )
        if self.template.kind != "trajectory":
            raise ValueError(f"template {self.template.id!r} is not a trajectory template")

    async def _judge(self, item: TrajectoryInput, backend: Backend) -> PointwiseScore:
        started = time.perf_counter()
        scale = self._scale_for(item.rubric)
        fields: dict[str, str | None] = {
            "trajectory": _run(item.messages),
            "reference_trajectory": _run(item.reference_trajectory),
            "reference": item.reference,
            "rubric_text": self._rubric_text(item.rubric, scale),
        }
        return self._score(await self._call(backend, fields, scale), scale, backend, started)


class PairwiseTrajectoryJudge(PairwiseJudge):
    """Which of two agent runs handles the task better: A, B or tie.

    Both orders run concurrently (``SwapPolicy``); orders that disagree give
    a tie, or are flagged with ``on_inconsistent="flag"``, and
    ``inconsistent`` is set either way.
    """

    input_model = TrajectoryPairInput  # type: ignore[assignment]
    default_template = "trajectory-pairwise"
    template_kind = "trajectory-pairwise"

    def _fields(self, item: TrajectoryPairInput) -> dict[str, str | None]:  # type: ignore[override]
        return {
            "trajectory_a": _run(item.messages_a),
            "trajectory_b": _run(item.messages_b),
            "reference_trajectory": _run(item.reference_trajectory),
            "reference": item.reference,
            "rubric_text": rubric_text(item.rubric) if item.rubric else None,
        }


@overload
def create_trajectory_judge(
    backend: Backend | str = ...,
    *,
    kind: Literal["rubric"] = ...,
    name: str | None = ...,
    template: str | Template | None = ...,
    scale: tuple[int, int] | None = ...,
    structured: bool | None = ...,
    max_tokens: int = ...,
    top_logprobs: int = ...,
    repair: bool = ...,
) -> TrajectoryJudge: ...


@overload
def create_trajectory_judge(
    backend: Backend | str = ...,
    *,
    kind: Literal["pairwise"],
    swap: SwapPolicy | None = ...,
    name: str | None = ...,
    template: str | Template | None = ...,
    structured: bool | None = ...,
    max_tokens: int = ...,
    top_logprobs: int = ...,
    repair: bool = ...,
) -> PairwiseTrajectoryJudge: ...


@overload
def create_trajectory_judge(
    *,
    kind: Literal["match"],
    match: MatchMode = ...,
    args: ArgsMode = ...,
    args_overrides: Mapping[str, ArgsOverride] | None = ...,
    name: str | None = ...,
) -> TrajectoryMatchJudge: ...


def create_trajectory_judge(
    backend: Backend | str | FromContext = CONTEXT_BACKEND,
    *,
    kind: Literal["rubric", "pairwise", "match"] = "rubric",
    match: MatchMode = "strict",
    args: ArgsMode = "exact",
    args_overrides: Mapping[str, ArgsOverride] | None = None,
    swap: SwapPolicy | None = None,
    name: str | None = None,
    template: str | Template | None = None,
    scale: tuple[int, int] | None = None,
    structured: bool | None = None,
    max_tokens: int = 512,
    top_logprobs: int = 10,
    repair: bool = True,
) -> Any:
    """A trajectory judge.

    - ``kind="rubric"`` (default): :class:`TrajectoryJudge`, a model grades
      the run; input :class:`TrajectoryInput`.
    - ``kind="pairwise"``: :class:`PairwiseTrajectoryJudge`, a model compares
      two runs, swap-debiased; input :class:`TrajectoryPairInput`.
    - ``kind="match"``: :class:`TrajectoryMatchJudge`, no model; ``match`` is
      the mode (strict, unordered, subset, superset), ``args`` how tool
      arguments compare and ``args_overrides`` per tool; input
      :class:`TrajectoryMatchInput`.
    """
    if kind == "match":
        return TrajectoryMatchJudge(mode=match, args=args, args_overrides=args_overrides, name=name)
    if kind == "pairwise":
        return PairwiseTrajectoryJudge(
            backend,
            swap=swap,
            name=name,
            template=template,
            structured=structured,
            max_tokens=max_tokens,
            top_logprobs=top_logprobs,
            repair=repair,
        )
    if kind != "rubric":
        raise ValueError(f"kind must be rubric, pairwise or match, got {kind!r}")
    return TrajectoryJudge(
        backend,
        name=name,
        template=template,
        scale=scale,
        structured=structured,
        max_tokens=max_tokens,
        top_logprobs=top_logprobs,
        repair=repair,
    )
