"""A judge-call cache that works with any backend.

The key is a SHA-256 over everything that can change a verdict
(:func:`~judgegraph.backends.verdict_identity`): the whole request
(messages, generation parameters, JSON schema, logprob settings), the
template id and version that made it (a new version may parse the same
text differently), the backend kind, the model, the server identity (its
base URL) and the options the backend sends with every call (a reasoning
effort, a chat model's own settings). A different server, model or option
therefore misses, even for byte-identical prompts.

A hit returns the stored result with no tokens spent and ``cache_hits=1`` in
its usage; a miss calls the backend and counts ``cache_misses=1``. Those
counts add up into each verdict's ``provenance.usage``. Only answers a
verdict can be read from are stored (:func:`verdict_bearing`): a failure, an
empty or blank completion, a structured request answered with no JSON object,
or a completion the server filtered is never replayed as if it were an
answer, so a rerun asks the server again. An entry that is no such answer
(written by an older version) is a miss. Concurrent identical calls share
one request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from judgegraph.types import JSONValue, Pricing, TokenLogprob, Usage

from ._identity import SERVER, backend_identity, identity_hash, verdict_identity
from ._protocol import Backend, Capabilities, GenerateRequest, GenerateResult

__all__ = [
    "CachedBackend",
    "JudgeCache",
    "MemoryCache",
    "SqliteCache",
    "cache_key",
    "server_identity",
    "verdict_bearing",
]


@runtime_checkable
class JudgeCache(Protocol):
    """Stores generate results by key. Implementations must be thread-safe."""

    def get(self, key: str) -> GenerateResult | None: ...

    def put(self, key: str, result: GenerateResult) -> None: ...


def verdict_bearing(request: GenerateRequest, result: GenerateResult) -> bool:
    """Whether ``result`` is an answer a verdict can be read from: text that is
    not blank, a JSON object when ``request`` asks for structured output, and
    not cut by the server's content filter. Only these are worth replaying."""
    if result.finish_reason == "content_filter" or not result.text.strip():
        return False
    if request.json_schema is None:
        return True
    try:
        return isinstance(json.loads(result.text), dict)
    except ValueError:
        return False


def _encode(result: GenerateResult) -> str:
    return json.dumps(
        {
            "text": result.text,
            "model": result.model,
            "usage": result.usage.model_dump(),
            "tokens": [[t.token, t.logprob, [list(a) for a in t.top]] for t in result.tokens]
            if result.tokens is not None
            else None,
            "finish_reason": result.finish_reason,
        }
    )


def _decode(raw: str) -> GenerateResult:
    d = json.loads(raw)
    tokens = d["tokens"]
    return GenerateResult(
        text=d["text"],
        model=d["model"],
        usage=Usage(**d["usage"]),
        tokens=tuple(TokenLogprob(t, lp, tuple((a, b) for a, b in top)) for t, lp, top in tokens)
        if tokens is not None
        else None,
        finish_reason=d["finish_reason"],
    )


class MemoryCache:
    """An in-process cache; ``max_entries`` bounds it (oldest entries go first)."""

    def __init__(self, *, max_entries: int | None = None) -> None:
        self.max_entries = max_entries
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> GenerateResult | None:
        with self._lock:
            raw = self._data.get(key)
        return None if raw is None else _decode(raw)

    def put(self, key: str, result: GenerateResult) -> None:
        with self._lock:
            self._data[key] = _encode(result)
            if self.max_entries is not None:
                while len(self._data) > self.max_entries:
                    del self._data[next(iter(self._data))]

    def __len__(self) -> int:
        return len(self._data)


class SqliteCache:
    """A cache in one SQLite file (stdlib ``sqlite3``), shared across runs and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS judge_calls (key TEXT PRIMARY KEY, result TEXT NOT NULL)")

    def get(self, key: str) -> GenerateResult | None:
        with self._lock:
            row = self._db.execute("SELECT result FROM judge_calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else _decode(row[0])

    def put(self, key: str, result: GenerateResult) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO judge_calls VALUES (?, ?)", (key, _encode(result)))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM judge_calls").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def server_identity(backend: Backend) -> str:
    """Where the backend's answers come from: its server as
    :func:`backend_identity` has it, else its kind and model."""
    server = backend_identity(backend).get(SERVER)
    return str(server) if server else f"{backend.name}:{backend.model}"


def cache_key(request: GenerateRequest, backend: Backend, *, server: str | None = None) -> str:
    """The cache key of one call: :func:`verdict_identity` of the request and
    the backend that answers it (``server`` overrides where it is served)."""
    return identity_hash(verdict_identity(backend=backend, request=request, server=server))


class CachedBackend:
    """Wrap any backend with a :class:`JudgeCache`. ``server`` overrides the
    server identity in the key (default: :func:`server_identity`)."""

    def __init__(self, backend: Backend, cache: JudgeCache, *, server: str | None = None) -> None:
        self.inner = backend
        self.cache = cache
        self.server = server or server_identity(backend)
        self.name: str = backend.name
        self.model: str = backend.model
        self.capabilities: Capabilities = backend.capabilities
        self.pricing: Pricing | None = backend.pricing
        self._inflight: dict[str, asyncio.Future[GenerateResult]] = {}

    def key(self, request: GenerateRequest) -> str:
        return cache_key(request, self.inner, server=self.server)

    def identity(self) -> dict[str, JSONValue]:
        return {**backend_identity(self.inner), SERVER: self.server}

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        key = self.key(request)
        hit = self.cache.get(key)
        if hit is not None and not verdict_bearing(request, hit):
            hit = None  # stored by an older version: ask again, and overwrite it
        twin = self._inflight.get(key) if hit is None else None
        if twin is not None:
            # The same call is already on its way: wait for it rather than send another.
            try:
                hit = await asyncio.shield(twin)
            except (Exception, asyncio.CancelledError):
                if not twin.done():
                    raise  # this caller was cancelled, not the call it waited on
                hit = None  # that call failed: make our own
        if hit is not None:
            return dataclasses.replace(hit, usage=Usage(cache_hits=1), attempts=0, latency_s=0.0)
        future: asyncio.Future[GenerateResult] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await self.inner.generate(request)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # mark it retrieved: no "never retrieved" log when nobody waits
            raise
        finally:
            self._inflight.pop(key, None)
        if verdict_bearing(request, result):
            self.cache.put(key, result)
        future.set_result(result)  # twins in flight share it either way: it is one answer, not a replay
        return dataclasses.replace(result, usage=result.usage + Usage(cache_misses=1))

    def __getattr__(self, name: str) -> Any:
        # Anything else (base_url, close, ...) is the wrapped backend's.
        return getattr(self.inner, name)
