"""Reading a result store back: a run's rows, its counts by outcome, and the
results of one judge configuration. Mixed into :class:`Store`, which gives
the connection, its buffered writes' flush and the run lookup."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

from ._store_records import ResultRecord, RunInfo, StoredRow, read_row

__all__ = ["StoreReads"]


class StoreReads:
    _db: sqlite3.Connection
    path: Path

    def flush(self) -> None:  # Store's: reads see buffered writes
        raise NotImplementedError

    def run(self, run_id: str) -> RunInfo:
        raise NotImplementedError

    def rows(self, run_id: str, *, with_input: bool = False) -> Iterator[StoredRow]:
        """A run's rows in source order, each with its result when there is one.
        A row whose stored values cannot be read back (torn JSON, a wrong type)
        still comes, with :attr:`StoredRow.unreadable` saying why and where."""
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
            yield read_row(r, store=self.path, run_id=run_id, kind=info.kind)

    def counts(self, run_id: str) -> dict[str, int]:
        """Rows of a run by outcome: ok / unparsed / error / invalid / pending, and, when
        there are any, ``unreadable``: rows whose stored values cannot be read back (see :meth:`rows`)."""
        out = {"rows": 0, "ok": 0, "unparsed": 0, "error": 0, "invalid": 0, "pending": 0}
        # The same reads as rows(), so a row is unreadable here exactly when it is there.
        for r in self.rows(run_id, with_input=True):
            k = "unreadable" if r.unreadable else "invalid" if r.item_hash is None else r.status or "pending"
            out[k] = out.get(k, 0) + 1
            out["rows"] += 1
        return out

    def results(self, config_hash: str) -> Iterable[ResultRecord]:
        self.flush()
        for r in self._db.execute(
            "SELECT config_hash, item_hash, status, reason, result, cost_usd, prompt_tokens, completion_tokens, "
            "attempts, finished_at FROM results WHERE config_hash=? ORDER BY item_hash",
            (config_hash,),
        ):
            yield ResultRecord(*r)
