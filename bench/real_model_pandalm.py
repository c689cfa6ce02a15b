"""SmolLM2-135M-Instruct as a PandaLM judge: zero-shot through our template,
then after a short LoRA fine-tune on CPU, on held-out prompts.

Same data and split as the probe judge in bench/results/finetune.md:
``traces_from_pandalm`` -> ``dedup_traces`` -> ``split_by_instruction``
(50 of 164 prompts held out, seed 0: 581 train / 258 held-out traces).
To fit a shared 2-core CPU, only pairs whose texts are short are used
(``--max-chars``), the held-out set is cut to ``--heldout`` items and judged
in one order; the recorded gpt-3.5-turbo verdicts and the majority class are
scored on the very same items.

    python bench/real_model_pandalm.py                  # print
    python bench/real_model_pandalm.py --write          # ... and append to bench/results/finetune.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "judgegraph" / "data" / "pandalm"


def _short(t: Any, limit: int) -> bool:
    return len(t.instruction) + len(t.response_a) + len(t.response_b) <= limit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="converted SmolLM2 folder (default: the tests' cache)")
    ap.add_argument("--heldout", type=int, default=40)
    ap.add_argument("--max-chars", type=int, default=1200, help="instruction + both responses, characters")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--zero-shot-tokens", type=int, default=48, help="room for a rationale before [RESULT]")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=ROOT / ".judgegraph" / "bench-pandalm")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    import _smollm2

    from judgegraph import PairwiseJudge, SwapPolicy, TransformersBackend
    from judgegraph.datasets import load_pandalm
    from judgegraph.finetune import (
        DatasetConfig,
        JudgeDataset,
        SFTOptions,
        aevaluate_judge,
        build_dataset,
        dedup_traces,
        export_for_serving,
        split_by_instruction,
        traces_from_pandalm,
        train_sft,
    )

    model = args.model or _smollm2.ensure()
    traces, _, _ = dedup_traces(traces_from_pandalm(DATA / "testset-v1.json"))
    train, held = split_by_instruction(traces, validation_fraction=50 / 164, seed=args.seed)
    n_train_all, n_held_all = len(train), len(held)
    train = [t for t in train if _short(t, args.max_chars)]
    held = [t for t in held if _short(t, args.max_chars)][: args.heldout]
    recorded = {it.idx: it for it in load_pandalm(DATA)}

    def idx(t: Any) -> int:
        return int(str(t.id).rsplit("-", 1)[-1])

    gold = [t.winner for t in held]
    gpt = [recorded[idx(t)].recorded_verdict("gpt-3.5-turbo").winner for t in held]
    majority = Counter(t.winner for t in train).most_common(1)[0][0]

    import asyncio

    def judge_on(path: Path, max_tokens: int) -> tuple[Any, float]:
        backend = TransformersBackend(path, max_batch_size=8)
        judge = PairwiseJudge(
            backend, template="pairwise-choice", swap=SwapPolicy(mode="single"), max_tokens=max_tokens, repair=False
        )
        started = time.perf_counter()
        report = asyncio.run(aevaluate_judge(judge, held, max_concurrency=8))
        return report, time.perf_counter() - started

    zero, zero_s = judge_on(model, args.zero_shot_tokens)
    print(f"zero-shot: {zero.summary()} ({zero_s:.0f} s)", flush=True)

    ds: JudgeDataset = build_dataset(train, DatasetConfig(formats=("pairwise-choice",), validation_fraction=0.0))
    opts = SFTOptions(
        method="lora",
        learning_rate=5e-4,
        warmup_steps=2,
        batch_size=args.batch_size,
        max_steps=args.steps,
        max_length=512,
        logging_steps=5,
        save_steps=10_000,
    )
    work = args.work
    result = train_sft(model, ds, work / "run", options=opts, progress=False)
    exported = export_for_serving(result.final_dir, work / "export", name="smollm2-pandalm")
    tuned, tuned_s = judge_on(exported.directory, 8)
    print(f"fine-tuned: {tuned.summary()} ({tuned_s:.0f} s); train {result.runtime_s:.0f} s", flush=True)

    def agree(pred: list[Any]) -> float:
        return sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold)

    row = {
        "split": f"seed {args.seed}: {n_train_all} train / {n_held_all} held-out traces",
        "used": f"{len(train)} train / {len(held)} held-out (texts <= {args.max_chars} chars), one order",
        "zero_shot": {"agreement": zero.agreement, "parsed": f"{zero.judged}/{zero.n}", "seconds": round(zero_s)},
        "fine_tuned": {
            "agreement": tuned.agreement,
            "parsed": f"{tuned.judged}/{tuned.n}",
            "seconds": round(tuned_s),
            "train_steps": result.steps,
            "train_s": round(result.runtime_s),
            "train_loss": result.train_loss,
            "examples_seen": result.steps * args.batch_size,
        },
        "gpt-3.5-turbo (recorded), same items": agree(gpt),
        f"majority class of train ({majority})": agree([majority] * len(gold)),
    }
    print(json.dumps(row, indent=2))
    if args.write:
        out = HERE / "results" / "finetune.md"
        with out.open("a", encoding="utf-8") as fh:
            fh.write("\n<!-- bench/real_model_pandalm.py -->\n```json\n" + json.dumps(row, indent=2) + "\n```\n")


if __name__ == "__main__":
    main()
