"""Stress: run the timing-sensitive tests many times on one busy core.

The tests marked ``timing`` (pyproject.toml) start processes or servers,
wait, kill, race tasks or count calls against a rate: the kind that passes on
a quiet machine and fails on CI's busy one. This runner pins a pytest run of
them to one CPU core, beside ``--busy`` processes that spin on the same core
(so the tests get about a third of it), repeats that ``--runs`` times and
prints how often each test passed and failed.

``--lanes 2`` runs two such lanes at once, one per core, each with its own
busy processes: the runs split between them, and each run still has one core
shared three ways. Everything stays on this machine; the tests themselves
talk only to 127.0.0.1. The busy processes are this runner's children: they
are stopped when a lane ends, and each stops by itself if the runner dies.

    .venv/bin/python bench/stress_tests.py --runs 20 --lanes 2 --write bench/results/ci.md
    .venv/bin/python bench/stress_tests.py --runs 5 -- tests/graphs/test_guardrail_outage.py
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A busy process: spins on its core, and looks up once in a while whether the
# runner that started it is still there, so it cannot outlive it.
_SPIN = """
import os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
parent = os.getppid()
n = 0
while True:
    n += 1
    if n % 2_000_000 == 0 and os.getppid() != parent:
        break
"""


def _pinned(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


def _outcomes(xml_path: Path) -> dict[str, str]:
    """test id -> passed | failed | error | skipped, from a JUnit XML report."""
    out: dict[str, str] = {}
    if not xml_path.exists():
        return out
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag for child in case}
        out[name] = (
            "failed" if "failure" in kinds else "error" if "error" in kinds else "skipped" if "skipped" in kinds
            else "passed"
        )  # fmt: skip
    return out


def _one_run(cpu: int, busy: int, run: int, select: list[str], scratch: Path) -> tuple[int, dict[str, str], int, str]:
    spinners = [subprocess.Popen([sys.executable, "-c", _SPIN, str(cpu)]) for _ in range(busy)]
    xml = scratch / f"run{run}.xml"
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
        f"--junitxml={xml}", *select,
    ]  # fmt: skip
    env = {**os.environ, "CI": "1"}
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, env=env, preexec_fn=lambda: _pinned(cpu), capture_output=True, text=True, check=False
        )
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()
    return run, _outcomes(xml), done.returncode, (done.stdout + done.stderr)[-4000:]


def stress(
    *,
    runs: int,
    lanes: int,
    busy: int,
    select: list[str],
    budget_s: float | None = None,
    on_run: Callable[[dict[str, Counter[str]], int], None] | None = None,
) -> tuple[dict[str, Counter[str]], list[str], int]:
    """Returns the table, the logs of failed runs, and how many runs finished. With
    ``budget_s``, no lane starts a run after that many seconds (a run under way ends)."""
    cpus = sorted(os.sched_getaffinity(0))[:lanes]
    table: dict[str, Counter[str]] = defaultdict(Counter)
    logs: list[str] = []
    done = 0
    lock = threading.Lock()
    stop_at = None if budget_s is None else time.monotonic() + budget_s

    def record(run: int, outcomes: dict[str, str], rc: int, tail: str) -> None:
        nonlocal done
        with lock:
            done += 1
            for test, outcome in outcomes.items():
                table[test][outcome] += 1
            print(f"run {run}: rc={rc}, {dict(Counter(outcomes.values()))}", flush=True)
            if rc not in (0, 5) or not outcomes:
                logs.append(f"run {run} (rc={rc}):\n{tail}")
            if on_run is not None:
                on_run(table, done)

    with tempfile.TemporaryDirectory(prefix="stress-") as tmp, concurrent.futures.ThreadPoolExecutor(len(cpus)) as ex:
        # Run k goes to lane k % lanes; a lane runs its share one after another.
        def lane(cpu: int, mine: list[int]) -> None:
            for k in mine:
                if stop_at is not None and time.monotonic() > stop_at:
                    return
                record(*_one_run(cpu, busy, k, select, Path(tmp)))

        for fut in [ex.submit(lane, cpu, list(range(i, runs, len(cpus)))) for i, cpu in enumerate(cpus)]:
            fut.result()
    return table, logs, done


def render(table: dict[str, Counter[str]], *, runs: int, lanes: int, busy: int, select: list[str]) -> str:
    failed = sum(c["failed"] + c["error"] for c in table.values())
    lines = [
        f"Stress run, {dt.date.today().isoformat()}: {runs} runs of `pytest {' '.join(select)}`, each pinned to one",
        f"core beside {busy} busy processes on that core ({lanes} lane(s) at once, one core each).",
        f"Tests: {len(table)}; failures and errors over all runs: {failed}.",
        "",
        "| test | passed | failed | error | skipped |",
        "|---|---:|---:|---:|---:|",
    ]
    for test in sorted(table):
        c = table[test]
        lines.append(f"| `{test}` | {c['passed']} | {c['failed']} | {c['error']} | {c['skipped']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--lanes", type=int, default=1, help="cores to use at once, one lane each")
    ap.add_argument("--busy", type=int, default=2, help="busy processes beside each run, on its core")
    ap.add_argument("--write", type=Path, help="also write the table (markdown) here, updated after every run")
    ap.add_argument("--budget-min", type=float, help="start no run after this many minutes")
    ap.add_argument("select", nargs="*", help="pytest selection (default: -m timing)")
    args = ap.parse_args()
    if args.runs < 1 or args.lanes < 1 or args.busy < 0:
        ap.error("--runs and --lanes must be at least 1, --busy at least 0")
    select = args.select or ["-m", "timing"]

    def table_text(table: dict[str, Counter[str]], done: int) -> str:
        return render(table, runs=done, lanes=args.lanes, busy=args.busy, select=select)

    def write(table: dict[str, Counter[str]], done: int) -> None:
        if args.write:
            args.write.write_text(table_text(table, done))

    budget = None if args.budget_min is None else 60 * args.budget_min
    table, logs, done = stress(
        runs=args.runs, lanes=args.lanes, busy=args.busy, select=select, budget_s=budget, on_run=write
    )
    text = table_text(table, done)
    print(text)
    for log in logs:
        print(log, file=sys.stderr)
    write(table, done)
    return 1 if logs or any(c["failed"] + c["error"] for c in table.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
