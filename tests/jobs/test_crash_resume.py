"""``judgegraph eval`` killed with SIGKILL at random points, then resumed.

The eval runs as a real subprocess (the CLI) against a loopback judge server
in this process, which counts every request per item. After each kill the
test reads what the store had committed, and what the server had been sent.
At the end every item is in the store exactly once, and no item whose
verdict was committed before a crash was sent to the model again: its
server-side call count did not move after that crash.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

_ITEM = re.compile(r"crash item (\d+)\b")
RUN_ID = "crash"


class CountingJudge:
    def __init__(self) -> None:
        self.calls: Counter[int] = Counter()
        self._lock = threading.Lock()

    def __call__(self, req: LoopbackRequest) -> Reply:
        m = _ITEM.search(req.prompt)
        assert m is not None
        i = int(m.group(1))
        with self._lock:
            self.calls[i] += 1
        return Reply(f"Fine. [RESULT] {i % 5 + 1}")

    def snapshot(self) -> Counter[int]:
        with self._lock:
            return Counter(self.calls)


@dataclass
class CrashRun:
    n: int
    kills: list[str] = field(default_factory=list)  # how each kill was timed
    committed_at_kill: list[set[int]] = field(default_factory=list)
    calls_at_kill: list[Counter[int]] = field(default_factory=list)
    final_calls: Counter[int] = field(default_factory=Counter)
    summary: dict[str, Any] = field(default_factory=dict)
    rows: list[tuple[int, str | None, str | None]] = field(default_factory=list)  # (row, item_id, status)

    @property
    def resent(self) -> int:
        """Requests beyond one per item: items in flight, or judged but not yet committed, at a kill."""
        return sum(self.final_calls.values()) - self.n


def _committed(db: Path) -> set[int]:
    if not db.exists():
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        got = con.execute(
            "SELECT i.item_id FROM items i JOIN runs u ON u.run_id=i.run_id "
            "JOIN results r ON r.config_hash=u.config_hash AND r.item_hash=i.item_hash WHERE i.run_id=?",
            (RUN_ID,),
        ).fetchall()
    except sqlite3.OperationalError:  # killed before the schema was written
        return set()
    finally:
        con.close()
    return {int(r[0]) for r in got}


def _command(src: Path, db: Path, url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "judgegraph.jobs.cli",
        "eval",
        str(src),
        "--kind",
        "pointwise",
        "--id",
        "id",
        "--model",
        "judge",
        "--base-url",
        url + "/v1",
        "--no-structured",
        "--store",
        str(db),
        "--run-id",
        RUN_ID,
        "--concurrency",
        "8",
        "--max-attempts",
        "2",
        "--timeout",
        "30",
        "--no-progress",
        "--json",
    ]


def crash_and_resume(tmp: Path, n: int, kills: int, *, seed: int, max_calls_between: int = 25) -> CrashRun:
    """Kill the eval ``kills`` times at random points (the last right after a commit), then let it finish."""
    rng = random.Random(seed)
    src = tmp / "items.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": str(i), "instruction": f"Rate crash item {i}.", "response": "ok"}) + "\n"
            for i in range(n)
        ),
        encoding="utf-8",
    )
    db = tmp / "store.db"
    judge = CountingJudge()
    out = CrashRun(n)
    env = {**os.environ, "OPENAI_API_KEY": "not-a-real-key"}
    with LoopbackServer(judge, latency_s=0.003) as server:
        cmd = _command(src, db, server.url)
        for k in range(kills):
            before = sum(judge.snapshot().values())
            had = len(_committed(db))
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if k == kills - 1:
                # Right after this process's first commit, so the last kill always finds
                # committed work the resume must not send again, however the timed kills fell.
                out.kills.append("after a commit")
                deadline = time.monotonic() + 120
                while len(_committed(db)) <= had and proc.poll() is None:
                    assert time.monotonic() < deadline, "the eval committed nothing"
                    time.sleep(0.005)
            elif rng.random() < 0.3:
                # Anywhere: during start-up, opening the store, or judging.
                delay = rng.uniform(0.2, 6.0)
                out.kills.append(f"after {delay:.1f}s")
                deadline = time.monotonic() + delay
                cap = before + 2 * max_calls_between  # leave work for the kills to come
                while time.monotonic() < deadline and sum(judge.snapshot().values()) < cap and proc.poll() is None:
                    time.sleep(0.002)
            else:
                # Mid-judging, after a random number of requests.
                target = before + rng.randint(1, max_calls_between)
                extra = rng.choice([0.0, 0.0, rng.uniform(0.0, 0.3)])
                out.kills.append(f"{extra * 1000:.0f} ms after {target - before} calls")
                deadline = time.monotonic() + 120
                while sum(judge.snapshot().values()) < target and proc.poll() is None:
                    assert time.monotonic() < deadline, "the eval made no progress"
                    time.sleep(0.002)
                time.sleep(extra)  # lets results commit (the store commits every 0.1 s)
            assert proc.poll() is None, "the job finished before it could be killed: use more items"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            time.sleep(0.1)  # let requests already on the wire reach the server's count
            out.calls_at_kill.append(judge.snapshot())
            out.committed_at_kill.append(_committed(db))
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        out.summary = json.loads(done.stdout)
        out.final_calls = judge.snapshot()
    con = sqlite3.connect(db)
    try:
        out.rows = [
            (r[0], r[1], r[2])
            for r in con.execute(
                "SELECT i.row, i.item_id, r.status FROM items i JOIN runs u ON u.run_id=i.run_id "
                "LEFT JOIN results r ON r.config_hash=u.config_hash AND r.item_hash=i.item_hash "
                "WHERE i.run_id=? ORDER BY i.row",
                (RUN_ID,),
            )
        ]
    finally:
        con.close()
    return out


def check_crash_run(run: CrashRun) -> None:
    n = run.n
    # Every item exactly once, each with its verdict.
    assert [r[0] for r in run.rows] == list(range(n))
    assert sorted(int(r[1]) for r in run.rows if r[1] is not None) == list(range(n))
    assert all(r[2] == "ok" for r in run.rows)
    s = run.summary
    assert s["rows"] == n and s["invalid"] == 0 and s["errors"] == 0 and s["unparsed"] == 0
    assert s["judged"] + s["cached"] == n and s["resumed"] is True
    # Nothing committed before a crash was sent to the model again.
    for k, (committed, calls) in enumerate(zip(run.committed_at_kill, run.calls_at_kill, strict=True)):
        again = sorted(i for i in committed if run.final_calls[i] != calls[i])
        assert not again, f"items committed before kill {k + 1} were judged again: {again[:10]}"
        # The store never holds more than the server answered.
        assert all(calls[i] >= 1 for i in committed)
    # Each item reached the model at least once, and the final run judged exactly what was missing.
    assert set(run.final_calls) == set(range(n))
    assert s["judged"] == n - len(run.committed_at_kill[-1])
    # The progress committed grows from kill to kill (no committed result is ever lost).
    for a, b in zip(run.committed_at_kill, run.committed_at_kill[1:], strict=False):
        assert a <= b


def test_ten_kill_nines_then_resume_lose_and_repeat_nothing(tmp_path: Path) -> None:
    # 2,000 items, so the run is still going at the tenth kill however fast the machine:
    # this seed's schedule spends at most 7 x 50 calls in its timed kills, 35 in its
    # counted ones, and whatever fits in its two extra waits (117 and 218 ms) and in the
    # wait for the last kill's commit (about one 0.1 s flush interval) at the server's top
    # rate (concurrency 8 / 3 ms = 2,667 calls/s), plus 8 in flight per kill: under 1,800.
    run = crash_and_resume(tmp_path, 2000, 10, seed=8)
    check_crash_run(run)
    assert len(run.kills) == 10
    # The last kill came after a commit, so the no-repeat check above had work to check.
    assert len(run.committed_at_kill[-1]) > len(run.committed_at_kill[-2])
    print(
        f"kills: {run.kills}; committed at each kill: {[len(c) for c in run.committed_at_kill]}; "
        f"re-sent requests: {run.resent}"
    )
