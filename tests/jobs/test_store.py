"""The SQLite result store: WAL, keys, runs, buffered commits."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from judgegraph.jobs import ItemRecord, ResultRecord, RunMismatchError, Store


def _result(h: str, status: str = "ok", chash: str = "c1") -> ResultRecord:
    return ResultRecord(
        chash,
        h,
        status,
        None if status == "ok" else "why",
        # An ok result carries its verdict (a score, or a winner for pairwise runs): reads check for it.
        f'{{"status": "{status}", "score": 4, "winner": "A"}}' if status == "ok" else f'{{"status": "{status}"}}',
        0.001,
        10,
        2,
        1,
        time.time(),
    )


def test_wal_mode_and_results_keyed_by_item_and_config(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as st:
        assert st._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        st.open_run("r", config_hash="c1", kind="pairwise", spec={})
        st.add_result(_result("h1"))
        st.add_result(_result("h1", "error"))  # same key: replaces, never duplicates
        st.add_result(_result("h1", chash="c2"))  # another judge config: its own result
        assert st.result_status("c1", "h1") == "error"  # visible before the flush too
        st.flush()
        n = st._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        assert n == 2
        assert st.result_status("c1", "h1") == "error"
        assert st.result_status("c2", "h1") == "ok"
        assert st.done_hashes("c1", include_failed=False) == set()
        assert st.done_hashes("c1", include_failed=True) == {"h1"}


def test_a_run_name_cannot_be_reused_with_another_judge(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as st:
        _, existed = st.open_run("r", config_hash="c1", kind="pairwise", spec={"a": 1})
        assert not existed
        _, existed = st.open_run("r", config_hash="c1", kind="pairwise", spec={"a": 1})
        assert existed
        with pytest.raises(RunMismatchError, match="another judge configuration"):
            st.open_run("r", config_hash="c2", kind="pairwise", spec={})
        with pytest.raises(KeyError, match="runs here"):
            st.run("nope")


def test_rows_and_counts_join_items_with_results(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as st:
        st.open_run("r", config_hash="c1", kind="pointwise", spec={})
        st.add_item(ItemRecord("r", 0, 0, "h1", None, "4.0", "a", None), '{"instruction": "q", "response": "x"}')
        st.add_item(ItemRecord("r", 0, 1, None, None, None, None, "row 1: missing response"))
        st.add_item(ItemRecord("r", 0, 2, "h2", None, None, None, None))
        st.add_item(ItemRecord("r", 0, 3, "h3", None, None, None, None))
        st.add_result(_result("h1"))
        st.add_result(_result("h2", "unparsed"))
        counts = st.counts("r")
        assert counts == {"rows": 4, "ok": 1, "unparsed": 1, "error": 0, "invalid": 1, "pending": 1}
        rows = list(st.rows("r", with_input=True))
        assert [r.row for r in rows] == [0, 1, 2, 3]
        assert rows[0].label == 4.0 and rows[0].input == {"instruction": "q", "response": "x"}
        assert rows[1].problem == "row 1: missing response" and rows[1].status is None
        assert rows[3].status is None and rows[3].result is None


def test_buffered_writes_are_invisible_until_committed_then_durable(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    st = Store(path, flush_interval_s=3600, flush_rows=10_000)
    st.open_run("r", config_hash="c1", kind="pairwise", spec={})
    st.add_result(_result("h1"))
    other = sqlite3.connect(path)
    assert other.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 0
    st.flush()
    assert other.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 1
    for i in range(5):
        st.add_result(_result(f"x{i}"))
    st.flush_rows = 3  # the next write crosses the row threshold and commits everything buffered
    st.add_result(_result("x5"))
    assert other.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 7
    other.close()
    st.close()
