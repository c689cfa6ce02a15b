"""The judge-call cache: counted on real loopback servers."""

from __future__ import annotations

from pathlib import Path

from judgegraph import OpenAIBackend, PointwiseJudge, Status
from judgegraph.backends import CachedBackend, MemoryCache, SqliteCache, TGIBackend
from judgegraph.judges import get_template
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

ITEM = {"instruction": "What is 2+2?", "response": "4"}


def _grade(req: LoopbackRequest) -> Reply:
    return Reply("Right. [RESULT] 5", token_probs={"5": 0.8, "4": 0.2})


def _openai(server: LoopbackServer) -> OpenAIBackend:
    return OpenAIBackend("judge", base_url=server.url + "/v1", api_key="x", structured_output=False)


def _requests(server: LoopbackServer) -> int:
    return sum(server.calls.values())


async def test_identical_calls_make_one_request() -> None:
    with LoopbackServer(_grade) as server:
        judge = PointwiseJudge(CachedBackend(_openai(server), MemoryCache()))
        first = await judge.ajudge(ITEM)
        again = [await judge.ajudge(ITEM) for _ in range(5)]
        assert _requests(server) == 1
        # Concurrent twins of a new call share one request too.
        other = {"instruction": "What is 3+3?", "response": "6"}
        many = await judge.ajudge_many([other] * 6)
        assert _requests(server) == 2
    assert first.provenance is not None and first.provenance.usage.cache_misses == 1
    assert first.provenance.usage.cache_hits == 0 and first.provenance.usage.completion_tokens > 0
    for v in again:
        assert v.status is Status.OK and v.score == first.score and v.distribution == first.distribution
        assert v.provenance is not None and v.provenance.usage.cache_hits == 1
        assert v.provenance.usage.completion_tokens == 0  # a hit spends nothing
    usages = [v.provenance.usage for v in many if not isinstance(v, Exception) and v.provenance]
    assert sum(u.cache_misses for u in usages) == 1 and sum(u.cache_hits for u in usages) == 5


async def test_a_different_server_model_parameter_or_template_version_misses() -> None:
    cache = MemoryCache()
    with LoopbackServer(_grade) as one, LoopbackServer(_grade) as two:
        await PointwiseJudge(CachedBackend(_openai(one), cache)).ajudge(ITEM)
        await PointwiseJudge(CachedBackend(_openai(two), cache)).ajudge(ITEM)  # same prompt, other server
        assert (_requests(one), _requests(two)) == (1, 1)
        other_model = OpenAIBackend("judge-2", base_url=one.url + "/v1", api_key="x", structured_output=False)
        await PointwiseJudge(CachedBackend(other_model, cache)).ajudge(ITEM)
        await PointwiseJudge(CachedBackend(_openai(one), cache), max_tokens=64).ajudge(ITEM)
        assert _requests(one) == 3
        # Same text, new version: it may parse differently, so it must not reuse the old verdict.
        v1 = get_template("pointwise-rubric", 1)
        v2 = v1.model_copy(update={"version": 99})  # passed directly: the global registry stays as it was
        await PointwiseJudge(CachedBackend(_openai(one), cache), template=v2).ajudge(ITEM)
        assert _requests(one) == 4
        # And the original setup still hits.
        await PointwiseJudge(CachedBackend(_openai(one), cache)).ajudge(ITEM)
        assert _requests(one) == 4
    assert len(cache) == 5


async def test_tgi_backend_is_keyed_by_its_url(tmp_path: Path) -> None:
    with LoopbackServer(_grade) as server:
        cache = SqliteCache(tmp_path / "calls.sqlite")
        backend = CachedBackend(TGIBackend(server.url, structured_output=False), cache)
        assert backend.server == server.url
        await PointwiseJudge(backend).ajudge(ITEM)
        cache.close()
        # A new process-like start: a fresh SQLite handle on the same file still hits.
        reopened = CachedBackend(
            TGIBackend(server.url, structured_output=False), SqliteCache(tmp_path / "calls.sqlite")
        )
        v = await PointwiseJudge(reopened).ajudge(ITEM)
        assert _requests(server) == 1
    assert v.status is Status.OK and v.score == 5
    assert v.provenance is not None and v.provenance.usage.cache_hits == 1


async def test_failures_are_not_cached() -> None:
    with LoopbackServer(lambda req: Fault("status", status=400)) as server:
        judge = PointwiseJudge(CachedBackend(_openai(server), MemoryCache()))
        a = await judge.ajudge(ITEM)
        b = await judge.ajudge(ITEM)
        assert a.status is b.status is Status.ERROR
        assert _requests(server) == 2


async def test_graph_factories_take_langgraph_cache() -> None:
    from langgraph.cache.memory import InMemoryCache
    from langgraph.types import CachePolicy

    from judgegraph.graphs import create_pairwise_graph, create_pointwise_graph

    def pair_grade(req: LoopbackRequest) -> Reply:
        return Reply("[SCORES] 8 3")

    with LoopbackServer(_grade) as server, LoopbackServer(pair_grade) as pair_server:
        # The judge is the graph's own: a judge from the run's context refuses a
        # node cache (tests/graphs/test_node_cache_identity.py).
        graph = create_pointwise_graph(
            judge=PointwiseJudge(_openai(server)), cache=InMemoryCache(), cache_policy=CachePolicy()
        )
        out = [await graph.ainvoke(dict(ITEM)) for _ in range(3)]
        assert _requests(server) == 1
        from judgegraph import PairwiseJudge

        pg = create_pairwise_graph(
            judge=PairwiseJudge(_openai(pair_server)), cache=InMemoryCache(), cache_policy=CachePolicy()
        )
        pair = {"instruction": "q", "response_a": "good", "response_b": "bad"}
        verdicts = [(await pg.ainvoke(dict(pair)))["verdict"] for _ in range(2)]
        assert _requests(pair_server) == 2  # both orders once, then cached
    assert all(o["verdict"].score == 5 for o in out)
    assert verdicts[0].winner == verdicts[1].winner


def test_memory_cache_bound() -> None:
    from judgegraph.backends import GenerateResult

    cache = MemoryCache(max_entries=2)
    for k in "abc":
        cache.put(k, GenerateResult(text=k, model="m"))
    assert len(cache) == 2 and cache.get("a") is None and cache.get("c") is not None
