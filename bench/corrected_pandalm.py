"""PandaLM: the share of items where answer 1 wins, from the recorded gpt-3.5-turbo judge on all
999 items and human labels on 10% of them, corrected vs naive, against the all-human figure.

Human value: 1 when the annotators' majority says response 1 is better (every PandaLM item has a
majority). Judge value: 1 when gpt-3.5-turbo's recorded verdict is "1"; a tie, "2" or an
unparseable output ("garbage", 25 items) is 0. One labelled draw (seed 0) is shown in full, then
``--repeats`` random 10% subsets say how often each 95% interval holds the all-human figure.
The labelled items are drawn from the same 999 items whose all-human share is the target, so the
intervals (built for an infinite population) are, if anything, conservative here.

Run: ``python bench/corrected_pandalm.py [--fraction 0.1] [--repeats 1000] [--out bench/results/corrected.md]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import judgegraph
from judgegraph.datasets import load_pandalm
from judgegraph.metrics import CorrectedEstimate, MetricResult, ppi_mean, rogan_gladen

DATA = Path(judgegraph.__file__).parent / "data" / "pandalm"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _band(low: float, high: float) -> str:
    return f"{100 * low:.1f} – {100 * high:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fraction", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "corrected.md")
    args = ap.parse_args()
    start = time.process_time()
    items = load_pandalm(DATA)
    y = np.asarray([it.majority == 1 for it in items])
    f = np.asarray([it.recorded_code("gpt-3.5-turbo") == 1 for it in items])
    truth = float(y.mean())
    n_items = len(items)
    n_lab = round(args.fraction * n_items)
    judge = [bool(v) for v in f]

    def draw(seed: int) -> tuple[CorrectedEstimate, CorrectedEstimate, CorrectedEstimate]:
        rng = np.random.default_rng(seed)
        lab = np.zeros(n_items, dtype=bool)
        lab[rng.choice(n_items, n_lab, replace=False)] = True
        human = [bool(v) if m else None for v, m in zip(y, lab, strict=True)]
        return (
            ppi_mean(judge, human, name="answer1_wins"),
            ppi_mean(judge, human, name="answer1_wins", power_tuning=True),
            rogan_gladen(judge, human, seed=seed),
        )

    ppi0, tuned0, rg0 = draw(0)
    naive = ppi0.naive
    assert naive.interval is not None

    def row(name: str, value: float, low: float, high: float) -> str:
        return (
            f"| {name} | {_pct(value)} | {_band(low, high)} | {100 * (value - truth):+.1f} pts "
            f"| {'yes' if low <= truth <= high else '**no**'} |"
        )

    human = ppi0.human_only
    assert human.interval is not None
    agree = float(np.mean(f == y))
    lines = [
        "# Judge-corrected estimates on PandaLM (issue 28)",
        "",
        f"`python bench/corrected_pandalm.py --fraction {args.fraction} --repeats {args.repeats}`.",
        "",
        f"PandaLM's {n_items} test pairs. Question: the share of items where **answer 1 wins** (annotator "
        f"majority). All-human figure: **{_pct(truth)}** ({int(y.sum())} of {n_items}). Judge: the recorded "
        f"gpt-3.5-turbo verdicts on every item (says answer 1 on {int(f.sum())}; a tie, answer 2 or an "
        f"unparseable output counts as not answer 1); it matches the humans on this yes/no question on "
        f"{_pct(agree)} of items. Human labels on a random {_pct(args.fraction)} ({n_lab} items). "
        "Intervals at 95%: naive and human-only Wilson; PPI prediction-powered CLT (`ppi_mean`; PPI++ with "
        "`power_tuning=True`); Rogan–Gladen "
        "percentile bootstrap over both samples (`rogan_gladen`, 2,000 resamples).",
        "",
        "## One draw (seed 0)",
        "",
        "| estimate | value | 95% interval | error vs all-human | holds all-human? |",
        "|---|---|---|---|---|",
        row("naive (judge on all items)", float(naive), naive.interval.low, naive.interval.high),
        row(f"human labels only ({n_lab})", float(human), human.interval.low, human.interval.high),
        row("PPI (corrected)", ppi0.estimate, ppi0.interval.low, ppi0.interval.high),
        row(
            f"PPI++ (corrected, power-tuned; judge weight {tuned0.judge_weight:.2f})",
            tuned0.estimate,
            tuned0.interval.low,
            tuned0.interval.high,
        ),
        row("Rogan–Gladen (corrected)", rg0.estimate, rg0.interval.low, rg0.interval.high),
        "",
        f"Rogan–Gladen's judge on the labelled items: sensitivity {_pct(rg0.sensitivity or 0)}, specificity "
        f"{_pct(rg0.specificity or 0)}.",
        "",
    ]

    stats: dict[str, list[tuple[float, float, float]]] = {"human": [], "ppi": [], "ppi++": [], "rg": []}
    for seed in range(args.repeats):
        p, t, r = draw(seed)
        h: MetricResult = p.human_only
        assert h.interval is not None
        stats["human"].append((float(h), h.interval.low, h.interval.high))
        stats["ppi"].append((p.estimate, p.interval.low, p.interval.high))
        stats["ppi++"].append((t.estimate, t.interval.low, t.interval.high))
        stats["rg"].append((r.estimate, r.interval.low, r.interval.high))
    lines += [
        f"## {args.repeats} random {_pct(args.fraction)} subsets",
        "",
        "| estimate | holds the all-human figure | mean width | mean abs. error | RMSE |",
        "|---|---|---|---|---|",
        f"| naive (judge on all items; no labels used) | {'yes' if naive.interval.contains(truth) else 'no'} "
        f"(every draw) | {100 * (naive.interval.high - naive.interval.low):.1f} pts "
        f"| {100 * abs(float(naive) - truth):.1f} pts | {100 * abs(float(naive) - truth):.1f} pts |",
    ]
    names = {
        "human": "human labels only",
        "ppi": "PPI (corrected)",
        "ppi++": "PPI++ (corrected, power-tuned)",
        "rg": "Rogan–Gladen (corrected)",
    }
    for key, name in names.items():
        a = np.asarray(stats[key])
        cover = float(np.mean((a[:, 1] <= truth) & (truth <= a[:, 2])))
        lines.append(
            f"| {name} | {_pct(cover)} | {100 * float(np.mean(a[:, 2] - a[:, 1])):.1f} pts "
            f"| {100 * float(np.mean(np.abs(a[:, 0] - truth))):.1f} pts "
            f"| {100 * float(np.sqrt(np.mean((a[:, 0] - truth) ** 2))):.1f} pts |"
        )
    lines += ["", f"({time.process_time() - start:.0f} s CPU.)", ""]
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
