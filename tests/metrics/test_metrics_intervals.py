"""Intervals on the metrics: Wilson / Clopper–Pearson for proportions, BCa bootstrap for kappa,
the paired bootstrap for the difference between two judges, win rates and escalation shares."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from _metrics_verdicts import ERROR, UNPARSED, ok
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from judgegraph.metrics import (
    accuracy,
    agreement,
    cohen_kappa,
    escalation_share,
    paired_difference,
    proportion,
    proportion_interval,
    summarize,
    win_rate,
)
from judgegraph.metrics._intervals import vectorized_kappa

LABELS = ["A", "B", "tie"]


def _noisy(ref: list[str], keep: float, rng: random.Random) -> list[str]:
    return [x if rng.random() < keep else rng.choice(LABELS) for x in ref]


def _wilson(k: int, n: int, level: float) -> tuple[float, float]:
    """The textbook Wilson score interval, written out."""
    z = stats.norm.ppf(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@given(st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))), st.sampled_from([0.8, 0.95]))
def test_wilson_matches_the_formula(kn: tuple[int, int], level: float) -> None:
    k, n = kn
    ci = proportion_interval(k, n, level=level)
    assert ci is not None and ci.method == "wilson" and ci.level == level
    low, high = _wilson(k, n, level)
    # Two closed forms of one quantity in float64: they agree to rounding, 1e-9 is ample.
    assert ci.low == pytest.approx(low, abs=1e-9)
    assert ci.high == pytest.approx(high, abs=1e-9)
    assert ci.low <= k / n <= ci.high


def test_accuracy_and_agreement_carry_a_binomial_interval() -> None:
    preds = [ok("A"), ok("B"), ok("tie"), UNPARSED, ERROR, ok("A"), ok("B"), ok("A")]
    gold = ["A", "A", "tie", "tie", "B", "A", "B", "B"]
    r = accuracy(preds, gold)
    assert r.value == pytest.approx(4 / 6)
    assert r.interval is not None and r.interval.describe() == "95% Wilson"
    assert (r.interval.low, r.interval.high) == pytest.approx(_wilson(4, 6, 0.95), abs=1e-9)
    # Under "wrong" the failed items are misses: 4 of 8.
    w = accuracy(preds, gold, unparsed="wrong", interval="exact", level=0.9)
    exact = stats.binomtest(4, 8).proportion_ci(confidence_level=0.9, method="exact")
    assert w.interval is not None and w.interval.method == "exact"
    assert (w.interval.low, w.interval.high) == pytest.approx((exact.low, exact.high), abs=1e-12)
    assert accuracy(preds, gold, interval=None).interval is None
    no_ties = agreement(preds, gold, include_ties=False)
    assert no_ties.interval is not None and no_ties.interval.contains(float(no_ties))
    assert accuracy([], []).interval is None


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # one shared label: NaN, checked
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=60),
    st.sampled_from([None, "linear", "quadratic"]),
)
def test_vectorized_kappa_matches_sklearn(pairs: list[tuple[int, int]], weights: str | None) -> None:
    ref = np.asarray([r for r, _ in pairs])
    pred = np.asarray([p for _, p in pairs])
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = cohen_kappa_score(ref, pred, labels=[0, 1, 2, 3], weights=weights)
    got = float(vectorized_kappa(ref, pred, k=4, weights=weights))  # type: ignore[arg-type]
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        # Same formula, different summation order: float64 rounding only.
        assert got == pytest.approx(expected, abs=1e-9)


def test_kappa_interval_is_seeded_and_brackets_the_value() -> None:
    rng = random.Random(3)
    gold = [rng.choice(LABELS) for _ in range(300)]
    preds = _noisy(gold, 0.6, rng)
    a = cohen_kappa(preds, gold, seed=1)
    assert a == cohen_kappa(preds, gold, seed=1)
    assert a.interval is not None and a.interval.method == "bootstrap-bca" and a.interval.level == 0.95
    assert a.interval.low < float(a) < a.interval.high
    assert cohen_kappa(preds, gold, seed=2).interval != a.interval
    assert cohen_kappa(preds, gold, interval=None).interval is None
    narrower = cohen_kappa(preds, gold, level=0.5, seed=1).interval
    assert narrower is not None and a.interval.low < narrower.low < narrower.high < a.interval.high
    weighted = cohen_kappa(preds, gold, weights="quadratic", labels=("A", "tie", "B"))
    assert weighted.interval is not None and weighted.interval.contains(float(weighted))


def test_kappa_interval_of_perfect_agreement_is_the_point() -> None:
    gold = ["A", "B", "tie"] * 10
    r = cohen_kappa(gold, gold)
    assert r.value == 1.0
    assert r.interval is not None and (r.interval.low, r.interval.high) == (1.0, 1.0)


def test_paired_difference_of_accuracy() -> None:
    rng = random.Random(0)
    gold = [rng.choice(LABELS) for _ in range(400)]
    a = _noisy(gold, 0.8, rng)
    # B is A with a few extra mistakes: the judges err on mostly the same items.
    b = [rng.choice([y for y in LABELS if y != g]) if rng.random() < 0.08 else x for x, g in zip(a, gold, strict=True)]
    d = paired_difference(a, b, gold, seed=5)
    assert d.a == pytest.approx(float(accuracy(a, gold)))
    assert d.b == pytest.approx(float(accuracy(b, gold)))
    assert d.difference == pytest.approx(d.a - d.b)  # type: ignore[operator]
    assert d.interval is not None and d.interval.low < d.difference < d.interval.high  # type: ignore[operator]
    assert d == paired_difference(a, b, gold, seed=5)
    # Resampling items jointly keeps the shared errors out of the difference: far narrower than
    # the two separate 95% intervals combined as if independent.
    wa, wb = accuracy(a, gold).interval, accuracy(b, gold).interval
    assert wa is not None and wb is not None
    independent = math.hypot(wa.high - wa.low, wb.high - wb.low)
    assert d.interval.high - d.interval.low < 0.6 * independent
    # B's extra mistakes are real: the paired interval excludes 0.
    assert d.interval.low > 0


def test_paired_difference_of_one_judge_with_itself_is_zero() -> None:
    rng = random.Random(1)
    gold = [rng.choice(LABELS) for _ in range(100)]
    a = _noisy(gold, 0.7, rng)
    for metric in ("accuracy", "cohen_kappa"):
        d = paired_difference(a, a, gold, metric=metric)  # type: ignore[arg-type]
        assert d.difference == 0.0
        assert d.interval is not None and (d.interval.low, d.interval.high) == (0.0, 0.0)


def test_paired_difference_of_kappa_and_failed_items() -> None:
    rng = random.Random(2)
    gold = [rng.choice(LABELS) for _ in range(300)]
    a: list[object] = list(_noisy(gold, 0.75, rng))
    b: list[object] = list(_noisy(gold, 0.55, rng))
    a[0], b[1] = None, UNPARSED
    d = paired_difference(a, b, gold, metric="cohen_kappa")
    kept = [i for i in range(300) if i not in (0, 1)]
    ka = cohen_kappa_score([gold[i] for i in kept], [a[i] for i in kept])  # type: ignore[misc]
    kb = cohen_kappa_score([gold[i] for i in kept], [b[i] for i in kept])  # type: ignore[misc]
    assert d.counts.used == 298 and d.counts.excluded == 2
    assert d.difference == pytest.approx(ka - kb, abs=1e-9)  # float64 rounding of one formula
    assert d.interval is not None and d.interval.low < d.difference < d.interval.high  # type: ignore[operator]


def test_win_rate_counts_ties_half_or_drops_them() -> None:
    verdicts = [ok("A"), ok("A"), ok("B"), ok("tie"), UNPARSED]
    half = win_rate(verdicts)
    assert half.value == pytest.approx(2.5 / 4)
    assert half.counts.used == 4 and half.counts.unparsed == 1
    assert half.interval is not None and half.interval.method.startswith("bootstrap")
    decisive = win_rate(verdicts, ties="exclude")
    assert decisive.value == pytest.approx(2 / 3) and decisive.counts.dropped_ties == 1
    assert decisive.interval is not None
    assert (decisive.interval.low, decisive.interval.high) == pytest.approx(_wilson(2, 3, 0.95), abs=1e-9)
    as_tie = win_rate(verdicts, unparsed="tie")
    assert as_tie.value == pytest.approx(3 / 5)
    b_side = win_rate([1, 1, 2, 0], side=2, other=1, tie_label=0)
    assert b_side.value == pytest.approx(1.5 / 4)
    with pytest.raises(ValueError, match="none of"):
        win_rate(["A", "C"])
    with pytest.raises(ValueError, match="unparsed"):
        win_rate(verdicts, unparsed="wrong")


def test_escalation_share_and_proportion() -> None:
    r = escalation_share([True, False, True, None, True])
    assert r.name == "escalation_share" and r.value == pytest.approx(3 / 4)
    assert r.counts.unparsed == 1 and r.counts.used == 4
    assert r.interval is not None and (r.interval.low, r.interval.high) == pytest.approx(_wilson(3, 4, 0.95), abs=1e-9)
    assert proportion([0, 1, 1], name="pass_rate").value == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="booleans"):
        proportion(["yes"])
    assert proportion([]).value is None


def test_summary_shows_intervals() -> None:
    rng = random.Random(4)
    gold = [rng.choice(LABELS) for _ in range(120)]
    rep = summarize(_noisy(gold, 0.7, rng), gold)
    assert rep.accuracy.interval is not None and rep.cohen_kappa is not None and rep.cohen_kappa.interval is not None
    text = rep.to_markdown()
    assert "95% interval" in text
    assert f"{100 * rep.accuracy.interval.low:.1f}" in text


def test_large_samples_use_the_percentile_bootstrap() -> None:
    # BCa's jackknife is quadratic in the items; past BCA_MAX_ITEMS the percentile interval is used.
    from judgegraph.metrics._intervals import BCA_MAX_ITEMS

    rng = random.Random(6)
    gold = [rng.choice(LABELS) for _ in range(BCA_MAX_ITEMS + 1)]
    preds = _noisy(gold, 0.7, rng)
    r = cohen_kappa(preds, gold)
    assert r.interval is not None and r.interval.method == "bootstrap-percentile"
    assert r.interval.describe() == "95% bootstrap (percentile)"
    assert r.interval.low < float(r) < r.interval.high
    d = paired_difference(preds, _noisy(gold, 0.6, rng), gold)
    assert d.interval is not None and d.interval.method == "paired-bootstrap-percentile"
