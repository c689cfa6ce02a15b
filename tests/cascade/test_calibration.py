"""Threshold calibration by fixed-sequence testing (Trust or Escalate)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from judgegraph import PairwiseInput, PairwiseVerdict, Status
from judgegraph.cascade import (
    Abstain,
    CascadeJudge,
    LowConfidence,
    agreement_credit,
    calibrate_cascade,
    calibrate_threshold,
    calibrate_tier,
    calibrated_tiers,
    matches_label,
)
from judgegraph.judges import ReplayJudge, item_key


def reference_threshold(conf: list[float], agrees: list[bool], alpha: float, delta: float) -> float | None:
    """Fixed-sequence testing written out plainly with scipy's binomtest."""
    n_min = next(n for n in range(1, 10_000) if (1 - alpha) ** n <= delta)
    chosen = None
    for lam in sorted(set(conf), reverse=True):
        kept = [a for c, a in zip(conf, agrees, strict=True) if c >= lam]
        if len(kept) < n_min:
            continue
        errors = kept.count(False)
        if binomtest(errors, len(kept), alpha, alternative="less").pvalue > delta:
            break
        chosen = lam
    return chosen


def synthetic(n: int, seed: int) -> tuple[list[float], list[bool]]:
    """Confidence c ~ U(0, 1); the verdict agrees with humans with probability 0.6 + 0.4c."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0, 1, n).round(2)
    agrees = rng.uniform(0, 1, n) < 0.6 + 0.4 * conf
    return [float(c) for c in conf], [bool(a) for a in agrees]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_an_independent_binomial_test_and_clopper_pearson_bound(seed: int) -> None:
    conf, agrees = synthetic(400, seed)
    cal = calibrate_threshold(conf, agrees, alpha=0.1, delta=0.1)
    assert cal.threshold == reference_threshold(conf, agrees, 0.1, 0.1)
    assert cal.threshold is not None
    kept = [a for c, a in zip(conf, agrees, strict=True) if c >= cal.threshold]
    assert (cal.kept, cal.errors) == (len(kept), kept.count(False))
    # A one-sided 1-delta Clopper-Pearson bound is the upper end of the two-sided 1-2*delta interval.
    ci = binomtest(cal.errors, cal.kept).proportion_ci(confidence_level=1 - 2 * 0.1, method="exact")
    assert cal.risk_upper_bound == pytest.approx(ci.high, rel=1e-9)
    assert cal.risk_upper_bound is not None and cal.risk_upper_bound <= 0.1
    assert all(s.passed for s in cal.steps[:-1])
    assert cal.policy() == LowConfidence(threshold=cal.threshold)


def test_testing_stops_at_the_first_failure() -> None:
    # 40 clean items at 0.9, then 10 at 0.8 with 6 errors, then 200 clean at 0.5.
    conf = [0.9] * 40 + [0.8] * 10 + [0.5] * 200
    agrees = [True] * 40 + [False] * 6 + [True] * 4 + [True] * 200
    cal = calibrate_threshold(conf, agrees, alpha=0.1, delta=0.1)
    assert [s.threshold for s in cal.steps] == [0.9, 0.8]
    assert [s.passed for s in cal.steps] == [True, False]
    assert cal.threshold == 0.9 and cal.kept == 40
    # 0.5 alone would pass (6 errors in 250), but fixed-sequence testing never reaches it.
    assert binomtest(6, 250, 0.1, alternative="less").pvalue < 0.1


def test_abstains_when_no_threshold_qualifies() -> None:
    conf = [0.9, 0.8, 0.7, 0.6] * 25
    agrees = [True, False] * 50
    cal = calibrate_threshold(conf, agrees, alpha=0.1, delta=0.05)
    assert cal.abstains and cal.threshold is None and cal.kept == 0 and cal.coverage == 0
    policy = cal.policy()
    assert isinstance(policy, Abstain) and "0.1" in policy.reason


def test_thresholds_keeping_too_few_items_are_skipped() -> None:
    # Three items at 0.99 could never pass at alpha 0.1, delta 0.1 (needs >= 22): skip, do not stop.
    conf = [0.99] * 3 + [0.9] * 200
    agrees = [False] * 3 + [True] * 200
    cal = calibrate_threshold(conf, agrees, alpha=0.1, delta=0.1)
    assert cal.too_few == 1 and cal.threshold == 0.9 and cal.errors == 3
    # A larger floor skips more: here nothing keeps 300 items, so nothing is tested.
    floor = calibrate_threshold(conf, agrees, alpha=0.1, delta=0.1, min_kept=300)
    assert floor.abstains and floor.too_few == 2 and floor.steps == ()


def test_the_guarantee_holds_in_simulation() -> None:
    """Among kept items the true risk is 0.2 * (1 - threshold), so the risk exceeds
    alpha = 0.1 exactly when the chosen threshold is below 0.5. That must happen in
    at most a delta share of calibration draws."""
    alpha, delta, trials = 0.1, 0.1, 300
    grid = [round(x, 2) for x in np.arange(0, 1.0001, 0.02)]
    for min_kept, min_answered in ((None, 0.8), (100, 0.97)):
        chosen: list[float | None] = []
        for seed in range(trials):
            conf, agrees = synthetic(1000, 1000 + seed)
            cal = calibrate_threshold(conf, agrees, alpha=alpha, delta=delta, candidates=grid, min_kept=min_kept)
            chosen.append(cal.threshold)
        violations = sum(t is not None and 0.2 * (1 - t) > alpha + 1e-12 for t in chosen) / trials
        assert violations <= delta + 3 * math.sqrt(delta * (1 - delta) / trials)
        answered = [t for t in chosen if t is not None]
        # It does not hide behind abstaining (a floor on kept items makes that rarer)...
        assert len(answered) > min_answered * trials
        assert np.mean([1 - t for t in answered]) > 0.25  # ...and keeps a useful share of items


def verdict(winner: str, confidence: float | None) -> PairwiseVerdict:
    return PairwiseVerdict(status=Status.OK, winner=winner, confidence=confidence)  # type: ignore[arg-type]


def test_calibrate_tier_from_results_and_labels() -> None:
    conf, agrees = synthetic(200, 7)
    results = [verdict("A" if a else "B", c) for c, a in zip(conf, agrees, strict=True)]
    results[0] = PairwiseVerdict(status=Status.ERROR, reason="down")  # never kept
    labels = ["A"] * 200
    cal = calibrate_tier(results, labels, alpha=0.15, delta=0.1)
    expected = reference_threshold(
        [c for i, c in enumerate(conf) if i != 0] + [-1.0],
        [a for i, a in enumerate(agrees) if i != 0] + [False],
        0.15,
        0.1,
    )
    assert cal.threshold == expected and cal.n == 200
    with pytest.raises(ValueError, match=r"labels\[3\]"):
        calibrate_tier(results[:5], ["A", "B", "A", 1, "A"], alpha=0.1, delta=0.1)  # type: ignore[list-item]


def test_agreement_credit_and_strict_match() -> None:
    assert agreement_credit(verdict("A", None), "A") == 1.0
    assert agreement_credit(verdict("tie", None), "A") == 0.5
    assert agreement_credit(verdict("B", None), "tie", tie_credit=0.25) == 0.25
    assert agreement_credit(verdict("B", None), "A") == 0.0
    assert agreement_credit(PairwiseVerdict(status=Status.UNPARSED, reason="x"), "A") == 0.0
    assert not matches_label(verdict("tie", None), "A") and matches_label(verdict("B", None), "B")


async def test_calibrated_cascade_splits_delta_and_uses_escalated_items() -> None:
    conf0, agrees0 = synthetic(600, 11)
    rng = np.random.default_rng(12)
    strong_agrees = (rng.uniform(0, 1, 600) < 0.97).tolist()
    labels = ["A"] * 600
    tier0 = [verdict("A" if a else "B", c) for c, a in zip(conf0, agrees0, strict=True)]
    tier1 = [verdict("A" if a else "B", 1.0) for a in strong_agrees]
    cal = calibrate_cascade([tier0, tier1], labels, alpha=0.1, delta=0.1)
    assert [t.delta for t in cal.tiers] == [0.05, 0.05]
    assert cal.tiers[0].threshold == reference_threshold(conf0, agrees0, 0.1, 0.05)
    lam = cal.tiers[0].threshold
    assert lam is not None
    remaining = [i for i, c in enumerate(conf0) if c < lam]
    assert cal.tiers[1].n == len(remaining)
    assert cal.tiers[1].steps[0].errors == sum(not strong_agrees[i] for i in remaining)
    assert cal.tiers[1].threshold == 1.0

    # The calibration drives a live cascade over recorded verdicts.
    items = [PairwiseInput(instruction=f"q{i}", response_a="a", response_b="b") for i in range(600)]
    keys = [item_key(it) for it in items]
    judges = [ReplayJudge(dict(zip(keys, tier, strict=True)), name=n) for n, tier in (("small", tier0), ("big", tier1))]
    cascade = CascadeJudge(calibrated_tiers(judges, cal), abstain=True)
    out = await cascade.ajudge_many(items)
    assert sum(v.decided_by == "small" for v in out) == len(items) - len(remaining)
    assert all(v.decided_by == "big" for i, v in enumerate(out) if i in set(remaining) and v.ok)


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="alpha"):
        calibrate_threshold([0.5], [True], alpha=0, delta=0.1)
    with pytest.raises(ValueError, match="delta"):
        calibrate_threshold([0.5], [True], alpha=0.1, delta=1)
    with pytest.raises(ValueError, match="2 items but agrees has 1"):
        calibrate_threshold([0.5, 0.6], [True], alpha=0.1, delta=0.1)
    with pytest.raises(ValueError, match=r"confidences\[1\]"):
        calibrate_threshold([0.5, math.nan], [True, True], alpha=0.1, delta=0.1)
    with pytest.raises(ValueError, match=r"tier_results\[1\]"):
        calibrate_cascade([[verdict("A", 1.0)], []], ["A"], alpha=0.1, delta=0.1)
