"""The API every judge has: an input model, a name, ``ajudge``/``ajudge_many``,
the Runnable bridge and the one way to find things in a runtime context.

Nothing here calls a model: :class:`~judgegraph.judges.ModelJudge` adds that.
Composites, cascades, replays and classifier judges are plain judges.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ValidationError

from judgegraph.backends import Backend, run_sync
from judgegraph.types import JudgeInputError, JudgeResult, PairwiseInput, PairwiseVerdict, Status, SwapPolicy
from judgegraph.types import worst_status as worst

from ._contract import Context, ajudge_one_order
from ._from_messages import from_chat_state

__all__ = [
    "CONTEXT_BACKEND",
    "CONTEXT_CONFIG_KEY",
    "FromContext",
    "Judge",
    "JudgeFailedError",
    "JudgeInputError",
    "coerce_input",
    "context_from_config",
    "find_in_context",
    "from_context",
    "run_sync",
    "worst",
]

InT = TypeVar("InT", bound=BaseModel)
OutT = TypeVar("OutT", bound=JudgeResult)
T = TypeVar("T")

CONTEXT_CONFIG_KEY = "judge_context"
"""Where a Runnable-style call (``invoke``/``ainvoke``/``batch``) carries the
runtime context: ``config={"configurable": {"judge_context": {...}}}``."""


def coerce_input(model: type[InT], value: object, *, where: str = "") -> InT:
    """``value`` as ``model``, or a :class:`JudgeInputError` naming each bad field."""
    if isinstance(value, model):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    try:
        value = from_chat_state(model, value)
    except ValueError as exc:
        raise JudgeInputError(f"{where}invalid {model.__name__}: {exc}") from None
    if not isinstance(value, Mapping):
        raise JudgeInputError(f"{where}expected a {model.__name__} or a mapping, got {type(value).__name__}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        problems = "; ".join(
            f"{_loc(err['loc']) or '(input)'}: {err['msg'].removeprefix('Value error, ')}" for err in exc.errors()
        )
        raise JudgeInputError(f"{where}invalid {model.__name__}: {problems}") from None


def _loc(parts: Sequence[int | str]) -> str:
    """A pydantic error location as ``messages[1].tool_calls[0].name``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def find_in_context(context: Context, key: str) -> object:
    """``context[key]`` for a mapping, ``context.key`` for an object, else None."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


@dataclass(frozen=True, slots=True)
class FromContext:
    """What the run's context holds under ``key``, looked up at call time:
    made by :func:`from_context`."""

    key: str

    def lookup(self, context: Context) -> Any:
        """What ``context`` holds under the key, None when nothing.

        Any: the context holds whatever the caller put there (a backend, a
        judge, a scorer), so the caller checks what it found and the type
        is the one it checks for."""
        return find_in_context(context, self.key)

    def __repr__(self) -> str:
        return f"from_context({self.key!r})"


def from_context(key: str) -> FromContext:
    """A backend (or a graph's judge) taken from the run's context under ``key``
    at call time, not fixed when the judge is built: ``PointwiseJudge(from_context("backend"))``,
    then ``ajudge(item, context={"backend": OpenAIBackend(...)})``. A plain string is a model id."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"from_context takes a non-empty key, got {key!r}")
    return FromContext(key)


CONTEXT_BACKEND = FromContext("backend")
"""The default of every model judge: the backend under ``"backend"`` in the run's context."""


def context_from_config(config: RunnableConfig | None) -> Context:
    """The runtime context a Runnable-style call carries in its config."""
    return ((config or {}).get("configurable") or {}).get(CONTEXT_CONFIG_KEY)


RAISE_ON_FAILURE_KEY = "raise_on_failure"
"""``with_config(configurable={"raise_on_failure": True})`` turns a failed
verdict into a :class:`JudgeFailedError` for that Runnable-style call."""


class JudgeFailedError(RuntimeError):
    """A Runnable-style call's verdict failed (status ``error`` or ``unparsed``)
    and ``raise_on_failure`` was set. ``result`` is the verdict, reason included."""

    def __init__(self, result: JudgeResult) -> None:
        status = getattr(result, "status", None)
        super().__init__(f"judge failed: {getattr(status, 'value', status)}: {getattr(result, 'reason', None)}")
        self.result = result


def _failed(result: JudgeResult) -> bool:
    status = getattr(result, "status", Status.OK)
    return status is not Status.OK and status != Status.OK.value


class Judge(Runnable[Any, OutT], Generic[InT, OutT]):
    """What every judge is: give it an input, get a result with a status.
    It is the :class:`~judgegraph.judges.AsyncJudge` contract with every
    capability declared (the defaults here: judges one item at a time, a
    pair as a whole, keyed by its public attributes), plus the sync and
    Runnable bridges over ``ajudge``.

    Subclasses set ``input_model`` and ``name`` and implement
    :meth:`_ajudge_item`. Invalid input raises :class:`JudgeInputError`;
    every model-side failure comes back as a result whose status says so.
    Things a judge needs at run time (backends, scorers) may live in the
    runtime ``context`` under a key, so clients live in context, not in state.

    As a Runnable, a model failure is a result too, so ``with_retry`` and
    ``with_fallbacks`` see nothing to act on; set ``raise_on_failure = True``
    on the judge, or ``with_config(configurable={"raise_on_failure": True})``,
    to have ``invoke``/``ainvoke``/``batch`` raise :class:`JudgeFailedError`
    (carrying the result) instead. ``ajudge``/``judge`` never raise for it.
    Sync calls (``judge``, ``judge_many``, ``invoke``, ``batch``) share one
    long-lived event loop, so clients and connection pools are reused.
    """

    input_model: type[InT]
    name: str
    raise_on_failure: bool = False

    @property
    def order_policy(self) -> SwapPolicy | None:
        """See :attr:`AsyncJudge.order_policy`: None, a pair is judged as a whole."""
        return None

    def with_order_policy(self, policy: SwapPolicy) -> Judge[InT, OutT]:
        """This judge with ``policy`` as its :attr:`order_policy`; judges that
        judge a pair as a whole (no order policy) return themselves."""
        return self

    @property
    def needs_batch(self) -> bool:
        """See :attr:`AsyncJudge.needs_batch`; False unless a judge says otherwise."""
        return False

    def config_fingerprint(self) -> Mapping[str, object] | None:
        """See :meth:`AsyncJudge.config_fingerprint`: None, so the judge is
        keyed by its public attributes (nested judges included)."""
        return None

    # ------------------------------------------------------------ public API

    async def ajudge(
        self, value: InT | Mapping[str, object], *, backend: Backend | None = None, context: Context = None
    ) -> OutT:
        """Judge one input. ``backend`` overrides a model judge's own backend
        for this call; judges that hold no backend refuse it."""
        item = coerce_input(self.input_model, value)
        return await self._runner(backend, context)(item)

    async def ajudge_many(
        self,
        values: Sequence[InT | Mapping[str, object]],
        *,
        max_concurrency: int = 16,
        backend: Backend | None = None,
        context: Context = None,
    ) -> list[OutT | JudgeInputError]:
        """Judge many inputs concurrently, in input order. A malformed item
        yields its :class:`JudgeInputError` in place instead of failing the rest."""
        run = self._runner(backend, context)
        sem = asyncio.Semaphore(max_concurrency)

        async def one(i: int, v: InT | Mapping[str, object]) -> OutT | JudgeInputError:
            try:
                item = coerce_input(self.input_model, v, where=f"item {i}: ")
            except JudgeInputError as exc:
                return exc
            async with sem:
                try:
                    return await run(item)
                except JudgeInputError as exc:  # found late, e.g. a field the template requires
                    return JudgeInputError(f"item {i}: {exc}")

        return list(await asyncio.gather(*(one(i, v) for i, v in enumerate(values))))

    async def ajudge_order(self, item: PairwiseInput, *, swapped: bool, context: Context = None) -> PairwiseVerdict:
        """One answer order of a pair (see :meth:`AsyncJudge.ajudge_order`):
        by default :meth:`ajudge` on the pair, swapped or not, mapped back."""
        return await ajudge_one_order(self, item, swapped=swapped, context=context)

    def judge(self, value: InT | Mapping[str, object], *, context: Context = None) -> OutT:
        """:meth:`ajudge` from sync code."""
        return run_sync(self.ajudge(value, context=context))

    def judge_many(
        self, values: Sequence[InT | Mapping[str, object]], *, max_concurrency: int = 16, context: Context = None
    ) -> list[OutT | JudgeInputError]:
        """:meth:`ajudge_many` from sync code."""
        return run_sync(self.ajudge_many(values, max_concurrency=max_concurrency, context=context))

    def check_context(self, context: Context) -> None:
        """Raise before any call when something this judge needs is not in
        ``context``: a set-up error, not a failed verdict."""

    def backend_for(self, context: Context) -> Backend | None:
        """The model backend this judge itself would call with ``context``, or
        None for judges that call none directly (composites, replays)."""
        return None

    def with_backends(self, wrap: Callable[[Backend], Backend]) -> Judge[InT, OutT]:
        """This judge with every backend it holds itself (not those it finds in
        a context) replaced by ``wrap(backend)``; e.g. to put them behind a
        rate limiter. Judges that hold no backend return themselves."""
        return self

    # ------------------------------------------------------------ Runnable

    @property
    def InputType(self) -> type[InT]:
        return self.input_model

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return self.input_model

    async def ainvoke(
        self, input: InT | Mapping[str, object], config: RunnableConfig | None = None, **kwargs: Any
    ) -> OutT:
        """:meth:`ajudge` as a Runnable, the context from ``config`` (:data:`CONTEXT_CONFIG_KEY`).

        Any: ``**kwargs`` are LangChain's Runnable keyword arguments, passed
        through to its run machinery, which types them ``Any``."""
        return await self.arun_in(input, context_from_config(config), config, **kwargs)

    async def arun_in(
        self, input: InT | Mapping[str, object], context: Context, config: RunnableConfig | None, **kwargs: Any
    ) -> OutT:
        """Judge ``input`` as a chain run of its own under ``config``'s run
        (what a graph node does when someone is tracing).

        Any: ``**kwargs`` are LangChain's Runnable keyword arguments, passed
        through to its run machinery, which types them ``Any``."""
        configurable = (config or {}).get("configurable") or {}
        raising = bool(configurable.get(RAISE_ON_FAILURE_KEY, self.raise_on_failure))

        async def run(value: InT | Mapping[str, object]) -> OutT:
            result = await self.ajudge(value, context=context)
            if raising and _failed(result):
                raise JudgeFailedError(result)
            return result

        return await self._acall_with_config(run, input, config, run_type="chain", **kwargs)

    def invoke(self, input: InT | Mapping[str, object], config: RunnableConfig | None = None, **kwargs: Any) -> OutT:
        """:meth:`ainvoke` from sync code.

        Any: ``**kwargs`` are LangChain's Runnable keyword arguments, passed
        through to its run machinery, which types them ``Any``."""
        return run_sync(self.ainvoke(input, config, **kwargs))

    def batch(
        self,
        inputs: list[InT | Mapping[str, object]],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[OutT]:
        """``abatch`` from sync code, in one trip to the shared event loop.

        Any: ``**kwargs`` are LangChain's Runnable keyword arguments, passed
        through to its run machinery, which types them ``Any``."""
        # One trip to the shared loop for the whole batch, not a thread per item.
        return run_sync(self.abatch(inputs, config, return_exceptions=return_exceptions, **kwargs))

    # ------------------------------------------------------------ internals

    def _runner(self, backend: Backend | None, context: Context) -> Callable[[InT], Awaitable[OutT]]:
        """What judges one validated item, after the set-up checks: a set-up
        error raises here, before any item is judged."""
        self._refuse_backend(backend)
        self.check_context(context)
        return lambda item: self._ajudge_item(item, context)

    async def _ajudge_item(self, item: InT, context: Context) -> OutT:
        raise NotImplementedError

    def _refuse_backend(self, backend: Backend | None) -> None:
        if backend is not None:
            raise TypeError(
                f"{self.name}: this judge takes no backend= (it holds none of its own); "
                "put backends in the runtime context instead"
            )
