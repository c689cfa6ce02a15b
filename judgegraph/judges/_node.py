"""Judges as LangGraph nodes.

The node maps state keys to the judge's input, takes its backend from the
graph's runtime context (never from state), and writes the result under
``output_key``. It also emits the result on the ``custom`` stream so verdicts
can be shown as they complete. When anyone traces, the judge is a chain run
under the node and each model call an LLM run under the judge.

Every node judgegraph builds (these, and the prebuilt graphs') is an async
function made a node by :func:`graph_node`, so it runs under ``invoke`` as
well as ``ainvoke``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.types import CachePolicy
from pydantic import BaseModel

from judgegraph.types import JudgeResult

from ._base import FromContext, Judge, JudgeInputError, context_from_config, run_sync
from ._contract import AsyncJudge
from ._fingerprint import node_identity
from ._from_messages import state_chat_key
from ._tracing import tracing_active

try:
    # LangGraph makes a plain async function a RunnableCallable(None, afunc):
    # no sync path, so graph.invoke fails ("No synchronous function provided").
    # A node with both paths is a RunnableCallable(func, afunc), and no public
    # LangGraph API builds one with LangGraph's own injection of config, runtime,
    # writer... by signature. So this is the one place judgegraph imports it;
    # tests/judges/test_sync_nodes.py checks that add_node still builds async
    # nodes from this very class, so an upgrade that moves or replaces it fails there.
    from langgraph._internal._runnable import RunnableCallable
except ImportError as exc:  # pragma: no cover - only with a LangGraph that moved it
    raise ImportError(
        "judgegraph's graph nodes are LangGraph RunnableCallables (langgraph._internal._runnable), "
        "which this LangGraph version no longer has; install the LangGraph version judgegraph supports"
    ) from exc

__all__ = ["create_batch_judge_node", "create_judge_node", "graph_node"]

InputMap = Mapping[str, str] | Callable[[Any], Any] | None

T = TypeVar("T")


def _get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        if key not in state:
            raise JudgeInputError(f"state has no key {key!r}")
        return state[key]
    if not hasattr(state, key):
        raise JudgeInputError(f"state has no attribute {key!r}")
    return getattr(state, key)


def _extract(state: Any, inputs: InputMap, model: type[BaseModel]) -> Any:
    if callable(inputs):
        return inputs(state)
    if inputs is None:
        # Same names in state as in the judge input; optional fields may be absent.
        def present(k: str) -> bool:
            found = state.get(k) if isinstance(state, Mapping) else getattr(state, k, None)
            return found is not None

        value = {k: _get(state, k) for k in model.model_fields if present(k)}
        # A MessagesState app's chat, for a judge that takes one (as ajudge({"messages": ...}) does).
        chat = state_chat_key(model, value)
        if chat is not None and present(chat):
            value[chat] = _get(state, chat)
        return value
    return {field: _get(state, key) for field, key in inputs.items()}


def _context(runtime: Any, config: RunnableConfig | None) -> Any:
    ctx = getattr(runtime, "context", None)
    return ctx if ctx is not None else context_from_config(config)


class _Node(RunnableCallable):
    """A node with LangGraph's async path for ``afunc`` unchanged, and a sync
    path that runs ``afunc`` on judgegraph's shared loop; calling it calls ``afunc``."""

    def __init__(self, afunc: Callable[..., Awaitable[Any]], identity: str | None) -> None:
        @functools.wraps(afunc)  # the same signature, so LangGraph injects the same arguments
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return run_sync(afunc(*args, **kwargs))

        if identity is not None:
            # LangGraph's node cache is namespaced by the node function's
            # module and qualname, and keyed by its input only: the judge's
            # verdict identity in the name keeps one judge's cached verdicts
            # from answering for another's.
            blocking.__qualname__ = f"{afunc.__qualname__}[{identity}]"

        # trace=False as add_node's own: the node's run is LangGraph's, not a second one.
        super().__init__(blocking, afunc, name=afunc.__name__, trace=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        assert self.afunc is not None
        return self.afunc(*args, **kwargs)


def graph_node(
    afunc: Callable[..., Awaitable[T]],
    *,
    judge: AsyncJudge[JudgeResult] | FromContext | None = None,
    cache_policy: CachePolicy[Any] | None = None,
) -> Callable[..., Awaitable[T]]:
    """The async node function ``afunc`` as a LangGraph node that runs under
    ``graph.invoke`` as well as ``graph.ainvoke``.

    ``ainvoke`` runs ``afunc`` exactly as LangGraph runs any async node;
    ``invoke`` runs it to completion on judgegraph's shared event loop (so it
    works inside a running loop too, e.g. a notebook cell). LangGraph injects
    ``config``, ``runtime`` and the rest by ``afunc``'s signature either way.
    The node is still ``afunc`` when called directly.

    ``judge``: the judge the node calls, whose verdict identity then names the
    node's slice of LangGraph's node cache. ``cache_policy``: the policy the
    node is added with, refused (ValueError) for a judge that comes from, or
    takes its model from, the run's context: the node cache keys on the
    node's input alone, so it would answer for whatever model a later run
    names (cache model calls with ``CachedBackend`` instead, which is keyed
    by the verdict identity).

    Any: LangGraph's ``CachePolicy`` is generic (and invariant) in its key
    function's type, so ``CachePolicy[Any]`` is the one that accepts every policy.
    """
    if not inspect.iscoroutinefunction(afunc):
        raise TypeError(f"graph_node takes an async function, got {afunc!r}: add a sync one to the graph as it is")
    identity = node_identity(judge) if judge is not None else None
    if cache_policy is not None and identity is None:
        raise ValueError(
            "cache_policy: LangGraph's node cache keys on the node's input only, and this node's judge "
            "(or its model) comes from the run's context, so a cached verdict would answer for another "
            "model; give the graph the judge itself, with its own backend, or cache model calls with "
            "judgegraph.backends.CachedBackend"
        )
    return _Node(afunc, identity)


def create_judge_node(
    judge: Judge[Any, Any],
    *,
    inputs: InputMap = None,
    output_key: str = "verdict",
) -> Callable[..., Awaitable[dict[str, JudgeResult]]]:
    """A node: ``graph.add_node("judge", create_judge_node(judge, ...))``,
    for ``invoke`` and ``ainvoke`` alike.

    ``inputs`` maps judge input fields to state keys (``{"response":
    "answer"}``), or is a function of the state; by default fields are read
    from state keys of the same name, and a judge that takes a chat (a
    pointwise judge) reads a ``MessagesState``'s ``messages`` when the state
    has no ``response``.

    Any: it takes judges of every input and result type (``Judge`` is
    invariant in both), and an ``inputs`` function takes the user's graph
    state, whose type only the user's graph knows.
    """

    async def judge_node(state: Any, config: RunnableConfig, runtime: Any = None) -> dict[str, JudgeResult]:
        value, context = _extract(state, inputs, judge.input_model), _context(runtime, config)
        if tracing_active(config):
            # A run of its own under the node, its model calls under it.
            result = await judge.arun_in(value, context, config)
        else:
            result = await judge.ajudge(value, context=context)
        writer = getattr(runtime, "stream_writer", None)
        if writer is not None:
            writer({"judge": judge.name, output_key: result})
        return {output_key: result}

    judge_node.__name__ = f"{judge.name}_node"
    return graph_node(judge_node, judge=judge)


def create_batch_judge_node(
    judge: Judge[Any, Any],
    *,
    items_key: str = "items",
    output_key: str = "results",
    default_concurrency: int = 16,
) -> Callable[..., Awaitable[dict[str, list[JudgeResult | JudgeInputError]]]]:
    """A node that judges a list in state, all within one node run.

    Concurrency comes from ``max_concurrency`` in the run config. Results are
    in input order; a malformed item yields its :class:`JudgeInputError`
    in place and the others still run.

    Any: it takes judges of every input and result type, and ``Judge`` is
    invariant in both, so only ``Judge[Any, Any]`` accepts them all.
    """

    async def batch_judge_node(
        state: Any, config: RunnableConfig, runtime: Any = None
    ) -> dict[str, list[JudgeResult | JudgeInputError]]:
        items = _get(state, items_key)
        limit = (config or {}).get("max_concurrency") or default_concurrency
        results = await judge.ajudge_many(items, max_concurrency=limit, context=_context(runtime, config))
        return {output_key: results}

    batch_judge_node.__name__ = f"{judge.name}_batch_node"
    return graph_node(batch_judge_node, judge=judge)
