"""Job throughput against a loopback OpenAI server with fixed latency.

Runs a pairwise job of ``--items`` items at ``--concurrency`` through the local
engine (source file -> judge -> SQLite store), and a plain asyncio loop that
sends byte-identical requests through the same OpenAI client, alternating
the two. Reports throughput as a fraction of Little's bound (concurrency /
latency) and of the plain loop, client CPU per item, and the job's peak RSS
on a small and a large input.

The server runs in its own process; each client run is a fresh process, so
CPU and peak RSS are that run's alone (imports and start-up excluded from
time and CPU).

    python bench/throughput.py                     # 20,000 items, C=256, L=1 s, 3 reps
    python bench/throughput.py --write             # ... and record bench/results/throughput.md
    python bench/throughput.py --items 2000 --reps 1   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ANSWER = "The first answer is more complete. [SCORES] 8 4"


# ------------------------------------------------------------------ server process


def _reply(req: Any) -> Any:
    from judgegraph.testing import Reply

    return Reply(ANSWER, prompt_tokens=120)


def _serve(latency: float, port_q: Any, stop: Any) -> None:
    from judgegraph.testing import LoopbackServer

    with LoopbackServer(_reply, latency_s=latency) as server:
        port_q.put(server.port)
        stop.wait()
        calls = sum(server.calls.values())
    port_q.put(calls)


# ------------------------------------------------------------------ client processes


def _spec(src: Path, url: str, concurrency: int) -> Any:
    from judgegraph.jobs import BackendConfig, JobSpec, JudgeConfig, Limits, SourceConfig
    from judgegraph.types import SwapPolicy

    return JobSpec(
        source=SourceConfig(path=str(src), fields={"instruction": "q", "response_a": "a", "response_b": "b"}),
        # One order per item, so one request per item for both variants; the
        # plain loop sends exactly the requests this judge sends.
        judge=JudgeConfig(kind="pairwise", swap=SwapPolicy(mode="single")),
        backend=BackendConfig(model="bench", base_url=url + "/v1", structured_output=False),
        limits=Limits(concurrency=concurrency),
    )


def _usage() -> tuple[float, int]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss


async def _plain(src: Path, url: str, concurrency: int) -> tuple[int, float, float]:
    """What a user would write by hand: read items, render the judge's prompt,
    N workers sending requests through one pooled AsyncOpenAI client."""
    from judgegraph.jobs import build_backend, build_judge
    from judgegraph.jobs._runner import _pool_size

    spec = _spec(src, url, concurrency)
    judge = build_judge(spec.judge)
    backend = build_backend(spec.backend, max_connections=_pool_size(spec))
    client = backend._client  # type: ignore[attr-defined]
    await client.chat.completions.create(**_params(backend, judge, {"q": "warm", "a": "x", "b": "y"}))
    items = [json.loads(line) for line in src.read_text().splitlines()]
    cpu0, t0 = _usage()[0], time.perf_counter()
    it = iter(items)
    done = 0

    async def worker() -> None:
        nonlocal done
        for rec in it:
            resp = await client.chat.completions.create(**_params(backend, judge, rec))
            assert resp.choices[0].message.content == ANSWER
            done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, time.perf_counter() - t0, _usage()[0] - cpu0


def _params(backend: Any, judge: Any, rec: dict[str, str]) -> dict[str, Any]:
    from judgegraph.backends import GenerateRequest

    fields = {"instruction": rec["q"], "response_a": rec["a"], "response_b": rec["b"], "reference": None,
              "rubric_text": None}  # fmt: skip
    messages = judge.template.render(fields, scale=judge.scale, structured=False)
    req = GenerateRequest(messages=tuple(messages), max_tokens=judge.max_tokens, logprobs=True,
                          top_logprobs=judge.top_logprobs)  # fmt: skip
    params: dict[str, Any] = backend._params(req)
    return params


async def _job(src: Path, url: str, concurrency: int, store: Path) -> tuple[int, float, float]:
    from judgegraph.jobs import arun_spec

    spec = _spec(src, url, concurrency)
    # Warm the client and the imports on a one-item job in another store.
    warm = src.with_name("warm.jsonl")
    warm.write_text(src.read_text().split("\n", 1)[0] + "\n")
    await arun_spec(spec.model_copy(update={"source": spec.source.model_copy(update={"path": str(warm)})}),
                   store=store.with_name("warm.db"))  # fmt: skip
    cpu0, t0 = _usage()[0], time.perf_counter()
    s = await arun_spec(spec, store=store)
    elapsed, cpu = time.perf_counter() - t0, _usage()[0] - cpu0
    assert s.ok == s.rows and s.judged == s.rows, s
    return s.judged, elapsed, cpu


def client_main(args: argparse.Namespace) -> None:
    src, url = Path(args.src), args.url
    if args.client == "plain":
        n, elapsed, cpu = asyncio.run(_plain(src, url, args.concurrency))
    else:
        n, elapsed, cpu = asyncio.run(_job(src, url, args.concurrency, Path(args.store)))
    print(json.dumps({"items": n, "elapsed_s": elapsed, "cpu_s": cpu, "peak_rss_kb": _usage()[1]}))


# ------------------------------------------------------------------ driver


def _write_items(path: Path, n: int) -> None:
    with path.open("w") as fp:
        for i in range(n):
            fp.write(json.dumps({
                "q": f"Question {i}: explain how a hash map handles collisions, briefly.",
                "a": f"Answer A{i}: chaining keeps a list per bucket; lookups walk the list. " * 2,
                "b": f"Answer B{i}: open addressing probes for the next free slot.",
            }) + "\n")  # fmt: skip


def _client(kind: str, src: Path, url: str, concurrency: int, store: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--client", kind, "--src", str(src), "--url", url,
           "--concurrency", str(concurrency), "--store", str(store)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{kind} client failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--small", type=int, default=2_000, help="items in the run that peak RSS is compared with")
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--latency", type=float, default=1.0, help="server latency per request, seconds")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="record the figures in bench/results/throughput.md")
    # client mode (internal)
    ap.add_argument("--client", choices=["plain", "job"])
    ap.add_argument("--src")
    ap.add_argument("--url")
    ap.add_argument("--store")
    args = ap.parse_args()
    if args.client:
        client_main(args)
        return

    ctx = mp.get_context("spawn")
    port_q, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_serve, args=(args.latency, port_q, stop), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port_q.get(timeout=60)}"
    bound = args.concurrency / args.latency
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "job": [], "job-small": []}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "items.jsonl", Path(tmp) / "small.jsonl"
        _write_items(big, args.items)
        _write_items(small, args.small)
        print(f"loopback server pid {server.pid}, latency {args.latency:g} s; bound C/L = {bound:.0f} items/s")
        for rep in range(args.reps):
            for kind in ("plain", "job"):  # alternate A B A B
                r = _client(kind, big, url, args.concurrency, Path(tmp) / f"{kind}-{rep}.db")
                r["throughput"] = r["items"] / r["elapsed_s"]
                runs[kind].append(r)
                print(f"  rep {rep + 1} {kind:5s}: {r['throughput']:7.1f} items/s = {r['throughput'] / bound:.3f} "
                      f"of bound, {1000 * r['cpu_s'] / r['items']:.2f} ms CPU/item, peak RSS "
                      f"{r['peak_rss_kb'] / 1024:.0f} MiB", flush=True)  # fmt: skip
        for rep in range(max(1, min(2, args.reps))):
            r = _client("job", small, url, args.concurrency, Path(tmp) / f"small-{rep}.db")
            runs["job-small"].append(r)
            print(f"  {args.small}-item job: peak RSS {r['peak_rss_kb'] / 1024:.0f} MiB", flush=True)
    stop.set()
    server.join(30)
    load_after = os.getloadavg()

    def med(kind: str, key: str) -> float:
        return float(statistics.median(r[key] for r in runs[kind]))

    plain_tp, job_tp = med("plain", "throughput"), med("job", "throughput")
    plain_cpu = 1000 * med("plain", "cpu_s") / args.items
    job_cpu = 1000 * med("job", "cpu_s") / args.items
    rss_big, rss_small = med("job", "peak_rss_kb") / 1024, med("job-small", "peak_rss_kb") / 1024
    spread = {
        k: (min(r["throughput"] for r in v), max(r["throughput"] for r in v))
        for k, v in runs.items()
        if k != "job-small"
    }
    lines = [
        f"items {args.items}, concurrency {args.concurrency}, latency {args.latency:g} s, reps {args.reps} "
        f"(medians; alternating plain/job), {os.cpu_count()} CPUs, Python {platform.python_version()}",
        f"Little's bound (C/L):        {bound:8.1f} items/s",
        f"plain asyncio loop:          {plain_tp:8.1f} items/s = {plain_tp / bound:.3f} of bound "
        f"(range {spread['plain'][0]:.1f}-{spread['plain'][1]:.1f})",
        f"judgegraph job (local):      {job_tp:8.1f} items/s = {job_tp / bound:.3f} of bound = "
        f"{job_tp / plain_tp:.3f} of the plain loop (range {spread['job'][0]:.1f}-{spread['job'][1]:.1f})",
        f"client CPU per item:         plain {plain_cpu:.2f} ms, job {job_cpu:.2f} ms (+{job_cpu - plain_cpu:.2f} ms)",
        f"job peak RSS:                {rss_small:.0f} MiB at {args.small} items, {rss_big:.0f} MiB at "
        f"{args.items} items (ratio {rss_big / rss_small:.2f})",
        f"machine load average (1/5/15 min): before {' '.join(f'{x:.1f}' for x in load_before)}, "
        f"after {' '.join(f'{x:.1f}' for x in load_after)}",
    ]  # fmt: skip
    print("\n".join(lines))
    if args.write:
        _record(args, lines, runs, bound)


def _record(args: argparse.Namespace, lines: list[str], runs: dict[str, list[dict[str, Any]]], bound: float) -> None:
    out = HERE / "results" / "throughput.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(
        f"| {k} | {i + 1} | {r['items']} | {r['elapsed_s']:.1f} | {r['items'] / r['elapsed_s']:.1f} | "
        f"{r['items'] / r['elapsed_s'] / bound:.3f} | {1000 * r['cpu_s'] / r['items']:.2f} | "
        f"{r['peak_rss_kb'] / 1024:.0f} |"
        for k, v in runs.items()
        for i, r in enumerate(v)
    )
    out.write_text(
        "# Job throughput (bench/throughput.py)\n\n"
        f"Measured {time.strftime('%Y-%m-%d', time.gmtime())} with `python bench/throughput.py "
        f"--items {args.items} --concurrency {args.concurrency} --latency {args.latency:g} --reps {args.reps}`.\n\n"
        "```\n" + "\n".join(lines) + "\n```\n\n"
        "| variant | rep | items | wall s | items/s | of bound | client CPU ms/item | peak RSS MiB |\n"
        "|---|---|---|---|---|---|---|---|\n" + rows + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
