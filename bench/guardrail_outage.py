"""Guardrail decision latency under a mixed outage, against its budget.

The timing half of tests/test_guardrail_outage.py (which asserts only that
every decision follows the declared policy). The same outage mix over real
HTTP (hangs, 503s, resets, non-JSON bodies, unreadable verdicts, some good
answers) and the same production-like retry policy, so only the guardrail's
``timeout_s`` ends a hang. Each decision is paired with a bare
``asyncio.sleep(budget)`` in the same loop, run just before it: how late a
plain timer wakes is what the machine adds, not the guardrail. Reported as
ratios: decision p50 and p99 over the budget, and the p99 overrun (p99 -
budget) beside the bare timer's p99 lateness.

    .venv/bin/python bench/guardrail_outage.py --decisions 200 --write bench/results/graphs.md
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BUDGET_S = 0.150


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _outage(seed: int) -> Any:
    from judgegraph.testing import Fault, Reply

    rng = random.Random(seed)

    def respond(req: Any) -> Any:
        x = rng.random()
        if x < 0.35:
            return Fault("hang", delay_s=3.0)
        if x < 0.50:
            return Fault("status", 503)
        if x < 0.60:
            return Fault("reset")
        if x < 0.70:
            return Fault("garbage")
        if x < 0.80:
            return Reply("I am not sure what to make of this.")
        return Reply(f"Assessed. [RESULT] {rng.choice([5, 1])}")

    return respond


async def _round(policy: str, decisions: int, seed: int) -> dict[str, float]:
    from judgegraph import OpenAIBackend, PointwiseJudge, RetryPolicy
    from judgegraph.graphs import create_guardrail_graph
    from judgegraph.testing import LoopbackServer

    ask = {"instruction": "How do I reset my password?", "answer": "Open Settings, then Security, then Reset."}
    graph = create_guardrail_graph(fail_policy=policy, threshold=3, timeout_s=BUDGET_S)  # type: ignore[arg-type]
    retry = RetryPolicy(max_attempts=4, initial_delay_s=0.5, timeout_s=60)
    late: list[float] = []
    took: list[float] = []
    timed_out = 0
    with LoopbackServer(_outage(seed)) as server:
        backend = OpenAIBackend("judge", base_url=server.url + "/v1", api_key="k", retry=retry)
        ctx = {"judge": PointwiseJudge(structured=False), "backend": backend}
        await graph.ainvoke(ask, context=ctx)  # warm-up: the client's pool and SSL context, once per loop
        for _ in range(decisions):
            t0 = time.perf_counter()
            await asyncio.sleep(BUDGET_S)
            late.append(time.perf_counter() - t0 - BUDGET_S)
            t0 = time.perf_counter()
            out = await graph.ainvoke(ask, context=ctx)
            took.append(time.perf_counter() - t0)
            timed_out += out["decision"].timed_out
    p99 = _quantile(took, 0.99)
    return {
        "p50_ratio": _quantile(took, 0.5) / BUDGET_S,
        "p99_ratio": p99 / BUDGET_S,
        "overrun_ms": (p99 - BUDGET_S) * 1e3,
        "timer_late_ms": _quantile(late, 0.99) * 1e3,
        "timed_out": timed_out / decisions,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=200, help="decisions per policy per repetition")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--write", type=Path, help="append the table as markdown to this file")
    args = ap.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    rows = []
    for policy in ("open", "closed"):
        runs = [asyncio.run(_round(policy, args.decisions, seed)) for seed in range(args.reps)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        rows.append(
            f"| fail-{policy} | {med['timed_out']:.0%} | {med['p50_ratio']:.2f} | {med['p99_ratio']:.3f} "
            f"| {med['overrun_ms']:.1f} ms | {med['timer_late_ms']:.1f} ms |"
        )
    table = (
        "| policy | decided by timeout | p50 / budget | p99 / budget | p99 overrun | bare timer p99 lateness |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    print(table)
    if args.write:
        text = (
            f"\n## Decisions under a mixed outage, {time.strftime('%Y-%m-%d %H:%M')}\n\n"
            f"`bench/guardrail_outage.py --decisions {args.decisions} --reps {args.reps}`: budget "
            f"{BUDGET_S * 1e3:.0f} ms, load average {' '.join(load)} before the run; medians over repetitions. "
            "An overrun no larger than the bare timer's lateness is the machine's, not the guardrail's.\n\n" + table
        )
        args.write.write_text(args.write.read_text().rstrip("\n") + "\n" + text)
    sys.exit(0)


if __name__ == "__main__":
    main()
