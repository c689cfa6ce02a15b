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
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from _waiting import wait_until

from judgegraph.testing import Fault, LoopbackRequest, Reply

pytestmark = pytest.mark.timing  # kills a process mid-run

N = 240
ITEM = re.compile(r"item-(\d+)")


class CountingJudge:
    """Answers consistently in both orders and counts requests per item, server-side,
    apart for each process: each runs with its own API key, and the key arrives with
    every request. So what the resumed run asked for is known exactly, however late
    a request the killed process had on the wire reached the server."""

    def __init__(self, *, hold: str, after: int) -> None:
        self.per_key: dict[str, Counter[int]] = defaultdict(Counter)
        self._lock = threading.Lock()
        self.hold, self.after = hold, after

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        text = req.prompt
        i = int(ITEM.search(text).group(1))  # type: ignore[union-attr]
        key = req.headers.get("authorization", "").removeprefix("Bearer ")
        with self._lock:
            self.per_key[key][i] += 1
            if key == self.hold and sum(self.per_key[key].values()) > self.after:
                # Held until the server stops: the process with this key can never finish.
                return Fault("hang", delay_s=3600)
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
    # The first process gets answers to N requests (half the items, two orders each), then
    # none: it is still running when it is killed, with requests in flight, however fast or
    # slow the machine. At most six items are half answered then, so at least N / 2 - 6
    # items get stored: the quarter the kill waits for always comes.
    judge = CountingJudge(hold="killed", after=N)
    env = {**os.environ, "OPENAI_API_KEY": "killed"}
    with loopback(judge, latency_s=0.03) as server:
        proc = subprocess.Popen(_cli(src, store, server.url), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: len(_committed(store)) >= N // 4, "a quarter of the items is stored", proc=proc)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait()
        assert proc.returncode == -signal.SIGKILL

        after_kill = _committed(store)
        assert N // 4 <= len(after_kill) < N, "kill -9 must land mid-run"

        resumed = subprocess.run(
            [*_cli(src, store, server.url), "--json"],
            env={**env, "OPENAI_API_KEY": "resumed"},
            capture_output=True,
            text=True,
        )
        assert resumed.returncode == 0, resumed.stderr
        summary = json.loads(resumed.stdout)
    killed, again = judge.per_key["killed"], judge.per_key["resumed"]
    assert set(judge.per_key) == {"killed", "resumed"}

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

    # Nothing stored before the kill was paid for again: the resumed run never asked for it.
    for i in after_kill.values():
        assert killed[i] == 2 and again[i] == 0, (i, killed[i], again[i])
    # The resumed run asked for exactly the items that were not stored, two orders each.
    missing = set(range(N)) - set(after_kill.values())
    assert again == Counter({i: 2 for i in missing})
    assert summary["cached"] == len(after_kill) and summary["judged"] == N - len(after_kill)
