"""Position consistency, swap accuracy, length bias and calibration (ECE, reliability
curves, Brier), checked against scipy / scikit-learn or counts worked out in the test."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _metrics_verdicts import UNPARSED, ok, score, two_orders
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from judgegraph.metrics import (
    calibration,
    expected_calibration_error,
    length_bias,
    length_correlation,
    position_consistency,
    reliability_curve,
    split_orders,
    swap_accuracy,
)

# ----------------------------------------------------------- position / swap / length


ORDER_PAIRS = [("A", "A"), ("A", "B"), ("A", "B"), ("B", "A"), ("tie", "A"), ("B", "B"), (None, None), ("A", None)]


def test_position_consistency_from_verdict_orders() -> None:
    verdicts = [two_orders(f, s) for f, s in ORDER_PAIRS]
    tie = position_consistency(verdicts, unparsed="tie")
    # consistent: (A,A), (B,B), (None,None)->(tie,tie)
    assert tie.n_consistent == 3 and tie.consistency == pytest.approx(3 / 8)
    assert (tie.n_prefer_first_position, tie.n_prefer_second_position) == (2, 1)
    assert tie.position_bias == pytest.approx((2 - 1) / 8)
    excl = position_consistency(verdicts, unparsed="exclude")
    assert excl.counts.excluded == 2 and excl.consistency == pytest.approx(2 / 6)
    wrong = position_consistency(verdicts, unparsed="wrong")
    assert wrong.n_consistent == 2 and wrong.n_other_inconsistent == 3
    # first-slot wins over decisive single-order verdicts (exclude): order 1 "A" or order 2 "B".
    kept = [p for p in ORDER_PAIRS if None not in p]
    slot1 = sum((f == "A") + (s == "B") for f, s in kept)
    decisive = sum((f != "tie") + (s != "tie") for f, s in kept)
    assert excl.first_slot_win_rate == pytest.approx(slot1 / decisive)


def test_split_orders_needs_two_orders() -> None:
    with pytest.raises(ValueError, match="two-order"):
        split_orders([ok("A")])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A", "B", "tie"]), st.sampled_from(["A", "B", "tie"])), min_size=1))
def test_position_bias_flips_when_orders_swap(pairs: list[tuple[str, str]]) -> None:
    first = [f for f, _ in pairs]
    second = [s for _, s in pairs]
    fwd = position_consistency(first, second)
    back = position_consistency(second, first)
    assert fwd.consistency == back.consistency
    assert fwd.position_bias == pytest.approx(-(back.position_bias or 0.0))
    assert (
        fwd.n_consistent + fwd.n_prefer_first_position + fwd.n_prefer_second_position + fwd.n_other_inconsistent
        == len(pairs)
    )


def test_swap_accuracy() -> None:
    first = ["A", "A", "B", None, "B"]
    second = ["A", "B", "B", None, "A"]
    gold = ["A", "A", "A", "B", "B"]
    r = swap_accuracy(first, gold, second=second, unparsed="wrong")
    assert r.first_order.value == pytest.approx(3 / 5)
    assert r.second_order.value == pytest.approx(1 / 5)
    assert r.average == pytest.approx(2 / 5)
    assert r.both.value == pytest.approx(1 / 5)
    assert r.position.consistency == pytest.approx(2 / 5)
    e = swap_accuracy(first, gold, second=second, unparsed="exclude")
    assert e.first_order.counts.used == 4 and e.first_order.value == pytest.approx(3 / 4)
    verdicts = [two_orders(f, s) for f, s in zip(first, second, strict=True)]
    assert swap_accuracy(verdicts, gold, unparsed="wrong") == r


def test_length_bias() -> None:
    texts_a = ["one two three", "one", "a b c d", "x", "same len", "q"]
    texts_b = ["one", "one two", "a", "x y z", "two word", "r s"]
    preds: list[Any] = ["A", "B", "A", "tie", "A", None]
    gold = ["A", "A", "B", "B", "A", "B"]
    r = length_bias(preds, texts_a, texts_b, references=gold)
    # decisive, unequal length: items 0 (longer A won), 1 (longer B won), 2 (longer A won)
    assert r.n == 3 and r.longer_win_rate == pytest.approx(1.0)
    assert r.p_value == pytest.approx(stats.binomtest(3, 3, 0.5).pvalue)
    # gold on unequal pairs: 0 longer, 1 shorter, 2 shorter, 3 longer, 5 longer
    assert r.n_reference == 5 and r.reference_longer_win_rate == pytest.approx(3 / 5)
    assert r.excess == pytest.approx(1 - 3 / 5)
    assert r.counts.unparsed == 1
    with pytest.raises(ValueError):
        length_bias(preds, texts_a, texts_b, unparsed="wrong")


def test_length_correlation_for_pointwise() -> None:
    scores = [score(1), score(2), score(None), score(5)]
    lengths = [10, 30, 20, 90]
    r = length_correlation(scores, lengths)
    assert r.method == "spearman" and r.value == pytest.approx(1.0) and r.counts.unparsed == 1


# ----------------------------------------------------------- calibration


def test_ece_and_curve_against_sklearn() -> None:
    rng = np.random.default_rng(4)
    conf = rng.uniform(0.02, 0.98, size=2000)
    hit = rng.uniform(size=2000) < conf**1.5  # overconfident
    bins = reliability_curve(list(conf), list(hit), n_bins=10)
    prob_true, prob_pred = calibration_curve(hit, conf, n_bins=10, strategy="uniform")
    nonempty = [b for b in bins if b.count]
    assert [b.accuracy for b in nonempty] == pytest.approx(list(prob_true))
    assert [b.mean_confidence for b in nonempty] == pytest.approx(list(prob_pred))
    counts = np.array([b.count for b in nonempty])
    expected = float(np.sum(counts / counts.sum() * np.abs(prob_true - prob_pred)))
    assert expected_calibration_error(list(conf), list(hit)) == pytest.approx(expected)


def test_constant_confidence_ece_is_accuracy_gap() -> None:
    hits = [True] * 7 + [False] * 3
    assert expected_calibration_error([0.95] * 10, hits) == pytest.approx(0.95 - 0.7)


def test_calibration_policies_with_explicit_confidences() -> None:
    preds = [ok("A"), UNPARSED, ok("B"), ok("A")]
    gold = ["A", "tie", "A", "A"]
    conf = [0.9, 0.7, 0.6, None]
    excluded = calibration(preds, gold, confidences=conf, unparsed="exclude")
    assert (excluded.accuracy, excluded.mean_confidence) == (pytest.approx(0.5), pytest.approx(0.75))
    assert excluded.counts.used == 2 and excluded.counts.excluded == 2 and excluded.n_without_confidence == 1
    # "wrong": the unparsed item stays, incorrect; "tie": it is read as a tie, which the gold label is.
    wrong = calibration(preds, gold, confidences=conf, unparsed="wrong")
    assert wrong.accuracy == pytest.approx(1 / 3) and wrong.counts.used == 3 and wrong.counts.unparsed == 1
    tie = calibration(preds, gold, confidences=conf, unparsed="tie")
    assert tie.accuracy == pytest.approx(2 / 3) and tie.mean_confidence == pytest.approx((0.9 + 0.7 + 0.6) / 3)


def test_calibration_from_results_counts_missing_confidence() -> None:
    preds = [ok("A", 0.9), ok("B", 0.8), ok("A"), UNPARSED, ok("tie", 0.6), ok("A", 0.99)]
    gold = ["A", "A", "A", "B", "tie", "A"]
    r = calibration(preds, gold, n_bins=5)
    assert r.n_without_confidence == 1 and r.counts.unparsed == 1 and r.counts.used == 4
    conf = [0.9, 0.8, 0.6, 0.99]
    hit = [1, 0, 1, 1]
    assert r.brier == pytest.approx(brier_score_loss(hit, conf))
    assert r.accuracy == pytest.approx(0.75)
    assert sum(b.count for b in r.bins) == 4
    q = calibration(preds, gold, n_bins=2, strategy="quantile")
    assert [b.count for b in q.bins] == [2, 2]
