"""The batch engine: an offline job's model calls through a provider's batch API.

Each round judges the items still open with a backend that answers from
batch results (:class:`AnswerBackend`). The requests it had no answer for
(both orders of a pairwise item, a repair) go into batches; once those are
settled the round repeats, so verdicts are parsed by the judge's own code,
exactly as a live call's would be. Batch ids and states live in the store.

Only the backends the batch API is for (OpenAI ones, or those serving
``BatchOptions.models``) answer from batches. Every other backend (a local
cascade tier: Transformers, TGI, scripted) runs live, each distinct request
once per job (:class:`LiveOnce`), so a cascade's policies decide on the
local verdicts in the first round and only its escalated items' requests go
into batches; later rounds reuse the local answers.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from pydantic import BaseModel, ConfigDict

from judgegraph.backends import Backend, BackendError, GenerateRequest, GenerateResult, cache_key
from judgegraph.judges import FromContext, Judge
from judgegraph.types import Pricing, Usage

from ._batch_api import AnswerBackend, AnswerBook, BatchOptions, BatchSettler, misses_var
from ._batch_store import BatchTable
from ._judging import fingerprint_for, judge_prepared
from ._recorder import JobProgress, JobSummary, ProgressCallback, _Recorder, _summary
from ._run_setup import claim_row, default_run_id, open_store
from ._sources import check_unchanged, count_rows, expand_paths, iter_rows, resume_notice, source_state
from ._spec import PreparedRow, RowPreparer, SourceConfig, config_hash
from ._store import Store

__all__ = ["BatchEstimate", "BatchOptions", "LiveOnce", "aestimate_batch_job", "arun_batch_job"]

# The live (local-tier) request keys the item being judged used.
live_var: ContextVar[list[str] | None] = ContextVar("judgegraph_batch_live", default=None)


class BatchEstimate(BaseModel):
    """What a batch run would send (first round: repairs are not foreseen; for a cascade,
    every item counts as escalated, since the local tier is not run: an upper bound)."""

    model_config = ConfigDict(frozen=True)

    items: int
    requests: int
    prompt_tokens: int  # estimated: characters / 4
    completion_tokens: int  # upper bound: max_tokens per request
    live_cost_usd: float | None
    batch_cost_usd: float | None


class LiveOnce:
    """A local backend run live, each distinct request once per job.

    A cascade item waiting on its escalated tier's batch is judged again in
    the next round; its local tier then gets the answers (or failures) of
    the first round instead of running again, so its decision cannot change
    between rounds and nothing local is paid for twice.
    """

    def __init__(self, inner: Backend, memo: dict[str, GenerateResult | BackendError]) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.capabilities = inner.capabilities
        self.pricing = inner.pricing
        self.memo = memo

    def __getattr__(self, name: str) -> Any:  # endpoint, structured_output, ... of the wrapped backend
        return getattr(self.inner, name)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        # The call's verdict identity, per backend object: two scripted stand-ins
        # may share a name and still answer differently.
        key = f"{id(self.inner)}:{cache_key(request, self.inner)}"
        used = live_var.get()
        if used is not None:
            used.append(key)
        got = self.memo.get(key)
        if got is None:
            try:
                got = await self.inner.generate(request)
            except BackendError as exc:
                got = exc
            self.memo[key] = got
        if isinstance(got, BackendError):
            raise got
        return got


class _NotRun:
    """A local backend in a dry run: not run, so its items count as escalated (an upper bound)."""

    def __init__(self, inner: Backend) -> None:
        self.name: str = inner.name
        self.model: str = inner.model
        self.capabilities = inner.capabilities
        self.pricing: Pricing | None = None

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        raise BackendError("dry run: the local tier is not run")


def _backends(judge: Judge[Any, Any], context: Mapping[str, Any] | None) -> list[Backend]:
    """Every backend the judge holds or finds in the context (cascade tiers included)."""
    found: dict[int, Backend] = {}

    def seen(b: Backend) -> Backend:
        found.setdefault(id(b), b)
        return b

    judge.with_backends(seen)
    for v in (context or {}).values():
        if isinstance(v, Backend):
            seen(v)
    return list(found.values())


def _batchable(opt: BatchOptions, explicit_client: bool, all_: list[Backend]) -> Callable[[Backend], bool]:
    """Which backends go through the batch API: those serving ``opt.models``;
    else every OpenAI backend; else (a ``client=`` given for judges with no
    OpenAI backend) every backend."""
    if opt.models is not None:
        models = set(opt.models)
        return lambda b: b.model in models

    def openai(b: Backend) -> bool:
        return b.name == "openai" and hasattr(getattr(b, "client", None), "batches")

    if explicit_client and not any(openai(b) for b in all_):
        return lambda b: True
    return openai


def _wrap(
    judge: Judge[Any, Any],
    context: Mapping[str, Any] | None,
    book: AnswerBook,
    discount: float,
    batched: Callable[[Backend], bool],
    local: Callable[[Backend], Backend],
    live_repairs: bool = False,
) -> Any:
    wrapped: dict[int, Backend] = {}

    def wrap(b: Backend) -> Backend:
        if id(b) not in wrapped:
            wrapped[id(b)] = (
                AnswerBackend(b, book, discount=discount, live_repairs=live_repairs) if batched(b) else local(b)
            )
        return wrapped[id(b)]

    ctx = {k: wrap(v) if isinstance(v, Backend) else v for k, v in (context or {}).items()}
    return ctx, judge.with_backends(wrap)


async def _apass(
    judge: Judge[Any, Any], ctx: dict[str, Any], todo: list[PreparedRow], chash: str, concurrency: int
) -> list[tuple[PreparedRow, list[str], list[str], Any]]:
    sem = asyncio.Semaphore(concurrency)

    async def one(prep: PreparedRow) -> tuple[PreparedRow, list[str], list[str], Any]:
        misses: list[str] = []
        live: list[str] = []
        misses_var.set(misses)  # this task's copy of the context: the orders' subtasks share the lists
        live_var.set(live)
        async with sem:
            record = await judge_prepared(judge, prep, context=ctx, config_hash=chash)
        return prep, misses, live, record

    return list(await asyncio.gather(*(one(p) for p in todo)))


def _check(judge: Any, context: Mapping[str, Any] | None) -> Judge[Any, Any]:
    if isinstance(judge, FromContext):
        found = judge.lookup(context)
        if found is None:
            raise LookupError(f"batch job: no judge under {judge.key!r} in the context")
        judge = found
    if not isinstance(judge, Judge):
        raise TypeError(f"batch job: the judge is a {type(judge).__name__}, not a judgegraph Judge")
    if judge.needs_batch:
        raise ValueError(
            "batch job: a budget policy ranks each chunk of items, which the batch engine's rounds would change;"
            " use a threshold policy (LowConfidence, ScoreMargin, SwapInconsistency) with --batch-api"
        )
    return judge


def _client_of(backends: list[Backend], batched: Callable[[Backend], bool]) -> Any:
    remote = [b for b in backends if batched(b)]
    if not remote:
        names = ", ".join(sorted({type(b).__name__ for b in backends})) or "none"
        raise TypeError(f"the batch API needs an OpenAI backend (got {names}); pass client= to use another")
    endpoints = {getattr(b, "endpoint", None) for b in remote}
    if len(endpoints) > 1:
        raise ValueError(
            f"batch job: the batched backends are on {len(endpoints)} servers ({sorted(map(str, endpoints))});"
            " one batch job sends to one provider: pass client= or BatchOptions(models=...)"
        )
    client = getattr(remote[0], "client", None)
    if client is None or not hasattr(client, "batches"):
        raise TypeError(f"{type(remote[0]).__name__} has no batch API client; pass client=")
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

    ``BatchOptions(engine="vllm", vllm_model=...)`` runs the same batch files
    through vLLM's offline ``run_batch`` on a local model folder instead of a
    provider (see ``_batch_vllm``); ``client`` then is not needed.

    Only the backends the batch API is for are batched (see
    :class:`BatchOptions` ``models``); a cascade's local tier runs live and
    only its escalated items' requests go into batches. The local answers are
    kept in memory for the job, not in the store: a resumed job runs the
    local tier again (a deterministic local judge escalates the same items).
    """
    opt = options or BatchOptions()
    judge = _check(judge, context)
    backends = _backends(judge, context)
    local = opt.engine == "vllm" and client is None
    batched = _batchable(opt, client is not None or local, backends)
    client = client or (None if local else _client_of(backends, batched))
    if local:  # checked before the store is opened: a wrong option changes nothing
        from ._batch_vllm import check_options

        check_options(opt)
    preparer = RowPreparer(kind, source)
    paths = expand_paths(source.path)
    before = source_state(paths)
    fp = fingerprint_for(judge, context, engine=opt.engine_identity())
    chash = config_hash(fp)
    run_id = run_id or default_run_id(source, chash)
    st, owned = open_store(store)
    if local:
        from ._batch_vllm import client_for

        client = client_for(st.path, opt)
    table = BatchTable(st.path)
    try:
        run_spec = {"source": source.model_dump(mode="json"), "judge": fp, "source_state": before}
        info, resumed = st.open_run(run_id, config_hash=chash, kind=kind, spec=run_spec)
        rec = _Recorder(st, run_id, chash, JobProgress(total=count_rows(paths, source.format)), progress)
        if resumed and (notice := resume_notice(info.spec, before)) is not None:
            rec.problem(notice)
        started = time.monotonic()
        state = "interrupted"
        try:
            claimed: set[str] = set()
            todo = [
                p for r in iter_rows(paths, source.format) if (p := claim_row(preparer, r, rec, claimed, rerun_failed))
            ]
            check_unchanged(before, paths)  # before any batch is paid for
            book = AnswerBook()
            memo: dict[str, GenerateResult | BackendError] = {}
            ctx, bjudge = _wrap(
                judge,
                context,
                book,
                opt.batch_discount,
                batched,
                lambda b: LiveOnce(b, memo),
                live_repairs=opt.repairs == "live",
            )

            def on_states(batches: dict[str, int], requests: dict[str, int]) -> None:
                rec.progress.batches, rec.progress.batch_requests = batches, requests
                rec._tick()

            settler = BatchSettler(client, table, chash, book, opt, on_states=on_states)
            for round_ in range(opt.max_rounds + 1):
                book.closed = round_ == opt.max_rounds
                wanted: set[str] = set()
                still: list[PreparedRow] = []
                keep: set[str] = set()
                for prep, misses, live, record in await _apass(bjudge, ctx, todo, chash, concurrency):
                    if misses and not book.closed:
                        wanted.update(misses)
                        still.append(prep)
                        keep.update(live)
                    else:
                        rec.result(prep.where, record)
                st.flush()
                for k in [k for k in memo if k not in keep]:  # local answers only items still open need
                    del memo[k]
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
    chash = config_hash(fingerprint_for(judge, context, engine=opt.engine_identity()))
    st, owned = open_store(store) if store is not None else (None, False)
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
    backends = _backends(judge, context)
    batched = _batchable(opt, False, backends)
    if not any(batched(b) for b in backends):
        batched = _batchable(opt, True, backends)
    ctx, bjudge = _wrap(judge, context, book, 1.0, batched, _NotRun)
    await _apass(bjudge, ctx, todo, chash, 256)
    prices = {b.model: b.pricing for b in backends if batched(b)}
    prompt = completion = 0
    live: float | None = 0.0
    for body in book.pending.values():
        p = sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4
        c = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        prompt, completion = prompt + p, completion + c
        pricing = prices.get(str(body.get("model")))
        priced = pricing.cost(Usage(prompt_tokens=p, completion_tokens=c)) if pricing else None
        live = live + priced if live is not None and priced is not None else None
    if not book.pending and not any(b.pricing for b in backends if batched(b)):
        live = None
    return BatchEstimate(
        items=len(todo),
        requests=len(book.pending),
        prompt_tokens=prompt,
        completion_tokens=completion,
        live_cost_usd=live,
        batch_cost_usd=live * opt.batch_discount if live is not None else None,
    )
