"""The result store: one SQLite file in WAL mode.

Results are keyed by ``(config_hash, item_hash)``: a verdict exists once per
judge configuration and input, whichever run or engine produced it, so a
resumed or repeated job finds it and does not pay again. Each run also
records its rows (``run_id, file, row``) with the item hash, label and any
input problem, which is what reports are built from.

Writes are buffered and committed in small transactions (at most every
``flush_interval_s``); ``kill -9`` loses at most that last interval, never a
committed or half-written row. A failed commit (busy past the timeout, disk
full, I/O error) puts its batch back to be retried and raises
:class:`StoreCommitError`: results are never dropped silently.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ._store_connect import connect_store, retry_busy, without_credentials
from ._store_guard import RunLock, StoreCommitError, StoreError
from ._store_reads import StoreReads
from ._store_records import ItemRecord, ResultRecord, RunInfo, RunMismatchError, StoredRow, read_run

__all__ = [
    "ItemRecord",
    "ResultRecord",
    "RunInfo",
    "RunMismatchError",
    "Store",
    "StoreCommitError",
    "StoreError",
    "StoredRow",
]


class Store(StoreReads):
    """One SQLite database: one writer process per run (see :class:`RunLock`) plus any readers."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_interval_s: float = 0.1,
        flush_rows: int = 512,
        busy_timeout_s: float = 30.0,
        max_unsaved: int = 4096,
        read_only: bool = False,
    ) -> None:
        """``busy_timeout_s``: how long a commit waits for another writer's lock
        before it fails (and is retried). ``max_unsaved``: results a job may
        hold uncommitted; past it, judging waits for a commit, so a store that
        refuses writes stops a job before it judges more than that into memory.
        ``read_only`` creates and changes nothing, and works on a store the
        user may not write."""
        if max_unsaved < 1:
            raise ValueError("max_unsaved must be at least 1")
        self.path = Path(path)
        self.flush_interval_s = flush_interval_s
        self.flush_rows = flush_rows
        self.busy_timeout_s = busy_timeout_s
        self.max_unsaved = max_unsaved
        self.read_only = read_only
        self._results: list[ResultRecord] = []
        self._items: list[ItemRecord] = []
        self._inputs: list[tuple[str, str]] = []
        self._pending_hashes: set[tuple[str, str]] = set()
        self._committing: dict[tuple[str, str], str] = {}  # being written by aflush()
        self._writer: sqlite3.Connection | None = None
        self._write_lock = threading.Lock()
        self._locks: dict[str, RunLock] = {}
        self._passes: dict[str, int] = {}  # run id -> the read pass this process writes
        self.auto_flush = True
        self.max_commit_failures = 5  # failed commits in a row before a write raises
        self._commit_failures = 0
        self._last_flush = time.monotonic()
        try:
            self._db = self._open()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the result store: {exc}") from None

    def _open(self) -> sqlite3.Connection:
        return connect_store(self.path, busy_timeout_s=self.busy_timeout_s, read_only=self.read_only)

    # ------------------------------------------------------------ runs

    def open_run(self, run_id: str, *, config_hash: str, kind: str, spec: dict[str, Any]) -> tuple[RunInfo, bool]:
        """Create the run, or return the existing one (``True`` when it existed).
        An existing run with another judge configuration is an error: results
        from two judges must not be mixed under one name. The run stays locked to this
        store until :meth:`close`: another writer of it, in any process, gets :class:`RunLockedError`."""
        self._writable()
        row = self._db.execute("SELECT config_hash FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is not None and row[0] != config_hash:
            raise RunMismatchError(
                f"run {run_id!r} exists with another judge configuration ({row[0][:12]} != {config_hash[:12]}); "
                "pick another run id"
            )
        if run_id not in self._locks:
            lock = RunLock(self.path, run_id)
            lock.acquire()
            self._locks[run_id] = lock
        now = time.time()
        last = self._db.execute("SELECT MAX(read_pass) FROM items WHERE run_id=?", (run_id,)).fetchone()[0]
        self._passes[run_id] = int(last or 0) + 1
        if row is not None:
            self._retry(self._db.execute, "UPDATE runs SET updated_at=?, state='running' WHERE run_id=?", (now, run_id))
            return self.run(run_id), True
        self._retry(
            self._db.execute,
            "INSERT INTO runs VALUES (?,?,?,?,?,?, 'running')",
            (run_id, config_hash, kind, json.dumps(without_credentials(spec), sort_keys=True), now, now),
        )
        return self.run(run_id), False

    def set_state(self, run_id: str, state: str) -> None:
        """Mark the run; ``finished`` means the whole input was read in this
        pass, so rows an earlier, longer input had and this one does not are
        dropped: a rerun reflects the input it read."""
        self._writable()
        self.flush()
        self._retry(
            self._db.execute, "UPDATE runs SET state=?, updated_at=? WHERE run_id=?", (state, time.time(), run_id)
        )
        current = self._passes.get(run_id)
        if state == "finished" and current is not None:
            self._retry(self._db.execute, "DELETE FROM items WHERE run_id=? AND read_pass<?", (run_id, current))

    def _retry(self, fn: Any, *args: Any) -> Any:
        return retry_busy(fn, *args, attempts=self.max_commit_failures)

    def _writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")

    def run(self, run_id: str) -> RunInfo:
        row = self._db.execute(
            "SELECT run_id, config_hash, kind, spec, created_at, updated_at, state FROM runs WHERE run_id=?", (run_id,)
        ).fetchone()
        if row is None:
            known = [r[0] for r in self._db.execute("SELECT run_id FROM runs ORDER BY created_at")]
            raise KeyError(f"no run {run_id!r} in {self.path}; runs here: {known or 'none'}")
        return read_run(row, store=self.path)

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
        self._writable()
        self._items.append(item)
        if input_json is not None and item.item_hash is not None:
            self._inputs.append((item.item_hash, input_json))
        self._maybe_flush()

    def add_result(self, result: ResultRecord) -> None:
        self._writable()
        self._results.append(result)
        self._pending_hashes.add((result.config_hash, result.item_hash))
        self._maybe_flush()

    @property
    def unsaved(self) -> int:
        """Results buffered or being committed, not yet in the database."""
        return len(self._results) + len(self._committing)

    def _maybe_flush(self) -> None:
        if not self.auto_flush:
            return
        pending = len(self._results) + len(self._items)
        if pending >= self.flush_rows or (pending and time.monotonic() - self._last_flush >= self.flush_interval_s):
            try:
                self.flush()
                self._commit_failures = 0
            except StoreCommitError:
                # Kept buffered and retried at the next write; a store that
                # keeps failing stops the job.
                self._commit_failures += 1
                if self._commit_failures >= self.max_commit_failures:
                    raise

    def _take(self) -> tuple[list[ResultRecord], list[ItemRecord], list[tuple[str, str]]]:
        batch = (self._results, self._items, self._inputs)
        self._results, self._items, self._inputs = [], [], []
        self._pending_hashes = set()
        return batch

    def _put_back(self, results: list[ResultRecord], items: list[ItemRecord], inputs: list[tuple[str, str]]) -> None:
        """A batch whose commit failed goes back to the front of the buffer."""
        self._results = results + self._results
        self._items = items + self._items
        self._inputs = inputs + self._inputs
        self._pending_hashes.update((r.config_hash, r.item_hash) for r in results)

    def _failed(self, exc: sqlite3.Error) -> StoreCommitError:
        return StoreCommitError(
            f"{self.path}: commit failed ({exc}); {len(self._results)} results and {len(self._items)} rows "
            "are not saved yet (kept in memory and retried; a rerun judges whatever is not saved when the job ends)",
            pending=len(self._results),
            reason=str(exc),
        )

    def flush(self) -> None:
        """Commit everything buffered in one transaction. On failure the batch
        stays buffered and :class:`StoreCommitError` says how much is unsaved."""
        self._last_flush = time.monotonic()
        if self._results or self._items or self._inputs:
            batch = self._take()
            try:
                self._retry(self._commit, self._db, *batch)
            except sqlite3.Error as exc:
                self._put_back(*batch)
                raise self._failed(exc) from None

    async def aflush(self) -> None:
        """:meth:`flush` on a worker thread with its own connection (a slow disk never
        stalls the event loop); results being committed stay visible to :meth:`result_status`."""
        self._last_flush = time.monotonic()
        if not (self._results or self._items or self._inputs):
            return
        batch = self._take()
        self._committing = {(r.config_hash, r.item_hash): r.status for r in batch[0]}
        try:
            if self._writer is None:
                self._writer = self._connect()
            await asyncio.to_thread(self._commit, self._writer, *batch)
        except sqlite3.Error as exc:
            self._put_back(*batch)
            raise self._failed(exc) from None
        except BaseException:
            self._put_back(*batch)  # cancelled mid-commit: the rollback kept nothing
            raise
        finally:
            self._committing = {}

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
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
                        "INSERT INTO items VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(run_id, file, row) DO UPDATE SET "
                        "item_hash=excluded.item_hash, item_id=excluded.item_id, label=excluded.label, "
                        "category=excluded.category, problem=excluded.problem, read_pass=excluded.read_pass",
                        [
                            (
                                *(i.run_id, i.file, i.row, i.item_hash, i.item_id, i.label, i.category, i.problem),
                                self._passes.get(i.run_id, 0),
                            )
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
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        try:
            if not self.read_only:
                self.flush()
        finally:
            for lock in self._locks.values():
                lock.release()
            self._locks.clear()
            if self._writer is not None:
                self._writer.close()
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
