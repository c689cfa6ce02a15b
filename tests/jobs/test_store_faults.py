"""The store under faults: nothing lost, nothing sent twice (issue 15).

Real SQLite throughout: a second connection holding the write lock past the
store's busy timeout makes commits fail for real; real processes race for
one run; a shrunk input, a corrupt file, a read-only file and two servers
serving one model name are set up as a user would meet them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from judgegraph import PointwiseJudge, ScriptedBackend
from judgegraph.backends import GenerateRequest
from judgegraph.jobs import JobProgress, SourceConfig, Store, StoreCommitError, arun_job
from judgegraph.testing import LoopbackServer, Reply

# Timing-sensitive (two processes race for one store and run lock): bench/stress_tests.py runs it on a busy core.
pytestmark = pytest.mark.timing


def _items(path: Path, n: int) -> Path:
    path.write_text(
        "".join(json.dumps({"instruction": f"Question {i}?", "response": f"answer {i}"}) + "\n" for i in range(n)),
        encoding="utf-8",
    )
    return path


def _backend() -> ScriptedBackend:
    return ScriptedBackend(lambda req: "Fine. [RESULT] 4", latency_s=0.005)


def _question(req: GenerateRequest) -> str:
    text = "\n".join(m.content for m in req.messages)
    return text[text.index("Question ") :].split("?")[0]


class _Locker:
    """Another writer: holds the database's write lock from a connection of its own."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.held = threading.Event()

    def hold(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.held.set()

    def release(self) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT")
        self.held.clear()


async def test_a_commit_refused_past_the_busy_timeout_keeps_its_results(tmp_path: Path) -> None:
    src = _items(tmp_path / "in.jsonl", 300)
    backend = _backend()
    store = Store(tmp_path / "s.db", busy_timeout_s=0.05, flush_interval_s=0.02)
    locker = _Locker(tmp_path / "s.db")
    loop = asyncio.get_running_loop()

    def on_progress(p: JobProgress) -> None:
        # Lock the store for a while, once, a third of the way in: several commits fail.
        if p.judged == 100 and not locker.held.is_set():
            locker.hold()
            loop.call_later(0.15, locker.release)

    summary = await arun_job(
        SourceConfig(path=str(src)),
        judge=PointwiseJudge(backend, structured=False, repair=False),
        kind="pointwise",
        store=store,
        concurrency=4,
        progress=on_progress,
    )
    assert locker.db.total_changes == 0 and not locker.held.is_set()
    assert summary.ok == 300
    counts = store.counts(summary.run_id)
    assert counts["ok"] == 300 and counts["rows"] == 300, counts  # before the fix, a failed batch was gone
    store.close()


async def test_a_store_that_keeps_refusing_ends_the_job_with_an_error_and_a_rerun_finishes(tmp_path: Path) -> None:
    src = _items(tmp_path / "in.jsonl", 1000)
    backend = _backend()
    # At most 100 results wait uncommitted: judging stalls on a refusing store
    # however fast the judge is, so the stop cannot lose a race with it.
    store = Store(tmp_path / "s.db", busy_timeout_s=0.05, flush_interval_s=0.02, max_unsaved=100)
    locker = _Locker(tmp_path / "s.db")
    judge = PointwiseJudge(backend, structured=False, repair=False)

    def on_progress(p: JobProgress) -> None:
        if p.judged == 50 and not locker.held.is_set():
            locker.hold()  # and never let go during this run

    with pytest.raises(StoreCommitError) as info:
        await arun_job(
            SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=store, run_id="r", progress=on_progress
        )
    assert "not saved" in str(info.value) and str(store.path) in str(info.value)
    unsaved = info.value.pending
    assert unsaved > 0
    sent_first = len(backend.calls)
    # The job stopped instead of judging everything into a store that refused it:
    # what was judged is what was saved before the lock, the full buffer and what was in flight.
    assert sent_first <= 50 + 100 + 32 + 32, sent_first
    locker.release()
    store.close()  # the buffered batch commits now that the lock is free

    with Store(tmp_path / "s.db") as st:
        saved = st.counts("r")["ok"]
    assert saved >= sent_first - 4 * 32  # only items in flight when it stopped can be missing
    summary = await arun_job(
        SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=tmp_path / "s.db", run_id="r"
    )
    assert summary.cached == saved and summary.judged == 1000 - saved and summary.ok == 1000
    per_item = Counter(_question(c) for c in backend.calls)
    assert len(per_item) == 1000
    with Store(tmp_path / "s.db") as st:
        assert st.counts("r")["ok"] == 1000
    # Every item saved in the first run was never sent again.
    assert sum(n - 1 for n in per_item.values()) <= sent_first - saved


async def test_a_rerun_reflects_the_input_it_read(tmp_path: Path) -> None:
    src = _items(tmp_path / "in.jsonl", 5)
    judge = PointwiseJudge(_backend(), structured=False, repair=False)
    first = await arun_job(
        SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=tmp_path / "s.db", run_id="r"
    )
    assert first.rows == 5
    _items(src, 2)  # the input shrank
    again = await arun_job(
        SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=tmp_path / "s.db", run_id="r"
    )
    assert again.rows == 2
    with Store(tmp_path / "s.db", read_only=True) as st:
        assert st.counts("r")["rows"] == 2
        assert [r.row for r in st.rows("r")] == [0, 1]


def _cli(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JG_KEY": "x", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [sys.executable, "-m", "judgegraph", *args], env=env, capture_output=True, text=True, timeout=300, **kw
    )  # type: ignore[call-overload]


def _eval_args(src: Path, store: Path, url: str, *extra: str) -> list[str]:
    return [
        "eval",
        str(src),
        "--kind",
        "pointwise",
        "--model",
        "judge",
        "--base-url",
        url + "/v1",
        "--api-key-env",
        "JG_KEY",
        "--no-structured",
        "--store",
        str(store),
        "--no-progress",
        *extra,
    ]


@pytest.mark.parametrize("second", ["same-path", "symlink"])
def test_two_eval_processes_on_one_run_never_send_an_item_twice(tmp_path: Path, second: str) -> None:
    src = _items(tmp_path / "in.jsonl", 40)
    store = tmp_path / "s.db"
    # The second process reaches the same store through a symlink (issue 26): same lock.
    other = store
    if second == "symlink":
        (tmp_path / "elsewhere").mkdir()
        other = tmp_path / "elsewhere" / "link.db"
        other.symlink_to(store)
    # Whichever process opens the run first holds it; its calls are answered only
    # once the other process has exited. So the two overlap however slowly either
    # starts (before, a second process that started after the first had finished
    # found the run done and exited 0), and the other must be refused.
    release = threading.Event()

    async def respond(req: object) -> Reply:
        await asyncio.to_thread(release.wait, 300)
        return Reply("Fine. [RESULT] 4")

    with LoopbackServer(respond) as server:
        env = {**os.environ, "JG_KEY": "x"}
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "judgegraph",
                    # The held calls wait for the other process: no attempt may time out meanwhile.
                    *_eval_args(src, path, server.url, "--run-id", "r", "--timeout", "600"),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for path in (store, other)
        ]
        watchers = [threading.Thread(target=lambda p=p: (p.wait(), release.set()), daemon=True) for p in procs]
        for w in watchers:
            w.start()
        outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [err[-1500:] for _, err in outs]
    refused = next(err for p, (_, err) in zip(procs, outs, strict=True) if p.returncode == 2)
    assert "being written by pid" in refused and "Traceback" not in refused
    assert len(refused.strip().splitlines()) == 1, refused
    assert sum(server.calls.values()) == 40  # each item sent once


def test_a_corrupt_store_gives_one_line_naming_the_file(tmp_path: Path) -> None:
    src = _items(tmp_path / "in.jsonl", 2)
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database\n" * 200)
    with LoopbackServer(lambda req: Reply("[RESULT] 4")) as server:
        ev = _cli(*_eval_args(src, bad, server.url))
    rep = _cli("report", "r", "--store", str(bad))
    for p in (ev, rep):
        assert p.returncode in (2, 3), p.stderr
        assert "Traceback" not in p.stderr and str(bad) in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def _read_only(paths: list[Path], on: bool) -> bool:
    """Make files and folders read-only, for root too (the immutable flag, where the filesystem has it)."""
    if os.geteuid() == 0:
        flag = "+i" if on else "-i"
        return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True).returncode == 0
    for p in paths:
        p.chmod((0o555 if p.is_dir() else 0o444) if on else 0o755)
    return True


def test_report_opens_the_store_read_only(tmp_path: Path) -> None:
    src = _items(tmp_path / "in.jsonl", 3)
    folder = tmp_path / "ro"
    folder.mkdir()
    store = folder / "s.db"
    with LoopbackServer(lambda req: Reply("Fine. [RESULT] 4")) as server:
        assert _cli(*_eval_args(src, store, server.url, "--run-id", "r")).returncode == 0
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    if not _read_only([store, folder], True):
        pytest.skip("no way to make a file read-only for root on this filesystem")
    try:
        rep = _cli("report", "r", "--store", str(store), "--out", str(tmp_path / "rep"))
    finally:
        _read_only([store, folder], False)
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert any((tmp_path / "rep").iterdir())
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_two_servers_serving_one_model_name_do_not_share_verdicts(tmp_path: Path) -> None:
    src = _items(tmp_path / "in.jsonl", 5)
    store = tmp_path / "s.db"

    def says(score: int) -> object:
        return lambda req: Reply(f"[RESULT] {score}")

    with LoopbackServer(says(4)) as a, LoopbackServer(says(2)) as b:  # type: ignore[arg-type]
        assert _cli(*_eval_args(src, store, a.url, "--json")).returncode == 0
        got = _cli(*_eval_args(src, store, b.url, "--json"))
        assert got.returncode == 0, got.stderr[-2000:]
        assert sum(a.calls.values()) == 5 and sum(b.calls.values()) == 5
    summary = json.loads(got.stdout)
    assert summary["judged"] == 5 and summary["cached"] == 0
    with Store(store, read_only=True) as st:
        scores = {r.run_id: {row.result["score"] for row in st.rows(r.run_id) if row.result} for r in st.runs()}
    assert sorted(scores.values(), key=str) == [{2}, {4}]
