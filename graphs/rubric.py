"""Rubric graph: one branch per criterion (``Send``), then a weighted
aggregate with each criterion's rationale kept.

Input keys: ``instruction``, ``response``, optionally ``reference`` and
``criteria`` (a list of :class:`~judgegraph.Criterion`; the factory's
``criteria`` are used when absent). Output key: ``verdict`` (a RubricResult).
The judge is a pointwise judge: each branch hands it the response with
that criterion's rubric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Required

from langgraph.cache.base import BaseCache
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import CachePolicy, Checkpointer, Send
from typing_extensions import TypedDict

from judgegraph.judges import JudgeInputError, coerce_input, graph_node
from judgegraph.rules import aggregate_rubric, combine_provenance, validate_criteria
from judgegraph.types import Criterion, PointwiseInput, PointwiseScore, RubricResult, worst_status

from ._context import CONTEXT_JUDGE, JudgeContext, JudgeSpec, check_spec, emit, lookup_judge
from ._reducers import merge_or_reset

__all__ = ["RubricGraphInput", "RubricGraphOutput", "RubricState", "create_rubric_graph"]


class RubricGraphInput(TypedDict, total=False):
    instruction: Required[str]
    response: Required[str]
    reference: str | None
    criteria: list[Criterion]


class RubricGraphOutput(TypedDict):
    verdict: RubricResult


class RubricState(RubricGraphInput, total=False):
    item: PointwiseInput
    judged_criteria: list[Criterion]
    scores: Annotated[dict[str, PointwiseScore], merge_or_reset]
    verdict: RubricResult


class _CriterionTask(TypedDict):
    item: PointwiseInput
    criterion: Criterion


def create_rubric_graph(
    *,
    judge: JudgeSpec = CONTEXT_JUDGE,
    criteria: Sequence[Criterion] | None = None,
    context_schema: type[Any] = JudgeContext,
    checkpointer: Checkpointer = None,
    cache: BaseCache[Any] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    name: str = "rubric",
) -> CompiledStateGraph[RubricState, Any, RubricGraphInput, RubricGraphOutput]:
    """A compiled rubric graph. ``judge`` (``from_context(key)`` or a judge object)
    must return a PointwiseScore; ``criteria`` are the default criteria.

    Any: ``context_schema`` is the caller's own context type (the compiled graph's context
    parameter follows it), and LangGraph's ``BaseCache`` and ``CachePolicy`` are generic in
    types it leaves to the caller, so only ``Any`` accepts every one.
    """
    check_spec(judge, graph="rubric")
    default = validate_criteria(criteria) if criteria is not None else None

    async def prepare(state: RubricState, runtime: Runtime[Any]) -> dict[str, Any]:
        fields = {k: state.get(k) for k in ("instruction", "response", "reference") if state.get(k) is not None}
        item = coerce_input(PointwiseInput, fields)
        given = state.get("criteria")
        if given is None and default is None:
            raise JudgeInputError("criteria: none in the input and none given to create_rubric_graph")
        judged = validate_criteria(given) if given is not None else default
        lookup_judge(judge, runtime.context, graph="rubric")
        return {"item": item, "judged_criteria": judged, "scores": None}

    def fan_out(state: RubricState) -> list[Send]:
        item = state["item"]
        return [Send("judge_criterion", _CriterionTask(item=item, criterion=c)) for c in state["judged_criteria"]]

    async def criterion(task: _CriterionTask, runtime: Runtime[Any]) -> dict[str, Any]:
        c = task["criterion"]
        found = lookup_judge(judge, runtime.context, graph="rubric")
        score = await found.ajudge(task["item"].model_copy(update={"rubric": c.rubric}), context=runtime.context)
        if not isinstance(score, PointwiseScore):
            raise TypeError(f"rubric graph: the judge returned a {type(score).__name__}, not a PointwiseScore")
        emit(runtime, {"graph": name, "criterion": c.name, "verdict": score})
        return {"scores": {c.name: score}}

    async def aggregate(state: RubricState, runtime: Runtime[Any]) -> dict[str, Any]:
        judged = state["judged_criteria"]
        scores = {c.name: state["scores"][c.name] for c in judged}
        status = worst_status([s.status for s in scores.values()])
        prov = combine_provenance([s.provenance for s in scores.values()], status=status, timing="concurrent")
        verdict = aggregate_rubric(judged, scores, provenance=prov)
        emit(runtime, {"graph": name, "verdict": verdict})
        return {"verdict": verdict}

    builder = StateGraph(
        RubricState, context_schema=context_schema, input_schema=RubricGraphInput, output_schema=RubricGraphOutput
    )
    builder.add_node("prepare", graph_node(prepare))
    # The ignore: langgraph's stubs reject any TypedDict input_schema; it works at run time.
    builder.add_node(
        "judge_criterion",
        graph_node(criterion, judge=judge, cache_policy=cache_policy),
        input_schema=_CriterionTask,
        cache_policy=cache_policy,
    )  # type: ignore[arg-type]
    builder.add_node("aggregate", graph_node(aggregate))
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", fan_out, ["judge_criterion"])
    builder.add_edge("judge_criterion", "aggregate")
    builder.add_edge("aggregate", END)
    return builder.compile(checkpointer=checkpointer, cache=cache, name=name)
