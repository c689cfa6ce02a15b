"""The batch engine: an offline job's model calls through a provider's batch API.

Each round judges the items still open with a backend that answers from
batch results (:class:`AnswerBackend`). The requests it had no answer for
(both orders of a pairwise item, a repair) go into batches; once those are
settled the round repeats, so verdicts are parsed by the judge's own code,
exactly as a live call's would be. Batch ids and states live in the store.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from judgegraph.backends import Backend
from judgegraph.judges import Judge
from judgegraph.types import Usage

from ._batch_api import AnswerBackend, AnswerBook, BatchOptions, BatchSettler, misses_var
from ._batch_store import BatchTable
from ._judging import fingerprint_for, judge_prepared
from ._recorder import JobProgress, JobSummary, ProgressCallback, _Recorder, _summary
from ._runner import _claim, _open, default_run_id
from ._sources import count_rows, expand_paths, iter_rows
from ._spec import PreparedRow, RowPreparer, SourceConfig, config_hash
from ._store import Store

__all__ = ["BatchEstimate", "BatchOptions", "aestimate_batch_job", "arun_batch_job"]


class BatchEstimate(BaseModel):
    """What a batch run would send (first round: repairs are not foreseen)."""

    model_config = ConfigDict(frozen=True)

    items: int
    requests: int
    prompt_tokens: int  # estimated: characters / 4
    completion_tokens: int  # upper bound: max_tokens per request
    live_cost_usd: float | None
    batch_cost_usd: float | None


def _wrap(judge: Judge[Any, Any], context: Mapping[str, Any] | None, book: AnswerBook, discount: float) -> Any:
    wrapped: dict[int, AnswerBackend] = {}

    def wrap(b: Backend) -> Backend:
        return wrapped.setdefault(id(b), AnswerBackend(b, book, discount=discount))

    ctx = {k: wrap(v) if isinstance(v, Backend) else v for k, v in (context or {}).items()}
    return ctx, judge.with_backends(wrap)


async def _apass(
    judge: Judge[Any, Any], ctx: dict[str, Any], todo: list[PreparedRow], chash: str, concurrency: int
) -> list[tuple[PreparedRow, list[str], Any]]:
    sem = asyncio.Semaphore(concurrency)

    async def one(prep: PreparedRow) -> tuple[PreparedRow, list[str], Any]:
        misses: list[str] = []
        misses_var.set(misses)  # this task's copy of the context: the orders' subtasks share the list
        async with sem:
            record = await judge_prepared(judge, prep, context=ctx, config_hash=chash)
        return prep, misses, record

    return list(await asyncio.gather(*(one(p) for p in todo)))


def _check(judge: Any, context: Mapping[str, Any] | None) -> Judge[Any, Any]:
    if isinstance(judge, str):
        found = (context or {}).get(judge)
        if found is None:
            raise LookupError(f"batch job: no judge under {judge!r} in the context")
        judge = found
    if not isinstance(judge, Judge):
        raise TypeError(f"batch job: the judge is a {type(judge).__name__}, not a judgegraph Judge")
    return judge


def _client_of(judge: Judge[Any, Any], context: Mapping[str, Any] | None) -> Any:
    backend = judge.backend_for(context)
    client = getattr(backend, "client", None)
    if client is None or not hasattr(client, "batches"):
        raise TypeError(
            f"the batch API needs an OpenAI backend (got {type(backend).__name__}); pass client= to use another"
        )
    return client


async def arun_batch_job(
    source: SourceConfig,
    *,
    judge: Any,
    kind: str,
    store: Store | str | os.PathLike[str],
    context: Mapping[str, Any] | None = None,
    run_id: str | None = None,
    client: Any = None,
    options: BatchOptions | None = None,
    concurrency: int = 256,
    rerun_failed: bool = False,
    progress: ProgressCallback | None = None,
) -> JobSummary:
    """Judge every row of ``source`` through the provider's batch API.

    Rerunning the same call after an interruption (``kill -9`` included)
    picks up the batches the store records and creates none twice.
    """
    opt = options or BatchOptions()
    judge = _check(judge, context)
    client = client or _client_of(judge, context)
    preparer = RowPreparer(kind, source)
    paths = expand_paths(source.path)
    fp = fingerprint_for(judge, context)
    chash = config_hash(fp)
    run_id = run_id or default_run_id(source, chash)
    st, owned = _open(store)
    table = BatchTable(st.path)
    try:
        _, resumed = st.open_run(
            run_id, config_hash=chash, kind=kind, spec={"source": source.model_dump(mode="json"), "judge": fp}
        )
        rec = _Recorder(st, run_id, chash, JobProgress(total=count_rows(paths, source.format)), progress)
        started = time.monotonic()
        state = "interrupted"
        try:
            claimed: set[str] = set()
            todo = [
                p for r in iter_rows(paths, source.format) if (p := _claim(preparer, r, rec, claimed, rerun_failed))
            ]
            book = AnswerBook()
            ctx, bjudge = _wrap(judge, context, book, opt.batch_discount)
            settler = BatchSettler(client, table, chash, book, opt)
            for round_ in range(opt.max_rounds + 1):
                book.closed = round_ == opt.max_rounds
                wanted: set[str] = set()
                still: list[PreparedRow] = []
                for prep, misses, record in await _apass(bjudge, ctx, todo, chash, concurrency):
                    if misses and not book.closed:
                        wanted.update(misses)
                        still.append(prep)
                    else:
                        rec.result(prep.where, record)
                st.flush()
                todo = still
                if not todo:
                    break
                await settler.asettle(wanted)
            state = "finished"
        finally:
            st.flush()
            st.set_state(run_id, state)
        return _summary(rec, st, "batch", resumed, time.monotonic() - started)
    finally:
        table.close()
        if owned:
            st.close()


async def aestimate_batch_job(
    source: SourceConfig,
    *,
    judge: Any,
    kind: str,
    store: Store | str | os.PathLike[str] | None = None,
    context: Mapping[str, Any] | None = None,
    options: BatchOptions | None = None,
    rerun_failed: bool = False,
) -> BatchEstimate:
    """The requests, tokens and cost (live and batch) of a batch run, sending nothing.
    Items ``store`` already holds a result for are left out, as the run would."""
    opt = options or BatchOptions()
    judge = _check(judge, context)
    preparer = RowPreparer(kind, source)
    chash = config_hash(fingerprint_for(judge, context))
    st, owned = _open(store) if store is not None else (None, False)
    try:
        todo: list[PreparedRow] = []
        for r in iter_rows(expand_paths(source.path), source.format):
            prep = preparer(r)
            if prep.item is None or prep.item_hash is None:
                continue
            got = st.result_status(chash, prep.item_hash) if st is not None else None
            if got is None or (rerun_failed and got != "ok"):
                todo.append(prep)
    finally:
        if owned and st is not None:
            st.close()
    book = AnswerBook()
    ctx, bjudge = _wrap(judge, context, book, 1.0)
    await _apass(bjudge, ctx, todo, chash, 256)
    prompt = sum(len(str(m.get("content", ""))) for b in book.pending.values() for m in b["messages"]) // 4
    completion = sum(int(b.get("max_tokens") or b.get("max_completion_tokens") or 0) for b in book.pending.values())
    pricing = getattr(judge.backend_for(context), "pricing", None)
    live = pricing.cost(Usage(prompt_tokens=prompt, completion_tokens=completion)) if pricing else None
    return BatchEstimate(
        items=len(todo),
        requests=len(book.pending),
        prompt_tokens=prompt,
        completion_tokens=completion,
        live_cost_usd=live,
        batch_cost_usd=live * opt.batch_discount if live is not None else None,
    )
