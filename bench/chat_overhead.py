"""What does a judge over a LangChain chat model add, beside openevals?

Against a loopback OpenAI-compatible server (own process, fixed latency), one
client process runs these variants in turn, alternating their order, each
judging the same N items at concurrency C with one ChatOpenAI model:
  plain-jg   ChatOpenAI.with_structured_output(<the judge's schema>) over the
             judge's own prebuilt messages: the requests the judge sends;
  judge      PointwiseJudge(ChatOpenAI).ajudge_many (template, parse, provenance);
  plain-oe   ChatOpenAI.with_structured_output(<openevals' schema>) over
             openevals' correctness prompt, prebuilt: the requests openevals sends;
  openevals  create_async_llm_as_judge(CORRECTNESS_PROMPT, judge=ChatOpenAI);
  graph-bare a one-node LangGraph graph around the plain-jg call, one run each;
  graph-node create_judge_node(judge) in a one-node graph, one run each.
No callbacks or tracers are configured. Client CPU (getrusage) per
judgement is reported; "added" is a variant minus its plain twin from the same
round. Medians over rounds and client processes.

    python bench/chat_overhead.py --n 300 --concurrency 32 --latency 0.05 --reps 3 --rounds 2
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

JG_REPLY = '{"feedback": "Correct and complete.", "score": 4}'
OE_REPLY = '{"reasoning": "It matches the reference.", "score": true}'
ITEM = {
    "instruction": "Explain why the sky is blue in two sentences. Item {i}.",
    "response": "Sunlight scatters off air molecules; blue light scatters most (Rayleigh scattering).",
    "reference": "Rayleigh scattering makes shorter (blue) wavelengths scatter more.",
}


def _serve(latency: float, port_q: Any) -> None:
    from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

    jg, oe = Reply(JG_REPLY, prompt_tokens=300), Reply(OE_REPLY, prompt_tokens=300)

    def responder(req: LoopbackRequest) -> Reply:
        name = ((req.body.get("response_format") or {}).get("json_schema") or {}).get("name")
        return oe if name == "score" else jg

    server = LoopbackServer(responder, latency_s=latency).start()
    port_q.put(server.port)
    while True:
        time.sleep(3600)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _client(url: str, n: int, concurrency: int, rounds: int) -> dict[str, list[float]]:
    import asyncio

    import httpx2  # type: ignore[import-not-found]
    import openai
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, StateGraph

    from judgegraph import PointwiseJudge, PointwiseScore, create_judge_node
    from judgegraph.backends import ChatModelBackend

    http = openai.DefaultAsyncHttpxClient(
        limits=httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    )
    model = ChatOpenAI(
        model="gpt-4.1-mini",
        api_key="x",
        base_url=url + "/v1",
        max_tokens=512,
        temperature=0.0,
        http_async_client=http,
        max_retries=0,
    )
    items = [{**ITEM, "instruction": ITEM["instruction"].format(i=i)} for i in range(n)]
    judge = PointwiseJudge(ChatModelBackend(model), top_logprobs=0)

    # The plain twin of the judge: the same schema, messages built outside the timed region.
    from judgegraph.types import PointwiseInput

    scale = judge.scale
    schema = {"title": "verdict", **judge.template.json_schema(scale)}
    plain_jg = model.with_structured_output(schema, method="json_schema", strict=True)

    def jg_messages(item: dict[str, str]) -> list[tuple[str, str]]:
        p = PointwiseInput(**item)
        fields = {
            "instruction": p.instruction,
            "response": p.response,
            "reference": p.reference,
            "rubric_text": judge._rubric_text(None, scale),
        }
        roles = {"system": "system", "user": "human", "assistant": "ai"}
        return [(roles[m.role], m.content) for m in judge.template.render(fields, scale=scale, structured=True)]

    jg_prebuilt = {id(it): jg_messages(it) for it in items}

    # openevals and its plain twin.
    from openevals.llm import _construct_default_output_json_schema, create_async_llm_as_judge
    from openevals.prompts import CORRECTNESS_PROMPT

    evaluator = create_async_llm_as_judge(prompt=CORRECTNESS_PROMPT, judge=model, feedback_key="correctness")
    oe_schema, description = _construct_default_output_json_schema(continuous=False, choices=None, use_reasoning=True)
    plain_oe = model.with_structured_output({"title": "score", "description": description, **oe_schema})

    def oe_messages(item: dict[str, str]) -> list[dict[str, str]]:
        text = CORRECTNESS_PROMPT.format(
            inputs=item["instruction"], outputs=item["response"], reference_outputs=item["reference"]
        )
        return [{"role": "user", "content": text}]

    oe_prebuilt = {id(it): oe_messages(it) for it in items}

    def bare_graph() -> Any:
        async def node(state: dict[str, Any]) -> dict[str, Any]:
            return {"verdict": await plain_jg.ainvoke(state["messages"])}

        g = StateGraph(dict)
        g.add_node("judge", node)
        g.add_edge(START, "judge")
        return g.compile()

    def node_graph() -> Any:
        g = StateGraph(dict)
        g.add_node("judge", create_judge_node(judge))
        g.add_edge(START, "judge")
        return g.compile()

    bare, noded = bare_graph(), node_graph()
    sem = asyncio.Semaphore(concurrency)

    async def gather(fn: Any) -> int:
        async def one(it: dict[str, str]) -> bool:
            async with sem:
                return bool(await fn(it))

        return sum(await asyncio.gather(*(one(it) for it in items)))

    async def run_judge() -> int:
        out = await judge.ajudge_many(items, max_concurrency=concurrency)
        return sum(isinstance(r, PointwiseScore) and r.ok for r in out)

    async def run_openevals_one(it: dict[str, str]) -> bool:
        r = await evaluator(inputs=it["instruction"], outputs=it["response"], reference_outputs=it["reference"])
        return r["score"] is True

    async def run_node_one(it: dict[str, str]) -> bool:
        return bool((await noded.ainvoke(dict(it)))["verdict"].ok)

    variants: dict[str, Any] = {
        "plain-jg": lambda: gather(lambda it: plain_jg.ainvoke(jg_prebuilt[id(it)])),
        "judge": run_judge,
        "plain-oe": lambda: gather(lambda it: plain_oe.ainvoke(oe_prebuilt[id(it)])),
        "openevals": lambda: gather(run_openevals_one),
        "graph-bare": lambda: gather(lambda it: bare.ainvoke({"messages": jg_prebuilt[id(it)]})),
        "graph-node": lambda: gather(run_node_one),
    }

    async def main() -> dict[str, list[float]]:
        for run in variants.values():  # warm-up: connections, lazy imports, compiled paths
            await run()
        out: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
        for k in range(rounds):
            for name in names if k % 2 == 0 else names[::-1]:
                cpu0 = _cpu()
                ok = await variants[name]()
                assert ok == n, f"{name}: {ok}/{n} judgements ok"
                out[name].append((_cpu() - cpu0) / n * 1e3)
        return out

    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--reps", type=int, default=3, help="client processes")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of all variants per client process")
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        print(json.dumps(_client(args.url, args.n, args.concurrency, args.rounds)))
        return

    port_q: Any = mp.Queue()
    server = mp.Process(target=_serve, args=(args.latency, port_q), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port_q.get(timeout=30)}"
    per: dict[str, list[float]] = {}
    added: dict[str, list[float]] = {"judge": [], "openevals": [], "graph-node": []}
    twins = {"judge": "plain-jg", "openevals": "plain-oe", "graph-node": "graph-bare"}
    try:
        for _ in range(args.reps):
            cmd = [
                sys.executable,
                __file__,
                "--client",
                "--url",
                url,
                "--n",
                str(args.n),
                "--concurrency",
                str(args.concurrency),
                "--rounds",
                str(args.rounds),
            ]
            out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            for name, values in out.items():
                per.setdefault(name, []).extend(values)
            for name, twin in twins.items():
                added[name].extend(a - b for a, b in zip(out[name], out[twin], strict=True))
    finally:
        server.terminate()
    print(f"n={args.n} C={args.concurrency} L={args.latency}s reps={args.reps} rounds={args.rounds}")
    print("client CPU ms per judgement (median [min, max]):")
    for name, values in per.items():
        print(f"  {name:11s} {statistics.median(values):6.2f}  [{min(values):.2f}, {max(values):.2f}]")
    print("added over its plain twin (median [min, max]):")
    for name, values in added.items():
        spread = f"[{min(values):+.2f}, {max(values):+.2f}]"
        print(f"  {name:11s} {statistics.median(values):+6.2f}  {spread}  vs {twins[name]}")
    ratio = statistics.median(added["judge"]) / statistics.median(added["openevals"])
    print(f"judge added / openevals added = {ratio:.2f} (target <= 0.5)")


if __name__ == "__main__":
    main()
