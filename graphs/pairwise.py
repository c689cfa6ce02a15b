"""Pairwise graph: both answer orders fanned out with ``Send``, then merged
under the swap policy.

Input keys: ``instruction``, ``response_a``, ``response_b`` and optionally
``reference`` and ``rubric``. Output key: ``verdict`` (a PairwiseVerdict).

Each branch asks the judge for one order (``ajudge_order``, part of the
judge contract): a :class:`~judgegraph.PairwiseJudge` makes exactly one model
call through its own prompt, parser and merge rules, and its declared
``order_policy`` (its ``swap``) is the default policy. Any other judge (an ensemble, a cascade) is
called once per order on the swapped input and its verdict mapped back; give it members that judge one order, or
pass ``swap=SwapPolicy(mode="single")`` to leave position bias to it.
"""

from __future__ import annotations

from typing import Annotated, Any, Required

from langgraph.cache.base import BaseCache
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import CachePolicy, Checkpointer, Send
from typing_extensions import TypedDict

from judgegraph.judges import coerce_input, graph_node
from judgegraph.rules import ORDER_LABELS, combine_orders, combine_provenance
from judgegraph.types import PairwiseInput, PairwiseVerdict, Rubric, SwapPolicy, worst_status

from ._context import CONTEXT_JUDGE, JudgeContext, JudgeSpec, check_spec, emit, lookup_judge
from ._reducers import merge_or_reset

__all__ = ["PairwiseGraphInput", "PairwiseGraphOutput", "PairwiseState", "create_pairwise_graph"]


class PairwiseGraphInput(TypedDict, total=False):
    instruction: Required[str]
    response_a: Required[str]
    response_b: Required[str]
    reference: str | None
    rubric: Rubric | None


class PairwiseGraphOutput(TypedDict):
    verdict: PairwiseVerdict


class PairwiseState(PairwiseGraphInput, total=False):
    pair: PairwiseInput
    swap: SwapPolicy
    orders: Annotated[dict[str, PairwiseVerdict], merge_or_reset]
    verdict: PairwiseVerdict


class _OrderTask(TypedDict):
    pair: PairwiseInput
    swapped: bool


def create_pairwise_graph(
    *,
    judge: JudgeSpec = CONTEXT_JUDGE,
    swap: SwapPolicy | None = None,
    context_schema: type[Any] = JudgeContext,
    checkpointer: Checkpointer = None,
    cache: BaseCache[Any] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    name: str = "pairwise",
) -> CompiledStateGraph[PairwiseState, Any, PairwiseGraphInput, PairwiseGraphOutput]:
    """A compiled pairwise graph.

    ``judge`` is ``from_context(key)`` (default ``from_context("judge")``) or a
    judge object. ``swap`` overrides the judge's own SwapPolicy (a
    PairwiseJudge's policy is used when not given).

    Any: ``context_schema`` is the caller's own context type (the compiled graph's context
    parameter follows it), and LangGraph's ``BaseCache`` and ``CachePolicy`` are generic in
    types it leaves to the caller, so only ``Any`` accepts every one.
    """
    check_spec(judge, graph="pairwise")

    async def prepare(state: PairwiseState, runtime: Runtime[Any]) -> dict[str, Any]:
        fields = {k: state.get(k) for k in PairwiseInput.model_fields if state.get(k) is not None}
        pair = coerce_input(PairwiseInput, fields)
        found = lookup_judge(judge, runtime.context, graph="pairwise")
        policy = swap or found.order_policy or SwapPolicy()
        return {"pair": pair, "swap": policy, "orders": None}

    def fan_out(state: PairwiseState) -> list[Send]:
        n = 2 if state["swap"].mode == "both" else 1
        return [Send("judge_order", _OrderTask(pair=state["pair"], swapped=i == 1)) for i in range(n)]

    async def order(task: _OrderTask, runtime: Runtime[Any]) -> dict[str, Any]:
        found = lookup_judge(judge, runtime.context, graph="pairwise")
        verdict = await found.ajudge_order(task["pair"], swapped=task["swapped"], context=runtime.context)
        label = ORDER_LABELS[task["swapped"]]
        emit(runtime, {"graph": name, "order": label, "verdict": verdict})
        return {"orders": {label: verdict}}

    async def aggregate(state: PairwiseState, runtime: Runtime[Any]) -> dict[str, Any]:
        verdicts = [state["orders"][label] for label in ORDER_LABELS if label in state["orders"]]
        status = worst_status([v.status for v in verdicts])
        prov = combine_provenance([v.provenance for v in verdicts], status=status, timing="concurrent")
        verdict = combine_orders(verdicts, policy=state["swap"], provenance=prov)
        emit(runtime, {"graph": name, "verdict": verdict})
        return {"verdict": verdict}

    builder = StateGraph(
        PairwiseState, context_schema=context_schema, input_schema=PairwiseGraphInput, output_schema=PairwiseGraphOutput
    )
    builder.add_node("prepare", graph_node(prepare))
    # The ignore: langgraph's stubs reject any TypedDict input_schema; it works at run time.
    builder.add_node(
        "judge_order",
        graph_node(order, judge=judge, cache_policy=cache_policy),
        input_schema=_OrderTask,
        cache_policy=cache_policy,
    )  # type: ignore[arg-type]
    builder.add_node("aggregate", graph_node(aggregate))
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", fan_out, ["judge_order"])
    builder.add_edge("judge_order", "aggregate")
    builder.add_edge("aggregate", END)
    return builder.compile(checkpointer=checkpointer, cache=cache, name=name)
