"""One verdict identity (issue 24): the cache and the job store never hand a
verdict made under one configuration to another.

Each server here is a real loopback HTTP server on 127.0.0.1 that answers
with a score of its own, so a verdict shared by mistake shows as the other
server's score (and as a server that was never called).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judgegraph.backends import CachedBackend, ChatModelBackend, MemoryCache, OpenAIBackend
from judgegraph.jobs import SourceConfig, Store, arun_job
from judgegraph.judges import PointwiseJudge
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import Status

langchain_openai = pytest.importorskip("langchain_openai")

ITEM = {"instruction": "What is 2+2?", "response": "4."}


def _verdict(score: int) -> Callable[[LoopbackRequest], Reply]:
    # Structured (JSON) and free-text judges both read this.
    return lambda req: Reply(json.dumps({"feedback": "Fine.", "score": score}))


def _by_effort(req: LoopbackRequest) -> Reply:
    """A reasoning model that thinks harder scores differently."""
    effort = req.body.get("reasoning_effort") or (req.body.get("reasoning") or {}).get("effort")
    return Reply(json.dumps({"feedback": f"effort {effort}", "score": 5 if effort == "high" else 2}))


def _calls(server: LoopbackServer) -> int:
    return sum(server.calls.values())


def _chat_openai(server: LoopbackServer, model: str = "gpt-4o-mini", **options: Any) -> Any:
    return langchain_openai.ChatOpenAI(model=model, api_key="sk-test", base_url=server.url + "/v1", **options)


def _items(path: Path, n: int = 3) -> SourceConfig:
    path.write_text("".join(json.dumps({"instruction": f"q{i}", "response": f"a{i}"}) + "\n" for i in range(n)))
    return SourceConfig(path=str(path))


async def _job_scores(source: SourceConfig, backend: Any, store: Path) -> tuple[list[int], int]:
    """The scores a job over ``source`` stores with ``backend``, and how many items it judged now."""
    summary = await arun_job(source, judge=PointwiseJudge(backend), kind="pointwise", store=store)
    with Store(store) as st:
        rows = list(st.rows(summary.run_id))
    return [r.result["score"] for r in rows if r.result is not None], summary.judged


# ---------------------------------------------------------------- two servers, one model name


async def test_chat_models_on_two_servers_do_not_share_cached_verdicts() -> None:
    cache = MemoryCache()
    with LoopbackServer(_verdict(5)) as a, LoopbackServer(_verdict(2)) as b:
        first = await PointwiseJudge(CachedBackend(ChatModelBackend(_chat_openai(a)), cache)).ajudge(ITEM)
        second = await PointwiseJudge(CachedBackend(ChatModelBackend(_chat_openai(b)), cache)).ajudge(ITEM)
        assert (_calls(a), _calls(b)) == (1, 1)  # B was asked, not answered from A's entry
    assert first.status is second.status is Status.OK
    assert (first.score, second.score) == (5, 2)


async def test_chat_models_on_two_servers_do_not_share_job_verdicts(tmp_path: Path) -> None:
    source, store = _items(tmp_path / "items.jsonl"), tmp_path / "jobs.db"
    with LoopbackServer(_verdict(5)) as a, LoopbackServer(_verdict(2)) as b:
        scores_a, _ = await _job_scores(source, ChatModelBackend(_chat_openai(a)), store)
        scores_b, judged_b = await _job_scores(source, ChatModelBackend(_chat_openai(b)), store)
        assert _calls(b) == 3 and judged_b == 3
    assert scores_a == [5, 5, 5] and scores_b == [2, 2, 2]


# ---------------------------------------------------------------- reasoning effort


async def test_reasoning_effort_is_in_the_cache_key() -> None:
    cache = MemoryCache()
    with LoopbackServer(_by_effort) as server:

        def backend(effort: str) -> OpenAIBackend:
            return OpenAIBackend("o3-mini", base_url=server.url + "/v1", api_key="x", reasoning_effort=effort)

        low = await PointwiseJudge(CachedBackend(backend("low"), cache)).ajudge(ITEM)
        high = await PointwiseJudge(CachedBackend(backend("high"), cache)).ajudge(ITEM)
        # A LangChain reasoning model carries its effort as a field of its own.
        chat_low = await PointwiseJudge(
            CachedBackend(ChatModelBackend(_chat_openai(server, "o3-mini"), reasoning_effort="low"), cache)
        ).ajudge(ITEM)
        chat_high = await PointwiseJudge(
            CachedBackend(ChatModelBackend(_chat_openai(server, "o3-mini"), reasoning_effort="high"), cache)
        ).ajudge(ITEM)
        assert _calls(server) == 4
    assert (low.score, high.score, chat_low.score, chat_high.score) == (2, 5, 2, 5)


async def test_reasoning_effort_is_in_the_job_config_hash(tmp_path: Path) -> None:
    source, store = _items(tmp_path / "items.jsonl"), tmp_path / "jobs.db"
    with LoopbackServer(_by_effort) as server:

        def backend(effort: str) -> OpenAIBackend:
            return OpenAIBackend("o3-mini", base_url=server.url + "/v1", api_key="x", reasoning_effort=effort)

        low, _ = await _job_scores(source, backend("low"), store)
        high, judged = await _job_scores(source, backend("high"), store)
        again, judged_again = await _job_scores(source, backend("low"), store)  # the same setup still reuses
        assert _calls(server) == 6
    assert (low, high, again) == ([2, 2, 2], [5, 5, 5], [2, 2, 2])
    assert (judged, judged_again) == (3, 0)


async def test_a_spec_knows_the_config_hash_its_run_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JobSpec.config_hash() (no key, no call) is the hash arun_spec keys its results by."""
    from judgegraph.jobs import BackendConfig, JobSpec, JudgeConfig, arun_spec

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with LoopbackServer(_verdict(5)) as server:
        spec = JobSpec(
            source=_items(tmp_path / "items.jsonl"),
            judge=JudgeConfig(kind="pointwise"),
            backend=BackendConfig(model="m", base_url=server.url + "/v1"),
        )
        summary = await arun_spec(spec, store=tmp_path / "jobs.db")
    assert summary.ok == 3 and summary.config_hash == spec.config_hash()
