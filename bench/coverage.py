"""Coverage of the 95% intervals for a judged pass rate: naive vs corrected, by simulation.

Each draw makes a world with a known truth: a true pass rate p ~ U(0.05, 0.95), a judge with
sensitivity and specificity ~ U(0.6, 0.99) each, N items whose human label is Bernoulli(p) and
whose judge verdict errs at those rates, and a random n_labelled of them with human labels.
Then it asks each interval whether it covers p:

- naive: Wilson on the judge's pass rate over all N items (what a judged job reports);
- human only: Wilson on the n labels alone;
- PPI: ``judgegraph.metrics.ppi_mean`` (prediction-powered, CLT);
- PPI++: the same with ``power_tuning=True`` (the judge's weight chosen from the data);
- Rogan–Gladen: ``judgegraph.metrics.rogan_gladen`` (bootstrap over both samples).

Run: ``python bench/coverage.py [--draws 1000] [--items 2000] [--seed 0] [--out bench/results/coverage.md]``
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from judgegraph.metrics import ppi_mean, proportion_interval, rogan_gladen


@dataclass
class Tally:
    covered: int = 0
    draws: int = 0
    widths: list[float] = field(default_factory=list)
    abs_errors: list[float] = field(default_factory=list)
    undefined: int = 0  # draws where the method gave no interval (counted as not covering)

    def add(self, low: float, high: float, estimate: float, truth: float) -> None:
        self.draws += 1
        self.covered += low <= truth <= high
        self.widths.append(high - low)
        self.abs_errors.append(abs(estimate - truth))

    def miss(self) -> None:
        self.draws += 1
        self.undefined += 1

    def coverage(self) -> float:
        return self.covered / self.draws

    def coverage_ci(self) -> tuple[float, float]:
        ci = proportion_interval(self.covered, self.draws)
        assert ci is not None
        return ci.low, ci.high


METHODS = (
    "naive (judge alone)",
    "human labels only",
    "PPI (corrected)",
    "PPI++ (corrected, power-tuned)",
    "Rogan–Gladen (corrected)",
)


def run(n_labelled: int, *, draws: int, items: int, seed: int) -> dict[str, Tally]:
    rng = np.random.default_rng([seed, n_labelled])
    tallies = {m: Tally() for m in METHODS}
    for d in range(draws):
        p = rng.uniform(0.05, 0.95)
        sens, spec = rng.uniform(0.6, 0.99, size=2)
        y = rng.random(items) < p
        f = np.where(y, rng.random(items) < sens, rng.random(items) >= spec)
        labelled = np.zeros(items, dtype=bool)
        labelled[rng.choice(items, n_labelled, replace=False)] = True
        human = [bool(v) if m else None for v, m in zip(y, labelled, strict=True)]
        judge = [bool(v) for v in f]
        ppi = ppi_mean(judge, human)
        tallies[METHODS[0]].add(ppi.naive.interval.low, ppi.naive.interval.high, float(ppi.naive), p)  # type: ignore[union-attr]
        h = ppi.human_only
        tallies[METHODS[1]].add(h.interval.low, h.interval.high, float(h), p)  # type: ignore[union-attr]
        tallies[METHODS[2]].add(ppi.interval.low, ppi.interval.high, ppi.estimate, p)
        tuned = ppi_mean(judge, human, power_tuning=True)
        tallies[METHODS[3]].add(tuned.interval.low, tuned.interval.high, tuned.estimate, p)
        try:
            rg = rogan_gladen(judge, human, seed=d)
        except ValueError:  # no labelled pass or fail, or a judge no better than chance on the sample
            tallies[METHODS[4]].miss()
        else:
            tallies[METHODS[4]].add(rg.interval.low, rg.interval.high, rg.estimate, p)
    return tallies


def render(results: dict[int, dict[str, Tally]], *, draws: int, items: int, seed: int, seconds: float) -> str:
    lines = [
        "# Coverage of 95% intervals for a judged pass rate (naive vs corrected)",
        "",
        f"`python bench/coverage.py --draws {draws} --items {items} --seed {seed}` ({seconds:.0f} s on one core).",
        "",
        f"{draws} simulated worlds per row. Each: true pass rate p ~ U(0.05, 0.95); a judge with sensitivity and "
        f"specificity each ~ U(0.6, 0.99); {items} items with human label ~ Bernoulli(p) and the judge's verdict "
        "erring at those rates; n_labelled items, chosen at random, carry their human label. An interval *covers* "
        "when it contains p. Nominal level 95%. Coverage's own 95% Wilson interval over the draws is in brackets. "
        "Methods: naive = Wilson on the judge's pass rate over all items; human only = Wilson on the labels alone; "
        "PPI = `judgegraph.metrics.ppi_mean` (prediction-powered, CLT); PPI++ = the same with `power_tuning=True`; "
        "Rogan–Gladen = "
        "`judgegraph.metrics.rogan_gladen` (percentile bootstrap over both samples, 2,000 resamples).",
        "",
        "| n_labelled | method | coverage | mean width | mean abs. error | no interval |",
        "|---|---|---|---|---|---|",
    ]
    for n, tallies in results.items():
        for name, t in tallies.items():
            lo, hi = t.coverage_ci()
            width = float(np.mean(t.widths)) if t.widths else math.nan
            err = float(np.mean(t.abs_errors)) if t.abs_errors else math.nan
            lines.append(
                f"| {n} | {name} | **{100 * t.coverage():.1f}%** [{100 * lo:.1f}, {100 * hi:.1f}] "
                f"| {100 * width:.1f} pts | {100 * err:.1f} pts | {t.undefined} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--labelled", type=int, nargs="+", default=[100, 500])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "coverage.md")
    args = ap.parse_args()
    start = time.process_time()
    results = {n: run(n, draws=args.draws, items=args.items, seed=args.seed) for n in args.labelled}
    text = render(results, draws=args.draws, items=args.items, seed=args.seed, seconds=time.process_time() - start)
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
