"""The pure rules: strict agreement, held-out evaluation at the calibrated threshold, champion/challenger promotion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judgegraph.cascade import ThresholdCalibration, calibrate_tier, certainty
from judgegraph.judges import JudgeInputError

from ..types import PairwiseVerdict, Winner
from ._records import FlywheelSettings, HeldoutEval, PromotionDecision

__all__ = ["as_verdict", "evaluate_on_heldout", "matches", "promotion_decision"]


def as_verdict(r: Any) -> PairwiseVerdict:
    """A judge's answer for one item as a verdict: a bad input raises its own error, anything else a TypeError."""
    if isinstance(r, JudgeInputError):
        raise r
    if not isinstance(r, PairwiseVerdict):
        raise TypeError(f"expected a PairwiseVerdict, got {type(r).__name__}")
    return r


def matches(r: PairwiseVerdict, label: Winner) -> bool:
    """Strict agreement, as calibration counts it: an ok verdict equal to the label."""
    return r.ok and r.winner == label


def evaluate_on_heldout(
    round_no: int,
    local: Sequence[PairwiseVerdict],
    teacher: Sequence[PairwiseVerdict],
    labels: Sequence[Winner],
    settings: FlywheelSettings,
    *,
    calibration: ThresholdCalibration | None = None,
) -> HeldoutEval:
    """Calibrate a local judge's threshold on the held-out set and measure it there.

    The threshold is the fixed-sequence calibrated one (``settings.alpha``,
    ``settings.delta``); items the local judge keeps at it are those with
    confidence >= threshold, as :class:`~judgegraph.cascade.LowConfidence` escalates
    the rest. Agreement is strict: a verdict counts only when it equals the label.
    A ``calibration`` made elsewhere (on cross-fitted traces) is applied as it
    is instead, and the held-out set only measures it.
    """
    if not (len(local) == len(teacher) == len(labels)):
        raise ValueError(f"{len(local)} local verdicts, {len(teacher)} teacher verdicts, {len(labels)} labels")
    if not labels:
        raise ValueError("the held-out set is empty")
    cal = calibration
    if cal is None:
        cal = calibrate_tier(
            list(local), list(labels), alpha=settings.alpha, delta=settings.delta, min_kept=settings.min_kept
        )
    kept = [_kept(r, cal.threshold) for r in local]
    n = len(labels)
    local_agree = sum(matches(r, y) for r, y in zip(local, labels, strict=True)) / n
    cascade_agree = sum(matches(r if k else t, y) for r, t, y, k in zip(local, teacher, labels, kept, strict=True)) / n
    pairs = [(r, t) for r, t, k in zip(local, teacher, kept, strict=True) if k and t.ok]
    # The equal-agreement point: keep the most confident items while the cascade
    # still agrees with the labels at least as often as the teacher alone.
    gain = [int(matches(r, y)) - int(matches(t, y)) for r, t, y in zip(local, teacher, labels, strict=True)]
    conf = [certainty(r) if r.ok else None for r in local]
    ranked = sorted((i for i in range(n) if conf[i] is not None), key=lambda i: -conf[i])  # type: ignore[operator]
    best = running = 0
    for pos, i in enumerate(ranked):
        running += gain[i]
        cut_here = pos + 1 == len(ranked) or conf[ranked[pos + 1]] != conf[i]  # a threshold cannot split ties
        if cut_here and running >= 0:
            best = pos + 1
    return HeldoutEval(
        round=round_no,
        n=n,
        local_agreement=local_agree,
        calibration=cal,
        calibrated_on="heldout" if calibration is None else "traces",
        escalation_share=1 - sum(kept) / n,
        cascade_agreement=cascade_agree,
        teacher_agreement_on_kept=(sum(r.winner == t.winner for r, t in pairs) / len(pairs)) if pairs else None,
        equal_agreement_escalation=1 - best / n,
    )


def _kept(r: PairwiseVerdict, threshold: float | None) -> bool:
    if threshold is None or not r.ok:
        return False
    c = certainty(r)
    return c is not None and c >= threshold


def promotion_decision(
    challenger: HeldoutEval | None,
    champion: HeldoutEval | None,
    *,
    tolerance: float,
    skipped: str | None = None,
    on: str = "agreement",
) -> PromotionDecision:
    """Champion/challenger: the challenger replaces the champion only if its
    held-out agreement is at least the champion's minus ``tolerance``
    (``on="escalation"``: only if it escalates no more of the held-out set at
    its calibrated threshold and its cascade agreement there is at least the
    champion's minus ``tolerance``). With no
    champion yet, a challenger is promoted (its calibrated threshold, possibly
    "escalate everything", is what protects agreement then)."""
    before = champion.round if champion is not None else None
    if challenger is None:
        why = skipped or "no challenger was trained"
        return PromotionDecision(
            promoted=False, reason=f"kept: {why}", champion_before=before, champion_after=before, tolerance=tolerance
        )
    if champion is None:
        return PromotionDecision(
            promoted=True,
            reason=f"promoted: no local judge in service yet (challenger agreement {challenger.local_agreement:.3f})",
            champion_before=None,
            champion_after=challenger.round,
            tolerance=tolerance,
        )
    tol = f" - {tolerance:g}" if tolerance else ""
    if on == "escalation":
        # Fewer (or as many) teacher calls at the calibrated threshold, without
        # losing cascade agreement on the held-out set.
        e_ch, e_cur = challenger.escalation_share, champion.escalation_share
        a_ch, a_cur = challenger.cascade_agreement, champion.cascade_agreement
        cheaper = e_ch <= e_cur + 1e-12
        holds = a_ch >= a_cur - tolerance - 1e-12
        promoted = cheaper and holds
        verb = "promoted" if promoted else "kept"
        reason = (
            f"{verb}: challenger escalates {e_ch:.3f} {'<=' if cheaper else '>'} champion (round {champion.round}) "
            f"{e_cur:.3f}, cascade agreement {a_ch:.3f} {'>=' if holds else '<'} {a_cur:.3f}{tol}"
        )
    else:
        ch, cur = challenger.local_agreement, champion.local_agreement
        promoted = ch >= cur - tolerance - 1e-12
        verb = "promoted" if promoted else "kept"
        rel = ">=" if promoted else "<"
        reason = f"{verb}: challenger agreement {ch:.3f} {rel} champion (round {champion.round}) {cur:.3f}{tol}"
    return PromotionDecision(
        promoted=promoted,
        reason=reason,
        champion_before=before,
        champion_after=challenger.round if promoted else before,
        tolerance=tolerance,
    )
