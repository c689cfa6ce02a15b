"""A stand-in LangSmith endpoint on 127.0.0.1 that records every request it
gets: offline evaluation must send it nothing."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: list[tuple[str, str]]

    def _any(self) -> None:
        self.hits.append((self.command, self.path))
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def _sink_server() -> Iterator[tuple[int, list[tuple[str, str]]]]:
    # One endpoint for the whole session: LangSmith caches its client (and
    # the URL it was made with) process-wide, so uploads a test provokes must
    # reach a server that is still listening, or they would be lost unseen.
    hits: list[tuple[str, str]] = []
    handler = type("Handler", (_Handler,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port, hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def langsmith_sink(
    _sink_server: tuple[int, list[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[tuple[str, str]]]:
    port, hits = _sink_server
    for name in ("LANGSMITH_ENDPOINT", "LANGCHAIN_ENDPOINT"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
    monkeypatch.setenv("LANGSMITH_API_KEY", "not-a-key")
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.delenv("LANGCHAIN_TRACING_V2", raising=False)
    _flush_uploads()  # what earlier tests left in flight is theirs
    hits.clear()
    yield hits


def _flush_uploads() -> None:
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langsmith.run_trees import get_cached_client

    wait_for_all_tracers()
    get_cached_client().flush()
