"""The Ray Data engine: the same job, scaled out over a Ray cluster.

Reading and preparing rows runs as Ray tasks (one per file, or per Parquet
row group), judging runs in a pool of actors, each with its own event loop,
backend and share of the rate limits, and the driver writes every outcome
to the same SQLite store as the local engine, through the same code. So a
job's stored results are the same whichever engine ran it, and either
engine can resume the other's run.

Workers read the API key from the environment variable the backend config
names; on a multi-machine cluster, pass it with Ray's ``runtime_env``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from judgegraph.backends import MissingExtraError, RateLimiter
from judgegraph.judges import Judge, coerce_input

from ._judging import fingerprint_for, judge_prepared, limit_context
from ._recorder import JobProgress, JobSummary, ProgressCallback, _Recorder, _summary
from ._run_setup import default_run_id
from ._runner import _pool_size
from ._sources import (
    Shard,
    check_unchanged,
    count_rows,
    expand_paths,
    iter_shard,
    plan_shards,
    resume_notice,
    source_state,
)
from ._spec import INPUT_MODELS, JobSpec, PreparedRow, RowPreparer, build_backend, build_judge, config_hash
from ._store import Store

__all__ = ["run_spec_ray"]

_ROW_COLUMNS = ("file", "row", "item_hash", "item_id", "label", "category", "problem", "input")
_RESULT_COLUMNS = (
    "status",
    "reason",
    "result",
    "cost_usd",
    "prompt_tokens",
    "completion_tokens",
    "attempts",
    "finished_at",
)


def _import_ray() -> Any:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
        import ray.data
    except ImportError:
        raise MissingExtraError("the Ray engine", "ray") from None
    return ray


def _read_shards(batch: Any, *, spec_json: str, chunk: int) -> Iterator[Any]:
    """Ray task: stream one shard's rows, prepared, as Arrow tables of ``chunk`` rows."""
    import pyarrow as pa

    spec = JobSpec.model_validate_json(spec_json)
    preparer = RowPreparer(spec.judge.kind, spec.source)
    cols: dict[str, list[Any]] = {c: [] for c in _ROW_COLUMNS}
    for raw in batch.column("shard").to_pylist():
        shard = Shard(**json.loads(raw))
        for srow in iter_shard(shard):
            p = preparer(srow)
            values = (
                p.file,
                p.row,
                p.item_hash,
                p.item_id,
                p.label,
                p.category,
                p.problem,
                p.item.model_dump_json(exclude_none=True) if p.item is not None else None,
            )
            for c, v in zip(_ROW_COLUMNS, values, strict=True):
                cols[c].append(v)
            if len(cols["file"]) >= chunk:
                yield pa.table(cols, schema=_row_schema())
                cols = {c: [] for c in _ROW_COLUMNS}
    if cols["file"]:
        yield pa.table(cols, schema=_row_schema())


def _row_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("file", pa.int64()), ("row", pa.int64())] + [(c, pa.string()) for c in _ROW_COLUMNS[2:]])


class _Claims:
    """Ray actor: the job's one register of item hashes, seeded with those the
    store already holds. A judging actor claims a batch's hashes before judging
    them, so an input that repeats across shards is judged once whichever actor
    sees it first, and the done-set lives once in the cluster, not per actor."""

    def __init__(self, done: set[str]) -> None:
        self.seen = done

    def claim(self, hashes: list[str]) -> list[bool]:
        won = []
        for h in hashes:
            won.append(h not in self.seen)
            self.seen.add(h)
        return won


class _JudgeActor:
    """Ray actor: judges the rows of each batch that no actor has claimed before."""

    def __init__(
        self,
        *,
        spec_json: str,
        config_hash: str,
        claims: list[Any],
        concurrency: int,
        rpm: float | None,
        tpm: float | None,
        actors: int = 1,
    ) -> None:
        self.spec = JobSpec.model_validate_json(spec_json)
        self.config_hash = config_hash
        self.claims = claims[0]  # in a list so Ray passes the handle, not a copy
        self.concurrency = concurrency
        self.loop = asyncio.new_event_loop()
        self.judge: Judge[Any, Any] = build_judge(self.spec.judge)
        limiter = RateLimiter(rpm=rpm, tpm=tpm) if (rpm or tpm) else None
        backend = build_backend(self.spec.backend, max_connections=_pool_size(self.spec) // max(1, actors))
        self.ctx, self.judge = limit_context(self.judge, {"backend": backend}, limiter)
        self.model = INPUT_MODELS[self.spec.judge.kind]

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        rows = batch.to_pylist()
        out = self.loop.run_until_complete(self._judge_rows(rows))
        cols = {c: [r[c] for r in rows] for c in _ROW_COLUMNS}
        for c in _RESULT_COLUMNS:
            cols[c] = [o.get(c) for o in out]
        schema = _row_schema()
        for name, typ in (
            ("status", pa.string()),
            ("reason", pa.string()),
            ("result", pa.string()),
            ("cost_usd", pa.float64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("attempts", pa.int64()),
            ("finished_at", pa.float64()),
        ):
            schema = schema.append(pa.field(name, typ))
        return pa.table(cols, schema=schema)

    async def _judge_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        import ray

        sem = asyncio.Semaphore(self.concurrency)
        valid = [i for i, r in enumerate(rows) if r["item_hash"] is not None]
        # One round trip per batch; a repeat within the batch loses to its first row.
        won = ray.get(self.claims.claim.remote([rows[i]["item_hash"] for i in valid]))
        todo = [i for i, w in zip(valid, won, strict=True) if w]

        async def one(i: int) -> dict[str, Any]:
            r = rows[i]
            item = coerce_input(self.model, json.loads(r["input"]))
            prep = PreparedRow(r["file"], r["row"], item, r["item_hash"])
            async with sem:
                rec = await judge_prepared(self.judge, prep, context=self.ctx, config_hash=self.config_hash)
            return {c: getattr(rec, c) for c in _RESULT_COLUMNS}

        results = await asyncio.gather(*(one(i) for i in todo))
        out: list[dict[str, Any]] = [{} for _ in rows]
        for i, res in zip(todo, results, strict=True):
            out[i] = res
        return out


def run_spec_ray(
    spec: JobSpec,
    *,
    store: Store | str | os.PathLike[str],
    run_id: str | None = None,
    rerun_failed: bool = False,
    progress: ProgressCallback | None = None,
    actors: int = 2,
    batch_size: int | None = None,
    address: str | None = None,
) -> JobSummary:
    """Run ``spec`` on Ray Data. Connects to ``address`` (or starts a local
    Ray) unless Ray is already initialised. ``actors`` judge concurrently,
    each with ``concurrency / actors`` items in flight and that share of the
    rpm/tpm limits."""
    from ._store import ResultRecord

    ray = _import_ray()
    if actors < 1:
        raise ValueError("actors must be at least 1")
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False

    judge = build_judge(spec.judge)
    chash = config_hash(fingerprint_for(judge, {"backend": build_backend(spec.backend)}))
    run_id = run_id or default_run_id(spec.source, chash)
    paths = expand_paths(spec.source.path)
    before = source_state(paths)
    owned = not isinstance(store, Store)
    st = Store(store) if not isinstance(store, Store) else store
    try:
        run_spec = {**spec.model_dump(mode="json"), "source_state": before}
        info, resumed = st.open_run(run_id, config_hash=chash, kind=spec.judge.kind, spec=run_spec)
        prog = JobProgress(total=count_rows(paths, spec.source.format))
        rec = _Recorder(st, run_id, chash, prog, progress)
        if resumed and (notice := resume_notice(info.spec, before)) is not None:
            rec.problem(notice)
        started = time.monotonic()
        claims = ray.remote(_Claims).options(num_cpus=0).remote(st.done_hashes(chash, include_failed=not rerun_failed))
        per_actor = max(1, spec.limits.concurrency // actors)
        spec_json = spec.model_dump_json()
        shards = plan_shards(paths, spec.source.format)
        ds = ray.data.from_items([{"shard": json.dumps(_shard_dict(s))} for s in shards])
        ds = ds.map_batches(
            _read_shards,
            batch_size=1,
            batch_format="pyarrow",
            num_cpus=0.5,
            fn_kwargs={"spec_json": spec_json, "chunk": 256},
        )
        ds = ds.map_batches(
            _JudgeActor,
            batch_size=batch_size or max(64, 4 * per_actor),
            batch_format="pyarrow",
            concurrency=actors,
            num_cpus=0.25,
            fn_constructor_kwargs={
                "spec_json": spec_json,
                "config_hash": chash,
                "claims": [claims],
                "concurrency": per_actor,
                "actors": actors,
                "rpm": spec.limits.rpm / actors if spec.limits.rpm else None,
                "tpm": spec.limits.tpm / actors if spec.limits.tpm else None,
            },
        )
        state = "interrupted"
        try:
            for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
                for r in batch.to_pylist():
                    rec.row_fields(
                        r["file"],
                        r["row"],
                        r["item_hash"],
                        r["item_id"],
                        r["label"],
                        r["category"],
                        r["problem"],
                        r["input"],
                    )
                    if r["item_hash"] is None:
                        continue
                    if r["status"] is None:  # judged before: counted by its stored verdict, as locally
                        rec.cached(rec.store.result_status(chash, r["item_hash"]))
                        continue
                    where = f"row {r['row']}" if r["file"] == 0 else f"file {r['file']} row {r['row']}"
                    rec.result(where, ResultRecord(chash, r["item_hash"], *(r[c] for c in _RESULT_COLUMNS)))
            check_unchanged(before, paths)
            state = "finished"
        finally:
            st.set_state(run_id, state)
        return _summary(rec, st, "ray", resumed, time.monotonic() - started)
    finally:
        if owned:
            st.close()


def _shard_dict(s: Shard) -> dict[str, Any]:
    return {"file": s.file, "path": s.path, "format": s.format, "row_groups": s.row_groups, "first_row": s.first_row}
