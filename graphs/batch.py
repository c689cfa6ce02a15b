"""Batch graph: a list of items judged side by side, one ``Send`` task each.

Input key: ``items`` (whatever the judge's ``ajudge`` takes: dicts or input
models). Output key: ``results``, in input order, one per item: the judge's
result, or an :class:`ItemError` for an item that could not be judged.

- Concurrency: ``max_concurrency`` at the top level of the run config caps
  how many items are judged at once (LangGraph's own task limit).
- Isolation: a malformed item or a judge that raises on one item yields an
  ItemError naming the item; the other items are unaffected. Model-side
  failures already come back from the judge as results with a status.
- Resume: each item is its own task, so with a checkpointer LangGraph saves
  each finished item as it completes. After an interruption, invoking again
  with ``None`` and the same ``thread_id`` judges only the unfinished items.
  Use :func:`judgegraph.graphs.checkpoint_serde` for the saver's serializer::

      async with aiosqlite.connect("runs.db") as conn:
          graph = create_batch_graph(checkpointer=AsyncSqliteSaver(conn, serde=checkpoint_serde()))
          config = {"max_concurrency": 16, "configurable": {"thread_id": "nightly"}}
          out = await graph.ainvoke({"items": items}, config, context=context)
          # after a crash: graph.ainvoke(None, config, context=context) finishes the rest
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langgraph.cache.base import BaseCache
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import CachePolicy, Checkpointer, Send
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from judgegraph.judges import JudgeInputError, graph_node
from judgegraph.types import Status

from ._context import CONTEXT_JUDGE, JudgeContext, JudgeSpec, check_spec, emit, lookup_judge
from ._reducers import merge_or_reset

__all__ = ["BatchGraphInput", "BatchGraphOutput", "BatchState", "ItemError", "create_batch_graph"]


class ItemError(BaseModel):
    """An item that produced no judge result, in its place in ``results``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    status: Status = Status.ERROR
    reason: str

    @property
    def ok(self) -> bool:
        return False


class BatchGraphInput(TypedDict):
    items: list[Any]


class BatchGraphOutput(TypedDict):
    results: list[Any]


class BatchState(TypedDict, total=False):
    items: list[Any]
    judged: Annotated[dict[int, Any], merge_or_reset]
    results: list[Any]


class _ItemTask(TypedDict):
    index: int
    item: Any


def create_batch_graph(
    *,
    judge: JudgeSpec = CONTEXT_JUDGE,
    context_schema: type[Any] = JudgeContext,
    checkpointer: Checkpointer = None,
    cache: BaseCache[Any] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    name: str = "batch",
) -> CompiledStateGraph[BatchState, Any, BatchGraphInput, BatchGraphOutput]:
    """A compiled batch graph; ``judge`` is ``from_context(key)`` or a judge object.

    Run it with ``config={"max_concurrency": 8, "configurable": {"thread_id": ...}}``.

    Any: ``context_schema`` is the caller's own context type (the compiled graph's context
    parameter follows it), and LangGraph's ``BaseCache`` and ``CachePolicy`` are generic in
    types it leaves to the caller, so only ``Any`` accepts every one.
    """
    check_spec(judge, graph="batch")

    async def plan(state: BatchState, runtime: Runtime[Any]) -> dict[str, Any]:
        items = state.get("items")
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise JudgeInputError(f"items: expected a list, got {type(items).__name__}")
        found = lookup_judge(judge, runtime.context, graph="batch")
        if found.needs_batch:
            # Budget-style cascade policies rank a whole batch; per-item tasks cannot honour them.
            raise ValueError(
                "batch graph: this judge ranks whole batches (a budget policy); "
                "run it with create_batch_judge_node instead"
            )
        return {"judged": None}

    def fan_out(state: BatchState) -> list[Send] | str:
        if not state["items"]:
            return "collect"
        return [Send("judge_item", _ItemTask(index=i, item=v)) for i, v in enumerate(state["items"])]

    async def judge_item(task: _ItemTask, runtime: Runtime[Any]) -> dict[str, Any]:
        i = task["index"]
        found = lookup_judge(judge, runtime.context, graph="batch")
        result: Any
        try:
            result = await found.ajudge(task["item"], context=runtime.context)
        except JudgeInputError as exc:
            result = ItemError(index=i, reason=f"item {i}: {exc}")
        except Exception as exc:  # one item's crash must not take the batch down
            if type(exc) is LookupError:
                raise  # a judge's "no backend in context": a set-up error every item would share
            result = ItemError(index=i, reason=f"item {i}: {type(exc).__name__}: {exc}")
        emit(runtime, {"graph": name, "index": i, "result": result})
        return {"judged": {i: result}}

    async def collect(state: BatchState) -> dict[str, Any]:
        judged = state.get("judged") or {}
        return {"results": [judged[i] for i in range(len(state["items"]))]}

    builder = StateGraph(
        BatchState, context_schema=context_schema, input_schema=BatchGraphInput, output_schema=BatchGraphOutput
    )
    builder.add_node("plan", graph_node(plan))
    # The ignore: langgraph's stubs reject any TypedDict input_schema; it works at run time.
    builder.add_node(
        "judge_item",
        graph_node(judge_item, judge=judge, cache_policy=cache_policy),
        input_schema=_ItemTask,
        cache_policy=cache_policy,
    )  # type: ignore[arg-type]
    builder.add_node("collect", graph_node(collect))
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", fan_out, ["judge_item", "collect"])
    builder.add_edge("judge_item", "collect")
    builder.add_edge("collect", END)
    return builder.compile(checkpointer=checkpointer, cache=cache, name=name)
