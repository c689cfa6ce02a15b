"""Does calibrating on cross-fitted teacher traces keep the flywheel's share falling?

A side-by-side simulation of the flywheel's loop on PandaLM (same splits as
``bench/flywheel_pandalm.py --test-fraction 0.25``: a fixed test set set aside
first, a human-labelled held-out set, a stream of 5 batches of whole prompts),
with the local judge of the flywheel (MiniLM + the swap-consistent probe head,
``lexical=1``) retrained on all teacher traces after every round and always put
in service. Only the threshold rule differs:

- ``human``: the flywheel's rule. Calibrated on the human held-out set
  (~200 items): disagreement with humans on kept items at most alpha with
  probability 1 - delta.
- ``traces@a``: calibrated on the teacher's traces, each judged by a head fitted
  on the other folds of trace prompts (cross-fitting, 4 folds): disagreement
  *with the teacher* on kept items at most a, with probability 1 - delta. The
  calibration set grows with every round (100 -> 450 traces), which is the
  point; the target is the teacher, not humans, which is the cost.

After each round the cascade in service judges the fixed test set; the script
prints its escalation share and agreement with the human labels against the
teacher alone.

It is a simulation, cheaper than the flywheel (one encoder, no files), and not
the same loop: every new judge goes into service (no promotion rule), repeated
comparisons are kept (the flywheel drops them), and folds are dealt on the raw
prompt. The measurement of record is ``bench/flywheel_pandalm.py
--calibrate-on traces``; this script is for sweeping alpha.

    nice -n 10 .venv/bin/python bench/flywheel_crossfit.py --seeds 0 1 2 3 4 5
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flywheel_pandalm import batches_by_prompt

from judgegraph.cascade import calibrate_tier
from judgegraph.datasets import PandaLMItem
from judgegraph.finetune import ClassifierJudge, EncoderProbe, PairwiseTrace, ProbeOptions, assign_folds, fold_heads
from judgegraph.flywheel._rules import matches
from judgegraph.quickstart import load_bundled_pandalm, split_pandalm_by_prompt
from judgegraph.quickstart._local import encoder_path
from judgegraph.types import PairwiseVerdict, Winner

FOLDS = 4


def _trace(it: PandaLMItem, winner: Winner) -> PairwiseTrace:
    return PairwiseTrace(
        id=str(it.idx),
        instruction=it.prompt,
        response_a=it.response1,
        response_b=it.response2,
        winner=winner,
        source="teacher",
    )


def _judge(probe: EncoderProbe, items: list[PandaLMItem]) -> list[PairwiseVerdict]:
    out = asyncio.run(ClassifierJudge(probe).ajudge_many([it.to_pairwise_input() for it in items]))
    assert all(isinstance(r, PairwiseVerdict) for r in out)
    return out  # type: ignore[return-value]


def _fit(base: EncoderProbe, traces: list[PairwiseTrace]) -> EncoderProbe:
    part = copy.copy(base)  # same encoder and embedding cache; fit() gives it its own head
    return part.fit(traces)


def _kept(r: PairwiseVerdict, threshold: float | None) -> bool:
    return threshold is not None and r.ok and r.confidence is not None and r.confidence >= threshold


def _crossfit_verdicts(
    base: EncoderProbe, items: list[PandaLMItem], traces: list[PairwiseTrace], seed: int
) -> list[PairwiseVerdict]:
    fold_key = assign_folds((it.prompt for it in items), folds=FOLDS, seed=seed)
    fold_of = [fold_key[it.prompt] for it in items]
    out: list[PairwiseVerdict | None] = [None] * len(items)
    for k, head in enumerate(fold_heads(base, traces, fold_of, folds=FOLDS)):
        idx = [i for i, f in enumerate(fold_of) if f == k]
        for i, r in zip(idx, _judge(head, [items[i] for i in idx]), strict=True):
            out[i] = r
    return [r for r in out if r is not None]


def run(
    args: argparse.Namespace, seed: int, items: list[PandaLMItem], base: EncoderProbe, rule: str
) -> list[dict[str, Any]]:
    outer = split_pandalm_by_prompt(items, heldout_fraction=args.test_fraction, seed=seed + 1000)
    rest, test = list(outer.train), list(outer.heldout)
    split = split_pandalm_by_prompt(rest, heldout_fraction=args.heldout_fraction, seed=seed)
    held, batches = list(split.heldout), batches_by_prompt(split.train, args.rounds, seed)
    teacher = {it.idx: it.recorded_verdict("gpt-3.5-turbo") for it in items}
    rng = random.Random(seed)
    traced: list[PandaLMItem] = []  # items with an ok teacher verdict, in collection order
    probe: EncoderProbe | None = None
    threshold: float | None = None
    rows = []
    for rno, batch in enumerate(batches, start=1):
        # Serve the batch: local first at the threshold, the rest (and audits) to the teacher.
        local = _judge(probe, batch) if probe is not None else [None] * len(batch)
        for it, r in zip(batch, local, strict=True):
            keep = r is not None and _kept(r, threshold)
            if (not keep or rng.random() < args.audit_rate) and teacher[it.idx].ok:
                traced.append(it)
        traces = [_trace(it, teacher[it.idx].winner) for it in traced]  # type: ignore[arg-type]
        probe = _fit(base, traces)
        if rule == "human":
            cal = calibrate_tier(
                _judge(probe, held), [it.gold_winner for it in held], alpha=args.alpha, delta=args.delta, min_kept=30
            )
        else:
            a = float(rule.split("@")[1])
            oof = _crossfit_verdicts(base, traced, traces, seed + rno)
            cal = calibrate_tier(oof, [t.winner for t in traces], alpha=a, delta=args.delta, min_kept=30)
        threshold = cal.threshold
        # The cascade in service, on the fixed test set.
        res = _judge(probe, test)
        kept = [_kept(r, threshold) for r in res]
        n = len(test)
        casc = sum(
            matches(r if k else teacher[it.idx], it.gold_winner)  # type: ignore[arg-type]
            for r, k, it in zip(res, kept, test, strict=True)
        )
        rows.append(
            {
                "round": rno,
                "traces": len(traces),
                "threshold": threshold,
                "escalated": 1 - sum(kept) / n,
                "cascade": casc / n,
                "teacher": sum(matches(teacher[it.idx], it.gold_winner) for it in test) / n,  # type: ignore[arg-type]
                "local": sum(matches(r, it.gold_winner) for r, it in zip(res, test, strict=True)) / n,  # type: ignore[arg-type]
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--rules", nargs="+", default=["human", "traces@0.15", "traces@0.2", "traces@0.25"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--test-fraction", type=float, default=0.25)
    ap.add_argument("--heldout-fraction", type=float, default=0.3)
    ap.add_argument("--alpha", type=float, default=0.3)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--audit-rate", type=float, default=0.1)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    # All items, as bench/flywheel_pandalm.py passes them: the split drops the empty ones itself,
    # so both scripts draw the same splits for a seed.
    items = load_bundled_pandalm()
    base = EncoderProbe.untrained(encoder_path(), ProbeOptions(lexical=1))
    started = time.perf_counter()
    base._embed([x for it in items if not it.has_empty_response for x in (it.prompt, it.response1, it.response2)])
    print(f"embedded in {time.perf_counter() - started:.0f} s", flush=True)
    out: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for rule in args.rules:
        for seed in args.seeds:
            rows = run(args, seed, items, base, rule)
            out.setdefault(rule, {})[seed] = rows
            print(rule, seed, " ".join(f"{r['escalated']:.2f}/{r['cascade']:.3f}" for r in rows), flush=True)
    print("\n| rule | " + " | ".join(f"after round {k}" for k in range(1, args.rounds + 1)) + " | teacher |")
    print("|---" * (args.rounds + 2) + "|")
    for rule, per_seed in out.items():
        cells = []
        for k in range(args.rounds):
            rs = [rows[k] for rows in per_seed.values()]
            esc = sum(r["escalated"] for r in rs) / len(rs)
            cas = sum(r["cascade"] for r in rs) / len(rs)
            cells.append(f"{100 * esc:.1f}% / {100 * cas:.1f}%")
        teach = sum(rows[0]["teacher"] for rows in per_seed.values()) / len(per_seed)
        print(f"| {rule} | " + " | ".join(cells) + f" | {100 * teach:.1f}% |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
