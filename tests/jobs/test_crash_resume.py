"""``judgegraph eval`` killed with SIGKILL at random points, then resumed.

The eval runs as a real subprocess (the CLI) against a loopback judge server
in this process, which counts every request per item. After each kill the
test reads what the store had committed, and what the server had been sent.
At the end every item is in the store exactly once, and no item whose
verdict was committed before a crash was sent to the model again: no later
process asked for it. Each process runs with its own API key, which arrives
with every request, so the server counts each one's requests apart and the
check is exact however late a killed process's last requests land.
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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _waiting import wait_until

from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

_ITEM = re.compile(r"crash item (\d+)\b")
RUN_ID = "crash"


class CountingJudge:
    """Counts requests per item for each API key (each process has its own). A
    key named in ``held`` gets answers to its first ``hold_after`` requests and
    then none (each later one hangs until the server stops): that process can
    never finish, so it is still running when the test kills it."""

    def __init__(self, hold_after: int) -> None:
        self.calls: dict[str, Counter[int]] = defaultdict(Counter)
        self.held: set[str] = set()
        self.hold_after = hold_after
        self._lock = threading.Lock()

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        m = _ITEM.search(req.prompt)
        assert m is not None
        i = int(m.group(1))
        key = req.headers.get("authorization", "").removeprefix("Bearer ")
        with self._lock:
            self.calls[key][i] += 1
            if key in self.held and sum(self.calls[key].values()) > self.hold_after:
                return Fault("hang", delay_s=3600)
        return Reply(f"Fine. [RESULT] {i % 5 + 1}")

    def total(self) -> int:
        with self._lock:
            return sum(sum(c.values()) for c in self.calls.values())

    def of(self, key: str) -> Counter[int]:
        with self._lock:
            return Counter(self.calls[key])


@dataclass
class CrashRun:
    n: int
    kills: list[str] = field(default_factory=list)  # how each kill was timed
    committed_at_kill: list[set[int]] = field(default_factory=list)
    calls_by_process: list[Counter[int]] = field(default_factory=list)  # each killed process's, then the last one's
    final_calls: Counter[int] = field(default_factory=Counter)  # all processes together
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


def crash_and_resume(
    tmp: Path, n: int, kills: int, *, seed: int, max_calls_between: int = 25, hold_after: int | None = None
) -> CrashRun:
    """Kill the eval ``kills`` times at random points (the last right after a commit), then let it finish.

    Each killed process is answered ``hold_after`` requests at most (by default half
    its share, ``n / (2 * kills)``), so it is always still running at its kill, and
    ``kills * hold_after < n`` leaves the last run work."""
    hold_after = n // (2 * kills) if hold_after is None else hold_after
    assert 0 < hold_after and kills * hold_after < n
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
    judge = CountingJudge(hold_after)
    out = CrashRun(n)
    with LoopbackServer(judge, latency_s=0.003) as server:
        cmd = _command(src, db, server.url)
        for k in range(kills):
            key = f"killed-{k}"
            judge.held.add(key)
            env = {**os.environ, "OPENAI_API_KEY": key}
            before = judge.total()
            had = len(_committed(db))
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if k == kills - 1:
                # Right after this process's first commit, so the last kill always finds
                # committed work the resume must not send again, however the timed kills fell.
                out.kills.append("after a commit")
                wait_until(lambda had=had: len(_committed(db)) > had, "the eval committed a result", proc=proc)
            elif rng.random() < 0.3:
                # Anywhere: during start-up, opening the store, or judging. The delay only
                # picks the moment; nothing is asserted about what happened in it.
                delay = rng.uniform(0.2, 6.0)
                out.kills.append(f"after {delay:.1f}s")
                until = time.monotonic() + delay
                cap = before + 2 * max_calls_between  # leave work for the kills to come
                while time.monotonic() < until and judge.total() < cap and proc.poll() is None:
                    time.sleep(0.002)
            else:
                # Mid-judging, after a random number of requests.
                target = before + rng.randint(1, max_calls_between)
                extra = rng.choice([0.0, 0.0, rng.uniform(0.0, 0.3)])
                out.kills.append(f"{extra * 1000:.0f} ms after {target - before} calls")
                wait_until(lambda t=target: judge.total() >= t, "the eval sent its requests", proc=proc)
                time.sleep(extra)  # picks the moment: results may commit meanwhile (every 0.1 s)
            # Held after hold_after answers, the process cannot have finished.
            assert proc.poll() is None, f"the eval exited ({proc.returncode}) before its kill"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            out.committed_at_kill.append(_committed(db))
        done = subprocess.run(cmd, env={**os.environ, "OPENAI_API_KEY": "last"}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        out.summary = json.loads(done.stdout)
        out.calls_by_process = [judge.of(f"killed-{k}") for k in range(kills)] + [judge.of("last")]
        out.final_calls = sum(out.calls_by_process, Counter())
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
    # Nothing committed before a crash was sent to the model again: no later process asked for it.
    for k, committed in enumerate(run.committed_at_kill):
        later = sum(run.calls_by_process[k + 1 :], Counter())
        again = sorted(i for i in committed if later[i])
        assert not again, f"items committed before kill {k + 1} were judged again: {again[:10]}"
        # The store never holds more than the server answered.
        earlier = sum(run.calls_by_process[: k + 1], Counter())
        assert all(earlier[i] >= 1 for i in committed)
    # Each item reached the model at least once, and the final run judged exactly what was missing.
    assert set(run.final_calls) == set(range(n))
    assert s["judged"] == n - len(run.committed_at_kill[-1])
    # The progress committed grows from kill to kill (no committed result is ever lost).
    for a, b in zip(run.committed_at_kill, run.committed_at_kill[1:], strict=False):
        assert a <= b


@pytest.mark.timing  # kills a process ten times
def test_ten_kill_nines_then_resume_lose_and_repeat_nothing(tmp_path: Path) -> None:
    # 2,000 items: each of the ten killed processes is answered 100 requests at most
    # (then held), so every one is still running at its kill, and the last run has at
    # least 1,000 items left to judge, however fast or slow the machine.
    run = crash_and_resume(tmp_path, 2000, 10, seed=8)
    check_crash_run(run)
    assert len(run.kills) == 10
    # The last kill came after a commit, so the no-repeat check above had work to check.
    assert len(run.committed_at_kill[-1]) > len(run.committed_at_kill[-2])
    print(
        f"kills: {run.kills}; committed at each kill: {[len(c) for c in run.committed_at_kill]}; "
        f"re-sent requests: {run.resent}"
    )
