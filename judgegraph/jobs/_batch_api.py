"""The provider side of the batch engine: the answer book, upload, create, poll, download.

Requests are keyed by a hash of their chat-completions body (the custom_id),
so the same request always maps to the same answer, whichever batch or run
carried it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from judgegraph.backends import Backend, BackendError, GenerateRequest, GenerateResult
from judgegraph.types import Pricing

from ._batch_store import TERMINAL, BatchRow, BatchTable

__all__ = ["AnswerBackend", "AnswerBook", "BatchOptions", "BatchSettler", "misses_var", "request_key"]

ENDPOINT = "/v1/chat/completions"
_log = logging.getLogger("judgegraph.jobs")


class BatchOptions(BaseModel):
    """How the batch engine splits, polls, resubmits and prices."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_requests_per_file: int = Field(default=50_000, ge=1)
    max_bytes_per_file: int = Field(default=200 * 1024 * 1024, ge=1024)
    poll_initial_s: float = Field(default=5.0, gt=0)
    poll_max_s: float = Field(default=300.0, gt=0)
    poll_factor: float = Field(default=1.5, ge=1.0)
    max_resubmits: int = Field(default=1, ge=0)
    max_rounds: int = Field(default=3, ge=1)
    batch_discount: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="the batch price as a share of the live price; engine vllm: 1.0 unless given, since a local"
        " run has no provider discount and its prices (if any) are the user's own",
    )
    completion_window: str = "24h"
    models: tuple[str, ...] | None = Field(
        default=None,
        description="only backends serving these models go through the batch API (default: every OpenAI backend);"
        " the others, e.g. a cascade's local tier, run live",
    )
    engine: Literal["provider", "vllm"] = Field(
        default="provider",
        description="provider: the backend's Files and Batches API; vllm: the same JSONL through vLLM's offline"
        " runner (python -m vllm.entrypoints.openai.run_batch) on a local model folder",
    )
    vllm_model: str | None = Field(default=None, description="engine vllm: the model folder run_batch loads")
    vllm_python: str | None = Field(
        default=None, description="engine vllm: an interpreter that imports vllm (default: this one)"
    )
    vllm_args: tuple[str, ...] = Field(default=(), description="engine vllm: more run_batch arguments")
    vllm_processes: int = Field(default=1, ge=1, description="engine vllm: run_batch processes at a time")
    repairs: Literal["batch", "live"] = Field(
        default="batch",
        description="batch: an unreadable verdict's repair request goes into a follow-up batch; live: it is sent"
        " at once, at the live price, so the item settles in one batch round",
    )

    @model_validator(mode="after")
    def _engine(self) -> BatchOptions:
        if self.engine == "vllm" and "batch_discount" not in self.model_fields_set:
            # Left unset, so a spec's options moved to another engine get that engine's default.
            object.__setattr__(self, "batch_discount", 1.0)
        if self.engine == "vllm" and not self.vllm_model:
            raise ValueError("engine 'vllm' needs vllm_model (--vllm-model): the model folder run_batch loads")
        given = [n for n in ("vllm_model", "vllm_python") if getattr(self, n)] + (["vllm_args"] * bool(self.vllm_args))
        if self.engine != "vllm" and given:
            raise ValueError(f"{', '.join(given)} only apply to engine 'vllm' (--batch-engine vllm)")
        return self

    def engine_identity(self) -> dict[str, Any] | None:
        """What answers the batched requests in place of the backend's server,
        for the config hash: vLLM's runner on its model folder, with its
        arguments (they may set the dtype, a seed or the context length).
        None for the provider, whose batches the live model answers."""
        if self.engine != "vllm":
            return None
        folder = str(Path(self.vllm_model or "").absolute())
        return {"engine": "vllm-run-batch", "model_folder": folder, "args": list(self.vllm_args)}


def request_key(body: dict[str, Any]) -> str:
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "jg-" + hashlib.sha256(canon.encode()).hexdigest()[:32]


# The request keys the item being judged asked for and found no answer to.
misses_var: ContextVar[list[str] | None] = ContextVar("judgegraph_batch_misses", default=None)


@dataclass
class AnswerBook:
    answers: dict[str, GenerateResult] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # key -> final reason
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> body to send
    closed: bool = False  # no more batches: a miss is a final error


class AnswerBackend:
    """A backend that answers from downloaded batch results.

    It keeps the wrapped backend's name, model and capabilities, so the judge
    builds the very requests (and provenance) a live call would; the pricing
    is the batch price.
    """

    def __init__(self, inner: Backend, book: AnswerBook, *, discount: float, live_repairs: bool = False) -> None:
        self.inner = inner
        self.live_repairs = live_repairs
        self.name = inner.name
        self.model = inner.model
        self.capabilities = inner.capabilities
        p = inner.pricing
        self.pricing = (
            Pricing(input_per_mtok=p.input_per_mtok * discount, output_per_mtok=p.output_per_mtok * discount)
            if p is not None
            else None
        )
        self.book = book
        # An OpenAI backend's request shape for reasoning models; the same body as its live call.
        self._reasoning = bool(getattr(inner, "reasoning", False))
        self._reasoning_effort: str | None = getattr(inner, "reasoning_effort", None)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        from judgegraph.backends import chat_params  # needs the openai extra, as the batch API does

        body = chat_params(self.model, request, reasoning=self._reasoning, reasoning_effort=self._reasoning_effort)
        key = request_key(body)
        if key in self.book.answers:
            return self.book.answers[key]
        if request.repair and self.live_repairs:
            # Sent live and billed at the live price; kept so a later round reuses it.
            res = await self.inner.generate(request)
            p = self.inner.pricing
            res = dataclasses.replace(res, cost_usd=p.cost(res.usage) if p is not None else None)
            self.book.answers[key] = res
            return res
        if key in self.book.failed:
            raise BackendError(self.book.failed[key])
        if self.book.closed:
            raise BackendError("no batch answer for this request: the follow-up batch limit (max_rounds) was reached")
        self.book.pending[key] = body
        misses = misses_var.get()
        if misses is not None:
            misses.append(key)
        raise BackendError("waiting for a batch")


class BatchSettler:
    """Gets an answer or a final failure for each wanted key: finds batches
    already in the store, polls open ones, downloads finished ones, and
    creates batches only for keys no live or finished batch holds."""

    def __init__(
        self,
        client: Any,
        table: BatchTable,
        config_hash: str,
        book: AnswerBook,
        options: BatchOptions,
        on_states: Callable[[dict[str, int], dict[str, int]], None] | None = None,
    ):
        self.client, self.table, self.chash, self.book, self.opt = client, table, config_hash, book, options
        self.on_states = on_states  # (batches by state, requests by state), after every change
        self._last: tuple[Any, ...] | None = None
        self._read: set[str] = set()  # local keys whose results are in the book
        self._tries: dict[str, int] = {}  # key -> failed attempts seen
        self._reasons: dict[str, str] = {}

    def report(self, rows: list[BatchRow] | None = None) -> None:
        """Tell ``on_states`` the batches' states, when they changed."""
        if self.on_states is None:
            return
        batches: dict[str, int] = {}
        requests: dict[str, int] = {}
        for r in rows if rows is not None else self.table.rows(self.chash):
            batches[r.state] = batches.get(r.state, 0) + 1
            requests[r.state] = requests.get(r.state, 0) + len(r.custom_ids)
        now = (tuple(sorted(batches.items())), tuple(sorted(requests.items())))
        if now != self._last:
            self._last = now
            self.on_states(batches, requests)

    async def asettle(self, wanted: set[str]) -> None:
        while True:
            rows = self.table.rows(self.chash)
            self.report(rows)
            await self._adopt_unsent(rows)
            rows = self.table.rows(self.chash)
            self.report(rows)
            await self._apoll([r for r in rows if r.batch_id and r.state not in TERMINAL])
            for r in self.table.rows(self.chash):
                if r.state in TERMINAL and r.local_key not in self._read:
                    await self._aread(r)
            need = [k for k in sorted(wanted) if k not in self.book.answers and k not in self.book.failed]
            if not need:
                return
            retry = []
            for k in need:
                if self._tries.get(k, 0) > self.opt.max_resubmits:
                    self.book.failed[k] = self._reasons.get(k, "the batch request failed")
                else:
                    retry.append(k)
            if retry:
                await self._asubmit(retry)
                self.report()

    async def _adopt_unsent(self, rows: list[BatchRow]) -> None:
        """Rows written before a crash cut their batch's creation short: find
        the batch by its key if it was created, else create it now."""
        unsent = [r for r in rows if r.batch_id is None and r.state not in TERMINAL]
        if not unsent:
            return
        made: dict[str, Any] = {}
        async for b in self.client.batches.list(limit=100):
            key = (b.metadata or {}).get("judgegraph_key")
            if key:
                made.setdefault(key, b)
        for r in unsent:
            b = made.get(r.local_key)
            if b is not None:
                self.table.update(r.local_key, batch_id=b.id, state=b.status)
            elif ids := [k for k in r.custom_ids if k in self.book.pending]:
                await self._acreate(r.local_key, ids)
            else:  # its items were stored since: nothing left to send
                self.table.update(r.local_key, batch_id=None, state="cancelled", reason="not needed any more")

    def _line(self, key: str) -> bytes:
        return (
            json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": self.book.pending[key]}) + "\n"
        ).encode()

    def _chunks(self, keys: list[str]) -> list[list[tuple[str, bytes]]]:
        chunks: list[list[tuple[str, bytes]]] = [[]]
        size = 0
        for k in keys:
            data = self._line(k)
            cur = chunks[-1]
            if cur and (len(cur) >= self.opt.max_requests_per_file or size + len(data) > self.opt.max_bytes_per_file):
                chunks.append([])
                size = 0
            chunks[-1].append((k, data))
            size += len(data)
        return [c for c in chunks if c]

    async def _asubmit(self, keys: list[str]) -> None:
        for chunk in self._chunks(keys):
            ids = [k for k, _ in chunk]
            tries = max(self._tries.get(k, 0) for k in ids)
            local = hashlib.sha256(json.dumps([self.chash, ids, tries]).encode()).hexdigest()[:24]
            self.table.add(local, self.chash, ids)  # committed before the provider hears of it
            await self._acreate(local, ids, b"".join(d for _, d in chunk))

    async def _acreate(self, local: str, ids: list[str], data: bytes | None = None) -> None:
        if data is None:
            data = b"".join(self._line(k) for k in ids)
        f = await self.client.files.create(file=(f"judgegraph-{local}.jsonl", data), purpose="batch")
        b = await self.client.batches.create(
            input_file_id=f.id,
            endpoint=ENDPOINT,
            completion_window=self.opt.completion_window,
            metadata={"judgegraph_key": local},
        )
        self.table.update(local, batch_id=b.id, state=b.status)

    async def _apoll(self, rows: list[BatchRow]) -> None:
        delay = self.opt.poll_initial_s
        open_ = {r.local_key: r for r in rows}
        while open_:
            for local, r in list(open_.items()):
                b = await self.client.batches.retrieve(r.batch_id)
                reason = None
                if b.errors is not None and b.errors.data:
                    reason = "; ".join(f"{e.code}: {e.message}" for e in b.errors.data)
                self.table.update(
                    local,
                    batch_id=b.id,
                    state=b.status,
                    output_file_id=b.output_file_id,
                    error_file_id=b.error_file_id,
                    reason=reason,
                )
                if b.status in TERMINAL:
                    del open_[local]
            self.report()
            if open_:
                # A local runner's state is a file read: polling it often costs nothing.
                await asyncio.sleep(min(delay, getattr(self.client, "poll_cap_s", delay)))
                delay = min(delay * self.opt.poll_factor, self.opt.poll_max_s)

    async def _aread(self, r: BatchRow) -> None:
        self._read.add(r.local_key)
        said: dict[str, list[GenerateResult | str]] = {}  # custom_id -> what each of its lines said
        unreadable = 0
        for fid in (r.output_file_id, r.error_file_id):
            if fid is None:
                continue
            content = await self.client.files.content(fid)
            for line in content.content.decode(errors="replace").splitlines():
                if line.strip():
                    got = self._read_line(line)
                    if got is None:
                        unreadable += 1
                    else:
                        said.setdefault(got[0], []).append(got[1])
        asked = set(r.custom_ids)
        for key, answers in said.items():
            if key in asked:
                self._take(r, key, answers)
        strangers = sorted(k for k in said if k not in asked)
        if strangers:
            # Never stored: an answer to a request nobody sent could only be
            # mistaken for another one's. Reported in the log and the batch's row.
            shown = ", ".join(strangers[:5]) + (f" and {len(strangers) - 5} more" if len(strangers) > 5 else "")
            note = f"output answered {len(strangers)} custom_id(s) never asked, not stored: {shown}"
            _log.warning("batch %s: %s", r.batch_id, note)
        if strangers and note not in (r.reason or ""):  # a rerun reads the same row again
            reason = f"{r.reason}; {note}" if r.reason else note
            self.table.update(
                r.local_key,
                batch_id=r.batch_id,
                state=r.state,
                output_file_id=r.output_file_id,
                error_file_id=r.error_file_id,
                reason=reason,
            )
        seen = set(said)
        why = f"batch {r.batch_id} {r.state}" + (f": {r.reason}" if r.reason else "")
        if r.state == "completed":
            why = f"missing from the output of batch {r.batch_id}"
            if unreadable:  # the line that carried it could not be read: its request goes again
                why += (
                    f" ({unreadable} output line{'s' if unreadable > 1 else ''} unreadable: bad JSON or no custom_id)"
                )
        for k in r.custom_ids:
            if k not in seen and k not in self.book.answers:
                self._fail(k, why)

    def _take(self, r: BatchRow, key: str, answers: list[GenerateResult | str]) -> None:
        """Store what the batch said for ``key``: one answer (identical copies
        count once), else the failure it reported; lines that disagree are a
        failure naming the custom_id, whichever came last."""
        distinct: list[GenerateResult | str] = []
        for a in answers:
            if a not in distinct:
                distinct.append(a)
        if len(distinct) > 1:
            why = (
                f"batch {r.batch_id} answered custom_id {key} {len(answers)} times with different results"
                " (none is used)"
            )
            _log.warning("%s", why)
            self._fail(key, why)
        elif isinstance(distinct[0], str):
            self._fail(key, distinct[0])
        else:
            self.book.answers[key] = distinct[0]

    @staticmethod
    def _read_line(line: str) -> tuple[str, GenerateResult | str] | None:
        """A batch output or error line: its custom_id and its answer, or why
        it has none; None when the line cannot be read (bad JSON, no custom_id)."""
        from judgegraph.backends import result_from_completion

        try:
            rec = json.loads(line)
            key = rec["custom_id"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(key, str) or not key:
            return None
        resp = rec.get("response")
        resp = resp if isinstance(resp, dict) else {}
        status = resp.get("status_code")
        body = resp.get("body") or {}
        if status == 200:
            try:
                return key, result_from_completion(body, "")  # the decoded JSON, read as a live call's is
            except (ValueError, BackendError) as exc:
                return key, f"malformed batch output line: {type(exc).__name__}"
        err = (rec.get("error") or body.get("error") or {}) if isinstance(body, dict) else {}
        err = err if isinstance(err, dict) else {"message": str(err)}
        if isinstance(err.get("error"), dict):  # vLLM's run_batch nests its ErrorResponse
            err = err["error"]
        return key, f"batch request failed: HTTP {status}: {err.get('message', 'no message')}"

    def _fail(self, key: str, reason: str) -> None:
        self._tries[key] = self._tries.get(key, 0) + 1
        self._reasons[key] = reason
