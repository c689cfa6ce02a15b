"""How well sampled (self-consistency) confidence ranks a judge's errors, on
LLMBar's recorded verdicts (issue 29).

    .venv/bin/python bench/sampled_confidence.py [--data ../shared/data/llmbar] [--out bench/results/sampled.md]

**What is simulated.** LLMBar recorded one verdict per (evaluator, prompting
strategy, answer order), never several temperature samples of one prompt, and
no logprobs. So the draws are simulated under this stated noise model: an
evaluator's draw on an item is one of its recorded verdicts on that item,
picked uniformly over its strategies × both answer orders (an unparsed
recording is a failed draw). k draws are taken with replacement and voted by
judgegraph's own ``SampledJudge.combine`` (mode; a split between the top
answers is a tie; confidence = the modal share). This is prompt-and-order
variability standing in for sampling variability; real temperature draws of
one prompt are likely less diverse, so these AUROCs are not a prediction of
what k samples of one prompt give.

**What it is compared with.** Logprob confidence cannot be compared: no
recording here has logprobs. The baseline is what a no-logprob pairwise judge
has today: swap agreement of one recorded run (Vanilla_NoRules, present in
every subset): 1.0 when both orders agree, 0.5 when not (the verdict a tie).

An error is a verdict other than the gold label (a tie is an error: gold is
always A or B). AUROC: how often an erring item gets lower confidence than a
correct one (ties count half); 95% intervals by a percentile bootstrap over
items (2,000 resamples); the paired difference is bootstrapped jointly.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import NDArray

from judgegraph import PairwiseJudge, ScriptedBackend
from judgegraph.datasets import list_llmbar_runs, load_llmbar_run
from judgegraph.judges import SampledJudge
from judgegraph.metrics import Interval, proportion_interval
from judgegraph.types import PairwiseVerdict, Status, Winner

EVALUATORS = ("GPT-4", "ChatGPT", "PaLM2", "LLaMA2")
BASELINE = "Vanilla_NoRules"
KS = (3, 5, 10)
EXTRA = (1, 4, 10)
SIM_SEEDS = 5
RESAMPLES = 2000


def auroc(conf: NDArray[np.float64], err: NDArray[np.bool_]) -> float:
    """P(conf of an error < conf of a correct item), ties half: the AUROC of
    low confidence as a detector of errors."""
    e, c = conf[err], conf[~err]
    if e.size == 0 or c.size == 0:
        return float("nan")
    less = (e[:, None] < c[None, :]).sum()
    same = (e[:, None] == c[None, :]).sum()
    return float((less + 0.5 * same) / (e.size * c.size))


def boot(
    stat: object, arrays: tuple[NDArray[np.float64] | NDArray[np.bool_], ...], seed: int = 0
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    n = arrays[0].size
    vals = []
    for _ in range(RESAMPLES):
        idx = rng.integers(0, n, n)
        v = stat(*(a[idx] for a in arrays))  # type: ignore[operator]
        if np.isfinite(v):
            vals.append(v)
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(lo), float(hi)


Key = tuple[str, int]


def load(
    data: Path,
) -> tuple[dict[str, dict[Key, list[str | None]]], dict[Key, str], dict[str, dict[Key, tuple[str | None, str | None]]]]:
    """Per evaluator, per item (subset, index): its recorded verdicts (None =
    unparsed); the gold; and the baseline run's two orders."""
    draws: dict[str, dict[tuple[str, int], list[str | None]]] = defaultdict(lambda: defaultdict(list))
    gold: dict[tuple[str, int], str] = {}
    baseline: dict[str, dict[tuple[str, int], tuple[str | None, str | None]]] = defaultdict(dict)
    for subset, evaluator, strategy in list_llmbar_runs(data):
        if evaluator not in EVALUATORS:
            continue
        run = load_llmbar_run(data, subset=subset, evaluator=evaluator, strategy=strategy)
        for j in run.judgements:
            key = (subset, j.item.index)
            gold[key] = "A" if j.item.label == 1 else "B"
            draws[evaluator][key] += [j.first, j.second]
            if strategy == BASELINE:
                baseline[evaluator][key] = (j.first, j.second)
    return draws, gold, baseline


def sampled_run(
    sampler: SampledJudge,
    recorded: dict[Key, list[str | None]],
    gold: dict[Key, str],
    keys: list[Key],
    rng: random.Random,
) -> tuple[list[float], list[bool], list[int]]:
    conf, wrong, usable = [], [], []
    for key in keys:
        picks = [rng.choice(recorded[key]) for _ in range(sampler.k)]
        draws = [
            PairwiseVerdict(status=Status.OK, winner=cast(Winner, w))
            if w is not None
            else PairwiseVerdict(status=Status.UNPARSED, reason="no parseable winner recorded")
            for w in picks
        ]
        r = sampler.combine(draws)
        assert isinstance(r, PairwiseVerdict)
        usable.append(sum(w is not None for w in picks))
        conf.append(r.confidence if r.ok and r.confidence is not None else 0.0)
        wrong.append(not (r.ok and r.winner == gold[key]))
    return conf, wrong, usable


def _rate(errors: NDArray[np.bool_]) -> str:
    """An error rate with its Wilson 95% interval (judgegraph.metrics)."""
    ci: Interval | None = proportion_interval(int(errors.sum()), int(errors.size))
    return f"{errors.mean():.3f}" + (f" [{ci.low:.3f}, {ci.high:.3f}]" if ci is not None else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "llmbar"))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "sampled.md"))
    args = ap.parse_args()
    started = time.time()
    lines = report(Path(args.data))
    lines += ["", f"Run time {time.time() - started:.0f} s."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def report(data: Path, *, evaluators: tuple[str, ...] = EVALUATORS) -> list[str]:
    """The results page; ``evaluators`` narrows it (a quick check of its shape)."""
    draws, gold, baseline = load(data)
    judge = PairwiseJudge(ScriptedBackend(["unused"]), name="recorded")
    lines = [
        "# Sampled confidence on LLMBar (issue 29)",
        "",
        f"Generated by `bench/sampled_confidence.py` from `{data}` (princeton-nlp/LLMBar, MIT), "
        f"{time.strftime('%Y-%m-%d')}. **Draws are simulated** from recorded verdicts (see the script's docstring): "
        "an evaluator's draw on an item is one of its recorded verdicts there, uniformly over its prompting "
        "strategies × both answer orders, k taken with replacement, voted by `SampledJudge.combine` (mode, a split "
        "is a tie, confidence = modal share). **No logprob comparison is possible: no recording has logprobs.** "
        f"Baseline: swap agreement of the recorded {BASELINE} run (1.0 both orders agree, else 0.5 and a tie). "
        "Error = verdict ≠ gold (ties are errors). AUROC of low confidence for errors, percentile bootstrap "
        f"95% over items ({RESAMPLES} resamples), simulation seed 0; the range over {SIM_SEEDS} simulation seeds "
        "in the last column. Error rates: Wilson 95% (`judgegraph.metrics.proportion_interval`).",
        "",
        "| evaluator | items | recorded verdicts / item | error rate (k=5) [95% Wilson] "
        "| swap-agreement AUROC [95% percentile bootstrap] | "
        + " | ".join(f"sampled k={k} AUROC" for k in KS)
        + " | k=5 − swap (paired) [95% paired percentile bootstrap] | k=5 AUROC over sim seeds |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(KS) + "---:|---:|",
    ]
    summary: dict[str, dict[str, object]] = {}
    for ev in evaluators:
        rec = draws.get(ev)
        if not rec:
            continue
        keys = sorted(k for k in rec if k in baseline[ev])
        per_item = statistics.fmean(len(rec[k]) for k in keys)
        # the baseline: one run's swap agreement
        b_conf, b_err = [], []
        for key in keys:
            first, second = baseline[ev][key]
            if first is None or second is None:
                b_conf.append(0.0)
                b_err.append(True)
            elif first == second:
                b_conf.append(1.0)
                b_err.append(first != gold[key])
            else:
                b_conf.append(0.5)
                b_err.append(True)
        bc, be = np.array(b_conf), np.array(b_err)
        blo, bhi = boot(auroc, (bc, be))
        cells = [f"{auroc(bc, be):.3f} [{blo:.3f}, {bhi:.3f}]"]
        k5: tuple[NDArray[np.float64], NDArray[np.bool_]] | None = None
        err5: NDArray[np.bool_] | None = None
        for k in KS:
            sampler = SampledJudge(judge, k=k, min_ok=1)
            conf, wrong, _ = sampled_run(sampler, rec, gold, keys, random.Random(0))
            sc, se = np.array(conf), np.array(wrong)
            lo, hi = boot(auroc, (sc, se))
            cells.append(f"{auroc(sc, se):.3f} [{lo:.3f}, {hi:.3f}]")
            if k == 5:
                k5, err5 = (sc, se), se
        assert k5 is not None and err5 is not None

        def diff(
            sc: NDArray[np.float64], se: NDArray[np.bool_], bc: NDArray[np.float64], be: NDArray[np.bool_]
        ) -> float:
            return auroc(sc, se) - auroc(bc, be)

        d = diff(k5[0], k5[1], bc, be)
        dlo, dhi = boot(diff, (k5[0], k5[1], bc, be))
        seeds = []
        for s in range(SIM_SEEDS):
            conf, wrong, _ = sampled_run(SampledJudge(judge, k=5, min_ok=1), rec, gold, keys, random.Random(s))
            seeds.append(auroc(np.array(conf), np.array(wrong)))
        lines.append(
            f"| {ev} | {len(keys)} | {per_item:.1f} | {_rate(err5)} | "
            + " | ".join(cells)
            + f" | {d:+.3f} [{dlo:+.3f}, {dhi:+.3f}] | {min(seeds):.3f}–{max(seeds):.3f} |"
        )
        summary[ev] = {"d": d, "ci": (dlo, dhi)}
    lines += [
        "",
        "**Caveat on the table above:** each column scores its own verdict. A swap-inconsistent item is a tie, so an "
        "error, and gets the lowest confidence (0.5) by construction; a sampled split is a tie too. So the AUROCs "
        "above mix 'knows it is split' with 'ranks its errors', and verdicts differ between columns.",
        "",
        "## Same verdict, two confidences",
        "",
        f"The verdict is fixed: the {BASELINE} run's first-order (A/B) verdict, one call, as a cheap single-call "
        "judge gives it (items where it parsed). Its error is that verdict ≠ gold. Confidences for it: **swap** = 1 "
        "if the swapped order (one more call) agrees, 0 if not, 0.5 if unparsed; **sampled, m more draws** = the "
        "share of m simulated draws (from the evaluator's other recorded verdicts on the item, with replacement) "
        "that agree with it. Same items and errors in every column, so the AUROCs compare directly.",
        "",
        "| evaluator | items | error rate [95% Wilson] | swap (1 more call) AUROC [95% percentile bootstrap] | "
        + " | ".join(f"sampled m={m} AUROC" for m in EXTRA)
        + " | sampled m=4 − swap (paired) [95% paired percentile bootstrap] |",
        "|---|---:|---:|---:|" + "---:|" * len(EXTRA) + "---:|",
    ]
    for ev in evaluators:
        rec = draws.get(ev)
        if not rec:
            continue
        keys = sorted(k for k in rec if k in baseline[ev] and baseline[ev][k][0] is not None)
        err = np.array([baseline[ev][k][0] != gold[k] for k in keys])
        swap = np.array(
            [0.5 if baseline[ev][k][1] is None else float(baseline[ev][k][1] == baseline[ev][k][0]) for k in keys]
        )
        lo, hi = boot(auroc, (swap, err))
        cells = [f"{auroc(swap, err):.3f} [{lo:.3f}, {hi:.3f}]"]
        rng = random.Random(0)
        m4: NDArray[np.float64] | None = None
        for m in EXTRA:
            conf = []
            for key in keys:
                verdict = baseline[ev][key][0]
                others = list(rec[key])
                others.remove(verdict)  # the verdict's own recording is not a draw
                picks = [rng.choice(others) for _ in range(m)] if others else []
                usable = [w for w in picks if w is not None]
                conf.append(sum(w == verdict for w in usable) / len(usable) if usable else 0.5)
            c = np.array(conf)
            lo, hi = boot(auroc, (c, err))
            cells.append(f"{auroc(c, err):.3f} [{lo:.3f}, {hi:.3f}]")
            if m == 4:
                m4 = c
        assert m4 is not None

        def paired(c: NDArray[np.float64], sw: NDArray[np.float64], e: NDArray[np.bool_]) -> float:
            return auroc(c, e) - auroc(sw, e)

        d = paired(m4, swap, err)
        dlo, dhi = boot(paired, (m4, swap, err))
        lines.append(
            f"| {ev} | {len(keys)} | {_rate(err)} | " + " | ".join(cells) + f" | {d:+.3f} [{dlo:+.3f}, {dhi:+.3f}] |"
        )
    lines += [
        "",
        "Reading: the paired columns are differences in AUROC on the same items (simulation seed 0); an interval "
        "that excludes 0 is a difference these items support. The simulated draws mix prompts and answer orders "
        "(an evaluator's pool includes the baseline run's swapped-order verdict too), so they carry more diversity "
        "than temperature samples of one prompt would, and the two signals overlap in part.",
    ]
    return lines


if __name__ == "__main__":
    main()
