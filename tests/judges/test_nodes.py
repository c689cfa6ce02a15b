"""Judges inside a user's LangGraph graph, and as LangChain Runnables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from _waiting import await_until
from langchain_core.callbacks import AsyncCallbackHandler
from langgraph.graph import END, START, StateGraph

from judgegraph import (
    JudgeInputError,
    PairwiseJudge,
    PointwiseJudge,
    PointwiseScore,
    ScriptedBackend,
    SwapPolicy,
    create_judge_node,
)
from judgegraph.backends import GenerateRequest
from judgegraph.judges import create_batch_judge_node


class AppState(TypedDict, total=False):
    question: str
    answer: str
    verdict: PointwiseScore


@dataclass
class Ctx:
    backend: Any


def app_graph(judge: PointwiseJudge) -> Any:
    """A user's app: produce an answer, then judge it."""

    async def answer(state: AppState) -> dict[str, str]:
        return {"answer": f"The answer to {state['question']!r} is 42."}

    g: StateGraph[AppState, Ctx, AppState, AppState] = StateGraph(AppState, context_schema=Ctx)
    g.add_node("answer", answer)
    g.add_node("judge", create_judge_node(judge, inputs={"instruction": "question", "response": "answer"}))
    g.add_edge(START, "answer")
    g.add_edge("answer", "judge")
    g.add_edge("judge", END)
    return g.compile()


async def test_ainvoke_takes_backend_from_runtime_context() -> None:
    backend = ScriptedBackend(lambda req: "Plausible. [RESULT] 4")
    graph = app_graph(PointwiseJudge())  # no backend on the judge: it comes from context
    out = await graph.ainvoke({"question": "life"}, context=Ctx(backend=backend))
    assert out["verdict"].score == 4
    prompt = backend.calls[0].messages[-1].content
    assert "The answer to 'life' is 42." in prompt


async def test_astream_updates_and_custom() -> None:
    backend = ScriptedBackend(lambda req: "[RESULT] 5")
    graph = app_graph(PointwiseJudge())
    seen: list[tuple[str, Any]] = []
    async for mode, chunk in graph.astream(
        {"question": "q"}, context=Ctx(backend=backend), stream_mode=["updates", "custom"]
    ):
        seen.append((mode, chunk))
    custom = [c for m, c in seen if m == "custom"]
    assert len(custom) == 1 and custom[0]["verdict"].score == 5 and custom[0]["judge"] == "PointwiseJudge"
    updates = [c for m, c in seen if m == "updates"]
    assert [next(iter(u)) for u in updates] == ["answer", "judge"]


async def test_missing_context_and_missing_state_key_are_clear() -> None:
    graph = app_graph(PointwiseJudge())
    with pytest.raises(LookupError, match="none under 'backend' in the runtime context"):
        await graph.ainvoke({"question": "q"}, context=Ctx(backend=None))

    g: StateGraph[AppState, Ctx, AppState, AppState] = StateGraph(AppState, context_schema=Ctx)
    g.add_node("judge", create_judge_node(PointwiseJudge(), inputs={"instruction": "question", "response": "answer"}))
    g.add_edge(START, "judge")
    with pytest.raises(JudgeInputError, match="state has no key 'answer'"):
        await g.compile().ainvoke({"question": "q"}, context=Ctx(backend=ScriptedBackend(["[RESULT] 1"])))


class _Recorder(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.starts: list[tuple[str | None, list[str]]] = []

    async def on_chain_start(self, serialized: Any, inputs: Any, *, tags: list[str] | None = None, **kw: Any) -> None:
        self.starts.append((kw.get("name"), tags or []))


async def test_judge_is_a_runnable_with_callbacks_and_tags() -> None:
    backend = ScriptedBackend(lambda req: "[SCORES] 7 3")
    judge = PairwiseJudge(backend, name="helpfulness", swap=SwapPolicy(mode="single"))
    rec = _Recorder()
    v = await judge.ainvoke(
        {"instruction": "q", "response_a": "a", "response_b": "b"},
        config={"callbacks": [rec], "tags": ["eval"], "run_name": "pairwise"},
    )
    assert v.winner == "A"
    assert ("pairwise", ["eval"]) in rec.starts
    # Sync invoke works too, and results convert to the evaluator shape.
    v2 = judge.invoke({"instruction": "q", "response_a": "a", "response_b": "b"})
    out = v2.to_evaluator_result()
    assert (out["key"], out["score"], out["comment"]) == ("preference", 1.0, None)
    assert out["metadata"] is not None and out["metadata"]["winner"] == "A"


class BatchState(TypedDict, total=False):
    items: list[dict[str, str]]
    results: list[Any]


@pytest.mark.timing  # counts requests in flight together
async def test_batch_node_honours_max_concurrency_and_order() -> None:
    active = 0
    peak = 0
    calls = 0

    class Counting(ScriptedBackend):
        async def generate(self, request: GenerateRequest) -> Any:
            nonlocal active, peak, calls
            calls += 1
            active += 1
            peak = max(peak, active)
            # Held until three are in flight together (or all 19 valid items were sent):
            # the peak is then the cap exactly, whatever the machine's speed.
            # (The peak, not the count now: it never falls back once reached.)
            await await_until(lambda: peak >= 3 or calls == 19, "three requests in flight")
            active -= 1
            return await super().generate(request)

    def reply(req: GenerateRequest) -> str:
        n = req.messages[-1].content.split("item-")[1].split("\n")[0]
        return f"[RESULT] {int(n) % 5 + 1}"

    g: StateGraph[BatchState, dict[str, Any], BatchState, BatchState] = StateGraph(BatchState, context_schema=dict)
    g.add_node("judge_all", create_batch_judge_node(PointwiseJudge()))
    g.add_edge(START, "judge_all")
    items = [{"instruction": "q", "response": f"item-{i}"} for i in range(20)]
    items[7] = {"instruction": "q"}  # malformed: reported in place, others still judged
    out = await g.compile().ainvoke(
        {"items": items}, context={"backend": Counting(reply)}, config={"max_concurrency": 3}
    )
    results = out["results"]
    assert peak == 3
    assert isinstance(results[7], JudgeInputError) and "item 7" in str(results[7])
    assert [r.score for i, r in enumerate(results) if i != 7] == [i % 5 + 1 for i in range(20) if i != 7]
