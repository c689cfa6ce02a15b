"""The judge-call cache keeps only answers a verdict can be read from (issue 26, item 4).

An HTTP-200 completion with no text (or blank text, or a structured request
answered with something that is no JSON object, or a completion the server
filtered) carries no verdict. Cached, it would be replayed for ever and the
healthy server never asked again; ``--rerun-failed`` could not recover.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import OpenAIBackend, PointwiseJudge, Status
from judgegraph.backends import (
    CachedBackend,
    GenerateRequest,
    GenerateResult,
    MemoryCache,
    ScriptedBackend,
    SqliteCache,
)
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import Message

ITEM = {"instruction": "What is 2+2?", "response": "4"}


class _EmptyThenGood:
    """Answers HTTP 200 with no text to the first ``empty`` calls, then properly."""

    def __init__(self, empty: int) -> None:
        self.empty = empty
        self.calls = 0

    def __call__(self, req: LoopbackRequest) -> Reply:
        self.calls += 1
        return Reply("") if self.calls <= self.empty else Reply("Right. [RESULT] 5")


def _openai(server: LoopbackServer) -> OpenAIBackend:
    return OpenAIBackend("judge", base_url=server.url + "/v1", api_key="x", structured_output=False)


@pytest.mark.timing
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_an_empty_answer_is_not_replayed_and_a_rerun_recovers(tmp_path: Path, kind: str) -> None:
    cache = MemoryCache() if kind == "memory" else SqliteCache(tmp_path / "calls.db")
    responder = _EmptyThenGood(empty=2)  # the first call and its repair
    with LoopbackServer(responder) as server:
        judge = PointwiseJudge(CachedBackend(_openai(server), cache))
        first = await judge.ajudge(ITEM)
        assert first.status is Status.UNPARSED and responder.calls == 2
        assert len(cache) == 0  # nothing a verdict can be read from was stored
        again = await judge.ajudge(ITEM)  # what --rerun-failed does: the server is asked again
        assert responder.calls == 3
        assert again.status is Status.OK and again.score == 5
        assert again.provenance is not None and again.provenance.usage.cache_misses == 1
        hit = await judge.ajudge(ITEM)  # a usable answer is cached as before
        assert responder.calls == 3 and hit.score == 5
        assert hit.provenance is not None and hit.provenance.usage.cache_hits == 1


@pytest.mark.timing
async def test_an_empty_answer_stored_before_this_fix_is_a_miss(tmp_path: Path) -> None:
    responder = _EmptyThenGood(empty=0)
    with LoopbackServer(responder) as server:
        # Learn the key the judge's call has, then poison it as an older version would have.
        learn = MemoryCache()
        await PointwiseJudge(CachedBackend(_openai(server), learn)).ajudge(ITEM)
        (key,) = learn._data
        cache = SqliteCache(tmp_path / "calls.db")
        cache.put(key, GenerateResult(text="", model="judge"))
        verdict = await PointwiseJudge(CachedBackend(_openai(server), cache)).ajudge(ITEM)
        assert verdict.status is Status.OK and verdict.score == 5 and responder.calls == 2
        assert cache.get(key) is not None and cache.get(key).text == "Right. [RESULT] 5"  # type: ignore[union-attr]
        cache.close()


def _request(structured: bool) -> GenerateRequest:
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}} if structured else None
    return GenerateRequest(messages=(Message(role="user", content="grade it"),), json_schema=schema)


_TEXTS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", " ", "\n\t ", "\u00a0", "[RESULT] 4", '{"score": 4}', "[1, 2]", '"4"', "null", "{"]),
    st.builds(json.dumps, st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)),
)


def _verdict_bearing(result: GenerateResult, structured: bool) -> bool:
    """What a verdict can be read from, said independently of the cache's code."""
    if result.finish_reason == "content_filter" or result.text.strip() == "":
        return False
    if not structured:
        return True
    try:
        return isinstance(json.loads(result.text), dict)
    except ValueError:
        return False


@settings(max_examples=100)
@given(
    text=_TEXTS,
    structured=st.booleans(),
    finish=st.sampled_from([None, "stop", "length", "content_filter", "tool_calls"]),
    sqlite=st.booleans(),
)
async def test_only_verdict_bearing_answers_are_stored_and_replayed(
    tmp_path_factory: pytest.TempPathFactory, text: str, structured: bool, finish: str | None, sqlite: bool
) -> None:
    answer = GenerateResult(text=text, model="m", finish_reason=finish)
    good = GenerateResult(text='{"score": 4}' if structured else "[RESULT] 4", model="m", finish_reason="stop")
    inner = ScriptedBackend([answer, good, good])
    cache = SqliteCache(tmp_path_factory.mktemp("c") / "calls.db") if sqlite else MemoryCache()
    backend = CachedBackend(inner, cache)
    request = _request(structured)
    first = await backend.generate(request)
    assert first.text == text
    usable = _verdict_bearing(answer, structured)
    assert len(cache) == (1 if usable else 0)
    second = await backend.generate(request)
    if usable:  # replayed, the server not asked
        assert len(inner.calls) == 1 and second.text == text and second.usage.cache_hits == 1
    else:  # asked again, and the good answer is the one kept
        assert len(inner.calls) == 2 and second.text == good.text and len(cache) == 1
        third = await backend.generate(request)
        assert len(inner.calls) == 2 and third.text == good.text
    if sqlite:
        assert isinstance(cache, SqliteCache)
        cache.close()
