"""Judge nodes under ``graph.invoke`` as well as ``graph.ainvoke``, and a
MessagesState app's chat read by default."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph

from judgegraph import PointwiseJudge, PointwiseScore, ScriptedBackend, create_judge_node
from judgegraph.backends import GenerateRequest
from judgegraph.judges import create_batch_judge_node, graph_node


class AppState(TypedDict, total=False):
    question: str
    answer: str
    verdict: PointwiseScore


@dataclass
class Ctx:
    backend: Any


def app_graph(judge: PointwiseJudge) -> Any:
    """A user's app with a sync node of its own, then a judge node."""

    def answer(state: AppState) -> dict[str, str]:
        return {"answer": f"The answer to {state['question']!r} is 42."}

    g: StateGraph[AppState, Ctx, AppState, AppState] = StateGraph(AppState, context_schema=Ctx)
    g.add_node("answer", answer)
    g.add_node("judge", create_judge_node(judge, inputs={"instruction": "question", "response": "answer"}))
    g.add_edge(START, "answer")
    g.add_edge("answer", "judge")
    g.add_edge("judge", END)
    return g.compile()


def test_a_judge_node_graph_runs_under_invoke_with_its_runtime_context_and_stream() -> None:
    backend = ScriptedBackend(lambda req: "Plausible. [RESULT] 4")
    graph = app_graph(PointwiseJudge())  # the backend comes from the runtime context, injected by signature
    out = graph.invoke({"question": "life"}, context=Ctx(backend=backend))
    assert out["verdict"].score == 4
    assert "The answer to 'life' is 42." in backend.calls[0].messages[-1].content
    # The runtime's stream writer reaches the sync stream as well.
    custom = list(graph.stream({"question": "q"}, context=Ctx(backend=backend), stream_mode="custom"))
    assert len(custom) == 1 and custom[0]["verdict"].score == 4


async def test_the_same_graph_runs_under_ainvoke_and_invoke_inside_a_running_loop() -> None:
    backend = ScriptedBackend(lambda req: "[RESULT] 5")
    graph = app_graph(PointwiseJudge())
    assert (await graph.ainvoke({"question": "a"}, context=Ctx(backend=backend)))["verdict"].score == 5
    # A notebook cell: a sync invoke while the cell's loop runs.
    assert graph.invoke({"question": "b"}, context=Ctx(backend=backend))["verdict"].score == 5
    assert len(backend.calls) == 2


class BatchState(TypedDict, total=False):
    items: list[dict[str, str]]
    results: list[Any]


def test_a_batch_judge_node_runs_under_invoke_with_config() -> None:
    def reply(req: GenerateRequest) -> str:
        n = req.messages[-1].content.split("item-")[1].split("\n")[0]
        return f"[RESULT] {int(n) % 5 + 1}"

    g: StateGraph[BatchState, dict[str, Any], BatchState, BatchState] = StateGraph(BatchState, context_schema=dict)
    g.add_node("judge_all", create_batch_judge_node(PointwiseJudge()))
    g.add_edge(START, "judge_all")
    items = [{"instruction": "q", "response": f"item-{i}"} for i in range(6)]
    out = g.compile().invoke({"items": items}, {"max_concurrency": 2}, context={"backend": ScriptedBackend(reply)})
    assert [r.score for r in out["results"]] == [i % 5 + 1 for i in range(6)]


def test_judge_nodes_are_built_as_langgraph_builds_async_nodes() -> None:
    """Judge nodes extend the class add_node makes from an async function
    (imported once, in judges/_node.py, from LangGraph's private module):
    if LangGraph moves or replaces it, this fails by name."""

    async def plain(state: dict[str, Any]) -> dict[str, Any]:
        return {}

    g: StateGraph[dict[str, Any], None, dict[str, Any], dict[str, Any]] = StateGraph(dict)
    g.add_node("plain", plain)
    node = create_judge_node(PointwiseJudge())
    g.add_node("judge", node)
    built = g.nodes["plain"].runnable
    assert isinstance(node, type(built)), f"add_node now builds {type(built).__module__}.{type(built).__name__}"
    assert g.nodes["judge"].runnable is node  # kept as is: both paths of ours
    assert getattr(built, "func", "missing") is None and getattr(node, "func", None) is not None


async def test_graph_node_keeps_the_signature_and_is_still_the_async_function() -> None:
    async def grade(state: dict[str, Any], config: RunnableConfig, runtime: Any = None) -> dict[str, Any]:
        return {"seen": (state["x"], config is not None, runtime is not None)}

    node = graph_node(grade)
    assert await node({"x": 1}, {}) == {"seen": (1, True, False)}  # a direct call is grade's own
    g: StateGraph[dict[str, Any], None, dict[str, Any], dict[str, Any]] = StateGraph(dict)
    g.add_node("grade", node)
    g.add_edge(START, "grade")
    app = g.compile()
    # LangGraph injects config and runtime by grade's signature on both paths.
    assert app.invoke({"x": 2})["seen"] == (2, True, True)
    assert (await app.ainvoke({"x": 3}))["seen"] == (3, True, True)
    assert (await asyncio.to_thread(app.invoke, {"x": 4}))["seen"] == (4, True, True)
    with pytest.raises(TypeError, match="takes an async function"):
        graph_node(lambda state: {})


# ---------------------------------------------------------------- MessagesState

CHAT = [HumanMessage("What is 17 + 25?"), AIMessage("17 + 25 = 42.")]


def chat_app(judge: PointwiseJudge) -> Any:
    class State(MessagesState, total=False):
        instruction: str
        response: str
        verdict: PointwiseScore

    g: StateGraph[State, None, State, State] = StateGraph(State)
    g.add_node("judge", create_judge_node(judge))  # default inputs
    g.add_edge(START, "judge")
    return g.compile()


async def test_a_messages_state_node_reads_the_chat_by_default() -> None:
    backend = ScriptedBackend(lambda req: "Right sum. [RESULT] 5")
    app = chat_app(PointwiseJudge(backend, structured=False))
    out = await app.ainvoke({"messages": CHAT})
    assert out["verdict"].score == 5
    prompt = backend.calls[-1].messages[-1].content
    assert "17 + 25 = 42." in prompt and "What is 17 + 25?" in prompt
    assert app.invoke({"messages": CHAT})["verdict"].score == 5
    # An answer in the state's own fields wins over the chat, as in ajudge().
    await app.ainvoke({"messages": CHAT, "instruction": "What is 20 + 21?", "response": "It is 41."})
    prompt = backend.calls[-1].messages[-1].content
    assert "It is 41." in prompt and "17 + 25" not in prompt


async def test_the_chat_is_still_checked_by_name() -> None:
    from judgegraph import JudgeInputError

    app = chat_app(PointwiseJudge(ScriptedBackend(lambda req: "[RESULT] 5")))
    with pytest.raises(JudgeInputError, match="the last message is a user message"):
        await app.ainvoke({"messages": CHAT[:1]})
