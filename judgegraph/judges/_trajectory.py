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
from typing import Literal, Unpack, overload

from judgegraph._templates import rubric_text
from judgegraph.backends import Backend
from judgegraph.types import Message, PointwiseScore, SwapPolicy

from ._base import CONTEXT_BACKEND, FromContext
from ._model import ModelJudgeOptions, spell_out_options
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

    @spell_out_options(ModelJudgeOptions)
    def __init__(
        self, backend: Backend | str | FromContext = CONTEXT_BACKEND, **options: Unpack[ModelJudgeOptions]
    ) -> None:
        super().__init__(backend, **options)
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
    **options: Unpack[ModelJudgeOptions],
) -> TrajectoryJudge: ...


@overload
def create_trajectory_judge(
    backend: Backend | str = ...,
    *,
    kind: Literal["pairwise"],
    swap: SwapPolicy | None = ...,
    **options: Unpack[ModelJudgeOptions],
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


@spell_out_options(ModelJudgeOptions)
def create_trajectory_judge(
    backend: Backend | str | FromContext = CONTEXT_BACKEND,
    *,
    kind: Literal["rubric", "pairwise", "match"] = "rubric",
    match: MatchMode = "strict",
    args: ArgsMode = "exact",
    args_overrides: Mapping[str, ArgsOverride] | None = None,
    swap: SwapPolicy | None = None,
    **options: Unpack[ModelJudgeOptions],
) -> TrajectoryJudge | PairwiseTrajectoryJudge | TrajectoryMatchJudge:
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
        return TrajectoryMatchJudge(mode=match, args=args, args_overrides=args_overrides, name=options.get("name"))
    if kind == "pairwise":
        # As before: a pairwise trajectory judge's scale is its template's.
        pair_options = options.copy()
        pair_options.pop("scale", None)
        return PairwiseTrajectoryJudge(backend, swap=swap, **pair_options)
    if kind != "rubric":
        raise ValueError(f"kind must be rubric, pairwise or match, got {kind!r}")
    return TrajectoryJudge(backend, **options)
