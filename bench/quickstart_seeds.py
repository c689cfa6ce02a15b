"""The quickstart's local judge and cascade over many prompt-split seeds.

For each seed this reproduces the quickstart's data path (PandaLM split by
prompt: 30% held out; the train side split again by prompt, seed + 1, into
fit and 25% calibration), trains the local judge on the fit items, lets the
planner pick the escalation budget on the calibration items only, and scores
the held-out items: local alone, teacher alone (gpt-3.5-turbo, recorded),
the cascade, share escalated, estimated cost, and the cost-agreement curve.

The cascade is simulated from per-item results (the quickstart runs the same
rule through the pairwise graph); the embeddings are computed once for all
seeds (bench/_quickstart_embed.py, cached under bench/.cache/).

Seeds were fixed before any tuning: TUNING_SEEDS are the ones looked at while
choosing the judge; REPORT_SEEDS were only run with the final choice.

    nice -n 10 python bench/quickstart_seeds.py --variants old,new --seeds tuning
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _quickstart_variants import VARIANTS, SeedData, Variant

TUNING_SEEDS = (0, 1, 2, 3, 4)
REPORT_SEEDS = (10, 11, 12, 13, 14, 15, 16, 17)
SHARES = tuple(round(0.05 * k, 2) for k in range(21))
CACHE = Path(__file__).parent / ".cache" / "pandalm-minilm-views.safetensors"


@dataclass
class SeedResult:
    seed: int
    variant: str
    heldout: int
    local: float
    teacher: float
    cascade: float
    escalated: float
    budget: float
    cost_cascade: float
    cost_teacher: float
    calib_local: float
    calib_teacher: float
    kept_curve: list[float] = field(default_factory=list)
    cascade_curve: list[float] = field(default_factory=list)
    kept_auc: float = 0.0
    cascade_auc: float = 0.0


def seed_data(items: Sequence[Any], seed: int, table: dict[str, dict[str, Any]]) -> SeedData:
    from judgegraph.quickstart import split_pandalm_by_prompt

    split = split_pandalm_by_prompt(items, heldout_fraction=0.3, seed=seed, dedupe=True)
    inner = split_pandalm_by_prompt(split.train, heldout_fraction=0.25, seed=seed + 1)
    return SeedData(fit=inner.train, calib=inner.heldout, held=split.heldout, table=table, train=split.train, seed=seed)


def _curves(conf: np.ndarray, local_ok: np.ndarray, cascade_ok_if_up: np.ndarray) -> tuple[list[float], list[float]]:
    """Agreement of the kept (most confident) items, and of the whole cascade,
    when the least confident share of items goes to the teacher."""
    order = np.argsort(conf, kind="stable")  # least confident first
    n = len(conf)
    kept, casc = [], []
    for s in SHARES:
        k = round(s * n)
        up, keep = order[:k], order[k:]
        kept.append(float(local_ok[keep].mean()) if len(keep) else float("nan"))
        casc.append(float((cascade_ok_if_up[up].sum() + local_ok[keep].sum()) / n))
    return kept, casc


def _auc(ys: Sequence[float]) -> float:
    pts = [(x, y) for x, y in zip(SHARES, ys, strict=True) if not np.isnan(y)]
    xs, vs = zip(*pts, strict=True)
    return float(np.trapezoid(vs, xs) / (xs[-1] - xs[0]))


#: How the planner's pick becomes the held-out rule. threshold: the calibration
#: threshold, item by item (before issue 20's cap); cap-budget: that threshold,
#: but never more than --budget of the held-out batch (the quickstart's rule);
#: cap-chosen: never more than the share the planner chose; share: exactly the
#: chosen share of the batch, least confident first (the Budget policy).
HELDOUT_RULES = ("threshold", "cap-budget", "cap-chosen", "share")


def heldout_threshold(
    rule: str, threshold: float | None, chosen: float, conf: np.ndarray, budget: float
) -> float | None:
    from judgegraph.quickstart._budget import batch_threshold

    confs = [float(c) for c in conf]
    if rule == "threshold":
        return threshold
    if rule == "cap-budget":
        return batch_threshold(threshold, confs, budget)
    if rule == "cap-chosen":
        return batch_threshold(threshold, confs, chosen)
    if rule == "share":
        return batch_threshold(None, confs, chosen) if chosen < 1 else None
    raise ValueError(rule)


def run_seed(variant: Variant, data: SeedData, seed: int, *, budget: float, rule: str = "cap-budget") -> SeedResult:
    from judgegraph.quickstart._judges import GPT35_PRICING, estimate_teacher_usage

    out = variant.run(data)
    gold = np.array([it.gold_winner for it in data.held])
    t_held = np.array([it.recorded_verdict("gpt-3.5-turbo").winner or "" for it in data.held])
    local_ok = out.held_pred == gold
    teacher_ok = t_held == gold
    thr = heldout_threshold(rule, out.threshold, out.budget, out.held_conf, variant.extra.get("budget", budget))
    up = out.held_conf < thr if thr is not None else np.ones(len(gold), bool)
    final = np.where(up, out.held_final_if_up, out.held_pred)
    price = np.array([GPT35_PRICING.cost(estimate_teacher_usage(it)) for it in data.held])
    kept, casc = _curves(out.held_conf, local_ok, out.held_final_if_up == gold)
    return SeedResult(
        seed=seed,
        variant=variant.name,
        heldout=len(gold),
        local=float(local_ok.mean()),
        teacher=float(teacher_ok.mean()),
        cascade=float((final == gold).mean()),
        escalated=float(up.mean()),
        budget=out.budget,
        cost_cascade=float(price[up].sum() * 1000 / len(gold)),
        cost_teacher=float(price.sum() * 1000 / len(gold)),
        calib_local=out.calib_local,
        calib_teacher=out.calib_teacher,
        kept_curve=kept,
        cascade_curve=casc,
        kept_auc=_auc(kept),
        cascade_auc=_auc(casc),
    )


def main(argv: Sequence[str] | None = None) -> None:
    from _quickstart_embed import load_or_embed

    from judgegraph.quickstart import load_bundled_pandalm

    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="old,new")
    ap.add_argument("--seeds", default="tuning", help="tuning, report, or a comma list")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--heldout-rule", choices=HELDOUT_RULES, default="cap-budget")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--curves", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="print the per-seed tables as markdown")
    args = ap.parse_args(argv)
    seeds = {"tuning": TUNING_SEEDS, "report": REPORT_SEEDS}.get(args.seeds) or tuple(
        int(s) for s in args.seeds.split(",")
    )
    items = [i for i in load_bundled_pandalm() if not i.has_empty_response]
    texts = list(dict.fromkeys(x for it in items for x in (it.prompt, it.response1, it.response2)))
    table = load_or_embed(CACHE, texts)
    results: list[SeedResult] = []
    for name in args.variants.split(","):
        variant = VARIANTS[name]
        rows = []
        for seed in seeds:
            r = run_seed(variant, seed_data(items, seed, table), seed, budget=args.budget, rule=args.heldout_rule)
            rows.append(r)
            print(
                f"{name:>14} seed {seed:>2} n={r.heldout:3d} local {r.local:.3f} teacher {r.teacher:.3f} "
                f"cascade {r.cascade:.3f} up {r.escalated:.2f} (budget {r.budget:.2f}) "
                f"cost {r.cost_cascade:.4f}/{r.cost_teacher:.4f} keptAUC {r.kept_auc:.3f} cascAUC {r.cascade_auc:.3f}"
            )
            if args.curves:
                print("    kept   ", " ".join(f"{x:.2f}" for x in r.kept_curve))
                print("    cascade", " ".join(f"{x:.2f}" for x in r.cascade_curve))
        m = {
            k: float(np.mean([getattr(r, k) for r in rows]))
            for k in ("local", "teacher", "cascade", "escalated", "kept_auc", "cascade_auc")
        }
        wins = sum(r.cascade >= r.teacher for r in rows)
        print(
            f"{name:>14} MEAN local {m['local']:.3f} teacher {m['teacher']:.3f} cascade {m['cascade']:.3f} "
            f"up {m['escalated']:.3f} keptAUC {m['kept_auc']:.3f} cascAUC {m['cascade_auc']:.3f} "
            f"cascade>=teacher on {wins}/{len(rows)}"
        )
        results.extend(rows)
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1) + "\n")
    if args.markdown:
        print(markdown(results))


def markdown(results: Sequence[SeedResult]) -> str:
    """Per-seed table (variants side by side) and the cascade's cost-agreement curve per seed."""
    names = list(dict.fromkeys(r.variant for r in results))
    by = {(r.variant, r.seed): r for r in results}
    seeds = list(dict.fromkeys(r.seed for r in results))
    head = "| seed (held-out) | teacher | " + " | ".join(
        f"{n}: local | {n}: cascade | {n}: escalated | {n}: cost/1k" for n in names
    )
    lines = [head + " |", "|" + "---|" * (2 + 4 * len(names))]
    for s in seeds:
        first = by[(names[0], s)]
        cells = [f"{s} ({first.heldout})", f"{first.teacher:.3f}"]
        for n in names:
            r = by[(n, s)]
            mark = " ✓" if r.cascade >= r.teacher else ""
            cells += [f"{r.local:.3f}", f"{r.cascade:.3f}{mark}", f"{r.escalated:.0%}", f"${r.cost_cascade:.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["**mean**", f"{np.mean([by[(names[0], s)].teacher for s in seeds]):.3f}"]
    for n in names:
        rs = [by[(n, s)] for s in seeds]
        wins = sum(r.cascade >= r.teacher for r in rs)
        cells += [
            f"**{np.mean([r.local for r in rs]):.3f}**",
            f"**{np.mean([r.cascade for r in rs]):.3f}** ({wins}/{len(rs)} ≥ teacher)",
            f"{np.mean([r.escalated for r in rs]):.1%}",
            f"${np.mean([r.cost_cascade for r in rs]):.4f}",
        ]
    lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Cost-agreement curves: cascade agreement (and agreement of the kept items) when the least", ""]
    lines[-2] += " confident share of held-out items goes to the teacher; AUC over shares 0-100%."
    shares = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0]
    lines.append("| seed | judge | " + " | ".join(f"{x:.0%}" for x in shares) + " | AUC cascade | AUC kept |")
    lines.append("|" + "---|" * (4 + len(shares)))
    for s in seeds:
        for n in names:
            r = by[(n, s)]
            pts = [
                f"{r.cascade_curve[SHARES.index(x)]:.3f} ({r.kept_curve[SHARES.index(x)]:.2f})"
                if x < 1
                else f"{r.cascade_curve[-1]:.3f}"
                for x in shares
            ]
            lines.append(f"| {s} | {n} | " + " | ".join(pts) + f" | {r.cascade_auc:.3f} | {r.kept_auc:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
