"""Served graphs keep a bounded number of clients (issue 26, item 3).

A served graph makes one backend (and OpenAI client, with its connection
pool) per (``context.model``, ``context.base_url``). Any caller varying the
model used to grow that cache, its memory and its sockets without bound; now
the backends used last are kept, up to a small bound, and one pushed out is
closed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import Status
from judgegraph.testing import LoopbackServer, Reply

SERVE = Path(__file__).resolve().parents[2] / "graphs" / "serve.py"
ITEM = {"instruction": "q", "response": "r"}


def _fresh_serve() -> ModuleType:
    """graphs/serve.py loaded by path as a server loads it, with a cache of its own."""
    name = f"_served_clients_{id(object())}"
    spec = importlib.util.spec_from_file_location(name, SERVE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _clients(env: Any) -> list[Any]:
    """The OpenAI clients an EnvBackend holds now (none before its first call or once closed)."""
    inner = env._backend
    if inner is None:
        return []
    return [c for c in (*inner._clients.values(), inner._unclaimed) if c is not None]


def _good(req: Any) -> Reply:
    return Reply('{"feedback": "Fine.", "score": 4}')


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("JUDGEGRAPH_ALLOWED_BASE_URLS", raising=False)


@pytest.mark.timing
async def test_many_model_names_keep_at_most_the_bound_of_open_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    serve = _fresh_serve()
    bound = serve.MAX_SERVED_BACKENDS
    judge = serve._served(serve.create_pointwise_judge())
    with LoopbackServer(_good) as server:
        monkeypatch.setenv("JUDGEGRAPH_BASE_URL", server.url + "/v1")
        made: list[Any] = []  # every client any call built, to check each one's fate
        for i in range(3 * bound):
            verdict = await judge.ajudge(ITEM, context={"model": f"model-{i}"})
            assert verdict.status is Status.OK and verdict.provenance.model == f"model-{i}"
            made.extend(c for env in serve._backends.values() for c in _clients(env) if c not in made)
            live = [c for c in made if not c.is_closed()]
            assert len(live) <= bound
        assert len(made) == 3 * bound  # one client per model name, each made once
        kept = {c for env in serve._backends.values() for c in _clients(env)}
        assert len(kept) == bound and all(not c.is_closed() for c in kept)
        assert all(c.is_closed() for c in made if c not in kept)  # every evicted client was closed
        await serve._backends.aclose()


@st.composite
def _calls(draw: st.DrawFn) -> list[tuple[str, int]]:
    models = st.sampled_from(["a", "b", "c", "d", "e", "f", "g"])
    return draw(st.lists(st.tuples(models, st.integers(min_value=0, max_value=1)), min_size=1, max_size=25))


@settings(max_examples=25)
@given(calls=_calls(), bound=st.integers(min_value=1, max_value=4))
async def test_any_sequence_of_models_and_endpoints_is_an_lru_that_closes_what_it_drops(
    calls: list[tuple[str, int]], bound: int
) -> None:
    serve = _fresh_serve()
    serve._backends.size = bound
    judge = serve._served(serve.create_pointwise_judge())
    expected: OrderedDict[tuple[str, str], None] = OrderedDict()
    made: dict[int, Any] = {}
    with LoopbackServer(_good) as server, pytest.MonkeyPatch.context() as mp:
        urls = [server.url + "/v1", server.url + "/v1/"]  # two endpoints (the second one allowed)
        mp.setenv("JUDGEGRAPH_BASE_URL", urls[0])
        mp.setenv("JUDGEGRAPH_ALLOWED_BASE_URLS", urls[1])
        for model, endpoint in calls:
            context: dict[str, str] = {"model": model}
            if endpoint:
                context["base_url"] = urls[1]
            verdict = await judge.ajudge(ITEM, context=context)
            assert verdict.status is Status.OK
            key = (model, urls[endpoint])
            expected.pop(key, None)
            expected[key] = None
            while len(expected) > bound:
                expected.popitem(last=False)
            assert list(serve._backends.keys()) == list(expected)  # least recently used goes first
            for env in serve._backends.values():
                made.update((id(c), c) for c in _clients(env))
            kept = {id(c) for env in serve._backends.values() for c in _clients(env)}
            assert len(kept) <= bound
            assert all(c.is_closed() == (i not in kept) for i, c in made.items())
        await serve._backends.aclose()
        assert all(c.is_closed() for c in made.values())


@pytest.mark.timing
async def test_a_backend_evicted_mid_call_finishes_its_call_then_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    serve = _fresh_serve()
    serve._backends.size = 1
    judge = serve._served(serve.create_pointwise_judge())
    arrived, release = asyncio.Event(), threading.Event()

    async def held(req: Any) -> Reply:
        if req.body.get("model") == "slow":
            loop.call_soon_threadsafe(arrived.set)
            await asyncio.get_running_loop().run_in_executor(None, release.wait)
        return _good(req)

    loop = asyncio.get_running_loop()
    with LoopbackServer(held) as server:
        monkeypatch.setenv("JUDGEGRAPH_BASE_URL", server.url + "/v1")
        slow_call = asyncio.create_task(judge.ajudge(ITEM, context={"model": "slow"}))
        try:
            await asyncio.wait_for(arrived.wait(), timeout=60)  # a hang limit, not a timing assertion
            (slow,) = serve._backends.values()
            (client,) = _clients(slow)
            assert (await judge.ajudge(ITEM, context={"model": "fast"})).status is Status.OK  # evicts "slow"
            assert slow.retired and not client.is_closed()  # its call is still in flight
        finally:
            release.set()
        assert (await slow_call).status is Status.OK
        assert client.is_closed() and _clients(slow) == []
        await serve._backends.aclose()
