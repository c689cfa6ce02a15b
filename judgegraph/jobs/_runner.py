"""The local engine: stream a source through a judge into the store.

The unit of work is one ``judge.ajudge(item)``. At most ``concurrency``
items are in flight; the source is read only as fast as slots free up, so
memory stays flat however long the input is. Every row is recorded with its
outcome: a verdict (ok / unparsed / error, with the reason), or the input
problem that kept it from being judged.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from .._backend import Backend
from .._judge import BaseJudge, JudgeInputError
from ._ratelimit import RateLimitedBackend, RateLimiter
from ._sources import count_rows, expand_paths, iter_rows
from ._spec import (
    JobSpec,
    PreparedRow,
    RowPreparer,
    SourceConfig,
    build_backend,
    build_judge,
    config_hash,
    judge_fingerprint,
)
from ._store import ItemRecord, ResultRecord, Store

__all__ = ["JobProgress", "JobSummary", "ProgressCallback", "run_job", "run_spec", "verdict_record"]


@dataclass
class JobProgress:
    """Counts so far, for progress displays. ``total`` is None when the
    source cannot be counted cheaply."""

    total: int | None = None
    rows: int = 0
    judged: int = 0
    cached: int = 0
    ok: int = 0
    unparsed: int = 0
    errors: int = 0
    invalid: int = 0
    cost_usd: float = 0.0
    tokens: int = 0
    requests: int = 0  # model calls made for the items judged now, retries and repairs included
    started: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> int:
        """Rows accounted for: judged now, found in the store, or invalid."""
        return self.judged + self.cached + self.invalid

    @property
    def failed(self) -> int:
        return self.unparsed + self.errors


ProgressCallback = Callable[[JobProgress], None]


class JobSummary(BaseModel):
    """What a run did. ``problems`` lists the first input problems and
    judge failures by row; all of them are in the store."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    store: str
    config_hash: str
    engine: str
    resumed: bool
    rows: int
    judged: int
    cached: int
    ok: int
    unparsed: int
    errors: int
    invalid: int
    cost_usd: float
    tokens: int
    elapsed_s: float
    problems: list[str]
    problems_total: int
    requests: int = 0  # model calls for the items judged now, retries and repair rounds included


_MAX_PROBLEMS = 100


class _Recorder:
    """Shared by both engines: turns prepared rows and verdicts into store
    writes and progress counts, identically."""

    def __init__(
        self, store: Store, run_id: str, config_hash: str, progress: JobProgress, callback: ProgressCallback | None
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.config_hash = config_hash
        self.progress = progress
        self.callback = callback
        self.problems: list[str] = []
        self.problems_total = 0
        self.started_wall = time.time()

    def problem(self, text: str) -> None:
        self.problems_total += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(text)

    def row(self, prep: PreparedRow) -> None:
        input_json = prep.item.model_dump_json(exclude_none=True) if prep.item is not None else None
        self.row_fields(
            prep.file, prep.row, prep.item_hash, prep.item_id, prep.label, prep.category, prep.problem, input_json
        )

    def row_fields(
        self,
        file: int,
        row: int,
        item_hash: str | None,
        item_id: str | None,
        label: str | None,
        category: str | None,
        problem: str | None,
        input_json: str | None,
    ) -> None:
        self.progress.rows += 1
        self.store.add_item(
            ItemRecord(self.run_id, file, row, item_hash, item_id, label, category, problem), input_json
        )
        if problem is not None:
            self.problem(problem)
        if item_hash is None:
            self.progress.invalid += 1
            self._tick()

    def cached(self) -> None:
        self.progress.cached += 1
        self._tick()

    def needs_judging(self, prep: PreparedRow, rerun_failed: bool) -> bool:
        assert prep.item_hash is not None
        got = self.store.result_status(self.config_hash, prep.item_hash)
        if got is None:
            return True
        if rerun_failed and got != "ok" and not self._judged_this_run(prep.item_hash):
            return True
        self.cached()
        return False

    def _judged_this_run(self, item_hash: str) -> bool:
        return self.store.finished_at(self.config_hash, item_hash) >= self.started_wall

    def result(self, where: str, record: ResultRecord) -> None:
        self.store.add_result(record)
        p = self.progress
        p.judged += 1
        if record.status == "ok":
            p.ok += 1
        elif record.status == "unparsed":
            p.unparsed += 1
        else:
            p.errors += 1
        if record.status != "ok":
            self.problem(f"{where}: {record.status}: {record.reason}")
        p.cost_usd += record.cost_usd or 0.0
        p.tokens += record.prompt_tokens + record.completion_tokens
        p.requests += record.attempts
        self._tick()

    def _tick(self) -> None:
        if self.callback is not None:
            self.callback(self.progress)


def verdict_record(config_hash: str, item_hash: str, verdict: Any) -> ResultRecord:
    """A judge's result (any pydantic result with ``status``) as a store record."""
    prov = getattr(verdict, "provenance", None)
    usage = getattr(prov, "usage", None)
    status = getattr(verdict, "status", None)
    return ResultRecord(
        config_hash=config_hash,
        item_hash=item_hash,
        status=str(getattr(status, "value", status)),
        reason=getattr(verdict, "reason", None),
        result=verdict.model_dump_json() if isinstance(verdict, BaseModel) else json.dumps(verdict),
        cost_usd=getattr(prov, "cost_usd", None),
        prompt_tokens=getattr(usage, "prompt_tokens", 0),
        completion_tokens=getattr(usage, "completion_tokens", 0),
        attempts=getattr(prov, "attempts", 1),
        finished_at=time.time(),
    )


def failure_record(config_hash: str, item_hash: str, exc: BaseException) -> ResultRecord:
    """A judge that raised instead of returning a failed result: recorded as
    an error with the exception, never as a score."""
    reason = str(exc) if isinstance(exc, JudgeInputError) else f"{type(exc).__name__}: {exc}"
    return ResultRecord(
        config_hash,
        item_hash,
        "error",
        reason,
        json.dumps({"status": "error", "reason": reason}),
        None,
        0,
        0,
        1,
        time.time(),
    )


async def judge_prepared(
    judge: Any, prep: PreparedRow, *, context: Any, backend: Backend | None, config_hash: str
) -> ResultRecord:
    assert prep.item is not None and prep.item_hash is not None
    try:
        if backend is not None and isinstance(judge, BaseJudge):
            verdict = await judge.ajudge(prep.item, backend=backend, context=context)
        else:
            verdict = await judge.ajudge(prep.item, context=context)
    except Exception as exc:
        return failure_record(config_hash, prep.item_hash, exc)
    if getattr(verdict, "status", None) is None:
        return failure_record(
            config_hash, prep.item_hash, TypeError(f"judge returned a {type(verdict).__name__} without a status")
        )
    return verdict_record(config_hash, prep.item_hash, verdict)


def _is_backend(v: Any) -> bool:
    return all(hasattr(v, a) for a in ("name", "model", "capabilities", "generate"))


def limit_context(
    judge: Any, context: Mapping[str, Any] | None, limiter: RateLimiter | None
) -> tuple[dict[str, Any], Backend | None]:
    """The context with every backend in it behind the limiter, and the
    judge's own fixed backend (if it has one) likewise."""
    ctx = dict(context or {})
    fixed: Backend | None = None
    if limiter is not None:
        for k, v in list(ctx.items()):
            if _is_backend(v):
                ctx[k] = RateLimitedBackend(v, limiter)
        own = getattr(judge, "backend", None)
        if own is not None and not isinstance(own, str) and _is_backend(own):
            fixed = RateLimitedBackend(own, limiter)
    return ctx, fixed


def fingerprint_for(judge: Any, context: Mapping[str, Any] | None) -> dict[str, Any]:
    backend = None
    if isinstance(judge, BaseJudge):
        try:
            backend = judge.resolve_backend(None, context)
        except TypeError:
            backend = None  # a composite (cascade, ensemble): its parts name their own backends
    fp = judge_fingerprint(judge, backend)
    if backend is None and context:
        fp["context_backends"] = {
            k: {"name": v.name, "model": v.model} for k, v in sorted(context.items()) if _is_backend(v)
        }
    return fp


def default_run_id(source: SourceConfig, config_hash: str) -> str:
    first = source.path if isinstance(source.path, str) else (source.path[0] if source.path else "run")
    stem = Path(first).stem.replace("*", "") or "run"
    return f"{stem}-{config_hash[:8]}"


def _open(store: Store | str | os.PathLike[str]) -> tuple[Store, bool]:
    if isinstance(store, Store):
        return store, False
    return Store(store), True


async def run_job(
    source: SourceConfig,
    *,
    judge: Any,
    kind: str,
    store: Store | str | os.PathLike[str],
    context: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    concurrency: int = 32,
    rpm: float | None = None,
    tpm: float | None = None,
    rerun_failed: bool = False,
    progress: ProgressCallback | None = None,
    spec: Mapping[str, Any] | None = None,
) -> JobSummary:
    """Judge every row of ``source`` with ``judge`` (anything with an async
    ``ajudge``, or the key of one in ``context``) and write each outcome to
    ``store``. Backends the judge looks up by key come from ``context`` too.

    Rows already judged under the same judge configuration are skipped (a
    resumed or repeated run pays nothing for them); with ``rerun_failed``,
    rows whose stored result is unparsed or error are judged again.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if isinstance(judge, str):  # a key into the context, as the graphs take judges
        found = (context or {}).get(judge)
        if found is None or not callable(getattr(found, "ajudge", None)):
            raise LookupError(f"run_job: no judge with an async ajudge() under {judge!r} in the context")
        judge = found
    preparer = RowPreparer(kind, source)
    paths = expand_paths(source.path)
    fp = fingerprint_for(judge, context)
    chash = config_hash(fp)
    run_id = run_id or default_run_id(source, chash)
    st, owned = _open(store)
    try:
        _, resumed = st.open_run(
            run_id,
            config_hash=chash,
            kind=kind,
            spec=dict(spec) if spec is not None else {"source": source.model_dump(mode="json"), "judge": fp},
        )
        limiter = RateLimiter(rpm=rpm, tpm=tpm) if (rpm or tpm) else None
        ctx, fixed = limit_context(judge, context, limiter)
        prog = JobProgress(total=count_rows(paths, source.format))
        rec = _Recorder(st, run_id, chash, prog, progress)
        started = time.monotonic()
        state = "interrupted"
        try:
            await _drive(preparer, iter_rows(paths, source.format), rec, judge, ctx, fixed, concurrency, rerun_failed)
            state = "finished"
        finally:
            st.set_state(run_id, state)
        return _summary(rec, st, "local", resumed, time.monotonic() - started)
    finally:
        if owned:
            st.close()


async def _drive(
    preparer: RowPreparer,
    rows: Any,
    rec: _Recorder,
    judge: Any,
    ctx: dict[str, Any],
    fixed: Backend | None,
    concurrency: int,
    rerun_failed: bool,
) -> None:
    store = rec.store
    stop = asyncio.Event()

    async def flusher() -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), store.flush_interval_s)
            except TimeoutError:
                pass
            await store.aflush()

    store.auto_flush = False  # commits happen on the flusher's thread, off the event loop
    flush_task = asyncio.create_task(flusher())
    try:
        if getattr(judge, "needs_batch", False):
            # A judge that ranks a whole batch (a cascade with a budget policy)
            # cannot take items one at a time: feed it chunks.
            await _drive_batches(preparer, rows, rec, judge, ctx, concurrency, rerun_failed)
        else:
            await _drive_pool(preparer, rows, rec, judge, ctx, fixed, concurrency, rerun_failed)
    finally:
        stop.set()
        await asyncio.gather(flush_task, return_exceptions=True)
        store.auto_flush = True
        store.flush()


def _claim(
    preparer: RowPreparer, srow: Any, rec: _Recorder, claimed: set[str], rerun_failed: bool
) -> PreparedRow | None:
    """Prepare and record one source row; return it when it still needs judging.

    An invalid row, a repeat of an input already claimed in this run (judged
    once, recorded for both rows), or an item the store already holds is
    recorded and skipped.
    """
    prep = preparer(srow)
    rec.row(prep)
    if prep.item is None:
        return None
    assert prep.item_hash is not None
    if prep.item_hash in claimed:
        rec.cached()
        return None
    if not rec.needs_judging(prep, rerun_failed):
        return None
    claimed.add(prep.item_hash)
    return prep


async def _drive_pool(
    preparer: RowPreparer,
    rows: Any,
    rec: _Recorder,
    judge: Any,
    ctx: dict[str, Any],
    fixed: Backend | None,
    concurrency: int,
    rerun_failed: bool,
) -> None:
    """``concurrency`` workers, each taking the next row to judge as soon as
    it has recorded its last one. A worker reuses its HTTP connection at once;
    spawning a task per item instead leaves the whole pool idle between
    waves, and the client then scans every idle connection per request."""
    source = iter(rows)
    inflight: set[str] = set()

    def next_item() -> PreparedRow | None:
        # Synchronous: no other worker runs between reading a row and claiming it.
        for srow in source:
            prep = _claim(preparer, srow, rec, inflight, rerun_failed)
            if prep is not None:
                return prep
        return None

    async def worker() -> None:
        while (prep := next_item()) is not None:
            try:
                record = await judge_prepared(judge, prep, context=ctx, backend=fixed, config_hash=rec.config_hash)
                rec.result(prep.where, record)
            finally:
                assert prep.item_hash is not None
                inflight.discard(prep.item_hash)

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for t in workers:
            t.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise


async def _drive_batches(
    preparer: RowPreparer,
    rows: Any,
    rec: _Recorder,
    judge: Any,
    ctx: dict[str, Any],
    concurrency: int,
    rerun_failed: bool,
    batch_size: int = 256,
) -> None:
    chunk: list[PreparedRow] = []
    seen: set[str] = set()

    async def run_chunk() -> None:
        if not chunk:
            return
        try:
            verdicts = await judge.ajudge_many([p.item for p in chunk], max_concurrency=concurrency, context=ctx)
        except Exception as exc:
            verdicts = [exc] * len(chunk)
        for p, v in zip(chunk, verdicts, strict=True):
            assert p.item_hash is not None
            if isinstance(v, BaseException):
                record = failure_record(rec.config_hash, p.item_hash, v)
            else:
                record = verdict_record(rec.config_hash, p.item_hash, v)
            rec.result(p.where, record)
        chunk.clear()
        seen.clear()

    for srow in rows:
        prep = _claim(preparer, srow, rec, seen, rerun_failed)
        if prep is None:
            continue
        chunk.append(prep)
        if len(chunk) >= batch_size:
            await run_chunk()
    await run_chunk()


def _summary(rec: _Recorder, store: Store, engine: str, resumed: bool, elapsed: float) -> JobSummary:
    p = rec.progress
    return JobSummary(
        run_id=rec.run_id,
        store=str(store.path),
        config_hash=rec.config_hash,
        engine=engine,
        resumed=resumed,
        rows=p.rows,
        judged=p.judged,
        cached=p.cached,
        ok=p.ok,
        unparsed=p.unparsed,
        errors=p.errors,
        invalid=p.invalid,
        cost_usd=p.cost_usd,
        tokens=p.tokens,
        requests=p.requests,
        elapsed_s=elapsed,
        problems=rec.problems,
        problems_total=rec.problems_total,
    )


def _pool_size(spec: JobSpec) -> int:
    """Connections for ``concurrency`` items: a pairwise item with both orders sends two requests at once."""
    swap = spec.judge.swap
    both = spec.judge.kind == "pairwise" and (swap is None or swap.mode == "both")
    per_item = 2 if both else len(spec.judge.criteria or ()) or 1
    return spec.limits.concurrency * per_item


async def run_spec(
    spec: JobSpec,
    *,
    store: Store | str | os.PathLike[str],
    run_id: str | None = None,
    rerun_failed: bool = False,
    progress: ProgressCallback | None = None,
    backend: Backend | None = None,
) -> JobSummary:
    """Run a declarative :class:`JobSpec` on the local engine. ``backend``
    overrides the one the spec describes (e.g. a ScriptedBackend in tests);
    the config hash still comes from the judge and the backend's model."""
    judge = build_judge(spec.judge)
    b = backend or build_backend(spec.backend, max_connections=_pool_size(spec))
    return await run_job(
        spec.source,
        judge=judge,
        kind=spec.judge.kind,
        store=store,
        context={"backend": b},
        run_id=run_id,
        concurrency=spec.limits.concurrency,
        rpm=spec.limits.rpm,
        tpm=spec.limits.tpm,
        rerun_failed=rerun_failed,
        progress=progress,
        spec=spec.model_dump(mode="json"),
    )
