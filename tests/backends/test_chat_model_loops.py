"""One LangChain chat-model judge called sync and async, in either order and
from inside a running loop (a notebook's pattern), against a loopback server:
as with OpenAIBackend, every call gets a verdict."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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


def test_close_closes_only_the_clients_the_backend_built() -> None:
    with LoopbackServer(lambda req: GOOD) as server:
        url = server.url + "/v1"
        backend = ChatModelBackend(langchain_openai.ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", base_url=url))
        judge = PointwiseJudge(backend)
        assert judge.judge(ITEM).ok and asyncio.run(judge.ajudge(ITEM)).ok
        sync = backend._sync
        built: list[Any] = [sync.model.root_client] if sync else []
        built += [b.model.root_async_client for b in backend._per_loop._items.values()]
        backend.close()
        assert judge.judge(ITEM).ok  # and it builds new ones if used again
        # LangChain shares its default HTTP pools among models of one base URL:
        # another model there still has them open and works. (Its async pool is
        # not called here: that pool is LangChain's, shared with every earlier
        # test whose server had this port, and may be bound to a dead loop.)
        other = langchain_openai.ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", base_url=url)
        assert other.invoke("hi").content
        assert not other.root_client._client.is_closed and not other.root_async_client._client.is_closed
    assert len(built) == 2 and all(c.is_closed() for c in built)


OPS = ("sync", "asyncio_run", "invoke", "many", "new_judge_same_url", "close_and_new")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.sampled_from(OPS), min_size=2, max_size=6))
def test_any_sequence_of_sync_and_fresh_loop_calls_gets_verdicts(ops: list[str]) -> None:
    """Every mix of sync calls, calls on a fresh loop each (asyncio.run), new
    judges on the same URL (LangChain shares HTTP pools per URL) and closed
    judges: every call gets a verdict. Plain ChatOpenAI fails the second
    asyncio.run on one URL with "Event loop is closed"."""
    with LoopbackServer(lambda req: GOOD, latency_s=LATER) as server:
        judge = chat_judge(server)
        results: list[Any] = []
        for op in ops:
            if op == "sync":
                results.append(judge.judge(ITEM))
            elif op == "asyncio_run":
                results.append(asyncio.run(judge.ajudge(ITEM)))
            elif op == "invoke":
                results.append(judge.invoke(ITEM))
            elif op == "many":
                results.extend(judge.judge_many([ITEM] * 2, max_concurrency=2))
            elif op == "new_judge_same_url":
                judge = chat_judge(server)
                results.append(asyncio.run(judge.ajudge(ITEM)))
            else:
                assert isinstance(judge.backend, ChatModelBackend)
                judge.backend.close()
                results.append(judge.judge(ITEM))
                judge = chat_judge(server)
                results.append(asyncio.run(judge.ajudge(ITEM)))
        assert statuses(*results) == [(Status.OK, None)] * len(results), ops
