"""One LangChain chat-model judge called sync and async, in either order and
from inside a running loop (a notebook's pattern), against a loopback server:
as with OpenAIBackend, every call gets a verdict."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.graph import START, StateGraph

from judgegraph import PointwiseJudge, create_judge_node
from judgegraph.backends import ChatModelBackend
from judgegraph.testing import LoopbackServer, Reply
from judgegraph.types import Status

# Timing-sensitive (sync and async calls on two event loops): bench/stress_tests.py runs it on a busy core.
pytestmark = pytest.mark.timing

langchain_openai = pytest.importorskip("langchain_openai")
ITEM = {"instruction": "What is 2+2?", "response": "4."}
GOOD = Reply('{"feedback": "Right.", "score": 5}')
# The answer comes a moment later, so the client always waits on its socket:
# a socket left bound to another loop then fails every time, not by chance.
LATER = 0.05


def chat_judge(server: LoopbackServer) -> PointwiseJudge:
    model = langchain_openai.ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", base_url=server.url + "/v1")
    return PointwiseJudge(model)


def statuses(*results: Any) -> list[tuple[Status, str | None]]:
    return [(r.status, r.reason) for r in results]


def test_sync_then_async_on_one_chat_model_judge() -> None:
    with LoopbackServer(lambda req: GOOD, latency_s=LATER) as server:
        judge = chat_judge(server)
        first = judge.judge(ITEM)
        second = asyncio.run(judge.ajudge(ITEM))
        third = judge.judge(ITEM)
        assert server.calls["/v1/chat/completions"] == 3
    assert statuses(first, second, third) == [(Status.OK, None)] * 3


def test_async_then_sync_on_one_chat_model_judge() -> None:
    with LoopbackServer(lambda req: GOOD, latency_s=LATER) as server:
        judge = chat_judge(server)
        first = asyncio.run(judge.ajudge(ITEM))  # its loop is closed afterwards
        second = judge.judge(ITEM)
        many = judge.judge_many([ITEM] * 3, max_concurrency=3)
        assert server.calls["/v1/chat/completions"] == 5
    assert statuses(first, second, *many) == [(Status.OK, None)] * 5


async def test_sync_calls_inside_a_running_loop_mix_with_awaited_ones() -> None:
    with LoopbackServer(lambda req: GOOD, latency_s=LATER) as server:
        judge = chat_judge(server)
        results = [judge.judge(ITEM), await judge.ajudge(ITEM), judge.invoke(ITEM), await judge.ajudge(ITEM)]
        assert statuses(*results) == [(Status.OK, None)] * 4
        # And in a graph, sync then async.
        builder: StateGraph[dict[str, Any], None, dict[str, Any], dict[str, Any]] = StateGraph(dict)
        builder.add_node("grade", create_judge_node(judge))
        builder.add_edge(START, "grade")
        graph = builder.compile()
        verdicts = [graph.invoke(dict(ITEM))["verdict"], (await graph.ainvoke(dict(ITEM)))["verdict"]]
        assert statuses(*verdicts) == [(Status.OK, None)] * 2
        assert server.calls["/v1/chat/completions"] == 6


def test_close_closes_the_client_sync_calls_used() -> None:
    with LoopbackServer(lambda req: GOOD) as server:
        model = langchain_openai.ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", base_url=server.url + "/v1")
        backend = ChatModelBackend(model)
        assert PointwiseJudge(backend).judge(ITEM).ok
        backend.close()
    clients = [backend.chat_model.root_client, backend.chat_model.root_async_client]  # type: ignore[attr-defined]
    assert [c.is_closed() for c in clients] == [True, True]
