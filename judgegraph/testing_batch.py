"""The OpenAI Files and Batches endpoints on a :class:`~judgegraph.testing.LoopbackServer`.

A batch is answered line by line with the server's own chat-completions
responder, so a batch and a live call for the same request get the same
reply. Faults are stated up front::

    with LoopbackServer(responder) as server:
        api = BatchAPI.attach(server, complete_after_polls=2, fail={2}, request_error=lambda cid, body: None)

``fail`` and ``expire`` name batches by the order they were created (1-based).
``request_error`` may return ``(status, message)`` for a request line to
answer it with an error instead. ``finalize_polls`` keeps a finished batch
``finalizing`` for that many more polls. ``malformed`` may return ``"json"``
(the output line is cut short: unreadable JSON) or ``"custom_id"`` (the line
has no custom_id) for a request line, to corrupt its line in the output file. The counts (``batches_created``,
``billed`` per custom_id) are what tests check "never billed twice" against.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any, Literal

from .testing import Fault, LoopbackRequest, LoopbackServer, Reply

__all__ = ["BatchAPI"]

RequestError = Callable[[str, dict[str, Any]], "tuple[int, str] | None"]
Malformed = Callable[[str, dict[str, Any]], "Literal['json', 'custom_id'] | None"]


@dataclass
class _Batch:
    id: str
    ordinal: int
    input_file_id: str
    metadata: dict[str, str]
    status: str = "validating"
    polls: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    errors: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "created_at": self.ordinal,
            "input_file_id": self.input_file_id,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "request_counts": self.counts,
            "metadata": self.metadata,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
        }


class BatchAPI:
    def __init__(
        self,
        server: LoopbackServer,
        *,
        complete_after_polls: int = 0,
        fail: Container[int] = (),
        expire: Container[int] = (),
        request_error: RequestError | None = None,
        finalize_polls: int = 0,
        malformed: Malformed | None = None,
    ) -> None:
        self.server = server
        self.finalize_polls = finalize_polls
        self.malformed = malformed
        self.complete_after_polls = complete_after_polls
        self.fail = fail
        self.expire = expire
        self.request_error = request_error
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.batches_created = 0
        self.billed: Counter[str] = Counter()  # custom_id -> times answered (and billed)
        self.polls = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    @classmethod
    def attach(
        cls,
        server: LoopbackServer,
        *,
        complete_after_polls: int = 0,
        fail: Container[int] = (),
        expire: Container[int] = (),
        request_error: RequestError | None = None,
        finalize_polls: int = 0,
        malformed: Malformed | None = None,
    ) -> BatchAPI:
        api = cls(
            server,
            complete_after_polls=complete_after_polls,
            fail=fail,
            expire=expire,
            request_error=request_error,
            finalize_polls=finalize_polls,
            malformed=malformed,
        )
        server.batches = api
        return api

    @property
    def requests_billed(self) -> int:
        return sum(self.billed.values())

    # ------------------------------------------------------------ routing

    def handle(self, req: LoopbackRequest) -> tuple[int, bytes] | None:
        """The reply to a Files/Batches request, or None for any other path."""
        path = req.path.split("?", 1)[0].rstrip("/")
        parts = path.split("/")
        if len(parts) < 3 or parts[2] not in ("files", "batches"):
            return None
        with self._lock:
            out = self._route(req.method, parts[2], parts[3:], req)
        if out is None:
            return 404, json.dumps({"error": {"message": f"no route {req.method} {path}", "type": "fault"}}).encode()
        return 200, out if isinstance(out, bytes) else json.dumps(out).encode()

    def _route(self, method: str, what: str, rest: list[str], req: LoopbackRequest) -> Any:
        if what == "files":
            if method == "POST" and not rest:
                return self._upload(req)
            if method == "GET" and len(rest) == 2 and rest[1] == "content" and rest[0] in self.files:
                return self.files[rest[0]]
            return None
        if method == "POST" and not rest:
            return self._create(req.body)
        if not rest or rest[0] not in self.batches:
            if method == "GET" and not rest:
                return {"object": "list", "data": [b.as_json() for b in self.batches.values()], "has_more": False}
            return None
        batch = self.batches[rest[0]]
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch.status not in ("completed", "failed", "expired"):
                batch.status = "cancelled"
            return batch.as_json()
        if method == "GET" and not rest[1:]:
            self.polls += 1
            self._advance(batch)
            return batch.as_json()
        return None

    # ------------------------------------------------------------ endpoints

    def _upload(self, req: LoopbackRequest) -> dict[str, Any]:
        head = f"Content-Type: {req.headers.get('content-type', '')}\r\n\r\n".encode()
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + req.raw)
        content, filename, purpose = b"", "upload.jsonl", "batch"
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            if name == "file":
                content, filename = data, str(part.get_filename() or filename)
            elif name == "purpose":
                purpose = data.decode()
        fid = f"file-{next(self._ids)}"
        self.files[fid] = content
        return {
            "id": fid,
            "object": "file",
            "bytes": len(content),
            "created_at": 0,
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        self.batches_created += 1
        bid = f"batch_{next(self._ids)}"
        batch = _Batch(bid, self.batches_created, str(body["input_file_id"]), dict(body.get("metadata") or {}))
        batch.counts["total"] = len(self.files.get(batch.input_file_id, b"").splitlines())
        self.batches[bid] = batch
        return batch.as_json()

    def _advance(self, batch: _Batch) -> None:
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return
        batch.polls += 1
        if batch.ordinal in self.fail:
            batch.status = "failed"
            batch.errors = [{"code": "invalid_request", "message": "injected: the input file failed validation"}]
            return
        if batch.polls <= self.complete_after_polls:
            batch.status = "in_progress"
            return
        if batch.ordinal in self.expire:
            batch.status = "expired"
            return
        if batch.polls <= self.complete_after_polls + self.finalize_polls:
            batch.status = "finalizing"
            return
        self._complete(batch)

    def _complete(self, batch: _Batch) -> None:
        out: list[str] = []
        err: list[str] = []
        for n, line in enumerate(self.files[batch.input_file_id].splitlines()):
            rec = json.loads(line)
            cid, body = str(rec["custom_id"]), dict(rec["body"])
            status, payload = self._answer(cid, body)
            row = {"id": f"batch_req_{n}", "custom_id": cid, "response": {"status_code": status, "body": payload}}
            text = json.dumps({**row, "error": None})
            broken = self.malformed(cid, body) if self.malformed else None
            if broken == "json":
                text = text[: len(text) // 2]
            elif broken == "custom_id":
                text = json.dumps({k: v for k, v in {**row, "error": None}.items() if k != "custom_id"})
            (out if status == 200 else err).append(text)
        batch.counts.update(completed=len(out), failed=len(err))
        for lines, attr in ((out, "output_file_id"), (err, "error_file_id")):
            if lines:
                fid = f"file-{next(self._ids)}"
                self.files[fid] = ("\n".join(lines) + "\n").encode()
                setattr(batch, attr, fid)
        batch.status = "completed"

    def _answer(self, cid: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        injected = self.request_error(cid, body) if self.request_error else None
        if injected is not None:
            return injected[0], {"error": {"message": injected[1], "type": "fault"}}
        req = LoopbackRequest("POST", "/v1/chat/completions", {}, body)
        reply = self.server.responder(req)
        if not isinstance(reply, Reply | Fault):
            # Batch output is written in one synchronous pass: a coroutine responder cannot be awaited here.
            raise TypeError("the Batch API endpoints need a plain (not async) responder on the LoopbackServer")
        if isinstance(reply, Fault):
            return reply.status, {"error": {"message": reply.message or f"injected {reply.status}", "type": "fault"}}
        self.billed[cid] += 1
        return 200, self.server.render(req, reply)
