"""What does judgegraph add over a plain AsyncOpenAI loop?

Runs the same N pairwise judgements (both orders, so 2N requests) against a
loopback OpenAI-compatible server with fixed latency:
  (a) judgegraph: a PairwiseJudge inside a batch judge node of a compiled
      LangGraph graph (one graph run, concurrency from max_concurrency);
  (b) plain: an asyncio loop over openai.AsyncOpenAI sending byte-identical
      requests at the same concurrency, no parsing beyond the SDK's.
The server runs in its own process. Each client process warms both variants
up, then runs them in pairs (plain then judgegraph, then the other way round)
and reads its CPU time with getrusage around each run, so every judgegraph
run has a plain run beside it in the same process: same imports, heap and
memory layout.
Separate processes per variant (the first design) let process-to-process
variation of about 0.8 ms per judgement swamp the figure. Several client
processes are run; medians are reported.

    python bench/overhead.py --n 400 --concurrency 64 --latency 0.5 --reps 3 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

REPLY = "Answer A is correct and complete; B misses the point.\n[SCORES] 8 3"
ITEM = {
    "instruction": "Explain why the sky is blue in two sentences. Item {i}.",
    "response_a": "Sunlight scatters off air molecules; blue light scatters most (Rayleigh scattering).",
    "response_b": "Because the ocean reflects onto it.",
}


def _serve(latency: float, port_q: Any) -> None:
    from judgegraph.testing import LoopbackServer, Reply

    reply = Reply(REPLY, token_probs={"8": 0.7, "7": 0.2, "9": 0.1}, prompt_tokens=300)
    server = LoopbackServer(lambda req: reply, latency_s=latency).start()
    port_q.put(server.port)
    while True:
        time.sleep(3600)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _client(url: str, n: int, concurrency: int, pairs: int) -> dict[str, list[dict[str, float]]]:
    import asyncio

    import httpx2  # type: ignore[import-not-found]
    import openai
    from langgraph.graph import START, StateGraph

    from judgegraph import OpenAIBackend, PairwiseJudge, PairwiseVerdict
    from judgegraph.judges import create_batch_judge_node

    items = [{**ITEM, "instruction": ITEM["instruction"].format(i=i)} for i in range(n)]
    backend = OpenAIBackend("judge", base_url=url + "/v1", api_key="x", max_connections=concurrency)
    judge = PairwiseJudge(backend, structured=False)

    async def run_graph(batch: list[dict[str, str]]) -> int:
        graph = StateGraph(dict)
        graph.add_node("judge", create_batch_judge_node(judge))
        graph.add_edge(START, "judge")
        out = await graph.compile().ainvoke({"items": batch}, config={"max_concurrency": concurrency // 2})
        return sum(isinstance(r, PairwiseVerdict) and r.ok for r in out["results"])

    # The plain loop sends the same request bodies the judge sends.
    from judgegraph.backends import GenerateRequest
    from judgegraph.types import PairwiseInput

    def params_for(item: dict[str, str]) -> list[dict[str, Any]]:
        pin = PairwiseInput(**item)
        out = []
        for p in (pin, pin.swapped()):
            msgs = judge.template.render(judge._fields(p), scale=judge.scale, structured=False)
            req = GenerateRequest(messages=tuple(msgs), max_tokens=judge.max_tokens, logprobs=True, top_logprobs=10)
            out.append(backend._params(req))
        return out

    client = openai.AsyncOpenAI(
        base_url=url + "/v1",
        api_key="x",
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(
            limits=httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        ),
    )

    prebuilt = {id(it): params_for(it) for it in items}  # built outside the timed region

    async def run_plain(batch: list[dict[str, str]]) -> int:
        bodies = [prebuilt[id(it)] for it in batch]
        sem = asyncio.Semaphore(concurrency // 2)

        async def one(pair: list[dict[str, Any]]) -> bool:
            async with sem:
                rs = await asyncio.gather(*(client.chat.completions.create(**p) for p in pair))
                return all(r.choices[0].message.content for r in rs)

        return sum(await asyncio.gather(*(one(p) for p in bodies)))

    async def main() -> dict[str, list[dict[str, float]]]:
        # Warm-up: connections, lazy imports, graph compile paths.
        await run_plain(items[:20])
        await run_graph(items[:20])
        out: dict[str, list[dict[str, float]]] = {"plain": [], "judgegraph": []}
        order = [("plain", run_plain), ("judgegraph", run_graph)]
        for k in range(pairs):
            # Alternate which goes first, so neither always runs on the other's leftovers.
            for name, run in order if k % 2 == 0 else order[::-1]:
                cpu0, t0 = _cpu(), time.perf_counter()
                ok = await run(items)
                out[name].append({"wall_s": time.perf_counter() - t0, "cpu_s": _cpu() - cpu0, "ok": ok})
        return out

    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600, help="pairwise judgements (2 requests each)")
    ap.add_argument("--concurrency", type=int, default=64, help="requests in flight")
    ap.add_argument("--latency", type=float, default=0.5, help="server latency, seconds")
    ap.add_argument("--reps", type=int, default=3, help="client processes")
    ap.add_argument("--pairs", type=int, default=3, help="plain/judgegraph run pairs per client process")
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.client:
        print(json.dumps(_client(args.url, args.n, args.concurrency, args.pairs)))
        return

    q: Any = mp.get_context("spawn").Queue()
    server = mp.get_context("spawn").Process(target=_serve, args=(args.latency, q), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{q.get(timeout=30)}"
    runs: dict[str, list[dict[str, float]]] = {"judgegraph": [], "plain": []}
    paired_ms: list[float] = []  # judgegraph minus the plain run of its pair, per judgement
    try:
        for _ in range(args.reps):
            cmd = [sys.executable, __file__, "--client", "--url", url, "--n", str(args.n)]
            cmd += ["--concurrency", str(args.concurrency), "--pairs", str(args.pairs)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            for variant in ("plain", "judgegraph"):
                for r in res[variant]:
                    assert r["ok"] == args.n, f"{variant}: only {r['ok']}/{args.n} judgements succeeded"
                runs[variant] += res[variant]
            for p, j in zip(res["plain"], res["judgegraph"], strict=True):
                paired_ms.append((j["cpu_s"] - p["cpu_s"]) / args.n * 1000)
    finally:
        server.terminate()

    def med(v: str, k: str) -> float:
        return statistics.median(r[k] for r in runs[v])

    bound = args.concurrency / args.latency  # requests/s by Little's law
    plain_wall, jg_wall = med("plain", "wall_s"), med("judgegraph", "wall_s")
    print(
        f"N={args.n} pairwise judgements ({2 * args.n} requests), concurrency={args.concurrency}, "
        f"latency={args.latency}s, {args.reps} client processes x {args.pairs} pairs (medians)"
    )
    print(
        f"plain loop:  wall {plain_wall:.2f}s  cpu {med('plain', 'cpu_s'):.2f}s  "
        f"throughput {2 * args.n / plain_wall / bound:.2f} of Little's bound"
    )
    print(f"judgegraph:  wall {jg_wall:.2f}s  cpu {med('judgegraph', 'cpu_s'):.2f}s")
    print(f"wall-time ratio judgegraph/plain: {jg_wall / plain_wall:.3f}  (target <= 1.05)")
    print(
        f"added client CPU per judgement (median of {len(paired_ms)} paired runs): "
        f"{statistics.median(paired_ms):.2f} ms  (target <= 1 ms); pairs ranged "
        f"{min(paired_ms):.2f} to {max(paired_ms):.2f} ms"
    )
    spread = [r["cpu_s"] / args.n * 1000 for r in runs["plain"]]
    print(f"plain loop CPU per judgement across runs: {min(spread):.2f}-{max(spread):.2f} ms")


if __name__ == "__main__":
    main()
