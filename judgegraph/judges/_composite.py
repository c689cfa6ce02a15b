"""The base of judges built out of other judges (ensembles, cascades), and
the small helpers they share for reading their parts' results."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from pydantic import BaseModel

from judgegraph.backends import Backend
from judgegraph.types import PairwiseVerdict, PointwiseScore, Usage

from ._base import Judge, JudgeInputError, coerce_input
from ._contract import Context

__all__ = [
    "CompositeJudge",
    "Result",
    "arun_part",
    "cost_of",
    "judge_name",
    "latency_of",
    "sum_usage",
    "verdict_text",
]

Result: TypeAlias = PairwiseVerdict | PointwiseScore


class CompositeJudge(Judge[Any, Any]):
    """A judge made of other judges.

    Each part resolves its own backend (its own, or from the runtime
    context), so a composite takes ``context`` but never ``backend``.
    Subclasses implement :meth:`_run` over a batch of validated items and
    :meth:`_with_parts` to rebuild themselves over other parts.
    """

    def __init__(self, parts: Sequence[Judge[Any, Any]], *, name: str, what: str) -> None:
        """Any: a composite takes judges of every input and result type, and
        ``Judge`` is invariant in both, so only ``Judge[Any, Any]`` accepts them all."""
        if not parts:
            raise ValueError(f"{what} must not be empty")
        for i, p in enumerate(parts):
            if not isinstance(p, Judge):
                raise TypeError(f"{what}[{i}] is a {type(p).__name__}, not a judge")
        models = {p.input_model for p in parts}
        if len(models) > 1:
            found = ", ".join(f"{judge_name(p)}: {p.input_model.__name__}" for p in parts)
            raise ValueError(f"{what} must all judge the same input type, got {found}")
        self.input_model = parts[0].input_model
        self.name = name
        self._parts_list = list(parts)

    # ------------------------------------------------------------ public API

    async def ajudge(self, value: Any, *, backend: Backend | None = None, context: Context = None) -> Any:
        """Judge one input (see :meth:`Judge.ajudge`).

        Any: a composite judges what its parts judge and returns what its
        kind makes of their verdicts, both known only at run time."""
        self._refuse_backend(backend)
        item = coerce_input(self.input_model, value)
        self.check_context(context)
        return (await self._run([item], context=context, max_concurrency=1))[0]

    async def ajudge_many(
        self,
        values: Sequence[Any],
        *,
        max_concurrency: int = 16,
        backend: Backend | None = None,
        context: Context = None,
    ) -> list[Any]:
        """Judge a batch, in input order; a malformed item yields its
        :class:`JudgeInputError` in place and the rest still run.

        Any: a composite judges what its parts judge and returns what its
        kind makes of their verdicts, both known only at run time."""
        self._refuse_backend(backend)
        self.check_context(context)
        out: list[Any] = [None] * len(values)
        valid: list[tuple[int, Any]] = []
        for i, v in enumerate(values):
            try:
                valid.append((i, coerce_input(self.input_model, v, where=f"item {i}: ")))
            except JudgeInputError as exc:
                out[i] = exc
        results = await self._run([it for _, it in valid], context=context, max_concurrency=max_concurrency)
        for (i, _), r in zip(valid, results, strict=True):
            out[i] = r
        return out

    @property
    def parts(self) -> list[Judge[Any, Any]]:
        """The judges this one is made of, in order.

        Any: a composite holds judges of every input and result type, and
        ``Judge`` is invariant in both, so only ``Judge[Any, Any]`` names them all."""
        return list(self._parts_list)

    def check_context(self, context: Context) -> None:
        """Fail before any call when a part's backend cannot be found."""
        for p in self._parts_list:
            p.check_context(context)

    def with_backends(self, wrap: Callable[[Backend], Backend]) -> CompositeJudge:
        parts = [p.with_backends(wrap) for p in self._parts_list]
        if all(new is old for new, old in zip(parts, self._parts_list, strict=True)):
            return self
        clone = copy.copy(self)
        clone._set_parts(parts)
        return clone

    # ------------------------------------------------------------ internals

    def _set_parts(self, parts: list[Judge[Any, Any]]) -> None:
        """Point this (copied) composite at ``parts``, same order as before."""
        self._parts_list = parts

    async def _ajudge_item(self, item: Any, context: Context) -> Any:
        return (await self._run([item], context=context, max_concurrency=1))[0]

    async def _run(self, items: list[Any], *, context: Context, max_concurrency: int) -> list[Any]:
        raise NotImplementedError


async def arun_part(
    judge: Judge[Any, Any], items: Sequence[BaseModel], *, context: Context, max_concurrency: int
) -> list[Result | str]:
    """One part over a batch. A part that crashes yields the error text per
    item instead of sinking the batch.

    Any: it takes judges of every input and result type, and ``Judge`` is
    invariant in both, so only ``Judge[Any, Any]`` accepts them all."""
    if not items:
        return []
    try:
        got = await judge.ajudge_many(items, max_concurrency=max_concurrency, context=context)
    except Exception as exc:  # a bug in one part must not cost the other parts' work
        return [f"{type(exc).__name__}: {exc}"] * len(items)
    out: list[Result | str] = []
    for r in got:
        if isinstance(r, PairwiseVerdict | PointwiseScore):
            out.append(r)
        elif isinstance(r, JudgeInputError):
            out.append(f"rejected the input: {r}")
        else:
            out.append(f"returned an unsupported {type(r).__name__}")
    return out


def judge_name(judge: object) -> str:
    """A judge's ``name``, else its class name."""
    return str(getattr(judge, "name", None) or type(judge).__name__)


def verdict_text(r: Result) -> str | None:
    """A result's answer as text: the winner, or the score."""
    if not r.ok:
        return None
    if isinstance(r, PairwiseVerdict):
        return r.winner
    return str(r.score)


def cost_of(r: Result) -> float | None:
    return r.provenance.cost_usd if r.provenance is not None else None


def latency_of(r: Result) -> float:
    return r.provenance.latency_s if r.provenance is not None else 0.0


def sum_usage(results: Sequence[Result]) -> Usage:
    usage = Usage()
    for r in results:
        if r.provenance is not None:
            usage = usage + r.provenance.usage
    return usage
