"""Provider batches in the result store: which requests each one carries and its state.

A row is written *before* the batch is created (its id still ``pending:KEY``)
and committed at once on its own connection, so a process killed at any
point leaves a record: a rerun finds the batch by the key in its metadata
instead of creating it again.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BatchRow", "BatchTable"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    local_key TEXT PRIMARY KEY,
    config_hash TEXT NOT NULL,
    batch_id TEXT,
    state TEXT NOT NULL,
    custom_ids TEXT NOT NULL,
    output_file_id TEXT,
    error_file_id TEXT,
    reason TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
"""

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True, slots=True)
class BatchRow:
    local_key: str
    config_hash: str
    batch_id: str | None
    state: str
    custom_ids: tuple[str, ...]
    output_file_id: str | None
    error_file_id: str | None
    reason: str | None


class BatchTable:
    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def rows(self, config_hash: str) -> list[BatchRow]:
        cur = self._db.execute(
            "SELECT local_key, config_hash, batch_id, state, custom_ids, output_file_id, error_file_id, reason"
            " FROM batches WHERE config_hash = ? ORDER BY created_at",
            (config_hash,),
        )
        return [BatchRow(r[0], r[1], r[2], r[3], tuple(json.loads(r[4])), r[5], r[6], r[7]) for r in cur]

    def add(self, local_key: str, config_hash: str, custom_ids: list[str]) -> None:
        now = time.time()
        self._db.execute(
            "INSERT OR IGNORE INTO batches VALUES (?, ?, NULL, 'submitting', ?, NULL, NULL, NULL, ?, ?)",
            (local_key, config_hash, json.dumps(custom_ids), now, now),
        )

    def update(
        self,
        local_key: str,
        *,
        batch_id: str | None,
        state: str,
        output_file_id: str | None = None,
        error_file_id: str | None = None,
        reason: str | None = None,
    ) -> None:
        self._db.execute(
            "UPDATE batches SET batch_id = ?, state = ?, output_file_id = ?, error_file_id = ?, reason = ?,"
            " updated_at = ? WHERE local_key = ?",
            (batch_id, state, output_file_id, error_file_id, reason, time.time(), local_key),
        )
