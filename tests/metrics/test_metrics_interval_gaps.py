"""Issue 28, results with error bars: intervals on position consistency and swap accuracy,
half credit for ties in ``accuracy`` and ``paired_difference``, and AUROC of the judge's
confidence with a stratified bootstrap interval."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from _metrics_verdicts import ERROR, UNPARSED
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from judgegraph.metrics import (
    accuracy,
    auroc,
    paired_difference,
    position_consistency,
    proportion_interval,
    swap_accuracy,
)
from judgegraph.metrics._calibration import _rank_auc
from judgegraph.metrics._intervals import bootstrap_interval, mean_statistic

# Few resamples keep the property tests quick; the properties hold for any count.
FAST = 300

pairwise = st.sampled_from(["A", "B", "tie"])
decisive = st.sampled_from(["A", "B"])


# --- 1. position consistency and swap accuracy ----------------------------------------------


def test_position_consistency_reports_wilson_and_bootstrap_intervals() -> None:
    # 12 consistent, 6 lean first (A then B), 2 lean second, 4 other (tie against a winner).
    first = ["A"] * 6 + ["B"] * 6 + ["A"] * 6 + ["B"] * 2 + ["tie"] * 4
    second = ["A"] * 6 + ["B"] * 6 + ["B"] * 6 + ["A"] * 2 + ["A"] * 4
    r = position_consistency(first, second, seed=3)
    assert r.consistency == pytest.approx(12 / 24) and r.position_bias == pytest.approx((6 - 2) / 24)
    assert r.consistency_interval == proportion_interval(12, 24)
    ci = r.position_bias_interval
    assert ci is not None and ci.method == "bootstrap-bca" and ci.level == 0.95
    assert ci.low < r.position_bias < ci.high  # type: ignore[operator]
    # The bias is the mean of per-item leans (+1 / −1 / 0), bootstrapped over items.
    lean = np.asarray([0.0] * 12 + [1.0] * 6 + [-1.0] * 2 + [0.0] * 4)
    assert ci == bootstrap_interval([lean], mean_statistic, seed=3)
    # Seeded: the same call gives the same interval; level= is honoured by both intervals.
    assert position_consistency(first, second, seed=3) == r
    narrow = position_consistency(first, second, seed=3, level=0.5)
    assert narrow.consistency_interval is not None and narrow.position_bias_interval is not None
    assert narrow.consistency_interval.level == narrow.position_bias_interval.level == 0.5
    assert narrow.position_bias_interval.high - narrow.position_bias_interval.low < ci.high - ci.low


def test_position_intervals_are_none_where_undefined() -> None:
    empty = position_consistency([None], ["A"])  # the one item failed and is excluded
    assert empty.consistency is None and empty.consistency_interval is None and empty.position_bias_interval is None
    one = position_consistency(["A"], ["B"])
    assert one.consistency_interval is not None  # Wilson is defined for one item
    assert one.position_bias_interval is None  # a bootstrap of one item says nothing


@settings(deadline=None, max_examples=60)
@given(st.lists(st.tuples(pairwise, pairwise), min_size=2, max_size=60), st.integers(0, 2**16))
def test_position_intervals_contain_their_estimates(pairs: list[tuple[str, str]], seed: int) -> None:
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    r = position_consistency(first, second, n_resamples=FAST, seed=seed)
    assert r.consistency is not None and r.position_bias is not None
    assert r.consistency_interval is not None and r.consistency_interval.contains(r.consistency)
    assert r.consistency_interval == proportion_interval(r.n_consistent, len(pairs))
    assert r.position_bias_interval is not None and r.position_bias_interval.contains(r.position_bias)
    # Swapping the orders mirrors the bias; the interval mirrors with it when the bootstrap is a
    # percentile one, but BCa's skew correction is computed afresh, so only containment is asserted.
    back = position_consistency(second, first, n_resamples=FAST, seed=seed)
    assert back.position_bias_interval is not None and back.position_bias_interval.contains(-r.position_bias)
    assert position_consistency(first, second, n_resamples=FAST, seed=seed) == r


def test_swap_accuracy_reports_intervals_on_every_figure() -> None:
    rng = random.Random(0)
    gold = [rng.choice("AB") for _ in range(80)]
    first: list[str | None] = [g if rng.random() < 0.8 else "tie" for g in gold]
    second = [g if rng.random() < 0.7 else rng.choice(["A", "B", "tie"]) for g in gold]
    first[0] = None  # a failed order: the item is excluded from every figure
    r = swap_accuracy(first, gold, second=second, seed=1)
    kept = range(1, 80)
    hits_f = [first[i] == gold[i] for i in kept]
    hits_s = [second[i] == gold[i] for i in kept]
    both = [x and y for x, y in zip(hits_f, hits_s, strict=True)]
    assert r.first_order.interval == proportion_interval(sum(hits_f), 79)
    assert r.second_order.interval == proportion_interval(sum(hits_s), 79)
    assert r.both.interval == proportion_interval(sum(both), 79)
    assert r.average == pytest.approx((sum(hits_f) + sum(hits_s)) / (2 * 79))
    ci = r.average_interval
    assert ci is not None and ci.method == "paired-bootstrap-bca" and ci.describe() == "95% paired bootstrap (BCa)"
    assert ci.low < r.average < ci.high  # type: ignore[operator]
    assert swap_accuracy(first, gold, second=second, seed=1) == r
    # The position figures inside carry their intervals too, at the same level.
    assert r.position.consistency_interval is not None and r.position.position_bias_interval is not None
    low = swap_accuracy(first, gold, second=second, seed=1, level=0.8)
    assert low.average_interval is not None and low.first_order.interval is not None
    assert low.average_interval.level == low.first_order.interval.level == low.position.position_bias_interval.level  # type: ignore[union-attr]
    assert low.average_interval.high - low.average_interval.low < ci.high - ci.low


def test_swap_average_of_identical_orders_is_the_one_order_bootstrap() -> None:
    # Resampling both orders of an item together: identical orders add no spread, and the
    # average's interval is the bootstrap of that one order's correctness, resample for resample.
    rng = random.Random(2)
    gold = [rng.choice("AB") for _ in range(50)]
    pred = [g if rng.random() < 0.75 else ("B" if g == "A" else "A") for g in gold]
    r = swap_accuracy(pred, gold, second=pred, seed=9, n_resamples=FAST)
    hits = np.asarray([p == g for p, g in zip(pred, gold, strict=True)], dtype=float)
    alone = bootstrap_interval([hits], mean_statistic, n_resamples=FAST, seed=9)
    assert r.average == r.first_order.value
    assert r.average_interval is not None and alone is not None
    # Same resampled indices, the mean of x and the mean of (x + x) / 2: equal to rounding.
    assert (r.average_interval.low, r.average_interval.high) == pytest.approx((alone.low, alone.high), abs=1e-12)


# --- 2. half credit for ties ---------------------------------------------------------------------


def test_accuracy_with_half_credit_for_ties() -> None:
    gold = ["A", "B", "tie", "A", "B", "tie", "A", "A"]
    pred = ["tie", "B", "A", "A", "tie", "tie", "B", None]
    # Item 7 failed (excluded). Credits: .5, 1, .5, 1, .5, 1, 0 -> 4.5 / 7.
    exact = accuracy(pred, gold)
    half = accuracy(pred, gold, ties="half", seed=4)
    assert exact.value == pytest.approx(3 / 7)
    assert half.value == pytest.approx(4.5 / 7) and half.name == "accuracy"
    assert half.counts == exact.counts and half.counts.unparsed == 1
    assert half.interval is not None and half.interval.method == "bootstrap-bca"
    assert half.interval.contains(4.5 / 7)
    assert accuracy(pred, gold, ties="half", seed=4) == half
    assert accuracy(pred, gold, ties="half", interval=None).interval is None
    # A failed prediction kept as wrong is not decisive: against a tie it earns nothing.
    kept_wrong = accuracy(["tie", None], ["A", "tie"], ties="half", unparsed="wrong")
    assert kept_wrong.value == pytest.approx(0.25)
    # Read as a tie, it earns half against a decisive reference.
    as_tie = accuracy([None, "A"], ["A", "A"], ties="half", unparsed="tie")
    assert as_tie.value == pytest.approx(0.75)
    with pytest.raises(ValueError, match="ties must be"):
        accuracy(pred, gold, ties="quarter")  # type: ignore[arg-type]


def test_paired_difference_with_half_credit() -> None:
    gold = ["A", "B", "tie", "A", "B", "tie", "A", "A"] * 5
    a = ["tie", "B", "A", "A", "tie", "tie", "B", "A"] * 5
    b = ["B", "B", "tie", "tie", "A", "A", "A", "tie"] * 5
    d = paired_difference(a, b, gold, ties="half", seed=2)
    assert d.metric == "accuracy"
    # Credits of A: .5 1 .5 1 .5 1 0 1; of B: 0 1 1 .5 0 .5 1 .5.
    assert d.a == pytest.approx(5.5 / 8) and d.b == pytest.approx(4.5 / 8)
    assert d.a == accuracy(a, gold, ties="half").value and d.b == accuracy(b, gold, ties="half").value
    assert d.difference == pytest.approx(1 / 8)
    assert d.interval is not None and d.interval.method == "paired-bootstrap-bca"
    assert d.interval.contains(d.difference)  # type: ignore[arg-type]
    assert paired_difference(a, b, gold, ties="half", seed=2) == d
    assert paired_difference(a, b, gold).difference == pytest.approx((4 - 3) / 8)  # exact by default
    with pytest.raises(ValueError, match="metric='accuracy' only"):
        paired_difference(a, b, gold, metric="cohen_kappa", ties="half")
    with pytest.raises(ValueError, match="ties must be"):
        paired_difference(a, b, gold, ties="none")  # type: ignore[arg-type]


@settings(deadline=None, max_examples=60)
@given(
    st.lists(
        st.tuples(st.one_of(decisive, st.none()), st.one_of(decisive, st.none()), decisive), min_size=1, max_size=40
    ),
    st.sampled_from(["exclude", "wrong"]),
)
def test_half_credit_without_ties_is_exact_credit(rows: list[tuple[str | None, str | None, str]], policy: str) -> None:
    a, b, gold = ([r[i] for r in rows] for i in range(3))
    assert accuracy(a, gold, unparsed=policy, ties="half") == accuracy(a, gold, unparsed=policy)  # type: ignore[arg-type]
    half = paired_difference(a, b, gold, unparsed=policy, ties="half", n_resamples=FAST)  # type: ignore[arg-type]
    assert half == paired_difference(a, b, gold, unparsed=policy, n_resamples=FAST)  # type: ignore[arg-type]


@settings(deadline=None, max_examples=60)
@given(
    st.lists(
        st.tuples(st.one_of(pairwise, st.none()), st.one_of(pairwise, st.none()), pairwise), min_size=1, max_size=40
    ),
    st.sampled_from(["wrong", "tie"]),
    st.integers(0, 2**16),
)
def test_difference_of_half_credit_accuracies_is_the_paired_difference(
    rows: list[tuple[str | None, str | None, str]], policy: str, seed: int
) -> None:
    # Under "wrong" and "tie" every item is kept, so each judge alone sees the same items.
    a, b, gold = ([r[i] for r in rows] for i in range(3))
    acc_a = accuracy(a, gold, unparsed=policy, ties="half", n_resamples=FAST, seed=seed)  # type: ignore[arg-type]
    acc_b = accuracy(b, gold, unparsed=policy, ties="half", n_resamples=FAST, seed=seed)  # type: ignore[arg-type]
    d = paired_difference(a, b, gold, unparsed=policy, ties="half", n_resamples=FAST, seed=seed)  # type: ignore[arg-type]
    assert acc_a.value is not None and acc_b.value is not None and d.difference is not None
    # Credits are multiples of 0.5, so each sum is exact in float64 and each mean is one
    # correctly rounded division: the figures agree exactly; 1e-12 only guards summation order.
    assert d.a == pytest.approx(acc_a.value, abs=1e-12) and d.b == pytest.approx(acc_b.value, abs=1e-12)
    assert d.difference == pytest.approx(acc_a.value - acc_b.value, abs=1e-12)
    if len(rows) == 1:  # a bootstrap of one item says nothing (Wilson still does, without half credit)
        assert d.interval is None
        return
    assert acc_a.interval is not None and acc_a.interval.contains(acc_a.value)
    assert d.interval is not None and d.interval.contains(d.difference)


# --- 3. AUROC ------------------------------------------------------------------------------------


def test_auroc_matches_sklearn_with_a_stratified_bootstrap_interval() -> None:
    rng = np.random.default_rng(0)
    correct = rng.random(300) < 0.8
    conf = np.where(correct, rng.beta(5, 2, 300), rng.beta(2, 3, 300))
    # Failed entries on either side are excluded and counted.
    confs: list[object] = [*conf.tolist(), None, math.nan, 0.9, 0.4]
    flags: list[object] = [*correct.tolist(), True, False, UNPARSED, ERROR]
    r = auroc(confs, flags, seed=5)
    assert r.name == "auroc"
    assert r.value == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)  # the same computation
    assert r.counts.total == 304 and r.counts.used == 300 and r.counts.excluded == 4
    assert r.counts.unparsed == 3 and r.counts.error == 1
    ci = r.interval
    assert ci is not None and ci.method == "stratified-bootstrap-bca"
    assert ci.describe() == "95% stratified bootstrap (BCa)"
    assert ci.low < r.value < ci.high  # type: ignore[operator]
    assert auroc(confs, flags, seed=5) == r
    assert 0.5 < ci.low  # the confidence really does separate right from wrong here


def test_auroc_is_none_where_undefined() -> None:
    one_class = auroc([0.9, 0.2, 0.7], [True, True, True])
    assert one_class.value is None and one_class.interval is None and one_class.counts.used == 3
    assert auroc([], []).value is None
    # One wrong verdict: the figure exists, but no resample can move that one item: no interval.
    lone = auroc([0.9, 0.8, 0.7, 0.1], [True, True, True, False])
    assert lone.value == 1.0 and lone.interval is None
    with pytest.raises(ValueError, match="equally long"):
        auroc([0.5], [True, False])
    with pytest.raises(ValueError, match="booleans"):
        auroc([0.5, 0.6], [True, "yes"])
    with pytest.raises(ValueError, match="finite number"):
        auroc([0.5, "high"], [True, False])
    with pytest.raises(ValueError, match="finite number"):
        auroc([0.5, math.inf], [True, False])


def _labelled_scores() -> st.SearchStrategy[tuple[list[float], list[bool]]]:
    # Confidences on a coarse grid so that tied scores (counted half) come up often.
    item = st.tuples(st.integers(0, 10).map(lambda k: k / 10), st.booleans())
    return (
        st.lists(item, min_size=2, max_size=60)
        .filter(lambda xs: len({y for _, y in xs}) == 2)
        .map(lambda xs: ([c for c, _ in xs], [y for _, y in xs]))
    )


@settings(deadline=None, max_examples=80)
@given(_labelled_scores(), st.integers(0, 2**16))
def test_auroc_properties(data: tuple[list[float], list[bool]], seed: int) -> None:
    conf, correct = data
    r = auroc(conf, correct, n_resamples=FAST, seed=seed)
    expected = float(roc_auc_score(correct, conf))
    assert r.value is not None
    # Both are exact rational counts of pairs over n1·n0 computed in float64 (sklearn by the
    # trapezoid rule, the bootstrap statistic by ranks): agreement to 1e-12 leaves only rounding.
    assert r.value == pytest.approx(expected, abs=1e-12)
    c = np.asarray(conf)
    y = np.asarray(correct)
    assert float(_rank_auc(c[y], c[~y])) == pytest.approx(expected, abs=1e-12)
    flipped = auroc(conf, [not x for x in correct], n_resamples=FAST, seed=seed)
    assert flipped.value == pytest.approx(1 - r.value, abs=1e-12)
    if r.interval is not None:
        assert r.interval.contains(r.value)
    else:  # only when a class has a single item
        assert min(int(y.sum()), int((~y).sum())) < 2
    assert auroc(conf, correct, n_resamples=FAST, seed=seed) == r


@settings(deadline=None, max_examples=30)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(2, 30))
def test_rank_auc_is_vectorized_over_resamples(n1: int, n0: int, batch: int) -> None:
    rng = np.random.default_rng(n1 * 100 + n0)
    pos = rng.integers(0, 5, size=(batch, n1)) / 4
    neg = rng.integers(0, 5, size=(batch, n0)) / 4
    got = _rank_auc(pos, neg)
    for i in range(batch):
        labels = [1] * n1 + [0] * n0
        want = roc_auc_score(labels, [*pos[i], *neg[i]])
        assert got[i] == pytest.approx(want, abs=1e-12)
