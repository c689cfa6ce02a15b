"""Soak: the reliability checks of tests/ at full size.

1. faults: a 5,000-item job against a loopback judge that fails 20% of its
   calls (429 with retry-after, 500, 503, reset, hang past the timeout, non-JSON
   body, output cut off, no verdict). Checked with the same code as the CI
   test (tests/test_faults_job.py, 600 + 200 items there).
2. crash: ``judgegraph eval`` killed with SIGKILL at random points and resumed
   (tests/test_crash_resume.py: 400 items, 10 kills).
3. guardrail: decisions under a mixed outage, timed by bench/guardrail_outage.py
   (tests/graphs/test_guardrail_outage.py checks the policy, 60 per policy).

    .venv/bin/python bench/soak.py --write bench/results/soak.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The checks live with the tests (tests/jobs), the guardrail's timing in bench/.
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "jobs"), str(ROOT / "bench")]

from test_crash_resume import check_crash_run, crash_and_resume  # noqa: E402
from test_faults_job import check_faulty_run, fault_share_seen, run_faulty_job  # noqa: E402


def soak_faults(n: int, share: float, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        run = asyncio.run(run_faulty_job(Path(tmp), n, share=share, seed=seed))
        check_faulty_run(run)
    s = run.summary
    calls = run.server.calls
    return {
        "items": n,
        "elapsed_s": run.elapsed_s,
        "ok": s.ok,
        "unparsed": s.unparsed,
        "errors": s.errors,
        "requests": s.requests,
        "requests_per_item": s.requests / n,
        "max_calls_one_item": max(calls.values()),
        "fault_share": fault_share_seen(run),
        "faults": dict(sorted(run.server.faults.items())),
        "unread": s.requests - sum(calls.values()),
        "lost": n - len(run.rows),
        "duplicated": len(run.rows) - len({r.item_hash for r in run.rows}),
        "problem_kinds": _kinds(run),
    }


def _kinds(run: Any) -> dict[str, int]:
    from collections import Counter

    from judgegraph.jobs._report_data import _problem_kind

    return dict(Counter(_problem_kind(r.reason) for r in run.rows if r.status != "ok").most_common())


def soak_crash(n: int, kills: int, seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        run = crash_and_resume(Path(tmp), n, kills, seed=seed, max_calls_between=max(25, n // (2 * kills)))
        check_crash_run(run)
    return {
        "items": n,
        "kills": kills,
        "elapsed_s": time.monotonic() - started,
        "kill_points": run.kills,
        "committed_at_kill": [len(c) for c in run.committed_at_kill],
        "requests": sum(run.final_calls.values()),
        "resent": run.resent,
        "judged_by_final_run": run.summary["judged"],
    }


def soak_guardrail(decisions: int) -> dict[str, Any]:
    import guardrail_outage as g  # bench/guardrail_outage.py: one timed round per policy

    out: dict[str, Any] = {"budget_ms": g.BUDGET_S * 1e3, "decisions_per_policy": decisions}
    for policy in ("open", "closed"):
        out[policy] = asyncio.run(g._round(policy, decisions, seed=7))
    return out


def render(faults: dict[str, Any], crash: dict[str, Any], guard: dict[str, Any], load: str) -> str:
    f, c = faults, crash
    lines = [
        "# Soak: faults, crashes and outages (bench/soak.py)",
        "",
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}; "
        f"load average at start {load} (the machine was shared with other work).",
        "",
        f"## Faults: {f['items']:,} items, {f['fault_share']:.1%} of calls failed",
        "",
        "| items | ok | unparsed | error | lost | duplicated | requests | per item | max calls, one item | wall |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {f['items']:,} | {f['ok']:,} | {f['unparsed']} | {f['errors']} | {f['lost']} | {f['duplicated']} | "
        f"{f['requests']:,} | {f['requests_per_item']:.2f} | {f['max_calls_one_item']} (bound 8) | "
        f"{f['elapsed_s']:.0f} s |",
        "",
        "Faults served: " + ", ".join(f"{k} {v}" for k, v in f["faults"].items()) + ".",
        "",
        "Failed items by reason: " + (", ".join(f"{k}: {v}" for k, v in f["problem_kinds"].items()) or "none") + ".",
        "",
        "Every item was judged or recorded as failed with its reason; every request the server saw is counted "
        f"in the store's attempts and the job summary's `requests` ({f['unread']} more were counted by the client "
        "but timed out before the loopback server, busy on a loaded machine, read them); each item's verdict is "
        "the one the server gave that item. Retries: 4 attempts per request plus one repair request, so at most "
        "8 calls per item.",
        "",
        f"## Crashes: {c['kills']} SIGKILLs of `judgegraph eval`, {c['items']:,} items",
        "",
        f"Kill points: {', '.join(c['kill_points'])}.",
        "",
        f"Items committed at each kill: {c['committed_at_kill']}. The final run judged "
        f"{c['judged_by_final_run']} items. The server answered {c['requests']:,} requests for {c['items']:,} items: "
        f"{c['resent']} re-sent, all of them items in flight or not yet committed (the store commits every 0.1 s) "
        "at a kill. No item committed before a kill was sent again; every item is in the store exactly once.",
        "",
        f"## Guardrail under a mixed outage: budget {guard['budget_ms']:.0f} ms, "
        f"{guard['decisions_per_policy']} decisions per policy",
        "",
        "| policy | p50 / budget | p99 / budget | p99 overrun | timer lateness p99 | timed out |",
        "|---|---|---|---|---|---|",
    ]
    for policy in ("open", "closed"):
        g = guard[policy]
        lines.append(
            f"| fail-{policy} | {g['p50_ratio']:.2f} | {g['p99_ratio']:.2f} | {g['overrun_ms']:.1f} ms | "
            f"{g['timer_late_ms']:.2f} ms | {g['timed_out']:.0%} |"
        )
    lines += [
        "",
        "Timer lateness is how late a bare `asyncio.sleep(budget)` woke in the same loop, measured before each "
        "decision: the machine's share of the overrun.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--share", type=float, default=0.2)
    ap.add_argument("--crash-items", type=int, default=1000)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--decisions", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print("faults ...", flush=True)
    faults = soak_faults(args.items, args.share, args.seed)
    print(faults, flush=True)
    print("crash ...", flush=True)
    crash = soak_crash(args.crash_items, args.kills, args.seed + 1)
    print(crash, flush=True)
    print("guardrail ...", flush=True)
    guard = soak_guardrail(args.decisions)
    print(guard, flush=True)
    text = render(faults, crash, guard, load)
    print(text)
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
