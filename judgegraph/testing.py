"""Loopback servers that speak the OpenAI and TGI protocols, for tests and benchmarks.

They are real HTTP/1.1 servers on 127.0.0.1 (keep-alive, Content-Length), so
the real ``openai`` and ``huggingface_hub`` clients are exercised end to end,
retries and all. A *responder* decides each reply, and can inject faults::

    def responder(req: LoopbackRequest) -> Reply | Fault:
        return Reply("Fine answer. [RESULT] 4", token_probs={"4": 0.7, "3": 0.3})

    with LoopbackServer(responder) as server:
        backend = OpenAIBackend("judge", base_url=server.url + "/v1", api_key="x")

The server runs its own event loop in a thread, so it serves sync and async
callers alike. ``server.calls`` counts the requests it answered, per path.

A responder may also be a coroutine function: it runs on the server's loop, so
it can wait for an event (say, until several requests are in flight at once)
without holding the other requests up. Tests wait for events, not for time.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import re
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Fault", "LoopbackRequest", "LoopbackServer", "Reply", "tokenize"]


@dataclass(frozen=True)
class Reply:
    """A successful completion.

    ``token_probs`` sets the top alternatives (probabilities) at the last
    output token whose text, stripped, is one of its keys: that is how a test
    states the judge's score distribution.
    """

    text: str
    token_probs: Mapping[str, float] | None = None
    finish_reason: Literal["stop", "length"] = "stop"
    prompt_tokens: int = 10


@dataclass(frozen=True)
class Fault:
    """A failure to serve instead of a reply.

    kind: ``status`` (HTTP ``status`` with optional ``retry_after``),
    ``reset`` (close the connection without answering), ``hang`` (answer
    after ``delay_s``), ``garbage`` (200 with a body that is not JSON).
    ``message`` is the error message a ``status`` fault's body carries.
    """

    kind: Literal["status", "reset", "hang", "garbage"]
    status: int = 500
    retry_after: float | None = None
    delay_s: float = 30.0
    message: str | None = None


@dataclass
class LoopbackRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes = b""  # the body as sent, when it is not JSON (a multipart file upload)

    @property
    def prompt(self) -> str:
        """The prompt text, whichever protocol carried it."""
        if "messages" in self.body:
            return "\n".join(str(m.get("content", "")) for m in self.body["messages"])
        return str(self.body.get("inputs", ""))


Responder = Callable[[LoopbackRequest], "Reply | Fault | Awaitable[Reply | Fault]"]

_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")


def tokenize(text: str) -> list[str]:
    """Split text into word/punctuation tokens that concatenate back to it."""
    return _TOKEN.findall(text)


@dataclass
class _Stats:
    calls: Counter[str] = field(default_factory=Counter)
    connections: int = 0  # TCP connections accepted: keep-alive reuse shows as fewer than calls


class LoopbackServer:
    def __init__(self, responder: Responder, *, latency_s: float = 0.0, host: str = "127.0.0.1") -> None:
        self.responder = responder
        self.latency_s = latency_s
        self.host = host
        self.port = 0
        self.stats = _Stats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        # The Files and Batches endpoints (judgegraph.testing_batch), when a test attaches them.
        self.batches: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def calls(self) -> Counter[str]:
        return self.stats.calls

    # ------------------------------------------------------------ lifecycle

    def start(self) -> LoopbackServer:
        self._thread = threading.Thread(target=self._run, name="loopback-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("loopback server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._server = loop.run_until_complete(asyncio.start_server(self._handle, self.host, 0, backlog=1024))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    # ------------------------------------------------------------ HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                raw = await reader.readexactly(int(headers.get("content-length", "0")))
                is_json = raw and not headers.get("content-type", "").startswith("multipart/")
                body = json.loads(raw) if is_json else {}
                req = LoopbackRequest(method, path, headers, body, raw)
                if not await self._respond(req, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    async def _respond(self, req: LoopbackRequest, writer: asyncio.StreamWriter) -> bool:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.batches is not None and (answer := self.batches.handle(req)) is not None:
            self._send(writer, answer[0], answer[1])
            return True
        if req.method == "GET":
            self._send(writer, 200, b'{"status":"ok"}')
            return True
        self.stats.calls[req.path] += 1
        made = self.responder(req)
        out = await made if inspect.isawaitable(made) else made
        if isinstance(out, Fault):
            if out.kind == "reset":
                writer.transport.abort()
                return False
            if out.kind == "hang":
                await asyncio.sleep(out.delay_s)
                self._send(writer, 503, b'{"error":"late"}')
                return True
            if out.kind == "garbage":
                self._send(writer, 200, b'{"choices": [ this is not json')
                return True
            extra = {"retry-after": f"{out.retry_after:g}"} if out.retry_after is not None else {}
            err = json.dumps({"error": {"message": out.message or f"injected {out.status}", "type": "fault"}}).encode()
            self._send(writer, out.status, err, extra)
            return True
        self._send(writer, 200, json.dumps(self._body(req, out)).encode())
        return True

    @staticmethod
    def _send(writer: asyncio.StreamWriter, status: int, body: bytes, extra: Mapping[str, str] | None = None) -> None:
        head = [f"HTTP/1.1 {status} X", "content-type: application/json", f"content-length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in (extra or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    # ------------------------------------------------------------ protocols

    def render(self, req: LoopbackRequest, reply: Reply) -> Any:
        """The response body the server sends for ``reply`` (batch output lines carry the same)."""
        return self._body(req, reply)

    def _body(self, req: LoopbackRequest, reply: Reply) -> Any:
        tokens = tokenize(reply.text)
        tops = _tops(tokens, reply.token_probs)
        usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": len(tokens),
            "total_tokens": reply.prompt_tokens + len(tokens),
        }
        if req.path.rstrip("/").endswith("chat/completions"):
            choice: dict[str, Any] = {
                "index": 0,
                "message": _chat_message(req, reply.text),
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
            if req.body.get("logprobs"):
                k = int(req.body.get("top_logprobs") or 0)
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": t,
                            "logprob": lp,
                            "bytes": None,
                            "top_logprobs": [{"token": a, "logprob": alp, "bytes": None} for a, alp in alts[:k]],
                        }
                        for t, (lp, alts) in zip(tokens, tops, strict=True)
                    ]
                }
            return {
                "id": "cmpl-loopback",
                "object": "chat.completion",
                "created": 0,
                "model": str(req.body.get("model", "loopback")),
                "system_fingerprint": "loopback",
                "choices": [choice],
                "usage": usage,
            }
        # TGI generate: "/" answers a list, "/generate" one object.
        params = req.body.get("parameters") or {}
        k = int(params.get("top_n_tokens") or 0)
        details = {
            "finish_reason": "length" if reply.finish_reason == "length" else "eos_token",
            "generated_tokens": len(tokens),
            "seed": params.get("seed"),
            # TGI lists the prompt's tokens only when decoder_input_details is set.
            "prefill": [
                {"id": i, "text": t, "logprob": None} for i, t in enumerate(tokenize(str(req.body.get("inputs", ""))))
            ]
            if params.get("decoder_input_details")
            else [],
            "tokens": [
                {"id": i, "text": t, "logprob": lp, "special": False}
                for i, (t, (lp, _)) in enumerate(zip(tokens, tops, strict=True))
            ],
            "top_tokens": [
                [{"id": j, "text": a, "logprob": alp, "special": False} for j, (a, alp) in enumerate(alts[:k])]
                for _, alts in tops
            ]
            if k
            else None,
        }
        one = {"generated_text": reply.text, "details": details if params.get("details") else None}
        return [one] if req.path.rstrip("/") == "" else one


def _tops(tokens: list[str], probs: Mapping[str, float] | None) -> list[tuple[float, list[tuple[str, float]]]]:
    """(logprob of the token, sorted alternatives) for each token."""
    out: list[tuple[float, list[tuple[str, float]]]] = [(0.0, [(t, 0.0)]) for t in tokens]
    if not probs:
        return out
    hits = [i for i, t in enumerate(tokens) if t.strip() in probs]
    if not hits:
        return out
    i = hits[-1]
    lead = tokens[i][: len(tokens[i]) - len(tokens[i].lstrip())]
    alts = sorted(((lead + k, math.log(p)) for k, p in probs.items() if p > 0), key=lambda a: -a[1])
    out[i] = (math.log(probs[tokens[i].strip()]), alts)
    return out


def _chat_message(req: LoopbackRequest, text: str) -> dict[str, Any]:
    """The assistant message for ``text``: a call of the forced tool when the
    request forces one and ``text`` is a JSON object (its arguments), as an
    OpenAI server answers structured output by function calling; else content."""
    choice = req.body.get("tool_choice")
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    try:
        is_object = isinstance(json.loads(text), dict)
    except ValueError:
        is_object = False
    if not name or not is_object:
        return {"role": "assistant", "content": text}
    call = {"id": "call_loopback", "type": "function", "function": {"name": name, "arguments": text}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}
