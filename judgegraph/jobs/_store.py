"""The result store: one SQLite file in WAL mode.

Results are keyed by ``(config_hash, item_hash)``: a verdict exists once per
judge configuration and input, whichever run or engine produced it, so a
resumed or repeated job finds it and does not pay again. Each run also
records its rows (``run_id, file, row``) with the item hash, label and any
input problem, which is what reports are built from.

Writes are buffered and committed in small transactions (at most every
``flush_interval_s``); a process killed with ``kill -9`` loses at most the
results of that last interval, never a committed one, and never leaves a
half-written row.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["ItemRecord", "ResultRecord", "RunInfo", "RunMismatchError", "Store", "StoredRow"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    config_hash TEXT NOT NULL,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'running'
);
CREATE TABLE IF NOT EXISTS results (
    config_hash TEXT NOT NULL,
    item_hash TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    result TEXT NOT NULL,
    cost_usd REAL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    finished_at REAL NOT NULL,
    PRIMARY KEY (config_hash, item_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS inputs (
    item_hash TEXT PRIMARY KEY,
    input TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS items (
    run_id TEXT NOT NULL,
    file INTEGER NOT NULL,
    row INTEGER NOT NULL,
    item_hash TEXT,
    item_id TEXT,
    label TEXT,
    category TEXT,
    problem TEXT,
    PRIMARY KEY (run_id, file, row)
) WITHOUT ROWID;
"""


class RunMismatchError(ValueError):
    """A run id that exists with a different judge configuration."""


class RunInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    config_hash: str
    kind: str
    spec: dict[str, Any]
    created_at: float
    updated_at: float
    state: str


@dataclass(frozen=True, slots=True)
class ResultRecord:
    config_hash: str
    item_hash: str
    status: str
    reason: str | None
    result: str  # the verdict as JSON
    cost_usd: float | None
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    finished_at: float


@dataclass(frozen=True, slots=True)
class ItemRecord:
    run_id: str
    file: int
    row: int
    item_hash: str | None
    item_id: str | None
    label: str | None
    category: str | None
    problem: str | None


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A run's row joined with its result (if any) and input."""

    file: int
    row: int
    item_hash: str | None
    item_id: str | None
    label: Any
    category: str | None
    problem: str | None
    status: str | None
    reason: str | None
    result: dict[str, Any] | None
    cost_usd: float | None
    prompt_tokens: int
    completion_tokens: int
    input: dict[str, Any] | None


class Store:
    """One SQLite database; safe for one writer process at a time plus readers."""

    def __init__(self, path: str | os.PathLike[str], *, flush_interval_s: float = 0.1, flush_rows: int = 512) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_interval_s = flush_interval_s
        self.flush_rows = flush_rows
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a killed process (only power loss can
        # drop the last transactions), at a fraction of FULL's fsync cost.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(_SCHEMA)
        got = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if got is None:
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        elif int(got[0]) != SCHEMA_VERSION:
            raise ValueError(f"{self.path}: store schema {got[0]} is not the supported {SCHEMA_VERSION}")
        self._results: list[ResultRecord] = []
        self._items: list[ItemRecord] = []
        self._inputs: list[tuple[str, str]] = []
        self._pending_hashes: set[tuple[str, str]] = set()
        self._committing: dict[tuple[str, str], str] = {}  # being written by aflush()
        self._writer: sqlite3.Connection | None = None
        self._write_lock = threading.Lock()
        self.auto_flush = True
        self._last_flush = time.monotonic()

    # ------------------------------------------------------------ runs

    def open_run(self, run_id: str, *, config_hash: str, kind: str, spec: dict[str, Any]) -> tuple[RunInfo, bool]:
        """Create the run, or return the existing one (``True`` when it existed).
        An existing run with another judge configuration is an error: results
        from two judges must not be mixed under one name."""
        now = time.time()
        row = self._db.execute("SELECT config_hash FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is not None:
            if row[0] != config_hash:
                raise RunMismatchError(
                    f"run {run_id!r} exists with another judge configuration ({row[0][:12]} != {config_hash[:12]}); "
                    "pick another run id"
                )
            self._db.execute("UPDATE runs SET updated_at=?, state='running' WHERE run_id=?", (now, run_id))
            return self.run(run_id), True
        self._db.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?, 'running')",
            (run_id, config_hash, kind, json.dumps(spec, sort_keys=True), now, now),
        )
        return self.run(run_id), False

    def set_state(self, run_id: str, state: str) -> None:
        self.flush()
        self._db.execute("UPDATE runs SET state=?, updated_at=? WHERE run_id=?", (state, time.time(), run_id))

    def run(self, run_id: str) -> RunInfo:
        row = self._db.execute(
            "SELECT run_id, config_hash, kind, spec, created_at, updated_at, state FROM runs WHERE run_id=?", (run_id,)
        ).fetchone()
        if row is None:
            known = [r[0] for r in self._db.execute("SELECT run_id FROM runs ORDER BY created_at")]
            raise KeyError(f"no run {run_id!r} in {self.path}; runs here: {known or 'none'}")
        return RunInfo(
            run_id=row[0],
            config_hash=row[1],
            kind=row[2],
            spec=json.loads(row[3]),
            created_at=row[4],
            updated_at=row[5],
            state=row[6],
        )

    def runs(self) -> list[RunInfo]:
        return [self.run(r[0]) for r in self._db.execute("SELECT run_id FROM runs ORDER BY created_at")]

    # ------------------------------------------------------------ lookups

    def result_status(self, config_hash: str, item_hash: str) -> str | None:
        """The stored status of a result, looking at unflushed writes too."""
        if (config_hash, item_hash) in self._pending_hashes:
            for r in reversed(self._results):
                if r.config_hash == config_hash and r.item_hash == item_hash:
                    return r.status
        if self._committing and (config_hash, item_hash) in self._committing:
            return self._committing[(config_hash, item_hash)]
        row = self._db.execute(
            "SELECT status FROM results WHERE config_hash=? AND item_hash=?", (config_hash, item_hash)
        ).fetchone()
        return None if row is None else str(row[0])

    def finished_at(self, config_hash: str, item_hash: str) -> float:
        """When the stored result was written (0.0 if there is none)."""
        self.flush()
        row = self._db.execute(
            "SELECT finished_at FROM results WHERE config_hash=? AND item_hash=?", (config_hash, item_hash)
        ).fetchone()
        return 0.0 if row is None else float(row[0])

    def done_hashes(self, config_hash: str, *, include_failed: bool) -> set[str]:
        sql = "SELECT item_hash FROM results WHERE config_hash=?"
        if not include_failed:
            sql += " AND status='ok'"
        self.flush()
        return {r[0] for r in self._db.execute(sql, (config_hash,))}

    # ------------------------------------------------------------ writes

    def add_item(self, item: ItemRecord, input_json: str | None = None) -> None:
        self._items.append(item)
        if input_json is not None and item.item_hash is not None:
            self._inputs.append((item.item_hash, input_json))
        self._maybe_flush()

    def add_result(self, result: ResultRecord) -> None:
        self._results.append(result)
        self._pending_hashes.add((result.config_hash, result.item_hash))
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if not self.auto_flush:
            return
        pending = len(self._results) + len(self._items)
        if pending >= self.flush_rows or (pending and time.monotonic() - self._last_flush >= self.flush_interval_s):
            self.flush()

    def _take(self) -> tuple[list[ResultRecord], list[ItemRecord], list[tuple[str, str]]]:
        batch = (self._results, self._items, self._inputs)
        self._results, self._items, self._inputs = [], [], []
        self._pending_hashes = set()
        return batch

    def flush(self) -> None:
        """Commit everything buffered in one transaction."""
        self._last_flush = time.monotonic()
        if self._results or self._items or self._inputs:
            self._commit(self._db, *self._take())

    async def aflush(self) -> None:
        """Like :meth:`flush`, but the commit runs on a worker thread with its
        own connection, so a slow disk never stalls the event loop. Results
        being committed stay visible to :meth:`result_status`."""
        self._last_flush = time.monotonic()
        if not (self._results or self._items or self._inputs):
            return
        results, items, inputs = self._take()
        self._committing = {(r.config_hash, r.item_hash): r.status for r in results}
        if self._writer is None:
            self._writer = self._connect()
        try:
            await asyncio.to_thread(self._commit, self._writer, results, items, inputs)
        finally:
            self._committing = {}

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=30000")
        return db

    def _commit(
        self,
        db: sqlite3.Connection,
        results: list[ResultRecord],
        items: list[ItemRecord],
        inputs: list[tuple[str, str]],
    ) -> None:
        with self._write_lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                if inputs:
                    db.executemany("INSERT OR IGNORE INTO inputs VALUES (?,?)", inputs)
                if items:
                    # A row read again on resume keeps what it had, except that a
                    # newly readable row replaces an unreadable one.
                    db.executemany(
                        "INSERT INTO items VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(run_id, file, row) DO UPDATE SET "
                        "item_hash=excluded.item_hash, item_id=excluded.item_id, label=excluded.label, "
                        "category=excluded.category, problem=excluded.problem",
                        [
                            (i.run_id, i.file, i.row, i.item_hash, i.item_id, i.label, i.category, i.problem)
                            for i in items
                        ],
                    )
                if results:
                    db.executemany(
                        "INSERT OR REPLACE INTO results VALUES (?,?,?,?,?,?,?,?,?,?)",
                        [
                            (
                                r.config_hash,
                                r.item_hash,
                                r.status,
                                r.reason,
                                r.result,
                                r.cost_usd,
                                r.prompt_tokens,
                                r.completion_tokens,
                                r.attempts,
                                r.finished_at,
                            )
                            for r in results
                        ],
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._writer is not None:
                self._writer.close()
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ reading back

    def rows(self, run_id: str, *, with_input: bool = False) -> Iterator[StoredRow]:
        """A run's rows in source order, each with its result when there is one."""
        self.flush()
        info = self.run(run_id)
        sql = (
            "SELECT i.file, i.row, i.item_hash, i.item_id, i.label, i.category, i.problem, "
            "r.status, r.reason, r.result, r.cost_usd, r.prompt_tokens, r.completion_tokens"
            + (", n.input" if with_input else ", NULL")
            + " FROM items i LEFT JOIN results r ON r.config_hash=? AND r.item_hash=i.item_hash"
            + (" LEFT JOIN inputs n ON n.item_hash=i.item_hash" if with_input else "")
            + " WHERE i.run_id=? ORDER BY i.file, i.row"
        )
        for r in self._db.execute(sql, (info.config_hash, run_id)):
            yield StoredRow(
                file=r[0],
                row=r[1],
                item_hash=r[2],
                item_id=r[3],
                label=json.loads(r[4]) if r[4] is not None else None,
                category=r[5],
                problem=r[6],
                status=r[7],
                reason=r[8],
                result=json.loads(r[9]) if r[9] is not None else None,
                cost_usd=r[10],
                prompt_tokens=r[11] or 0,
                completion_tokens=r[12] or 0,
                input=json.loads(r[13]) if r[13] is not None else None,
            )

    def counts(self, run_id: str) -> dict[str, int]:
        """Rows of a run by outcome: ok / unparsed / error / invalid / pending."""
        self.flush()
        info = self.run(run_id)
        out = {"rows": 0, "ok": 0, "unparsed": 0, "error": 0, "invalid": 0, "pending": 0}
        sql = (
            "SELECT CASE WHEN i.item_hash IS NULL THEN 'invalid' ELSE COALESCE(r.status, 'pending') END, COUNT(*) "
            "FROM items i LEFT JOIN results r ON r.config_hash=? AND r.item_hash=i.item_hash "
            "WHERE i.run_id=? GROUP BY 1"
        )
        for k, n in self._db.execute(sql, (info.config_hash, run_id)):
            out[k] = out.get(k, 0) + n
            out["rows"] += n
        return out

    def results(self, config_hash: str) -> Iterable[ResultRecord]:
        self.flush()
        for r in self._db.execute(
            "SELECT config_hash, item_hash, status, reason, result, cost_usd, prompt_tokens, completion_tokens, "
            "attempts, finished_at FROM results WHERE config_hash=? ORDER BY item_hash",
            (config_hash,),
        ):
            yield ResultRecord(*r)
