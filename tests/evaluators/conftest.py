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


@pytest.fixture
def langsmith_sink(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    hits: list[tuple[str, str]] = []
    handler = type("Handler", (_Handler,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for name in ("LANGSMITH_ENDPOINT", "LANGCHAIN_ENDPOINT"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("LANGSMITH_API_KEY", "not-a-key")
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.delenv("LANGCHAIN_TRACING_V2", raising=False)
    try:
        yield hits
    finally:
        server.shutdown()
        server.server_close()
