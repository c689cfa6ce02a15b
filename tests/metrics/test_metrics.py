"""judgegraph.metrics on small inputs, checked against direct scipy / scikit-learn / krippendorff
calls or against counts worked out in the test itself."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, cohen_kappa_score, precision_recall_fscore_support

from judgegraph.metrics import (
    MetaEvalReport,
    MetricResult,
    UnparsedPolicy,
    accuracy,
    agreement,
    breakdown,
    calibration,
    classification_scores,
    cohen_kappa,
    correlation,
    correlations,
    expected_calibration_error,
    kendall,
    krippendorff_alpha,
    length_bias,
    length_correlation,
    pearson,
    position_consistency,
    reliability_curve,
    spearman,
    split_orders,
    summarize,
    swap_accuracy,
)
from judgegraph.types import PairwiseVerdict, PointwiseScore, Status


def ok(winner: str, confidence: float | None = None, orders: tuple[PairwiseVerdict, ...] = ()) -> PairwiseVerdict:
    return PairwiseVerdict(status=Status.OK, winner=winner, confidence=confidence, orders=orders)  # type: ignore[arg-type]


UNPARSED = PairwiseVerdict(status=Status.UNPARSED, reason="no verdict", raw_text="hmm")
ERROR = PairwiseVerdict(status=Status.ERROR, reason="timeout")


def score(value: int | None, expected: float | None = None) -> PointwiseScore:
    if value is None:
        return PointwiseScore(status=Status.UNPARSED, scale=(1, 5), reason="no score")
    return PointwiseScore(status=Status.OK, score=value, scale=(1, 5), expected_score=expected)


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


# ----------------------------------------------------------- position / swap / length


def two_orders(first: str | None, second: str | None) -> PairwiseVerdict:
    o1 = UNPARSED if first is None else ok(first)
    o2 = UNPARSED if second is None else ok(second)
    if first is None or second is None:
        return PairwiseVerdict(status=Status.UNPARSED, reason="an order failed", orders=(o1, o2))
    winner = first if first == second else "tie"
    return ok(winner, orders=(o1, o2))


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


# ----------------------------------------------------------- breakdown and summary


def test_breakdown_is_metric_on_each_subset() -> None:
    preds = ["A", "B", "A", "tie", "B", "A"]
    gold = ["A", "A", "A", "tie", "B", "B"]
    cats = ["x", "x", "y", "y", "y", "z"]
    b = breakdown(preds, gold, cats, min_items=2)
    assert b.metric == "accuracy"
    x, y, overall = b.by_category["x"], b.by_category["y"], b.overall
    assert isinstance(x, MetricResult) and isinstance(y, MetricResult) and isinstance(overall, MetricResult)
    assert x.value == pytest.approx(accuracy(preds[:2], gold[:2]).value)
    assert y.value == pytest.approx(1.0)
    assert b.too_small == {"z": 1}
    assert overall.value == pytest.approx(4 / 6)
    k = breakdown(preds, gold, cats, metric=cohen_kappa)
    assert set(k.by_category) == {"x", "y", "z"}


def test_summarize_pairwise_report_round_trips() -> None:
    rng = random.Random(5)
    verdicts: list[PairwiseVerdict] = []
    gold: list[str] = []
    for _ in range(80):
        g = rng.choice(["A", "B", "tie"])
        f = g if rng.random() < 0.7 else rng.choice(["A", "B", "tie"])
        s = f if rng.random() < 0.8 else rng.choice(["A", "B"])
        v = two_orders(f, s) if rng.random() > 0.05 else two_orders(None, s)
        if v.ok:
            v = v.model_copy(update={"confidence": rng.uniform(0.4, 1.0)})
        verdicts.append(v)
        gold.append(g)
    cats = [rng.choice(["math", "code"]) for _ in gold]
    lens_a = [rng.randint(5, 50) for _ in gold]
    lens_b = [rng.randint(5, 50) for _ in gold]
    rep = summarize(verdicts, gold, name="toy", unparsed="wrong", categories=cats, lengths_a=lens_a, lengths_b=lens_b)
    assert rep.kind == "pairwise"
    assert rep.n_unparsed == sum(not v.ok for v in verdicts)
    assert rep.accuracy.value == accuracy(verdicts, gold, unparsed="wrong").value
    for policy in ("exclude", "wrong", "tie"):
        c = classification_scores(verdicts, gold, unparsed=policy)
        assert rep.by_policy[policy].f1 == c.f1 and rep.by_policy[policy].used == c.counts.used
    assert rep.position is not None and rep.swap is not None
    assert rep.position.counts.total == 80
    assert rep.length is not None and rep.length.counts.policy == "exclude"  # "wrong" falls back, visibly
    assert rep.calibration is not None and rep.calibration.n_without_confidence > 0
    assert rep.breakdown is not None and set(rep.breakdown.by_category) == {"code", "math"}
    text = rep.model_dump_json()
    assert MetaEvalReport.model_validate_json(text) == rep
    json.loads(text)
    md = rep.to_markdown()
    assert "unparsed policy: `wrong`" in md and "| tie |" in md


def test_summarize_pointwise() -> None:
    rng = random.Random(6)
    gold = [rng.randint(1, 5) for _ in range(50)]
    preds = [score(min(5, max(1, g + rng.choice([-1, 0, 0, 1])))) for g in gold]
    preds[3] = score(None)
    rep = summarize(preds, gold, lengths_a=[rng.randint(1, 99) for _ in gold])
    assert rep.kind == "pointwise" and rep.n_unparsed == 1
    assert rep.correlations is not None and rep.weighted_kappa is not None
    assert rep.correlations.spearman.value == spearman(preds, gold).value
    assert rep.length_correlation is not None and rep.classification is None
    with pytest.raises(ValueError, match="numeric tie_label"):
        summarize(preds, gold, unparsed="tie")
    assert summarize(preds, gold, unparsed="tie", tie_label=3).correlations is not None


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


@pytest.mark.parametrize("policy", ["exclude", "wrong", "tie"])
@pytest.mark.parametrize(
    ("preds", "refs", "kind"),
    [
        ([], [], "pairwise"),
        (["A"], ["A"], "pairwise"),
        ([Status.UNPARSED, Status.ERROR], ["A", "B"], "pairwise"),
        (["A"] * 5, ["A"] * 5, "pairwise"),
        ([3], [3], "pointwise"),
        ([3, 3, 3], [1, 2, 3], "pointwise"),
        ([Status.UNPARSED] * 3, [1, 2, 3], "pointwise"),
    ],
)
def test_degenerate_inputs_give_undefined_not_errors(
    preds: list[Any], refs: list[Any], kind: Any, policy: UnparsedPolicy
) -> None:
    import warnings

    n = len(preds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = summarize(
            preds,
            refs,
            kind=kind,
            unparsed=policy,
            tie_label="tie" if kind == "pairwise" else 3,
            categories=["x"] * n,
            confidences=[0.5] * n,
            lengths_a=[1] * n,
            lengths_b=[2] * n,
        )
    assert rep.n_items == n
    assert rep.n_unparsed + rep.n_error == sum(isinstance(p, Status) for p in preds)
    if rep.cohen_kappa is not None and len(set(map(str, preds + refs))) < 2:
        assert rep.cohen_kappa.value is None
    MetaEvalReport.model_validate_json(rep.model_dump_json())
