"""The judge flywheel on PandaLM, offline.

Data: the PandaLM test set bundled in the package (judgegraph/data/pandalm),
split by prompt with the quickstart's split (judgegraph.quickstart). The held-out
side is the flywheel's fixed labelled set (human majority of three annotators);
the train side is the stream, cut into batches of whole prompts, so each round's
batch brings prompts the local judge has never seen.

Teacher: gpt-3.5-turbo's recorded verdicts, replayed ("garbage" outputs are
failed verdicts). Local judge: frozen all-MiniLM-L6-v2 + the swap-consistent
head from judgegraph.finetune (the quickstart's local judge), retrained each
round on the teacher's verdicts on escalated and audited items.

Besides the held-out figures the flywheel reports itself, this script scores
every round's batch against its human labels (never shown to the flywheel):
that is the out-of-sample check of "agreement held while escalation fell".

    nice -n 10 .venv/bin/python bench/flywheel_pandalm.py --seeds 0 1 2 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from judgegraph.datasets import PandaLMItem
from judgegraph.finetune._traces import PairwiseTrace
from judgegraph.flywheel import (
    Flywheel,
    FlywheelItem,
    FlywheelSettings,
    ItemDecision,
    ProbeTrainer,
    build_flywheel_report,
    render_flywheel_markdown,
    write_flywheel_report,
)
from judgegraph.flywheel._rules import matches
from judgegraph.judges import ReplayJudge, item_key
from judgegraph.quickstart import load_bundled_pandalm, split_pandalm_by_prompt
from judgegraph.quickstart._local import encoder_path
from judgegraph.types import PairwiseVerdict, Winner


def heldout_traces(items: list[PandaLMItem]) -> list[PairwiseTrace]:
    out = []
    for it in items:
        assert it.gold_winner is not None
        out.append(
            PairwiseTrace(
                id=f"pandalm-{it.idx}",
                instruction=it.prompt,
                response_a=it.response1,
                response_b=it.response2,
                winner=it.gold_winner,
                source="human",
                judge="PandaLM annotators (majority of 3)",
            )
        )
    return out


def batches_by_prompt(items: list[PandaLMItem], rounds: int, seed: int) -> list[list[PandaLMItem]]:
    groups: dict[str, list[PandaLMItem]] = {}
    for it in items:
        groups.setdefault(it.prompt, []).append(it)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    target = len(items) / rounds
    out: list[list[PandaLMItem]] = [[] for _ in range(rounds)]
    k = 0
    for key in keys:
        if len(out[k]) >= target * 0.999 and k < rounds - 1:
            k += 1
        out[k].extend(groups[key])
    return out


def teacher_for(items: list[PandaLMItem], cost_per_call: float) -> ReplayJudge:
    table: dict[str, PairwiseVerdict] = {}
    for it in items:
        if it.has_empty_response:
            continue
        table[item_key(it.to_pairwise_input())] = it.recorded_verdict("gpt-3.5-turbo")
    return ReplayJudge(table, name="gpt-3.5-turbo (replay)", cost_usd=cost_per_call)


def on_test(fw: Flywheel, test: list[PandaLMItem], teacher_v: dict[str, PairwiseVerdict]) -> dict[str, Any]:
    """The cascade in service after a round, on the fixed test prompts: the
    same items every round, never shown to the flywheel, so a change between
    rounds is the judge's and not a new batch's."""
    cascade, _ = asyncio.run(fw.acascade())
    inputs = [it.to_pairwise_input() for it in test]
    out = asyncio.run(cascade.ajudge_many(inputs, max_concurrency=16))
    n = len(test)
    # No champion yet: the teacher judges alone, every item is its call.
    escalated = n if fw.state.champion is None else sum(len(r.tiers) > 1 for r in out)
    return {
        "n": n,
        "escalated": escalated / n,
        "cascade": sum(matches(r, it.gold_winner) for r, it in zip(out, test, strict=True)) / n,  # type: ignore[arg-type]
        "teacher": sum(matches(teacher_v[item_key(i)], it.gold_winner) for i, it in zip(inputs, test, strict=True)) / n,  # type: ignore[arg-type]
    }


def run_seed(args: argparse.Namespace, seed: int, items: list[PandaLMItem]) -> dict[str, Any]:
    test: list[PandaLMItem] = []
    everything = items  # the replayed teacher knows every item, test items too
    if args.test_fraction:
        # Prompts set aside before anything else; the flywheel sees neither
        # their labels nor their items.
        outer = split_pandalm_by_prompt(items, heldout_fraction=args.test_fraction, seed=seed + 1000)
        items, test = list(outer.train), list(outer.heldout)
    split = split_pandalm_by_prompt(items, heldout_fraction=args.heldout_fraction, seed=seed)
    batches = batches_by_prompt(split.train, args.rounds, seed)
    labels: dict[str, Winner] = {item_key(it.to_pairwise_input()): it.gold_winner for it in split.train}  # type: ignore[misc]
    teacher_v = {item_key(it.to_pairwise_input()): it.recorded_verdict("gpt-3.5-turbo") for it in split.train}
    settings = FlywheelSettings(
        alpha=args.alpha,
        delta=args.delta,
        min_kept=args.min_kept,
        audit_rate=args.audit_rate,
        seed=seed,
        promote_on=args.promote_on,
        calibrate_on=args.calibrate_on,
        folds=args.folds,
        promote_tolerance=args.promote_tolerance,
    )
    workdir = Path(args.workdir) / f"seed-{seed}"
    fw = Flywheel(
        workdir,
        heldout=heldout_traces(split.heldout),
        teacher=teacher_for(everything, args.cost_per_call),
        trainer=ProbeTrainer(encoder=str(encoder_path()), options={"lexical": args.lexical}),
        settings=settings,
        log=lambda s: print(f"[seed {seed}] {s}", flush=True),
    )
    test_v = {item_key(it.to_pairwise_input()): it.recorded_verdict("gpt-3.5-turbo") for it in test}
    test_rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    if fw.pending() is not None:
        fw.run_round()
    for b in batches[len([r for r in fw.rounds() if r.stage == "done"]) :]:
        fw.run_round([FlywheelItem(input=it.to_pairwise_input(), id=str(it.idx)) for it in b])
        if test:
            test_rows.append(on_test(fw, test, test_v) | {"round": len(fw.rounds())})
            print(f"[seed {seed}] test set after round {len(fw.rounds())}: {test_rows[-1]}", flush=True)
    wall = time.perf_counter() - started
    write_flywheel_report(workdir)
    # Out of sample: each batch against its human labels, which the flywheel never saw.
    batch_rows = []
    for rec in fw.rounds():
        path = fw.round_dir(rec.round) / "decisions.jsonl"
        decs = [
            ItemDecision.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line
        ]
        n = len(decs)
        cascade = sum(d.verdict == labels[d.key] for d in decs) / n
        teacher = sum(matches(teacher_v[d.key], labels[d.key]) for d in decs) / n
        batch_rows.append({"round": rec.round, "n": n, "cascade": cascade, "teacher": teacher})
    return {
        "seed": seed,
        "split": split.describe(),
        "batches": [len(b) for b in batches],
        "report": build_flywheel_report(workdir).model_dump(mode="json"),
        "markdown": render_flywheel_markdown(build_flywheel_report(workdir)),
        "batch_vs_labels": batch_rows,
        "test_after_round": test_rows,
        "wall_s": wall,
    }


def summary(results: list[dict[str, Any]]) -> str:
    """Per round, the mean over seeds (and the range)."""

    def cell(vals: list[float | None]) -> str:
        xs = [v for v in vals if v is not None]
        if not xs:
            return "n/a"
        mean = 100 * sum(xs) / len(xs)
        return f"{mean:.1f}% ({100 * min(xs):.0f}–{100 * max(xs):.0f})" if len(xs) > 1 else f"{mean:.1f}%"

    rounds = min(len(r["report"]["rows"]) for r in results)
    lines = [
        f"\n### Mean over {len(results)} seed(s) (range)\n",
        "| round | batch escalated | batch: cascade vs labels | batch: teacher vs labels | held-out escalated "
        "(calibrated) | held-out cascade | held-out teacher | held-out local alone | held-out escalated at "
        "teacher's agreement |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in range(rounds):
        rows = [r["report"]["rows"][k] for r in results]
        batch = [r["batch_vs_labels"][k] for r in results]
        lines.append(
            f"| {k + 1} | {cell([x['batch_escalation_share'] for x in rows])} | {cell([b['cascade'] for b in batch])} "
            f"| {cell([b['teacher'] for b in batch])} | {cell([x['escalation_share'] for x in rows])} "
            f"| {cell([x['cascade_agreement'] for x in rows])} | {cell([x['teacher_agreement'] for x in rows])} "
            f"| {cell([x['local_agreement'] for x in rows])} "
            f"| {cell([x['equal_agreement_escalation'] for x in rows])} |"
        )
    return "\n".join(lines)


def test_summary(results: list[dict[str, Any]]) -> str:
    """The fixed test set after each round, mean over seeds."""
    lines = [
        f"\n### Fixed test set, the cascade in service after each round (mean over {len(results)} seeds)\n",
        "| after round | escalated | cascade | teacher alone | seeds where escalation fell since the last round |",
        "|---|---|---|---|---|",
    ]
    rows = min(len(r["test_after_round"]) for r in results)
    for k in range(rows):
        at = [r["test_after_round"][k] for r in results]
        fell = sum(
            k > 0 and a["escalated"] < r["test_after_round"][k - 1]["escalated"]
            for a, r in zip(at, results, strict=True)
        )
        mean = {f: 100 * sum(a[f] for a in at) / len(at) for f in ("escalated", "cascade", "teacher")}
        lines.append(
            f"| {k + 1} | {mean['escalated']:.1f}% | {mean['cascade']:.1f}% | {mean['teacher']:.1f}% "
            f"| {fell if k else 'n/a'} of {len(at)} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=0.3)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--min-kept", type=int, default=30)
    ap.add_argument("--audit-rate", type=float, default=0.1)
    ap.add_argument("--heldout-fraction", type=float, default=0.3)
    ap.add_argument(
        "--test-fraction",
        type=float,
        default=0.0,
        help="share of prompts set aside first as a fixed test set, judged by the cascade in service after every round",
    )
    ap.add_argument("--promote-on", choices=("agreement", "escalation"), default="agreement")
    ap.add_argument(
        "--calibrate-on",
        choices=("heldout", "traces"),
        default="heldout",
        help="traces: thresholds calibrated on each round's cross-fitted teacher traces",
    )
    ap.add_argument("--folds", type=int, default=4, help="cross-fitting folds with --calibrate-on traces")
    ap.add_argument("--promote-tolerance", type=float, default=0.0)
    ap.add_argument("--lexical", type=int, choices=(1, 2), default=1, help="probe signals: 2 is the quickstart's judge")
    ap.add_argument(
        "--cost-per-call", type=float, default=0.0005, help="assumed USD per teacher call (stated in the results)"
    )
    ap.add_argument("--workdir", default=".judgegraph/bench-flywheel")
    ap.add_argument("--json", default=None, help="write all figures here as JSON")
    args = ap.parse_args()
    items = load_bundled_pandalm()
    results = [run_seed(args, s, items) for s in args.seeds]
    for r in results:
        print(f"\n### seed {r['seed']}: {r['split']}\nbatches {r['batches']}, {r['wall_s']:.0f} s\n")
        print(r["markdown"])
        print("| round | batch items | cascade vs labels | teacher alone vs labels |\n|---|---|---|---|")
        for b in r["batch_vs_labels"]:
            print(f"| {b['round']} | {b['n']} | {100 * b['cascade']:.1f}% | {100 * b['teacher']:.1f}% |")
    print(summary(results))
    if results[0]["test_after_round"]:
        print(test_summary(results))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "results": results}, indent=2) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
