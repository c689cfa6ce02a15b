"""Cascades on LLMBar's recorded verdicts: weaker judge first, GPT-4 for the rest.

Every number comes from replaying the verdicts that LLMBar's authors
recorded (GPT-4, ChatGPT, LLaMA2-70B, PaLM2; both answer orders) through
judgegraph's own CascadeJudge / ReplayJudge, so no model is called.

    .venv/bin/python bench/cascade_llmbar.py [--data ../shared/data/llmbar] [--out bench/results/cascade.md]

Accuracy gives a tie half a point (a swap-inconsistent verdict is a tie),
which equals LLMBar's "average accuracy over both orders" whenever both
orders were parsed; an item with one order unparsed earns half of what the
readable order earns, one with neither scores 0. "strict" counts ties as
wrong. Intervals: Wilson 95% for the rates, ``paired_difference`` (paired
bootstrap) for the strict difference from GPT-4 alone.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgegraph.cascade import (
    Budget,
    CascadeJudge,
    EscalationPolicy,
    SwapInconsistency,
    agreement_credit,
    calibrate_cascade,
    calibrated_tiers,
    matches_label,
    plan_cascades,
)
from judgegraph.datasets import load_llmbar_run
from judgegraph.judges import EnsembleJudge, LLMBarReplay, ReplayJudge, llmbar_replay
from judgegraph.metrics import Interval, PairedDifference, paired_difference, proportion_interval
from judgegraph.types import PairwiseVerdict

STRONG = "GPT-4"
WEAK = ("ChatGPT", "LLaMA2", "PaLM2")
NATURAL_STRATEGIES = ("Vanilla", "Vanilla_NoRules", "CoT", "Swap", "Metrics_Reference")
OTHER_SUBSETS = ("FairEval", "LLMEval^2", "MT-Bench")
OTHER_STRATEGIES = ("Vanilla_NoRules", "Metrics_Reference")
# Assumed relative price per judged item (both orders): GPT-4 = 1. gpt-3.5-turbo listed at
# roughly 1/20 of gpt-4's per-token price in 2023; LLaMA2-70B and PaLM2 are priced the same here.
COSTS = {STRONG: 1.0, **{w: 0.05 for w in WEAK}}


@dataclass
class Row:
    subset: str
    strategy: str
    policy: str
    accuracy: float
    strict: float
    to_strong: float
    gpt4: float
    shuffled: tuple[float, float, float] | None = None  # budget rows: mean, min, max over random item orders
    confident_wrong: int | None = None  # weak-alone rows: both orders agree on the wrong answer
    n: int = 0  # items scored
    # Strict agreement minus GPT-4 alone's on the same items, paired bootstrap (None for GPT-4's own row).
    vs_gpt4: PairedDifference | None = None


@dataclass(frozen=True)
class Scored:
    accuracy: float
    strict: float
    sent: float
    winners: list[Any]  # per item: the verdict's winner, None when it failed
    labels: list[Any]

    def vs(self, other: Scored) -> PairedDifference:
        """This judge's strict agreement minus ``other``'s on the same items, paired bootstrap
        (``paired_difference`` scores exact matches: a tie or failure is wrong, as in "strict")."""
        return paired_difference(self.winners, other.winners, self.labels, metric="accuracy", unparsed="wrong")


def _replay(data: Path, subset: str, evaluator: str, strategy: str) -> LLMBarReplay:
    return llmbar_replay(load_llmbar_run(data, subset=subset, evaluator=evaluator, strategy=strategy))


async def _scored(judge: CascadeJudge | ReplayJudge | EnsembleJudge, rep: LLMBarReplay) -> Scored:
    results: list[Any] = await judge.ajudge_many(list(rep.items))
    n = len(results)
    acc = sum(agreement_credit(r, y) for r, y in zip(results, rep.labels, strict=True)) / n
    strict = sum(matches_label(r, y) for r, y in zip(results, rep.labels, strict=True)) / n
    sent = sum(any(t.judge == STRONG for t in r.tiers) for r in results) / n if isinstance(judge, CascadeJudge) else 0.0
    winners = [r.winner if r.ok else None for r in results]
    return Scored(acc, strict, sent, winners, list(rep.labels))


async def _score(judge: CascadeJudge | ReplayJudge | EnsembleJudge, rep: LLMBarReplay) -> tuple[float, float, float]:
    s = await _scored(judge, rep)
    return s.accuracy, s.strict, s.sent


async def _shuffled(judge: CascadeJudge, rep: LLMBarReplay, orders: int) -> tuple[float, float, float]:
    """Budget accuracy over random item orders: equally confident items are taken
    in input order, so one fixed order is one arbitrary draw."""
    accs = []
    pairs = list(zip(rep.items, rep.labels, strict=True))
    for seed in range(orders):
        random.Random(seed).shuffle(pairs)
        out: list[Any] = await judge.ajudge_many([it for it, _ in pairs])
        accs.append(sum(agreement_credit(r, y) for r, (_, y) in zip(out, pairs, strict=True)) / len(pairs))
    return statistics.fmean(accs), min(accs), max(accs)


def _recommended(plan: Any) -> str:
    rec = plan.recommended
    if rec is None:
        return "none."
    return f"`{rec.name}` ({_pct(rec.agreement)}, cost {rec.cost_per_item:.3f})."


async def cascade_rows(data: Path, subset: str, strategy: str, budget: float = 0.5, orders: int = 0) -> list[Row]:
    strong_rep = _replay(data, subset, STRONG, strategy)
    strong = ReplayJudge(strong_rep.records)
    g = await _scored(strong, strong_rep)
    g_acc, n = g.accuracy, len(strong_rep.items)
    rows = [Row(subset, strategy, f"{STRONG} alone", g_acc, g.strict, 1.0, g_acc, n=n)]
    for w in WEAK:
        rep = _replay(data, subset, w, strategy)
        assert rep.keys == strong_rep.keys, "the weak and strong replays hold different items"
        weak = ReplayJudge(rep.records)
        alone = await _scored(weak, rep)
        wrong = sum(
            isinstance(v, PairwiseVerdict) and v.ok and not v.inconsistent and v.winner != r.label
            for r in rep.records
            for v in [r.result]
        )
        rows.append(
            Row(subset, strategy, f"{w} alone", alone.accuracy, alone.strict, 0.0, g_acc, None, wrong, n, alone.vs(g))
        )
        policies: list[tuple[str, EscalationPolicy]] = [
            ("swap inconsistency", SwapInconsistency()),
            (f"budget {budget:.0%}", Budget(fraction=budget)),
        ]
        for label, pol in policies:
            cascade = CascadeJudge([weak, strong], escalate=pol)
            c = await _scored(cascade, rep)
            spread = await _shuffled(cascade, rep, orders) if orders and isinstance(pol, Budget) else None
            policy = f"{w} → {STRONG}, {label}"
            rows.append(Row(subset, strategy, policy, c.accuracy, c.strict, c.sent, g_acc, spread, None, n, c.vs(g)))
    return rows


async def budget_sweep(data: Path, strategy: str) -> list[tuple[str, float, float, float]]:
    strong_rep = _replay(data, "Natural", STRONG, strategy)
    strong = ReplayJudge(strong_rep.records)
    out = []
    for w in WEAK:
        weak = ReplayJudge(_replay(data, "Natural", w, strategy).records)
        for k in range(1, 10):
            acc, _, sent = await _score(CascadeJudge([weak, strong], escalate=Budget(fraction=k / 10)), strong_rep)
            out.append((w, k / 10, acc, sent))
    return out


async def jury_rows(data: Path, strategy: str) -> list[Row]:
    """A jury of one weak model's five prompting strategies as tier 1: its
    agreement gives a graded confidence for the budget policy."""
    strong_rep = _replay(data, "Natural", STRONG, strategy)
    strong = ReplayJudge(strong_rep.records)
    g = await _scored(strong, strong_rep)
    g_acc, n = g.accuracy, len(strong_rep.items)
    rows = []
    for w in WEAK:
        members = [ReplayJudge(_replay(data, "Natural", w, s).records, name=f"{w}/{s}") for s in NATURAL_STRATEGIES]
        jury = EnsembleJudge(members, aggregation="majority", name=f"{w} jury")
        j = await _scored(jury, strong_rep)
        rows.append(
            Row(
                "Natural",
                "5-strategy jury",
                f"{w} jury alone",
                j.accuracy,
                j.strict,
                0.0,
                g_acc,
                None,
                None,
                n,
                j.vs(g),
            )
        )
        for k in (0.3, 0.5):
            c = await _scored(CascadeJudge([jury, strong], escalate=Budget(fraction=k)), strong_rep)
            policy = f"{w} jury → {STRONG}, budget {k:.0%}"
            rows.append(
                Row("Natural", "5-strategy jury", policy, c.accuracy, c.strict, c.sent, g_acc, None, None, n, c.vs(g))
            )
    return rows


async def calibration_rows(data: Path, alpha: float, delta: float, seed: int = 0) -> list[str]:
    """Trust or Escalate on pooled LLMBar: ChatGPT -> GPT-4 (Vanilla_NoRules, the one
    strategy recorded on every subset), calibrated on a random half, tested on the other."""
    strategy = "Vanilla_NoRules"
    items: list[Any] = []
    labels: list[Any] = []
    weak_recs: list[Any] = []
    strong_recs: list[Any] = []
    for sub in ("Natural", *OTHER_SUBSETS):
        w, g = _replay(data, sub, "ChatGPT", strategy), _replay(data, sub, STRONG, strategy)
        assert w.keys == g.keys
        items += w.items
        labels += w.labels
        weak_recs += w.records
        strong_recs += g.records
    weak, strong = ReplayJudge(weak_recs), ReplayJudge(strong_recs)
    sure = [
        r for r in strong_recs if isinstance(r.result, PairwiseVerdict) and r.result.ok and not r.result.inconsistent
    ]
    gpt4_noise = sum(r.result.winner != r.label for r in sure) / len(sure)
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    cal_idx, test_idx = sorted(order[: len(order) // 2]), sorted(order[len(order) // 2 :])
    tier_results: list[list[Any]] = [list(await j.ajudge_many([items[i] for i in cal_idx])) for j in (weak, strong)]
    cal = calibrate_cascade(tier_results, [labels[i] for i in cal_idx], alpha=alpha, delta=delta)
    cascade = CascadeJudge(calibrated_tiers([weak, strong], cal), abstain=True)
    out = await cascade.ajudge_many([items[i] for i in test_idx])
    kept = [(r, labels[i]) for r, i in zip(out, test_idx, strict=True) if r.ok]
    errors = sum(not matches_label(r, y) for r, y in kept)
    risk = errors / len(kept) if kept else float("nan")
    risk_ci = proportion_interval(errors, len(kept))
    risk_text = f"{risk:.3f}" + (f" (95% Wilson {risk_ci.low:.3f}–{risk_ci.high:.3f})" if risk_ci else "")
    to_gpt4 = sum(any(t.judge == STRONG for t in r.tiers) for r in out) / len(out)
    lines = [
        f"alpha = {alpha}, delta = {delta} (delta/2 per tier); {len(items)} pooled items "
        f"(Natural, FairEval, LLMEval^2, MT-Bench), random halves (seed {seed}): "
        f"{len(cal_idx)} to calibrate, {len(test_idx)} to test. Confidence is swap agreement (1.0 or 0.5). "
        f"GPT-4 disagrees with the label on {gpt4_noise:.1%} of the pooled items where its two orders agree.",
        "",
        f"| tier | threshold | kept on calibration | disagreements | risk upper bound (one-sided "
        f"{1 - delta / 2:.0%}, exact binomial) |",
        "|---|---|---:|---:|---:|",
    ]
    for name, t in zip(("ChatGPT", STRONG), cal.tiers, strict=True):
        thr = "abstains" if t.threshold is None else f"{t.threshold:.2f}"
        ub = "-" if t.risk_upper_bound is None else f"{t.risk_upper_bound:.3f}"
        lines.append(f"| {name} | {thr} | {t.kept}/{t.n} | {t.errors} | {ub} |")
    lines += [
        "",
        f"Test half: {len(kept)}/{len(out)} items answered ({len(out) - len(kept)} abstained), disagreement with "
        f"the human label among answered items {risk_text} (guaranteed <= {alpha} with probability >= {1 - delta}), "
        f"{to_gpt4:.1%} sent to GPT-4.",
    ]
    return lines


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _wilson(share: float, n: int) -> Interval | None:
    """Wilson 95% for a share of n items, from the count it stands for; a half item (a tie's ½
    credit) rounds up, so accuracy with ties ½ gets the interval of its nearest whole count."""
    return proportion_interval(math.floor(round(2 * share * n) / 2 + 0.5), n)


def _with_ci(share: float, n: int, unit: str = "") -> str:
    ci = _wilson(share, n) if n else None
    text = f"{_pct(share)}{unit}"
    return text + (f" [{_pct(ci.low)}, {_pct(ci.high)}]" if ci is not None else "")


def _diff(d: PairedDifference | None) -> str:
    if d is None or d.difference is None:
        return "–"
    ci = f" [{100 * d.interval.low:+.1f}, {100 * d.interval.high:+.1f}]" if d.interval is not None else ""
    return f"{100 * d.difference:+.1f}{ci}"


def _table(rows: Sequence[Row], *, with_check: bool) -> list[str]:
    head = (
        "| subset | strategy | judge / policy | accuracy [95% Wilson] | strict [95% Wilson] "
        "| sent to GPT-4 [95% Wilson] | strict Δ vs GPT-4 alone [95% paired bootstrap, BCa] |"
    )
    sep = "|---|---|---|---:|---:|---:|---:|"
    if with_check:
        head += " within 1 pt of GPT-4, <= 50% sent | budget: mean (min-max) over 100 random orders |"
        sep += "---|---|"
    lines = [head, sep]
    for r in rows:
        line = f"| {r.subset} | {r.strategy} | {r.policy} | {_with_ci(r.accuracy, r.n)} | {_with_ci(r.strict, r.n)} "
        line += f"| {_with_ci(r.to_strong, r.n, '%')} | {_diff(r.vs_gpt4)} |"
        if with_check:
            line += (" **yes** |" if _hit(r) else " no |") if "→" in r.policy else " |"
            if r.shuffled:
                mean, lo, hi = r.shuffled
                line += f" {_pct(mean)} ({_pct(lo)}-{_pct(hi)}) |"
            else:
                line += " |"
        lines.append(line)
    return lines


def _hit(r: Row) -> bool:
    return "→" in r.policy and r.to_strong <= 0.5 and r.gpt4 - r.accuracy <= 0.01 + 1e-9


async def main(data: Path, out: Path) -> None:
    started = time.perf_counter()
    lines = await report(data)
    lines += [f"_Runtime: {time.perf_counter() - started:.1f} s on 2 CPU cores._", ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


async def report(
    data: Path,
    *,
    strategies: Sequence[str] = NATURAL_STRATEGIES,
    subsets: Sequence[str] = OTHER_SUBSETS,
    orders: int = 100,
) -> list[str]:
    """The results page; fewer strategies, subsets or random orders give a quick check of its shape."""
    natural: list[Row] = []
    for s in strategies:
        natural += await cascade_rows(data, "Natural", s, orders=orders)
    others: list[Row] = []
    for sub in subsets:
        for s in OTHER_STRATEGIES:
            others += await cascade_rows(data, sub, s)
    sweep = await budget_sweep(data, "Vanilla")
    jury = await jury_rows(data, "Vanilla")
    calib = await calibration_rows(data, alpha=0.2, delta=0.1)

    recs = []
    for ev in (STRONG, *WEAK):
        recs += list(_replay(data, "Natural", ev, "Vanilla").records)
    plan = plan_cascades(recs, costs=COSTS, target_agreement=0.945)
    hits = [r for r in natural if _hit(r)]
    wrong = [r.confident_wrong for r in natural if r.confident_wrong is not None]
    robust = [r for r in natural if r.shuffled and r.gpt4 - r.shuffled[1] <= 0.01 + 1e-9]
    on_average = [r for r in natural if r.shuffled and r.gpt4 - r.shuffled[0] <= 0.01 + 1e-9]
    swap_hits = [r for r in hits if "swap" in r.policy]
    n_nat = natural[0].n  # items in Natural (every Natural row scores the same items)

    lines = [
        "# Cascades on LLMBar (recorded verdicts, replayed)",
        "",
        "Generated by `bench/cascade_llmbar.py` from `../shared/data/llmbar` (princeton-nlp/LLMBar, MIT). "
        "No model was called: each judge is a `ReplayJudge` over the verdicts LLMBar's authors recorded in both "
        "answer orders, and every cascade runs through `CascadeJudge` exactly as a live one would.",
        "",
        "- **accuracy**: agreement with the gold label; a tie (the two answer orders disagree) earns ½. "
        "This equals LLMBar's published *average accuracy* when both orders were parsed. An item with one order "
        "left unparsed earns half of what the readable order earns (LLMBar's convention, `agreement_credit`); "
        "with neither, 0 unless the cascade escalates it.",
        "- **strict**: ties count as wrong.",
        "- **sent to GPT-4**: share of items the cascade escalated (GPT-4 alone: 100%).",
        "- Intervals, 95%: Wilson for accuracy (its ½-point credits rounded up to whole items), strict and sent "
        "(`judgegraph.metrics.proportion_interval`); **strict Δ vs GPT-4 alone**: the row's strict agreement minus "
        "GPT-4's on the same items, paired bootstrap over items (`paired_difference`, BCa; it scores exact matches, "
        "so a Δ on the ½-credit accuracy has no interval here).",
        "- Swap-inconsistency policy: escalate when the weak judge's two orders disagree (or it failed). "
        "Budget policy: escalate the k% least confident items of the batch (the paper's method); with "
        "recorded verdicts the only confidence is swap agreement (1.0 or 0.5), so equally confident items are "
        "taken in dataset order, which makes the budget rows partly arbitrary.",
        "- Each weak judge is paired with GPT-4 under the same prompting strategy.",
        "",
        "## LLMBar Natural (100 pairs)",
        "",
        *_table(natural, with_check=True),
        "",
        "### Does a cascade match GPT-4 within 1 point while sending <= 50% to GPT-4?",
        "",
    ]
    if hits:
        lines.append(
            f"{len(hits)} of {sum('→' in r.policy for r in natural)} same-strategy cascade rows do: "
            + "; ".join(
                f"{r.policy} ({r.strategy}): {_pct(r.accuracy)} vs GPT-4 {_pct(r.gpt4)}, {_pct(r.to_strong)}% sent"
                for r in hits
            )
            + "."
        )

        def names(rows: list[Row]) -> str:
            return "; ".join(f"{r.policy} ({r.strategy})" for r in rows) or "none"

        lines += [
            "",
            "Read these with care. They are picked from 30 configurations on the same 100 items (in-sample), "
            "and the margins sit at the 1-point boundary. The budget rows also depend on which equally confident "
            "items happen to come first, so the table repeats them over 100 random item orders:",
            f"- swap-escalation rows within 1 point: {names(swap_hits)};",
            f"- budget rows within 1 point on average over the orders: {names(on_average)};",
            f"- budget rows within 1 point in every order: {names(robust)}.",
            "",
            "**Answer:** only for the configurations listed just above (ChatGPT with LLMBar's Metrics_Reference "
            "prompts), at the boundary. With the other prompting strategies, and for LLaMA2 and PaLM2 in every "
            "strategy, no cascade reaches GPT-4 within 1 point while sending at most half the items, so the "
            "seed paper's claim does not carry over to LLMBar Natural in general.",
        ]
    else:
        lines.append("No: none of the same-strategy cascade rows does.")
    lines += [
        "",
        "The limiting factor is the weak judges' *confident* errors: items where both orders agree on the wrong "
        f"answer are never escalated on swap inconsistency ({min(wrong)}-{max(wrong)} such items per weak judge "
        "and strategy here) and are the last a swap-agreement budget would send, and on 100 items each costs a "
        "full point.",
        "",
        "## Budget sweep, Natural, Vanilla strategy",
        "",
        "| weak judge | budget k | accuracy [95% Wilson] | sent to GPT-4 [95% Wilson] |",
        "|---|---:|---:|---:|",
        *[f"| {w} | {k:.0%} | {_with_ci(a, n_nat)} | {_with_ci(s, n_nat, '%')} |" for w, k, a, s in sweep],
        "",
        "## A jury as the cheap tier (Natural, GPT-4 Vanilla)",
        "",
        "Tier 1 is an `EnsembleJudge` (majority vote) over the same weak model's five recorded prompting "
        "strategies; its confidence is the share of strategies that agree, a graded signal the budget policy can "
        "rank by. It costs five weak calls per item. Hypothetical: LLMBar ran the strategies separately.",
        "",
        *_table(jury, with_check=True),
        "",
        "## Other subsets (ties removed by LLMBar)",
        "",
        *_table(others, with_check=False),
        "",
        "## Planner on Natural (Vanilla strategy)",
        "",
        f"Assumed cost per item: GPT-4 = 1, ChatGPT / LLaMA2 / PaLM2 = 0.05 each. {len(plan.candidates)} "
        "candidate policies; the cost-agreement frontier (in-sample):",
        "",
        "| policy | accuracy [95% Wilson] | cost / item | reach by tier |",
        "|---|---:|---:|---|",
        *[
            f"| {p.name} | {_with_ci(p.agreement, n_nat)} | {p.cost_per_item:.3f} "
            f"| {' > '.join(_pct(x) + '%' for x in p.reach)} |"
            for p in plan.frontier
        ],
        "",
        f"Target accuracy 94.5%: {plan.recommendation}: {_recommended(plan)}",
        "",
        "## Calibrated escalation (Trust or Escalate)",
        "",
        "Thresholds chosen by fixed-sequence testing with exact binomial bounds; an item no tier is trusted "
        "with is abstained on. LLMBar's Processed subsets carry noisy crowd labels, so only a loose alpha "
        "is attainable.",
        "",
        *calib,
        "",
    ]
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "llmbar")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "cascade.md")
    args = ap.parse_args()
    asyncio.run(main(args.data, args.out))
