"""The one judge contract: what graphs, jobs and composites may rely on.

:class:`AsyncJudge` is a protocol: ``ajudge(item, *, context)`` returning a
:class:`~judgegraph.types.JudgeResult`, plus the capabilities a caller must
know before it calls (a name, the input it grades, whether it judges only
whole batches, whether it judges answer orders one call each). They are
declared, never probed: :class:`~judgegraph.judges.Judge` declares them all
(every judge here is one), and :func:`as_async_judge` declares them once for
a user's object that only has ``ajudge``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from pydantic import BaseModel

from judgegraph.rules import flip_verdict
from judgegraph.types import JudgeResult, PairwiseInput, PairwiseVerdict, SwapPolicy

__all__ = ["AsyncJudge", "Context", "ajudge_one_order", "as_async_judge"]

R_co = TypeVar("R_co", bound=JudgeResult, covariant=True)

Context: TypeAlias = Mapping[str, object] | object | None
"""A run's context: what a judge finds its backends (and a graph its judges)
in, under keys, at call time. Usually a mapping (a job's ``context=``, a
graph's ``runtime.context``); an object whose attributes are the keys works
too (a dataclass ``context_schema``), read by
:func:`~judgegraph.judges.find_in_context`; None when the run offers nothing."""


@runtime_checkable
class AsyncJudge(Protocol[R_co]):
    """What a judge is to everything that calls one.

    ``ajudge`` judges one input (a model or a mapping of its fields) and
    returns a result whose status says whether it is a verdict; a model-side
    failure is a failed result, not an exception. The properties are the
    judge's declared capabilities.
    """

    @property
    def name(self) -> str:
        """The judge's name, as results and errors give it."""

    @property
    def input_model(self) -> type[BaseModel] | None:
        """The input it grades; None for a judge that does not declare it
        (it is then checked by what it returns)."""

    @property
    def needs_batch(self) -> bool:
        """True for a judge that ranks a whole batch (a cascade with a budget
        policy): callers must give it batches (``ajudge_many``), never items."""

    @property
    def order_policy(self) -> SwapPolicy | None:
        """A pairwise judge's own position-bias policy when it judges each
        answer order in a call of its own (:meth:`ajudge_order`); None for a
        judge that judges a pair as a whole."""

    async def ajudge(self, value: Any, *, context: Context = None) -> R_co:
        """Judge one input with the run's ``context``.

        Any: each judge takes its own input model (or a mapping of its
        fields), and the protocol is generic in the result only, so that
        every judge's narrower parameter still satisfies it."""

    async def ajudge_order(self, item: PairwiseInput, *, swapped: bool, context: Context = None) -> PairwiseVerdict:
        """One answer order of ``item``: as given, or with ``swapped=True``
        its swapped pair, the verdict stated for the original order."""

    def check_context(self, context: Context) -> None:
        """Raise (a set-up error, before any call) when something the judge
        needs is not in ``context``."""

    def config_fingerprint(self) -> Mapping[str, object] | None:
        """Everything about the judge that can change a verdict, when the
        judge states it itself; None to be keyed by its public attributes."""


async def ajudge_one_order(
    judge: AsyncJudge[JudgeResult], item: PairwiseInput, *, swapped: bool, context: Context = None
) -> PairwiseVerdict:
    """One answer order from a judge that judges a pair as a whole: ``ajudge``
    on the pair (swapped or not) and its verdict mapped back to the original order."""
    result = await judge.ajudge(item.swapped() if swapped else item, context=context)
    if not isinstance(result, PairwiseVerdict):
        raise TypeError(f"pairwise graph: the judge returned a {type(result).__name__}, not a PairwiseVerdict")
    return flip_verdict(result) if swapped else result


class _Declared:
    """A user's object with only ``async ajudge(value, *, context)``, with the
    capabilities the contract asks for declared once, from what it has."""

    needs_batch = False
    order_policy: SwapPolicy | None = None

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = str(getattr(inner, "name", None) or type(inner).__name__)
        model = getattr(inner, "input_model", None)
        self.input_model: type[BaseModel] | None = model if isinstance(model, type) else None

    async def ajudge(self, value: Any, *, context: Context = None) -> Any:
        return await self.inner.ajudge(value, context=context)

    async def ajudge_order(self, item: PairwiseInput, *, swapped: bool, context: Context = None) -> PairwiseVerdict:
        return await ajudge_one_order(self, item, swapped=swapped, context=context)

    def check_context(self, context: Context) -> None:
        check = getattr(self.inner, "check_context", None)
        if callable(check):
            check(context)
        elif callable(resolve := getattr(self.inner, "resolve_backend", None)):
            resolve(None, context)

    def config_fingerprint(self) -> Mapping[str, object] | None:
        return None


def as_async_judge(obj: object) -> AsyncJudge[JudgeResult]:
    """``obj`` under the judge contract: a judge as it is; a user's object that
    only has an async ``ajudge`` with the contract's capabilities declared
    for it (a plain judge of one input at a time); anything else a TypeError."""
    if isinstance(obj, AsyncJudge):
        return obj
    if not callable(getattr(obj, "ajudge", None)):
        raise TypeError(f"a {type(obj).__name__} is not a judge: it has no async ajudge()")
    return _Declared(obj)
