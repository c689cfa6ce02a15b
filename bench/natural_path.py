"""Client CPU a judgement costs on each library's natural path (issue 14).

Not byte-identical requests (that is ``overhead.py``): each side sends what it
would send on its own. The plain side is a bare ``AsyncOpenAI`` call with a
short correctness prompt, a strict JSON schema for ``{feedback, score}`` and a
``json.loads`` of the answer, as a hand-written evaluator does. The judgegraph
side is ``PointwiseJudge(OpenAIBackend(...)).ajudge(item)`` with its defaults:
its own template, structured output, logprob options, parsing, validation and
provenance. Both share one client and one loopback server (in its own process,
so the server's CPU is not counted). Calls alternate one by one, so drift hits
both alike; the figure is judgegraph's CPU minus the plain call's, per call,
median over repetitions.

    .venv/bin/python bench/natural_path.py --calls 1000 --reps 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import statistics
from collections.abc import Iterator
from pathlib import Path

from guardrail import _cpu, _serve  # the same loopback server, answer and CPU clock

PROMPT = (
    "You grade answers for correctness. Give a short reason, then a score from 1 (wrong) to 5 (fully correct).\n"
    "<question>\n{q}\n</question>\n<answer>\n{a}\n</answer>"
)
SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "score",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"feedback": {"type": "string"}, "score": {"type": "integer"}},
            "required": ["feedback", "score"],
            "additionalProperties": False,
        },
    },
}


@contextlib.contextmanager
def serving() -> Iterator[str]:
    """The guardrail bench's loopback server (same answer), in its own process: its URL."""
    parent, child = mp.Pipe()
    server = mp.Process(target=_serve, args=(child,), daemon=True)
    server.start()
    try:
        yield parent.recv()
    finally:
        parent.send("stop")


async def _run(url: str, calls: int, reps: int, warmup: int) -> list[tuple[float, float]]:
    import openai

    from judgegraph import OpenAIBackend, PointwiseJudge

    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="bench", max_retries=0)
    judge = PointwiseJudge(OpenAIBackend("gpt-4o-mini", client=client))
    item = {"instruction": "How do I reset my password?", "response": "Use the emailed link."}
    content = PROMPT.format(q=item["instruction"], a=item["response"])

    async def plain() -> None:
        r = await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": content}],
            response_format=SCHEMA,  # type: ignore[arg-type]
            temperature=0.0,
        )
        assert json.loads(r.choices[0].message.content or "")["score"] == 5

    async def ours() -> None:
        verdict = await judge.ajudge(item)
        assert verdict.ok and verdict.score == 5, verdict

    for _ in range(warmup):
        await plain()
        await ours()
    out = []
    for _ in range(reps):
        cpu_plain = cpu_ours = 0.0
        for _ in range(calls):
            c0 = _cpu()
            await plain()
            c1 = _cpu()
            await ours()
            c2 = _cpu()
            cpu_plain += c1 - c0
            cpu_ours += c2 - c1
        out.append((1e3 * cpu_plain / calls, 1e3 * cpu_ours / calls))
    await client.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--write", type=Path, help="append the table as markdown to this file")
    args = ap.parse_args()
    with serving() as url:
        rows = asyncio.run(_run(url, args.calls, args.reps, args.warmup))
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    lines = [
        f"natural path, {args.calls} calls x {args.reps} reps, load {load}",
        "| rep | plain AsyncOpenAI call | PointwiseJudge over OpenAIBackend | added |",
        "|---|---|---|---|",
    ]
    lines += [f"| {i} | {p:.3f} ms | {o:.3f} ms | {o - p:+.3f} ms |" for i, (p, o) in enumerate(rows)]
    added = statistics.median(o - p for p, o in rows)
    lines.append(f"\nmedian added client CPU per judgement: {added:+.3f} ms (target < 0.5 ms)")
    text = "\n".join(lines)
    print(text)
    if args.write:
        with args.write.open("a", encoding="utf-8") as fh:
            fh.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
