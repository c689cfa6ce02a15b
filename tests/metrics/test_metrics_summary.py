"""Per-category breakdowns and the summarize() meta-evaluation report, pairwise and
pointwise, including degenerate inputs that must come out undefined, not raise."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from _metrics_verdicts import score, two_orders

from judgegraph.metrics import (
    MetaEvalReport,
    MetricResult,
    UnparsedPolicy,
    accuracy,
    breakdown,
    classification_scores,
    cohen_kappa,
    spearman,
    summarize,
)
from judgegraph.types import PairwiseVerdict, Status

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
