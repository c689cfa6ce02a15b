"""Reading a result store back: a run's rows, its counts by outcome, and the
results of one judge configuration. Mixed into :class:`Store`, which gives
the connection, its buffered writes' flush and the run lookup."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator

from ._store_records import ResultRecord, RunInfo, StoredRow

__all__ = ["StoreReads"]


class StoreReads:
    _db: sqlite3.Connection

    def flush(self) -> None:  # Store's: reads see buffered writes
        raise NotImplementedError

    def run(self, run_id: str) -> RunInfo:
        raise NotImplementedError

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
