"""The local engine: stream a source through a judge into the store.

The unit of work is one ``judge.ajudge(item)``. At most ``concurrency``
items are in flight; the source is read only as fast as slots free up, so
memory stays flat however long the input is. Every row is recorded with its
outcome: a verdict (ok / unparsed / error, with the reason), or the input
problem that kept it from being judged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from judgegraph.backends import Backend, RateLimiter
from judgegraph.judges import FromContext, Judge

from ._batch_vllm import spec_backend
from ._judging import failure_record, fingerprint_for, judge_prepared, limit_context, verdict_record
from ._recorder import JobProgress, JobSummary, ProgressCallback, _Recorder, _summary
from ._run_setup import claim_row, default_run_id, open_store
from ._sources import check_unchanged, count_rows, expand_paths, iter_rows, resume_notice, source_state
from ._spec import (
    JobSpec,
    PreparedRow,
    RowPreparer,
    SourceConfig,
    build_judge,
    config_hash,
)
from ._store import Store
from ._store_guard import StoreCommitError, StoreError

__all__ = ["arun_job", "arun_spec"]

_log = logging.getLogger("judgegraph.jobs")


async def arun_job(
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
    batch_api: bool = False,
    batch_options: Any = None,
) -> JobSummary:
    """Judge every row of ``source`` with ``judge`` (a judgegraph Judge, or
    ``from_context(key)`` for the one ``context`` holds) and write each outcome
    to ``store``. Backends the judge takes ``from_context`` come from ``context`` too.

    Rows already judged under the same judge configuration are skipped (a
    resumed or repeated run pays nothing for them); with ``rerun_failed``,
    rows whose stored result is unparsed or error are judged again.

    With ``batch_api`` the model calls go through the provider's batch API
    (half price, results within a day; ``batch_options``: a
    :class:`~judgegraph.jobs.BatchOptions`), resumably: see ``arun_batch_job``.
    """
    if batch_api:
        from ._batch import arun_batch_job

        return await arun_batch_job(
            source,
            judge=judge,
            kind=kind,
            store=store,
            context=context,
            run_id=run_id,
            options=batch_options,
            rerun_failed=rerun_failed,
            progress=progress,
        )
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if isinstance(judge, FromContext):  # as the graphs take judges
        found = judge.lookup(context)
        if found is None:
            raise LookupError(f"arun_job: no judge under {judge.key!r} in the context")
        judge = found
    if not isinstance(judge, Judge):
        raise TypeError(
            f"arun_job: the judge is a {type(judge).__name__}, not a judgegraph Judge "
            "(subclass judgegraph.judges.Judge to run your own; from_context(key) takes the one the context holds)"
        )
    preparer = RowPreparer(kind, source)
    paths = expand_paths(source.path)
    before = source_state(paths)
    fp = fingerprint_for(judge, context)
    chash = config_hash(fp)
    run_id = run_id or default_run_id(source, chash)
    st, owned = open_store(store)
    try:
        run_spec = dict(spec) if spec is not None else {"source": source.model_dump(mode="json"), "judge": fp}
        info, resumed = st.open_run(run_id, config_hash=chash, kind=kind, spec={**run_spec, "source_state": before})
        limiter = RateLimiter(rpm=rpm, tpm=tpm) if (rpm or tpm) else None
        ctx, judge = limit_context(judge, context, limiter)
        prog = JobProgress(total=count_rows(paths, source.format))
        rec = _Recorder(st, run_id, chash, prog, progress)
        if resumed and (notice := resume_notice(info.spec, before)) is not None:
            rec.problem(notice)
        started = time.monotonic()
        state = "interrupted"
        try:
            await _drive(preparer, iter_rows(paths, source.format), rec, judge, ctx, concurrency, rerun_failed)
            check_unchanged(before, paths)
            state = "finished"
        finally:
            try:
                st.set_state(run_id, state)
            except StoreError:
                if state == "finished":
                    raise  # otherwise the job's own error is on its way out, and says more

        summary = _summary(rec, st, "local", resumed, time.monotonic() - started)
    except BaseException:
        if owned:
            with contextlib.suppress(StoreError):  # the error on its way out says more
                st.close()
        raise
    if owned:
        st.close()
    return summary


async def _drive(
    preparer: RowPreparer,
    rows: Any,
    rec: _Recorder,
    judge: Any,
    ctx: dict[str, Any],
    concurrency: int,
    rerun_failed: bool,
) -> None:
    store = rec.store
    stop = asyncio.Event()
    kick = asyncio.Event()  # commit now: stopping, or the unsaved buffer is full
    saved = asyncio.Event()

    async def flusher() -> None:
        # A failed commit keeps its batch buffered and is retried on the next
        # tick; only a store that keeps failing stops the job.
        failures = 0
        while not stop.is_set():
            try:
                await asyncio.wait_for(kick.wait(), store.flush_interval_s)
            except TimeoutError:
                pass
            kick.clear()
            try:
                await store.aflush()
                failures = 0
                saved.set()
            except StoreCommitError as exc:
                failures += 1
                _log.warning("%s (failure %d of %d in a row)", exc, failures, store.max_commit_failures)
                if failures >= store.max_commit_failures:
                    raise

    async def room() -> None:
        # Backpressure: judging waits while the store holds max_unsaved
        # results it has not committed, so a store that refuses writes ends
        # the job before more work piles up in memory than a rerun can redo.
        while store.unsaved >= store.max_unsaved:
            saved.clear()
            kick.set()
            await saved.wait()

    store.auto_flush = False  # commits happen on the flusher's thread, off the event loop
    flush_task = asyncio.create_task(flusher())
    if judge.needs_batch:
        # A judge that ranks a whole batch (a cascade with a budget policy)
        # cannot take items one at a time: feed it chunks.
        work = _drive_batches(preparer, rows, rec, judge, ctx, concurrency, rerun_failed, room)
    else:
        work = _drive_pool(preparer, rows, rec, judge, ctx, concurrency, rerun_failed, room)
    work_task = asyncio.create_task(work)
    try:
        await asyncio.wait({work_task, flush_task}, return_when=asyncio.FIRST_COMPLETED)
        if flush_task.done() and not work_task.done():
            # The store refused commits again and again: stop judging items
            # whose results could not be saved.
            work_task.cancel()
        await asyncio.gather(work_task, return_exceptions=True)
    finally:
        stop.set()
        kick.set()
        if not work_task.done():
            work_task.cancel()
            await asyncio.gather(work_task, return_exceptions=True)
        flush_error = (await asyncio.gather(flush_task, return_exceptions=True))[0]
        store.auto_flush = True
    # The last commit; if it fails too, the error says how many results were not saved.
    store.flush()
    if isinstance(flush_error, StoreCommitError):
        raise StoreCommitError(
            f"{store.path}: the job stopped after {store.max_commit_failures} failed commits in a row "
            f"({flush_error.reason}); everything judged is saved now: run the same command again to judge the rest",
            pending=0,
            reason=flush_error.reason,
        )
    work_task.result()  # the work's own error, if it had one


async def _drive_pool(
    preparer: RowPreparer,
    rows: Any,
    rec: _Recorder,
    judge: Any,
    ctx: dict[str, Any],
    concurrency: int,
    rerun_failed: bool,
    room: Callable[[], Awaitable[None]],
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
            prep = claim_row(preparer, srow, rec, inflight, rerun_failed)
            if prep is not None:
                return prep
        return None

    async def worker() -> None:
        while True:
            await room()
            if (prep := next_item()) is None:
                return
            try:
                record = await judge_prepared(judge, prep, context=ctx, config_hash=rec.config_hash)
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
    room: Callable[[], Awaitable[None]],
    batch_size: int = 256,
) -> None:
    chunk: list[PreparedRow] = []
    seen: set[str] = set()

    async def run_chunk() -> None:
        if not chunk:
            return
        await room()
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
        prep = claim_row(preparer, srow, rec, seen, rerun_failed)
        if prep is None:
            continue
        chunk.append(prep)
        if len(chunk) >= batch_size:
            await run_chunk()
    await run_chunk()


def _pool_size(spec: JobSpec) -> int:
    """Connections for ``concurrency`` items: a pairwise item with both orders sends two requests at once."""
    swap = spec.judge.swap
    both = spec.judge.kind == "pairwise" and (swap is None or swap.mode == "both")
    per_item = 2 if both else len(spec.judge.criteria or ()) or 1
    return spec.limits.concurrency * per_item


async def arun_spec(
    spec: JobSpec,
    *,
    store: Store | str | os.PathLike[str],
    run_id: str | None = None,
    rerun_failed: bool = False,
    progress: ProgressCallback | None = None,
    backend: Backend | None = None,
    batch_api: bool | None = None,
    batch_options: Any = None,
) -> JobSummary:
    """Run a declarative :class:`JobSpec` on the local engine. ``backend``
    overrides the one the spec describes (e.g. a ScriptedBackend in tests);
    the config hash still comes from the judge and the backend's model.

    ``batch_api`` (default: whether the spec has ``batch_api`` options) sends
    the model calls through the provider's batch API; ``batch_options``
    replaces the spec's options."""
    if batch_api is None:
        batch_api = spec.batch_api is not None
    if batch_options is None:
        batch_options = spec.batch_api
    judge = build_judge(spec.judge)
    b = backend or spec_backend(spec.backend, batch_options if batch_api else None, max_connections=_pool_size(spec))
    return await arun_job(
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
        batch_api=batch_api,
        batch_options=batch_options,
    )
