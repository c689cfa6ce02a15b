"""Unparsed policies and counts, accuracy, agreement, kappa, Krippendorff's alpha, classification
scores and correlations, checked against scikit-learn / scipy / krippendorff or hand counts."""

from __future__ import annotations

import math
import random
from typing import Any

import krippendorff
import numpy as np
import pytest
from _metrics_verdicts import ERROR, UNPARSED, ok, score
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support

from judgegraph.metrics import (
    accuracy,
    agreement,
    classification_scores,
    cohen_kappa,
    correlation,
    correlations,
    kendall,
    krippendorff_alpha,
    pearson,
    spearman,
)
from judgegraph.types import Status

# ----------------------------------------------------------- policies and counts

PREDS = [ok("A"), ok("B"), ok("tie"), UNPARSED, ERROR, ok("A")]
GOLD = ["A", "A", "tie", "tie", "B", "A"]


def test_exclude_policy_drops_and_counts() -> None:
    r = accuracy(PREDS, GOLD, unparsed="exclude")
    assert r.counts.total == 6 and r.counts.used == 4
    assert (r.counts.unparsed, r.counts.error, r.counts.excluded) == (1, 1, 2)
    assert r.value == pytest.approx(3 / 4)  # A=A, B≠A, tie=tie, A=A


def test_wrong_policy_keeps_failed_as_misses() -> None:
    r = accuracy(PREDS, GOLD, unparsed="wrong")
    assert r.counts.used == 6 and r.counts.excluded == 0
    assert r.value == pytest.approx(3 / 6)


def test_tie_policy_reads_failed_as_tie() -> None:
    r = accuracy(PREDS, GOLD, unparsed="tie")
    assert r.counts.used == 6
    assert r.value == pytest.approx(4 / 6)  # the unparsed item meets a gold tie


def test_plain_labels_none_and_status_markers() -> None:
    preds: list[Any] = [1, 2, None, Status.ERROR, float("nan")]
    gold = [1, 1, 2, 2, 1]
    r = accuracy(preds, gold, unparsed="exclude")
    assert (r.counts.unparsed, r.counts.error, r.counts.used) == (2, 1, 2)
    assert r.value == pytest.approx(0.5)


def test_bad_policy_and_length_mismatch() -> None:
    with pytest.raises(ValueError, match="unparsed="):
        accuracy(["A"], ["A"], unparsed="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="length mismatch"):
        accuracy(["A", "B"], ["A"])


def test_failed_reference_counts_as_failed_item() -> None:
    r = accuracy(["A", "B"], ["A", None], unparsed="wrong")
    assert r.counts.unparsed == 1 and r.value == pytest.approx(0.5)
    # Two failed sides never agree under "wrong".
    assert accuracy([None], [None], unparsed="wrong").value == 0.0


def test_empty_after_exclusion_is_undefined_not_zero() -> None:
    r = accuracy([UNPARSED, ERROR], ["A", "B"])
    assert r.value is None and r.counts.used == 0
    assert math.isnan(float(r))


def test_agreement_without_ties_drops_either_side_tie() -> None:
    a = ["A", "tie", "B", "A", "B"]
    b = ["A", "A", "tie", "B", "B"]
    with_ties = agreement(a, b)
    without = agreement(a, b, include_ties=False)
    assert with_ties.value == pytest.approx(2 / 5)
    assert without.counts.dropped_ties == 2 and without.counts.used == 3
    assert without.value == pytest.approx(2 / 3)
    assert without.name == "agreement_without_ties"
    # A failed item whose other side is a tie is a tie item: dropped, whatever the policy.
    w = agreement(["A", None, None], ["A", "tie", "B"], include_ties=False, unparsed="wrong")
    assert (w.counts.used, w.counts.dropped_ties, w.counts.unparsed) == (2, 1, 2)
    assert w.value == pytest.approx(1 / 2)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A", "B", "tie", None]), st.sampled_from(["A", "B", "tie"])), min_size=1))
def test_accuracy_policies_bracket(pairs: list[tuple[str | None, str]]) -> None:
    preds = [p for p, _ in pairs]
    gold = [g for _, g in pairs]
    wrong = accuracy(preds, gold, unparsed="wrong")
    tie = accuracy(preds, gold, unparsed="tie")
    assert wrong.value is not None and tie.value is not None
    assert 0.0 <= wrong.value <= tie.value <= 1.0
    assert wrong.counts.unparsed == tie.counts.unparsed == sum(p is None for p in preds)


# ----------------------------------------------------------- kappa / alpha / classification


def test_kappa_matches_sklearn_on_kept_items() -> None:
    rng = random.Random(0)
    a = [rng.choice(["A", "B", "tie", None]) for _ in range(200)]
    b = [rng.choice(["A", "B", "tie"]) if rng.random() < 0.5 else x for x in a]
    kept = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    expected = cohen_kappa_score([x for x, _ in kept], [y for _, y in kept])
    r = cohen_kappa(a, b)
    assert r.value == pytest.approx(expected)
    assert r.counts.used == len(kept)


def test_weighted_kappa_follows_label_order() -> None:
    a = ["A", "tie", "B", "B", "A", "tie", "A", "B"]
    b = ["A", "B", "B", "tie", "tie", "tie", "B", "B"]
    code = {"A": 0, "tie": 1, "B": 2}
    expected = cohen_kappa_score([code[x] for x in b], [code[x] for x in a], weights="linear")
    r = cohen_kappa(a, b, weights="linear", labels=("A", "tie", "B"))
    assert r.value == pytest.approx(expected)
    assert r.name == "cohen_kappa_linear"
    with pytest.raises(ValueError, match="weighted"):
        cohen_kappa(a, b, weights="quadratic", unparsed="wrong")
    with pytest.raises(ValueError, match="not in labels"):
        cohen_kappa(a, b, weights="linear", labels=("A", "B"))


def test_kappa_wrong_policy_adds_a_disagreeing_category() -> None:
    a = ["A", "B", None, "A"]
    b = ["A", "B", "A", "B"]
    r = cohen_kappa(a, b, unparsed="wrong")
    expected = cohen_kappa_score(["A", "B", "A", "B"], ["A", "B", "<failed>", "A"])
    assert r.value == pytest.approx(expected)


def test_pointwise_scores_kappa_and_expected_scores() -> None:
    preds = [score(1, 1.2), score(3, 2.9), score(None), score(5, 4.4), score(4, 4.1)]
    gold = [1, 3, 4, 4, 4]
    r = cohen_kappa(preds, gold, weights="quadratic")
    expected = cohen_kappa_score([1, 3, 4, 4], [1, 3, 5, 4], weights="quadratic", labels=[1, 3, 4, 5])
    assert r.value == pytest.approx(expected)
    p = pearson(preds, gold, score_field="expected_score")
    assert p.value == pytest.approx(stats.pearsonr([1.2, 2.9, 4.4, 4.1], [1, 3, 4, 4]).statistic)


def test_krippendorff_alpha_matches_package_with_missing() -> None:
    r1 = ["A", "B", "B", None, "A", "tie"]
    r2 = ["A", "B", "A", "B", "A", "tie"]
    r3 = ["A", None, "A", "B", "A", "B"]
    code = {"A": 0.0, "B": 1.0, "tie": 2.0, None: np.nan}
    data = np.array([[code[x] for x in r] for r in (r1, r2, r3)])
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    got = krippendorff_alpha([r1, r2, r3])
    assert got.value == pytest.approx(expected)
    assert got.counts.total == 18 and got.counts.unparsed == 2 and got.counts.used == 16
    with pytest.raises(ValueError, match="reference"):
        krippendorff_alpha([r1, r2], unparsed="wrong")


def test_krippendorff_interval_on_scores() -> None:
    a = [score(1), score(2), score(4), score(5)]
    b = [1, 3, 4, 5]
    expected = krippendorff.alpha(
        reliability_data=np.array([[1, 2, 4, 5], [1, 3, 4, 5]], float), level_of_measurement="interval"
    )
    assert krippendorff_alpha([a, b], level="interval").value == pytest.approx(expected)
    with pytest.raises(ValueError, match="numeric"):
        krippendorff_alpha([["A", "B"], ["A", "A"]], level="interval")


def test_classification_scores_match_sklearn() -> None:
    rng = random.Random(1)
    gold = [rng.choice([0, 1, 2]) for _ in range(300)]
    pred = [g if rng.random() < 0.6 else rng.choice([0, 1, 2]) for g in gold]
    p, r, f, _ = precision_recall_fscore_support(gold, pred, average="macro", zero_division=0)
    c = classification_scores(pred, gold)
    assert (c.precision, c.recall, c.f1) == pytest.approx((p, r, f))
    assert c.labels == ["0", "1", "2"]
    assert sum(s.support for s in c.per_label.values()) == 300


def test_wrong_policy_lowers_recall_not_precision() -> None:
    gold = ["A", "B", "A", "B", "tie", "A", "B", "A"]
    pred: list[Any] = ["A", "B", None, "A", "tie", None, "B", "A"]
    excl = classification_scores(pred, gold, unparsed="exclude")
    wrong = classification_scores(pred, gold, unparsed="wrong")
    for label in ("A", "B", "tie"):
        assert wrong.per_label[label].precision == pytest.approx(excl.per_label[label].precision)
    assert wrong.per_label["A"].recall < excl.per_label["A"].recall
    assert wrong.per_label["A"].support == 4 and excl.per_label["A"].support == 2


# ----------------------------------------------------------- correlations


def test_correlations_match_scipy() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=60)
    y = x + rng.normal(size=60)
    c = correlations(list(x), list(y))
    assert c.pearson.value == pytest.approx(stats.pearsonr(x, y).statistic)
    assert c.spearman.value == pytest.approx(stats.spearmanr(x, y).statistic)
    assert c.kendall.value == pytest.approx(stats.kendalltau(x, y).statistic)
    assert c.kendall.p_value == pytest.approx(stats.kendalltau(x, y).pvalue)
    assert spearman(list(x), list(y)).value == c.spearman.value
    assert kendall(list(x), list(y), kendall_variant="c").value == pytest.approx(
        stats.kendalltau(x, y, variant="c").statistic
    )


def test_group_and_system_levels() -> None:
    rng = np.random.default_rng(3)
    groups = [g for g in range(8) for _ in range(5)]
    x = rng.normal(size=40)
    y = x + rng.normal(size=40) + np.array(groups) * 0.3
    per_group = [stats.spearmanr(x[i * 5 : i * 5 + 5], y[i * 5 : i * 5 + 5]).statistic for i in range(8)]
    got = correlation(list(x), list(y), method="spearman", level="group", groups=groups)
    assert got.value == pytest.approx(np.mean(per_group)) and got.n_groups == 8
    mx = [x[i * 5 : i * 5 + 5].mean() for i in range(8)]
    my = [y[i * 5 : i * 5 + 5].mean() for i in range(8)]
    sys_ = correlation(list(x), list(y), method="pearson", level="system", groups=groups)
    assert sys_.value == pytest.approx(stats.pearsonr(mx, my).statistic) and sys_.n == 8
    with pytest.raises(ValueError, match="groups"):
        correlation(list(x), list(y), level="system")


def test_correlation_policies() -> None:
    pred: list[Any] = [1.0, 2.0, None, 4.0, 5.0]
    ref = [1.0, 2.5, 3.0, 3.5, 5.0]
    excl = pearson(pred, ref)
    assert excl.value == pytest.approx(stats.pearsonr([1, 2, 4, 5], [1, 2.5, 3.5, 5]).statistic)
    assert excl.counts.unparsed == 1 and excl.n == 4
    filled = pearson(pred, ref, unparsed="tie", fill=3.0)
    assert filled.value == pytest.approx(stats.pearsonr([1, 2, 3, 4, 5], ref).statistic)
    with pytest.raises(ValueError, match="fill"):
        pearson(pred, ref, unparsed="tie")
    with pytest.raises(ValueError, match="wrong"):
        pearson(pred, ref, unparsed="wrong")
    assert pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).value is None  # constant input: undefined


def test_group_level_drops_failed_items_from_their_group() -> None:
    pred: list[Any] = [1.0, 2.0, 3.0, None, 1.0, 3.0, 2.0]
    ref = [1.0, 2.0, 3.5, 9.0, 3.0, 1.0, 2.0]
    groups = ["a", "a", "a", "a", "b", "b", "b"]
    got = correlation(pred, ref, method="pearson", level="group", groups=groups)
    ga = stats.pearsonr([1, 2, 3], [1, 2, 3.5]).statistic
    gb = stats.pearsonr([1, 3, 2], [3, 1, 2]).statistic
    assert got.value == pytest.approx((ga + gb) / 2)
