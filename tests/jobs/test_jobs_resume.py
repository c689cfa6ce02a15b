"""A job killed with SIGKILL mid-run resumes: every item exactly once, and the
server's own request counts show that nothing already stored was judged again."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from judgegraph.testing import LoopbackRequest, Reply

N = 240
ITEM = re.compile(r"item-(\d+)")


class CountingJudge:
    """Answers consistently in both orders and counts requests per item, server-side."""

    def __init__(self) -> None:
        self.per_item: Counter[int] = Counter()
        self._lock = threading.Lock()

    def __call__(self, req: LoopbackRequest) -> Reply:
        text = req.prompt
        i = int(ITEM.search(text).group(1))  # type: ignore[union-attr]
        with self._lock:
            self.per_item[i] += 1
        first_good = text.index("GOOD") < text.index("BAD")
        return Reply("[SCORES] 9 2" if first_good else "[SCORES] 2 9")


def _cli(src: Path, store: Path, url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "judgegraph.jobs.cli",
        "eval",
        str(src),
        "--model",
        "m",
        "--base-url",
        url + "/v1",
        "--no-structured",
        "--map",
        "instruction=q",
        "--map",
        "response_a=a",
        "--map",
        "response_b=b",
        "--store",
        str(store),
        "--run-id",
        "killed",
        "--concurrency",
        "6",
        "--no-progress",
    ]


def _committed(store: Path) -> dict[str, int]:
    """item hash -> item number, for results committed to the store so far."""
    if not store.exists():
        return {}
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        rows = db.execute("SELECT r.item_hash, n.input FROM results r JOIN inputs n USING (item_hash)").fetchall()
    except sqlite3.OperationalError:
        return {}  # tables not created yet
    finally:
        db.close()
    return {h: int(ITEM.search(json.loads(inp)["instruction"]).group(1)) for h, inp in rows}  # type: ignore[union-attr]


def test_kill_9_then_resume_loses_nothing_and_repays_nothing(tmp_path: Path, loopback: Any) -> None:
    src = tmp_path / "items.jsonl"
    with src.open("w") as fp:
        for i in range(N):
            good_first = i % 3 != 0
            fp.write(
                json.dumps(
                    {
                        "q": f"item-{i:04d}: better?",
                        "a": "GOOD one" if good_first else "BAD one",
                        "b": "BAD one" if good_first else "GOOD one",
                    }
                )
                + "\n"
            )
    store = tmp_path / "runs.db"
    judge = CountingJudge()
    env = {**os.environ, "OPENAI_API_KEY": "unused"}
    with loopback(judge, latency_s=0.03) as server:
        proc = subprocess.Popen(_cli(src, store, server.url), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while len(_committed(store)) < N // 4:
                assert proc.poll() is None, "the job ended before it could be killed: " + proc.stdout.read().decode()  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "the job made no progress"
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(30)
        assert proc.returncode == -signal.SIGKILL

        after_kill = _committed(store)
        # Requests the killed process had in flight are still answered (and
        # counted) by the server for up to one latency: let them land first.
        calls_at_kill = Counter(judge.per_item)
        while True:
            time.sleep(0.3)
            now = Counter(judge.per_item)
            if now == calls_at_kill:
                break
            calls_at_kill = now
        assert N // 4 <= len(after_kill) < N, "kill -9 must land mid-run"

        resumed = subprocess.run(
            [*_cli(src, store, server.url), "--json"], env=env, capture_output=True, text=True, timeout=300
        )
        assert resumed.returncode == 0, resumed.stderr
        summary = json.loads(resumed.stdout)

    # Every item exactly once, each with a verdict.
    db = sqlite3.connect(store)
    items = db.execute("SELECT row, item_hash FROM items WHERE run_id='killed' ORDER BY row").fetchall()
    results = db.execute("SELECT item_hash, status FROM results").fetchall()
    assert [r for r, _ in items] == list(range(N))
    assert len(results) == N and {h for h, _ in results} == {h for _, h in items}
    assert {s for _, s in results} == {"ok"}
    winners = dict(db.execute("SELECT item_hash, json_extract(result, '$.winner') FROM results").fetchall())
    db.close()
    final = _committed(store)
    assert all(winners[h] == ("B" if final[h] % 3 == 0 else "A") for h in final)

    # Nothing stored before the kill was paid for again: its server-side count did not move.
    for i in after_kill.values():
        assert judge.per_item[i] == calls_at_kill[i] == 2, (i, judge.per_item[i], calls_at_kill[i])
    # The resumed run asked for exactly the items that were not stored (two orders each).
    resumed_calls = sum(judge.per_item.values()) - sum(calls_at_kill.values())
    assert resumed_calls == 2 * (N - len(after_kill))
    assert summary["cached"] == len(after_kill) and summary["judged"] == N - len(after_kill)
