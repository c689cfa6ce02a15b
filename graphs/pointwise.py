"""Pointwise graph: one response scored on an absolute scale.

Input keys: ``instruction``, ``response`` and optionally ``reference``
(reference-guided grading) and ``rubric`` (its levels set the scale).
``context`` (sources for templates such as ``groundedness``).
Output key: ``verdict`` (a PointwiseScore). Without a reference the judge
grades reference-free; without a rubric it uses the factory's ``rubric``,
or the judge's generic quality rubric on its own scale.
"""

from __future__ import annotations

from typing import Any, Required

from langgraph.cache.base import BaseCache
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import CachePolicy, Checkpointer
from typing_extensions import TypedDict

from judgegraph.judges import coerce_input, graph_node
from judgegraph.types import PointwiseInput, PointwiseScore, Rubric

from ._context import CONTEXT_JUDGE, JudgeContext, JudgeSpec, check_spec, emit, lookup_judge

__all__ = ["PointwiseGraphInput", "PointwiseGraphOutput", "PointwiseState", "create_pointwise_graph"]


class PointwiseGraphInput(TypedDict, total=False):
    instruction: Required[str]
    response: Required[str]
    reference: str | None
    rubric: Rubric | None
    context: str | None


class PointwiseGraphOutput(TypedDict):
    verdict: PointwiseScore


class PointwiseState(PointwiseGraphInput, total=False):
    verdict: PointwiseScore


def create_pointwise_graph(
    *,
    judge: JudgeSpec = CONTEXT_JUDGE,
    rubric: Rubric | None = None,
    context_schema: type[Any] = JudgeContext,
    checkpointer: Checkpointer = None,
    cache: BaseCache[Any] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    name: str = "pointwise",
) -> CompiledStateGraph[PointwiseState, Any, PointwiseGraphInput, PointwiseGraphOutput]:
    """A compiled one-node pointwise graph. ``judge`` is ``from_context(key)`` or a
    judge object; ``rubric`` is the default when the input has none.

    Any: ``context_schema`` is the caller's own context type (the compiled graph's context
    parameter follows it), and LangGraph's ``BaseCache`` and ``CachePolicy`` are generic in
    types it leaves to the caller, so only ``Any`` accepts every one.
    """
    check_spec(judge, graph="pointwise")

    async def score(state: PointwiseState, runtime: Runtime[Any]) -> dict[str, Any]:
        fields = {k: state.get(k) for k in PointwiseInput.model_fields if state.get(k) is not None}
        if rubric is not None:
            fields.setdefault("rubric", rubric)
        item = coerce_input(PointwiseInput, fields)
        found = lookup_judge(judge, runtime.context, graph="pointwise")
        verdict = await found.ajudge(item, context=runtime.context)
        emit(runtime, {"graph": name, "verdict": verdict})
        return {"verdict": verdict}

    builder = StateGraph(
        PointwiseState,
        context_schema=context_schema,
        input_schema=PointwiseGraphInput,
        output_schema=PointwiseGraphOutput,
    )
    builder.add_node("score", graph_node(score, judge=judge, cache_policy=cache_policy), cache_policy=cache_policy)
    builder.add_edge(START, "score")
    builder.add_edge("score", END)
    return builder.compile(checkpointer=checkpointer, cache=cache, name=name)
