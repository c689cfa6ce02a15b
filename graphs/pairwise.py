"""Pairwise graph: both answer orders fanned out with ``Send``, then merged
under the swap policy.

Input keys: ``instruction``, ``response_a``, ``response_b`` and optionally
``reference`` and ``rubric``. Output key: ``verdict`` (a PairwiseVerdict).

With a :class:`~judgegraph.PairwiseJudge` each branch makes exactly one
model call through the judge's own prompt, parser and merge rules. Any other
judge (an ensemble, a cascade) is called once per order on the swapped
input and its verdict mapped back; give it members that judge one order, or
pass ``swap=SwapPolicy(mode="single")`` to leave position bias to it.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Annotated, Any, Required

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Checkpointer, Send
from typing_extensions import TypedDict

from judgegraph._judge import coerce_input, worst
from judgegraph._pairwise import SWAPPED_WINNER, PairwiseJudge
from judgegraph.types import PairwiseInput, PairwiseVerdict, Rubric, Status, SwapPolicy

from ._context import JudgeContext, JudgeSpec, emit, lookup_judge
from ._provenance import merge_provenance
from ._reducers import merge_or_reset

__all__ = ["PairwiseGraphInput", "PairwiseGraphOutput", "PairwiseState", "create_pairwise_graph"]

_LABELS = ("A/B", "B/A")


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


@lru_cache(maxsize=8)
def _combiner(policy: SwapPolicy) -> PairwiseJudge:
    # PairwiseJudge owns the merge rules; a bare instance per policy lets a
    # non-PairwiseJudge judge's two verdicts be merged by the same code.
    return PairwiseJudge("unused", swap=policy)


def _flip(v: PairwiseVerdict) -> PairwiseVerdict:
    """A verdict on the swapped pair, stated for the original order."""
    if v.winner is None:
        return v
    dist = {SWAPPED_WINNER.get(k, k): p for k, p in v.distribution.items()} if v.distribution else None
    return v.model_copy(
        update={"winner": SWAPPED_WINNER[v.winner], "score_a": v.score_b, "score_b": v.score_a, "distribution": dist}
    )


async def _judge_order(judge: Any, item: PairwiseInput, *, swapped: bool, context: Any) -> PairwiseVerdict:
    if isinstance(judge, PairwiseJudge):
        backend = judge.resolve_backend(None, context)
        started = time.perf_counter()
        outcome = await judge._call(backend, judge._fields(item), judge.scale)
        verdict = judge._order_verdict(outcome, swapped=swapped)
        prov = judge._provenance(backend, [outcome], verdict.status, time.perf_counter() - started)
        return verdict.model_copy(update={"provenance": prov})
    result = await judge.ajudge(item, context=context)
    if not isinstance(result, PairwiseVerdict):
        raise TypeError(f"pairwise graph: the judge returned a {type(result).__name__}, not a PairwiseVerdict")
    return _flip(result) if swapped else result


def create_pairwise_graph(
    *,
    judge: JudgeSpec = "judge",
    swap: SwapPolicy | None = None,
    context_schema: type[Any] = JudgeContext,
    checkpointer: Checkpointer = None,
    name: str = "pairwise",
) -> CompiledStateGraph[PairwiseState, Any, PairwiseGraphInput, PairwiseGraphOutput]:
    """A compiled pairwise graph.

    ``judge`` is a key in the runtime context (default ``"judge"``) or a
    judge object. ``swap`` overrides the judge's own SwapPolicy (a
    PairwiseJudge's policy is used when not given).
    """

    async def prepare(state: PairwiseState, runtime: Runtime[Any]) -> dict[str, Any]:
        fields = {k: state.get(k) for k in PairwiseInput.model_fields if state.get(k) is not None}
        pair = coerce_input(PairwiseInput, fields)
        found = lookup_judge(judge, runtime.context, graph="pairwise")
        policy = swap or (found.swap if isinstance(found, PairwiseJudge) else SwapPolicy())
        return {"pair": pair, "swap": policy, "orders": None}

    def fan_out(state: PairwiseState) -> list[Send]:
        n = 2 if state["swap"].mode == "both" else 1
        return [Send("judge_order", _OrderTask(pair=state["pair"], swapped=i == 1)) for i in range(n)]

    async def order(task: _OrderTask, runtime: Runtime[Any]) -> dict[str, Any]:
        found = lookup_judge(judge, runtime.context, graph="pairwise")
        item = task["pair"].swapped() if task["swapped"] else task["pair"]
        verdict = await _judge_order(found, item, swapped=task["swapped"], context=runtime.context)
        label = _LABELS[task["swapped"]]
        emit(runtime, {"graph": name, "order": label, "verdict": verdict})
        return {"orders": {label: verdict}}

    async def aggregate(state: PairwiseState, runtime: Runtime[Any]) -> dict[str, Any]:
        present = [(label, state["orders"][label]) for label in _LABELS if label in state["orders"]]
        verdicts = [v for _, v in present]
        status = worst([v.status for v in verdicts])
        prov = merge_provenance([v.provenance for v in verdicts], status=status)
        if status is not Status.OK:
            label, bad = next((lbl, v) for lbl, v in present if v.status is not Status.OK)
            verdict = PairwiseVerdict(
                status=status,
                reason=f"order {label}: {bad.reason}",
                raw_text=bad.raw_text,
                orders=tuple(verdicts) if len(verdicts) > 1 else (),
                provenance=prov,
            )
        elif len(verdicts) == 1:
            verdict = verdicts[0]
        else:
            verdict = _combiner(state["swap"])._combine(verdicts[0], verdicts[1])
            verdict = verdict.model_copy(update={"provenance": prov})
        emit(runtime, {"graph": name, "verdict": verdict})
        return {"verdict": verdict}

    builder = StateGraph(
        PairwiseState, context_schema=context_schema, input_schema=PairwiseGraphInput, output_schema=PairwiseGraphOutput
    )
    builder.add_node("prepare", prepare)
    # The ignore: langgraph's stubs reject any TypedDict input_schema; it works at run time.
    builder.add_node("judge_order", order, input_schema=_OrderTask)  # type: ignore[arg-type]
    builder.add_node("aggregate", aggregate)
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", fan_out, ["judge_order"])
    builder.add_edge("judge_order", "aggregate")
    builder.add_edge("aggregate", END)
    return builder.compile(checkpointer=checkpointer, name=name)
