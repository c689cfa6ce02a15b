"""One call that computes every applicable meta-evaluation figure into a JSON-ready report."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

from pydantic import Field

from judgegraph.types import FrozenModel

from ..types import PairwiseVerdict, PointwiseScore
from ._agreement import (
    ClassificationResult,
    accuracy,
    agreement,
    classification_scores,
    cohen_kappa,
    krippendorff_alpha,
)
from ._bias import (
    LengthBiasResult,
    PositionResult,
    SwapAccuracyResult,
    length_bias,
    length_correlation,
    position_consistency,
    split_orders,
    swap_accuracy,
)
from ._breakdown import Breakdown, breakdown
from ._calibration import CalibrationResult, calibration
from ._correlation import CorrelationResult, Correlations, correlation, correlations
from ._inputs import (
    UNPARSED_POLICIES,
    Failure,
    Interval,
    MetricResult,
    ScoreField,
    UnparsedPolicy,
    check_policy,
    extract,
)

__all__ = ["MetaEvalReport", "PolicyFigures", "summarize"]

Kind = Literal["pairwise", "pointwise", "labels"]


class PolicyFigures(FrozenModel):
    """Headline figures under one unparsed policy (for the policy-sensitivity table)."""

    accuracy: float | None
    precision: float | None
    recall: float | None
    f1: float | None
    used: int


class MetaEvalReport(FrozenModel):
    """Everything ``summarize`` could compute; sections that do not apply are None.

    Metrics that cannot take ``unparsed="wrong"`` (correlations, weighted kappa, alpha,
    length bias) are computed under ``exclude`` instead, and their ``counts.policy`` says so.
    """

    schema_version: int = 1
    name: str | None = None
    kind: Kind
    unparsed_policy: UnparsedPolicy
    n_items: int
    n_unparsed: int
    n_error: int
    accuracy: MetricResult
    agreement_without_ties: MetricResult | None = None
    cohen_kappa: MetricResult | None = None
    weighted_kappa: MetricResult | None = None
    krippendorff_alpha: MetricResult | None = None
    classification: ClassificationResult | None = None
    by_policy: dict[str, PolicyFigures] = Field(default_factory=dict)
    correlations: Correlations | None = None
    position: PositionResult | None = None
    swap: SwapAccuracyResult | None = None
    length: LengthBiasResult | None = None
    length_correlation: CorrelationResult | None = None
    calibration: CalibrationResult | None = None
    breakdown: Breakdown | None = None

    def to_markdown(self) -> str:
        """A compact human-readable rendering (the report generator may do its own)."""
        return _markdown(self)


def _infer_kind(predictions: Sequence[Any]) -> Kind:
    if any(isinstance(p, PairwiseVerdict) for p in predictions):
        return "pairwise"
    if any(isinstance(p, PointwiseScore) for p in predictions):
        return "pointwise"
    return "labels"


def _fallback(policy: UnparsedPolicy) -> UnparsedPolicy:
    return "exclude" if policy == "wrong" else policy


def summarize(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    name: str | None = None,
    kind: Kind | None = None,
    unparsed: UnparsedPolicy = "exclude",
    tie_label: Any = "tie",
    a_label: Any = "A",
    b_label: Any = "B",
    labels: Sequence[Any] | None = None,
    second: Sequence[Any] | None = None,
    categories: Sequence[Any] | None = None,
    lengths_a: Sequence[Any] | None = None,
    lengths_b: Sequence[Any] | None = None,
    confidences: Sequence[float | None] | None = None,
    n_bins: int = 10,
    score_field: ScoreField = "score",
) -> MetaEvalReport:
    """Meta-evaluate a judge against references in one call.

    ``kind`` defaults from the items (PairwiseVerdict → pairwise, PointwiseScore →
    pointwise, else plain labels; pass ``kind="pointwise"`` for plain numbers).
    Pairwise: accuracy, agreement without ties, kappa, alpha, macro P/R/F1 under the
    chosen and every other unparsed policy, position consistency (from verdicts that carry
    both ``orders`` or from ``second``), length bias (``lengths_a``/``lengths_b``),
    calibration (from ``confidence``), per-category accuracy (``categories``).
    Pointwise: exact agreement, kappa and quadratic weighted kappa, interval alpha,
    Pearson / Spearman / Kendall, length correlation (``lengths_a``), calibration is not
    computed, per-category Spearman. For pointwise, ``unparsed="tie"`` uses ``tie_label``
    as the fill score and so needs it numeric. ``a_label``/``b_label``/``tie_label`` name the
    pairwise outcomes when plain labels are used (e.g. 1, 2, 0 for PandaLM's codes).
    """
    policy = check_policy(unparsed)
    kind = kind or _infer_kind(predictions)
    if len(predictions) != len(references):
        raise ValueError(f"length mismatch: {len(predictions)} predictions but {len(references)} references")
    acc = accuracy(predictions, references, unparsed=policy, tie_label=tie_label, score_field=score_field)
    report: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "unparsed_policy": policy,
        "n_items": len(predictions),
        "n_unparsed": acc.counts.unparsed,
        "n_error": acc.counts.error,
        "accuracy": acc,
    }
    soft = _fallback(policy)
    if kind == "pointwise":
        fill: float | None = None
        if soft == "tie":
            if isinstance(tie_label, bool) or not isinstance(tie_label, int | float):
                raise ValueError('pointwise summarize with unparsed="tie" needs a numeric tie_label (the fill score)')
            fill = float(tie_label)
        report["correlations"] = correlations(
            predictions, references, unparsed=soft, fill=fill, score_field=score_field
        )
        values = [extract(v, score_field=score_field) for v in [*predictions, *references]]
        if all(isinstance(v, Failure) or float(v).is_integer() for v in values):
            report["cohen_kappa"] = cohen_kappa(
                predictions, references, unparsed=policy, tie_label=tie_label, score_field=score_field
            )
            report["weighted_kappa"] = cohen_kappa(
                predictions,
                references,
                weights="quadratic",
                unparsed=soft,
                tie_label=tie_label,
                score_field=score_field,
            )
        report["krippendorff_alpha"] = krippendorff_alpha(
            [predictions, references], level="interval", unparsed=soft, tie_label=tie_label, score_field=score_field
        )
        if lengths_a is not None:
            report["length_correlation"] = length_correlation(predictions, lengths_a, unparsed=soft, fill=fill)
        if categories is not None:
            report["breakdown"] = breakdown(
                predictions,
                references,
                categories,
                metric=partial(correlation, method="spearman", unparsed=soft, fill=fill, score_field=score_field),
                min_items=3,
            )
        return MetaEvalReport(**report)

    report["cohen_kappa"] = cohen_kappa(predictions, references, labels=labels, unparsed=policy, tie_label=tie_label)
    report["agreement_without_ties"] = agreement(
        predictions, references, include_ties=False, unparsed=policy, tie_label=tie_label
    )
    report["krippendorff_alpha"] = krippendorff_alpha(
        [predictions, references], level="nominal", labels=labels, unparsed=soft, tie_label=tie_label
    )
    report["classification"] = classification_scores(
        predictions, references, labels=labels, unparsed=policy, tie_label=tie_label
    )
    by_policy: dict[str, PolicyFigures] = {}
    for p in UNPARSED_POLICIES:
        c = classification_scores(predictions, references, labels=labels, unparsed=p, tie_label=tie_label)
        by_policy[p] = PolicyFigures(
            accuracy=c.accuracy, precision=c.precision, recall=c.recall, f1=c.f1, used=c.counts.used
        )
    report["by_policy"] = by_policy
    if kind == "pairwise":
        orders: tuple[Sequence[Any], Sequence[Any]] | None = None
        if second is not None:
            orders = (predictions, second)
        elif predictions and all(isinstance(v, PairwiseVerdict) and len(v.orders) == 2 for v in predictions):
            orders = split_orders(predictions)
        if orders is not None:
            names = {"unparsed": policy, "a_label": a_label, "b_label": b_label, "tie_label": tie_label}
            report["position"] = position_consistency(orders[0], orders[1], **names)
            report["swap"] = swap_accuracy(orders[0], references, second=orders[1], **names)
        if lengths_a is not None and lengths_b is not None:
            report["length"] = length_bias(
                predictions,
                lengths_a,
                lengths_b,
                references=references,
                unparsed=soft,
                a_label=a_label,
                b_label=b_label,
                tie_label=tie_label,
            )
    has_conf = confidences is not None or any(getattr(v, "confidence", None) is not None for v in predictions)
    if has_conf:
        report["calibration"] = calibration(
            predictions, references, confidences=confidences, n_bins=n_bins, unparsed=policy, tie_label=tie_label
        )
    if categories is not None:
        report["breakdown"] = breakdown(
            predictions, references, categories, metric=partial(accuracy, unparsed=policy, tie_label=tie_label)
        )
    return MetaEvalReport(**report)


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:.2f}%" if pct else f"{x:.4f}"


def _band(ci: Interval | None, pct: bool) -> str:
    """An interval as the tables show it: ``low – high`` in the figure's own format."""
    return f"{_fmt(ci.low, pct)} – {_fmt(ci.high, pct)}" if ci is not None else ""


def _markdown(r: MetaEvalReport) -> str:
    lines = [f"## Meta-evaluation{': ' + r.name if r.name else ''}", ""]
    lines.append(
        f"{r.kind}, {r.n_items} items, {r.n_unparsed} unparsed, {r.n_error} errors; "
        f"unparsed policy: `{r.unparsed_policy}`"
    )
    lines += ["", "| metric | value | 95% interval | items used |", "|---|---|---|---|"]
    methods: set[str] = set()  # every interval the table shows: its level and method, said once below

    def figure(label: str, value: float | None, ci: Interval | None, used: int, pct: bool = False) -> None:
        if ci is not None:
            methods.add(ci.describe())
        lines.append(f"| {label} | {_fmt(value, pct)} | {_band(ci, pct)} | {used} |")

    def row(label: str, m: MetricResult | CorrelationResult | None, pct: bool = False) -> None:
        if m is not None:
            figure(label, m.value, getattr(m, "interval", None), m.counts.used, pct)

    row("accuracy", r.accuracy, pct=True)
    row("agreement without ties", r.agreement_without_ties, pct=True)
    row("Cohen's kappa", r.cohen_kappa)
    row("weighted kappa (quadratic)", r.weighted_kappa)
    row("Krippendorff's alpha", r.krippendorff_alpha)
    if r.classification is not None:
        c = r.classification
        lines.append(f"| macro precision | {_fmt(c.precision, True)} |  | {c.counts.used} |")
        lines.append(f"| macro recall | {_fmt(c.recall, True)} |  | {c.counts.used} |")
        lines.append(f"| macro F1 | {_fmt(c.f1, True)} |  | {c.counts.used} |")
    if r.correlations is not None:
        row("Pearson", r.correlations.pearson)
        row("Spearman", r.correlations.spearman)
        row("Kendall", r.correlations.kendall)
    row("length correlation (Spearman)", r.length_correlation)
    if r.swap is not None:
        sw = r.swap
        row("accuracy, first order", sw.first_order, pct=True)
        row("accuracy, second order", sw.second_order, pct=True)
        figure("accuracy, mean of the two orders", sw.average, sw.average_interval, sw.first_order.counts.used, True)
        row("accuracy in both orders", sw.both, pct=True)
    if r.position is not None:
        pos = r.position
        figure("position consistency", pos.consistency, pos.consistency_interval, pos.counts.used, pct=True)
        figure(
            "position bias (first-shown − second-shown)",
            pos.position_bias,
            pos.position_bias_interval,
            pos.counts.used,
            pct=True,
        )
    if r.calibration is not None and r.calibration.auroc is not None:
        row("AUROC of confidence (correct vs wrong)", r.calibration.auroc)
    if methods:  # the level and method, said once for the table
        lines += ["", f"Intervals: {'; '.join(sorted(methods))}."]
    if r.by_policy:
        lines += [
            "",
            "| unparsed policy | accuracy | macro P | macro R | macro F1 | items used |",
            "|---|---|---|---|---|---|",
        ]
        for policy, f in r.by_policy.items():
            lines.append(
                f"| {policy} | {_fmt(f.accuracy, True)} | {_fmt(f.precision, True)} | {_fmt(f.recall, True)} "
                f"| {_fmt(f.f1, True)} | {f.used} |"
            )
    if r.position is not None:
        pos = r.position
        lines += [
            "",
            f"Position: first-shown answer won both orders "
            f"{pos.n_prefer_first_position}×, second-shown {pos.n_prefer_second_position}×; "
            f"first-slot win rate {_fmt(pos.first_slot_win_rate, True)} of {pos.n_decisive_verdicts} verdicts.",
        ]
    if r.length is not None:
        ln = r.length
        lines += [
            "",
            f"Longer answer wins {_fmt(ln.longer_win_rate, True)} of {ln.n} decisive verdicts "
            f"(references: {_fmt(ln.reference_longer_win_rate, True)}; binomial p = {_fmt(ln.p_value)}).",
        ]
    if r.calibration is not None:
        cal = r.calibration
        lines += [
            "",
            f"Calibration: ECE {_fmt(cal.ece)}, MCE {_fmt(cal.mce)}, Brier {_fmt(cal.brier)} "
            f"over {cal.counts.used} items ({cal.n_without_confidence} without confidence).",
        ]
    if r.breakdown is not None and r.breakdown.by_category:
        lines += ["", f"| category | {r.breakdown.metric} | items used |", "|---|---|---|"]
        for key, m in r.breakdown.by_category.items():
            value = m.value if isinstance(m, MetricResult | CorrelationResult) else m.accuracy
            used = m.counts.used
            lines.append(f"| {key} | {_fmt(value)} | {used} |")
    return "\n".join(lines) + "\n"
