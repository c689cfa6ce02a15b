"""LangGraph's node cache answers a judge node only with its own judge's
verdicts (issue 24: one verdict identity, whatever caches it).

LangGraph keys a node's cache by the node function's name and its input
alone; a judge node carries its judge's verdict identity in that name, and a
node whose judge comes from the run's context (which the key cannot see)
refuses a cache policy. Real loopback servers, each answering its own score.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.cache.memory import InMemoryCache
from langgraph.graph import END, START, StateGraph
from langgraph.types import CachePolicy

from judgegraph import OpenAIBackend, PointwiseJudge
from judgegraph.graphs import create_pointwise_graph
from judgegraph.judges import create_judge_node, from_context, node_identity
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import PointwiseScore

# Loopback servers: a test of its own xdist group, marked like the other server tests.
pytestmark = pytest.mark.timing

ITEM = {"instruction": "What is 2+2?", "response": "4"}
SCORES = (3, 4, 5)


def _answers(score: int) -> Any:
    def respond(req: LoopbackRequest) -> Reply:
        del req
        return Reply(f"Judged. [RESULT] {score}")

    return respond


def _judge(server: LoopbackServer, model: str = "judge", **options: Any) -> PointwiseJudge:
    backend = OpenAIBackend(model, base_url=server.url + "/v1", api_key="x", structured_output=False)
    return PointwiseJudge(backend, **options)


@pytest.fixture(scope="module")
def servers() -> Iterator[list[LoopbackServer]]:
    started = [LoopbackServer(_answers(s)).start() for s in SCORES]
    try:
        yield started
    finally:
        for s in started:
            s.stop()


class _State(TypedDict, total=False):
    instruction: str
    response: str
    verdict: PointwiseScore


def _user_graph(judge: PointwiseJudge, cache: InMemoryCache) -> Any:
    """A user's own graph: create_judge_node added with a cache policy."""
    builder = StateGraph(_State)
    builder.add_node("judge", create_judge_node(judge), cache_policy=CachePolicy())
    builder.add_edge(START, "judge")
    builder.add_edge("judge", END)
    return builder.compile(cache=cache)


def _prebuilt_graph(judge: PointwiseJudge, cache: InMemoryCache) -> Any:
    return create_pointwise_graph(judge=judge, cache=cache, cache_policy=CachePolicy())


def _requests(server: LoopbackServer) -> int:
    return sum(server.calls.values())


async def test_two_judges_sharing_one_node_cache_each_get_their_own_verdict(servers: list[LoopbackServer]) -> None:
    cache = InMemoryCache()
    low, high = servers[0], servers[2]
    first = await _prebuilt_graph(_judge(low), cache).ainvoke(dict(ITEM))
    before = _requests(high)
    second = await _prebuilt_graph(_judge(high), cache).ainvoke(dict(ITEM))
    # Before the node carried its judge's identity, the second graph got the
    # first one's score 3 from the cache and the second server was never asked.
    assert (first["verdict"].score, second["verdict"].score) == (3, 5)
    assert _requests(high) == before + 1


@settings(max_examples=30)
@given(steps=st.lists(st.tuples(st.sampled_from(["prebuilt", "node"]), st.integers(0, len(SCORES) - 1)), max_size=8))
def test_a_shared_node_cache_serves_each_judge_only_its_own_verdicts(
    servers: list[LoopbackServer], steps: list[tuple[str, int]]
) -> None:
    cache = InMemoryCache()
    before = [_requests(s) for s in servers]
    for kind, index in steps:
        # A fresh judge and graph each step: the same configuration is the same identity.
        judge = _judge(servers[index])
        graph = _prebuilt_graph(judge, cache) if kind == "prebuilt" else _user_graph(judge, cache)
        verdict = graph.invoke(dict(ITEM))["verdict"]
        assert verdict.score == SCORES[index], (kind, index)
    # Each (graph kind, judge) pair asked its server once; every repeat was the cache's.
    for index, server in enumerate(servers):
        kinds = {kind for kind, i in steps if i == index}
        assert _requests(server) - before[index] == len(kinds)


def test_a_judge_from_the_run_context_refuses_a_node_cache(servers: list[LoopbackServer]) -> None:
    with pytest.raises(ValueError, match="cache_policy"):
        create_pointwise_graph(cache=InMemoryCache(), cache_policy=CachePolicy())  # the judge comes from context
    with pytest.raises(ValueError, match="cache_policy"):
        create_pointwise_graph(judge=PointwiseJudge(from_context("model")), cache_policy=CachePolicy())
    # Without a cache policy, both build: nothing is cached, so nothing can be wrong.
    create_pointwise_graph()
    assert node_identity(PointwiseJudge(from_context("model"))) is None
    assert node_identity(_judge(servers[0])) is not None


_OPTIONS = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["judge", "judge-2"]),
        "max_tokens": st.sampled_from([64, 512]),
        "top_logprobs": st.sampled_from([0, 10]),
        "repair": st.booleans(),
        "structured": st.sampled_from([None, False]),
        "server": st.integers(0, len(SCORES) - 1),
    }
)


@settings(max_examples=60)
@given(a=_OPTIONS, b=_OPTIONS)
def test_node_identity_changes_with_every_setting_that_can_change_a_verdict(
    servers: list[LoopbackServer], a: dict[str, Any], b: dict[str, Any]
) -> None:
    def build(opts: dict[str, Any]) -> PointwiseJudge:
        rest = {k: v for k, v in opts.items() if k not in ("model", "server")}
        return _judge(servers[opts["server"]], opts["model"], **rest)

    assert (node_identity(build(a)) == node_identity(build(b))) == (a == b)


def test_a_guardrail_refuses_a_node_cache_that_would_replay_an_outage(servers: list[LoopbackServer]) -> None:
    from judgegraph.graphs import create_guardrail_graph

    with pytest.raises(ValueError, match="cache_policy: a guardrail's decision"):
        create_guardrail_graph(fail_policy="closed", threshold=3, judge=_judge(servers[0]), cache_policy=CachePolicy())
    create_guardrail_graph(fail_policy="closed", threshold=3, judge=_judge(servers[0]))  # builds without one
