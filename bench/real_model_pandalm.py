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
import asyncio
import json
import os
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
    ap.add_argument("--concurrency", type=int, default=16, help="judge concurrency = backend batch size")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads; on a shared 2-core box 2 threads ran 3-4x slower than 1 (OpenMP waits)",
    )
    ap.add_argument("--zero-shot-only", action="store_true", help="skip the LoRA fine-tune (CPU time)")
    ap.add_argument(
        "--readout",
        choices=("generate", "forced", "both", "none"),
        default="generate",
        help="zero-shot readout: the judge's own generated verdict, and/or a forced choice "
        "(argmax of P(A), P(B), P(TIE) right after '[RESULT] ', from the logits); "
        "none: go straight to the fine-tune",
    )
    ap.add_argument("--show", type=int, default=2, help="print this many raw zero-shot outputs")
    ap.add_argument("--work", type=Path, default=ROOT / ".judgegraph" / "bench-pandalm")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    import _smollm2
    import torch

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

    torch.set_num_threads(args.threads)
    model = args.model or _smollm2.ensure()
    traces, _, _ = dedup_traces(traces_from_pandalm(DATA / "testset-v1.json"))
    train, held = split_by_instruction(traces, validation_fraction=50 / 164, seed=args.seed)
    n_train_all, n_held_all = len(train), len(held)
    train = [t for t in train if _short(t, args.max_chars)]
    held = [t for t in held if _short(t, args.max_chars)][: args.heldout]
    load_start = os.getloadavg()[0]
    recorded = {it.idx: it for it in load_pandalm(DATA)}

    def idx(t: Any) -> int:
        return int(str(t.id).rsplit("-", 1)[-1])

    gold = [t.winner for t in held]
    gpt = [recorded[idx(t)].recorded_verdict("gpt-3.5-turbo").winner for t in held]
    majority = Counter(t.winner for t in train).most_common(1)[0][0]

    def judge_on(path: Path, max_tokens: int) -> tuple[Any, float]:
        backend = TransformersBackend(path, max_batch_size=args.concurrency)
        judge = PairwiseJudge(
            backend, template="pairwise-choice", swap=SwapPolicy(mode="single"), max_tokens=max_tokens, repair=False
        )
        started = time.perf_counter()
        report = asyncio.run(aevaluate_judge(judge, held, max_concurrency=args.concurrency))
        return report, time.perf_counter() - started

    def agree(pred: list[Any]) -> float:
        return sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold)

    row: dict[str, Any] = {
        "split": f"seed {args.seed}: {n_train_all} train / {n_held_all} held-out traces",
        "used": f"{len(train)} train / {len(held)} held-out (texts <= {args.max_chars} chars), one order",
        "threads": args.threads,
        "concurrency": args.concurrency,
        "load_avg_start": load_start,
        "gpt-3.5-turbo (recorded), same items": agree(gpt),
        f"majority class of train ({majority})": agree([majority] * len(gold)),
    }
    if args.show:
        row["raw_zero_shot_samples"] = asyncio.run(_raw(model, held[: args.show], args.zero_shot_tokens))
        print(json.dumps(row["raw_zero_shot_samples"], indent=2), flush=True)
    if args.readout in ("generate", "both"):
        zero, zero_s = judge_on(model, args.zero_shot_tokens)
        print(f"zero-shot: {zero.summary()} ({zero_s:.0f} s)", flush=True)
        row["zero_shot"] = {
            "agreement": zero.agreement,
            "parsed": f"{zero.judged}/{zero.n}",
            # a failed verdict counts as a disagreement in `agreement`
            "agreement_among_parsed": zero.agreement * zero.n / zero.judged if zero.judged else None,
            "max_tokens": args.zero_shot_tokens,
            "seconds": round(zero_s),
            "summary": zero.summary(),
        }
    if args.readout in ("forced", "both"):
        started = time.perf_counter()
        pred = asyncio.run(_forced(model, held))
        row["zero_shot_forced_choice"] = {
            "agreement": agree(pred),
            "predicted": dict(Counter(pred)),
            "seconds": round(time.perf_counter() - started),
        }
        print(f"forced choice: {row['zero_shot_forced_choice']}", flush=True)
    if args.zero_shot_only:
        _finish(row, args.write)
        return

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
    print(f"trained {result.steps} steps in {result.runtime_s:.0f} s, loss {result.train_loss}", flush=True)
    tuned, tuned_s = judge_on(exported.directory, 8)
    print(f"fine-tuned: {tuned.summary()} ({tuned_s:.0f} s); train {result.runtime_s:.0f} s", flush=True)
    started = time.perf_counter()
    tuned_forced = asyncio.run(_forced(exported.directory, held))
    row["fine_tuned_forced_choice"] = {
        "agreement": agree(tuned_forced),
        "predicted": dict(Counter(tuned_forced)),
        "seconds": round(time.perf_counter() - started),
    }
    print(f"fine-tuned forced choice: {row['fine_tuned_forced_choice']}", flush=True)

    row["fine_tuned"] = {
        "agreement": tuned.agreement,
        "parsed": f"{tuned.judged}/{tuned.n}",
        "seconds": round(tuned_s),
        "train_steps": result.steps,
        "train_s": round(result.runtime_s),
        "train_loss": result.train_loss,
        "examples_seen": result.steps * args.batch_size,
    }
    _finish(row, args.write)


def _request(judge: Any, trace: Any) -> Any:
    from judgegraph.backends import GenerateRequest

    msgs = judge.template.render(judge._fields(trace.to_input()), scale=judge.scale, structured=False)
    return GenerateRequest(tuple(msgs))


async def _raw(model: Path, held: list[Any], max_tokens: int) -> list[str]:
    """What the model writes zero-shot (the parse rate alone does not say)."""
    from judgegraph import PairwiseJudge, TransformersBackend
    from judgegraph.backends import GenerateRequest

    backend = TransformersBackend(model, max_batch_size=len(held))
    judge = PairwiseJudge(backend, template="pairwise-choice")
    reqs = [_request(judge, t) for t in held]
    outs = await asyncio.gather(*(backend.generate(GenerateRequest(r.messages, max_tokens=max_tokens)) for r in reqs))
    return [o.text for o in outs]


async def _forced(model: Path, held: list[Any]) -> list[str]:
    """The verdict the model gives when made to answer at once: the prompt
    plus ``[RESULT] ``, then the likeliest of A, B and TIE (exact, from the
    logits, through ``TransformersBackend.avalue_logprobs``)."""
    from judgegraph import PairwiseJudge, TransformersBackend

    backend = TransformersBackend(model)
    judge = PairwiseJudge(backend, template="pairwise-choice")
    labels = {"A": "A", "B": "B", "TIE": "tie"}
    pred = []
    for t in held:
        lps = await backend.avalue_logprobs(_request(judge, t), "[RESULT] ", list(labels))
        pred.append(list(labels.values())[max(range(len(lps)), key=lps.__getitem__)])
    return pred


def _finish(row: dict[str, Any], write: bool) -> None:
    row["load_avg_end"] = os.getloadavg()[0]
    print(json.dumps(row, indent=2))
    if write:
        out = HERE / "results" / "finetune.md"
        with out.open("a", encoding="utf-8") as fh:
            fh.write("\n<!-- bench/real_model_pandalm.py -->\n```json\n" + json.dumps(row, indent=2) + "\n```\n")


if __name__ == "__main__":
    main()
