"""Soak: a 5,000-item ``judgegraph eval`` while another writer locks the store at random.

A thread in this process takes SQLite's write lock on the job's store at
random moments for random lengths, some longer than the job's
``--store-timeout``, so the job's commits really fail (``database is
locked``). Two scenarios:

1. flaky: holds of 0.2-3 s, 0.1-2 s apart, with a 0.1 s store timeout.
   Commits fail and are retried; the job should end with exit code 0 and
   every item stored once.
2. outage: the same, then, after 10 s, a hold that lasts until the job has
   exited (five failed commits in a row stop it). The job should stop with
   exit code 3 and a message saying how many results were not saved; the
   same command run again finishes the rest.

The loopback judge counts the requests per item and run: "duplicated" is an
item sent twice in one run, or sent again after its result was saved.

    .venv/bin/python bench/soak_store.py --write bench/results/soak_store.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply  # noqa: E402


class Locker(threading.Thread):
    """Another writer on the store: random holds of its write lock."""

    def __init__(
        self, path: Path, seed: int, hold: tuple[float, float], outage_after_s: float | None, judging: threading.Event
    ) -> None:
        super().__init__(daemon=True)
        self.judging = judging  # set at the job's first request: it has opened its store
        self.path, self.rng, self.hold = path, random.Random(seed), hold
        self.gap = (0.1, 2.0)
        self.outage_after_s = outage_after_s
        self.stop = threading.Event()
        self.holds: list[float] = []

    def run(self) -> None:
        while not self.judging.wait(0.05):
            if self.stop.is_set():
                return
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        started = time.monotonic()
        outage_done = False
        while not self.stop.wait(self.rng.uniform(*self.gap)):
            length = self.rng.uniform(*self.hold)
            if self.outage_after_s is not None and not outage_done and time.monotonic() - started > self.outage_after_s:
                length, outage_done = 3600.0, True  # until the job has given up and exited
            t0 = time.monotonic()
            db.execute("BEGIN IMMEDIATE")
            self.stop.wait(length)
            db.execute("COMMIT")
            self.holds.append(time.monotonic() - t0)
        db.close()


def _items(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as fp:
        for i in range(n):
            fp.write(json.dumps({"instruction": f"Question {i}?", "response": f"answer {i}"}) + "\n")


def _eval(src: Path, store: Path, url: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable,
        "-m",
        "judgegraph",
        "eval",
        str(src),
        "--kind",
        "pointwise",
        "--model",
        "judge",
        "--base-url",
        url + "/v1",
        "--api-key-env",
        "SOAK_KEY",
        "--no-structured",
        "--store",
        str(store),
        "--store-timeout",
        str(timeout_s),
        "--run-id",
        "soak",
        "--concurrency",
        "64",
        "--no-progress",
        "--json",
    ]
    return subprocess.run(args, env={**os.environ, "SOAK_KEY": "x"}, capture_output=True, text=True, timeout=3600)


def scenario(name: str, n: int, seed: int, outage_after_s: float | None) -> dict[str, Any]:
    sent: list[Counter[int]] = []  # requests per item, one counter per run
    lock = threading.Lock()
    judging = threading.Event()

    def judge(req: LoopbackRequest) -> Reply:
        m = re.search(r"Question (\d+)\?", req.prompt)
        with lock:
            sent[-1][int(m.group(1)) if m else -1] += 1
        judging.set()
        return Reply("Fine. [RESULT] 4")

    def saved_rows(store: Path) -> set[int]:
        db = sqlite3.connect(store)
        got = db.execute(
            "SELECT i.row FROM items i JOIN results r ON r.item_hash=i.item_hash AND r.status='ok' "
            "WHERE i.run_id='soak'"
        ).fetchall()
        db.close()
        return {r[0] for r in got}

    with tempfile.TemporaryDirectory() as tmp, LoopbackServer(judge, latency_s=0.01) as server:
        src, store = Path(tmp) / "in.jsonl", Path(tmp) / "s.db"
        _items(src, n)
        locker = Locker(store, seed, (0.2, 3.0), outage_after_s, judging)
        locker.start()
        t0 = time.monotonic()
        sent.append(Counter())
        runs = [_eval(src, store, server.url, 0.1)]
        locker.stop.set()
        locker.join()
        saved_before: set[int] = set()
        if runs[0].returncode != 0:
            saved_before = saved_rows(store)
            sent.append(Counter())
            runs.append(_eval(src, store, server.url, 0.1))
        wall = time.monotonic() - t0
        db = sqlite3.connect(store)
        stored = db.execute("SELECT COUNT(*), COUNT(DISTINCT item_hash) FROM results WHERE status='ok'").fetchone()
        db.close()
        final = saved_rows(store)
    unsaved = 0
    for r in runs[:-1]:
        m = re.search(r"(\d+) judged results are not saved", r.stderr)
        unsaved += int(m.group(1)) if m else 0
    # Sent twice: more than once within a run, or again after its result was saved.
    twice_in_a_run = sum(c - 1 for run in sent for c in run.values() if c > 1)
    after_saved = sum(c for i, c in sent[-1].items() if i in saved_before) if len(sent) > 1 else 0
    last = json.loads(runs[-1].stdout)
    return {
        "scenario": name,
        "items": n,
        "exit_codes": [r.returncode for r in runs],
        "first_error": (runs[0].stderr.strip().splitlines() or [""])[-1][:400] if runs[0].returncode else "",
        "commit_failures": sum(r.stderr.count("commit failed") for r in runs),
        "lock_holds": len(locker.holds),
        "holds_over_timeout": sum(h > 0.1 for h in locker.holds),
        "longest_hold_s": max(locker.holds, default=0.0),
        "stored_ok": stored[0],
        "lost": n - len(final & set(range(n))),
        "sent": sum(sum(c.values()) for c in sent),
        "saved_by_first_run": len(saved_before) if len(sent) > 1 else stored[0],
        "reported_unsaved": unsaved,
        "resent_unsaved": sum(c for i, c in sent[-1].items() if i not in saved_before) if len(sent) > 1 else 0,
        "duplicated": twice_in_a_run + after_saved,
        "last_summary_ok": last["ok"],
        "wall_s": wall,
    }


def render(results: list[dict[str, Any]], load: str) -> str:
    out = [
        "# Soak: store faults during a 5,000-item job (bench/soak_store.py)",
        "",
        f"Machine: 2 CPUs, Python {sys.version.split()[0]}, Linux; load average at start {load} "
        "(the machine was shared with other work). Store timeout 0.1 s; another connection held the "
        "store's write lock at random (0.1-2 s apart, 0.2-3 s long; in the outage scenario, after 10 s, "
        "until the job gave up).",
        "",
        "| scenario | exit codes | lock holds (> timeout) | failed commits | stored ok | lost | requests "
        "| saved by run 1 | reported unsaved | sent again (unsaved) | duplicated | wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        out.append(
            f"| {r['scenario']} | {', '.join(map(str, r['exit_codes']))} | {r['lock_holds']} "
            f"({r['holds_over_timeout']}) | {r['commit_failures']} | {r['stored_ok']:,} | {r['lost']} | {r['sent']:,} "
            f"| {r['saved_by_first_run']:,} | {r['reported_unsaved']} | {r['resent_unsaved']} | {r['duplicated']} "
            f"| {r['wall_s']:.0f} s |"
        )
    out.append("")
    for r in results:
        if r["first_error"]:
            out.append(f"{r['scenario']}: the first run ended with: `{r['first_error']}`")
            out.append("")
    out.append(
        "Exit code 0: every row judged ok; 3: the store could not be written (the message says how many "
        "results were not saved). Duplicated counts items sent more than once within a run, or sent again "
        "after their result was saved; sent again (unsaved) counts the second run's requests for items "
        "the first did not save (the results it reported as not saved, plus items in flight when it stopped)."
    )
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    a = ap.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    results = [
        scenario("flaky", a.items, a.seed, None),
        scenario("outage", a.items, a.seed + 1, 10.0),
    ]
    for r in results:
        print(json.dumps(r))
    text = render(results, load)
    print(text)
    if a.write:
        a.write.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
