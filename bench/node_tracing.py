"""What the judge node and its tracing cost, with nobody listening (issue 14).

One process, one ``PointwiseJudge(OpenAIBackend)`` against a loopback server
in its own process, one graph run per judgement, calls alternating by variant:

- ``bare``: a one-node LangGraph graph whose node makes the same judge call
  (``await judge.ajudge(item)``) by hand;
- ``node``: ``create_judge_node(judge)`` in a one-node graph, as shipped;
- ``node, tracing hooks removed``: the same node with the tracing work taken
  out in-process (the node's ``tracing_active`` check and the model call's
  ``agenerate_traced`` wrapper replaced by plain calls): the code as it was
  before that work;
- ``node, a callback handler``: the shipped node with one no-op LangChain
  handler in the run config, so the judge's chain run and its LLM child run
  are opened: what tracing costs when someone does listen.

Reported: client CPU per judgement (``getrusage``), median over repetitions,
and each variant minus ``bare``.

    .venv/bin/python bench/node_tracing.py --calls 500 --reps 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).parent))
from natural_path import _cpu, serving  # the same loopback server, answer and CPU clock


async def _run(url: str, calls: int, reps: int, warmup: int) -> dict[str, list[float]]:
    import openai
    from langchain_core.callbacks import AsyncCallbackHandler
    from langgraph.graph import END, START, StateGraph

    import judgegraph.judges._model as model_mod
    import judgegraph.judges._node as node_mod
    from judgegraph import OpenAIBackend, PointwiseJudge, create_judge_node

    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="bench", max_retries=0)
    judge = PointwiseJudge(OpenAIBackend("gpt-4o-mini", client=client))
    item = {"instruction": "How do I reset my password?", "response": "Use the emailed link."}

    class State(TypedDict, total=False):
        instruction: str
        response: str
        verdict: Any

    def one_node(fn: Any) -> Any:
        builder = StateGraph(State)
        builder.add_node("judge", fn)
        builder.add_edge(START, "judge")
        builder.add_edge("judge", END)
        return builder.compile()

    async def by_hand(state: State) -> dict[str, Any]:
        return {"verdict": await judge.ajudge(item)}

    bare_graph, node_graph = one_node(by_hand), one_node(create_judge_node(judge))

    class Quiet(AsyncCallbackHandler):
        pass

    listening = {"callbacks": [Quiet()]}
    traced, active = model_mod.agenerate_traced, node_mod.tracing_active

    async def untraced(backend: Any, request: Any) -> Any:
        return await backend.generate(request)

    def hooks(on: bool) -> None:
        model_mod.agenerate_traced = traced if on else untraced  # type: ignore[assignment]
        node_mod.tracing_active = active if on else (lambda config=None: False)  # type: ignore[assignment]

    async def check(out: Any) -> None:
        assert out["verdict"].ok, out["verdict"]

    async def bare() -> None:
        await check(await bare_graph.ainvoke(item))

    async def node() -> None:
        await check(await node_graph.ainvoke(item))

    async def node_before() -> None:
        hooks(False)
        try:
            await check(await node_graph.ainvoke(item))
        finally:
            hooks(True)

    async def node_listened() -> None:
        await check(await node_graph.ainvoke(item, config=listening))  # type: ignore[arg-type]

    variants: dict[str, Callable[[], Awaitable[None]]] = {
        "bare": bare,
        "node": node,
        "node, tracing hooks removed": node_before,
        "node, a callback handler": node_listened,
    }
    for fn in variants.values():
        for _ in range(warmup):
            await fn()
    out: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(reps):
        for name, fn in variants.items():
            c0 = _cpu()
            for _ in range(calls):
                await fn()
            out[name].append(1e3 * (_cpu() - c0) / calls)
    await client.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=50)
    args = ap.parse_args()
    with serving() as url:
        rows = asyncio.run(_run(url, args.calls, args.reps, args.warmup))
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    base = rows["bare"]
    print(f"{args.calls} calls x {args.reps} reps, load {load}")
    print("| variant | client CPU ms / judgement, median [min, max] | minus bare, median of paired reps |")
    print("|---|---:|---:|")
    for name, xs in rows.items():
        added = statistics.median(x - b for x, b in zip(xs, base, strict=True))
        print(f"| {name} | {statistics.median(xs):.3f} [{min(xs):.3f}, {max(xs):.3f}] | {added:+.3f} |")


if __name__ == "__main__":
    main()
