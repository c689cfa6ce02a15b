"""Escalation thresholds with a guarantee on human agreement.

Given a human-labelled calibration set, pick the lowest confidence threshold
at which, among the items a tier keeps (confidence >= threshold), the
disagreement risk with humans is at most alpha, with probability at least
1 - delta. This is fixed-sequence testing as in "Trust or Escalate"
(Jung et al., arXiv 2407.18370): thresholds are tested from the most to the
least conservative with an exact binomial test, and testing stops at the
first one that fails. If even the first fails, the tier abstains.

The guarantee assumes calibration and future items are exchangeable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from judgegraph.backends import MissingExtraError
from judgegraph.judges import Judge, Result
from judgegraph.types import FrozenModel, PairwiseVerdict, PointwiseScore, Winner

from ._cascade import Abstain, LowConfidence, Tier, certainty

__all__ = [
    "CalibrationStep",
    "CascadeCalibration",
    "Label",
    "ThresholdCalibration",
    "agreement_credit",
    "calibrate_cascade",
    "calibrate_threshold",
    "calibrate_tier",
    "calibrated_tiers",
    "matches_label",
]

Label = Winner | int
_PREF: dict[str, float] = {"A": 1.0, "tie": 0.5, "B": 0.0}


def _check_label(result: Result, label: Any, where: str) -> None:
    if isinstance(result, PairwiseVerdict):
        if label not in ("A", "B", "tie"):
            raise ValueError(f"{where}: a pairwise label must be 'A', 'B' or 'tie', got {label!r}")
    elif isinstance(label, bool) or not isinstance(label, int):
        raise ValueError(f"{where}: a pointwise label must be an integer score, got {label!r}")


def matches_label(result: Result, label: Label) -> bool:
    """Strict agreement: the verdict is exactly the human label. A failed result never matches."""
    if not result.ok:
        return False
    if isinstance(result, PairwiseVerdict):
        return result.winner == label
    return result.score == label


def agreement_credit(
    result: Result, label: Label, *, tie_credit: float = 0.5, missing_order: Literal["half", "zero"] = "half"
) -> float:
    """Credit for one verdict against a human label, in [0, 1].

    Exact agreement earns 1. For pairwise verdicts a tie against a
    preference (or a preference against a tie) earns ``tie_credit``: with
    0.5 a swap-inconsistent verdict (whose orders disagree, merged to a tie)
    scores like the mean of its two orders, which is LLMBar's "average
    accuracy". A failed result earns 0, except a pairwise result with
    exactly one readable order in ``orders``: with ``missing_order="half"``
    (LLMBar's convention: the unreadable order counts as wrong, the two are
    averaged) it earns half of what that order alone would. Pointwise scores
    earn only exact matches.
    """
    if not result.ok:
        orders = getattr(result, "orders", None) or ()
        readable = [o for o in orders if o.ok]
        if missing_order == "half" and isinstance(result, PairwiseVerdict) and len(orders) == 2 and len(readable) == 1:
            return 0.5 * agreement_credit(readable[0], label, tie_credit=tie_credit)
        return 0.0
    if isinstance(result, PairwiseVerdict):
        if result.winner == label:
            return 1.0
        if result.winner == "tie" or label == "tie":
            return tie_credit
        return 0.0
    return 1.0 if result.score == label else 0.0


class CalibrationStep(FrozenModel):
    """One threshold tested: how many items it keeps, how many of those
    disagree with humans, and the exact binomial test of risk <= alpha."""

    threshold: float
    kept: int
    errors: int
    p_value: float = Field(description="P(Binomial(kept, alpha) <= errors)")
    risk_upper_bound: float = Field(description="one-sided Clopper-Pearson bound at level 1 - delta")
    passed: bool


class ThresholdCalibration(FrozenModel):
    """The chosen threshold (None: the tier abstains) and the tests behind it."""

    alpha: float
    delta: float
    measure: Literal["probability", "entropy"] = "probability"
    n: int = Field(description="calibration items")
    threshold: float | None
    kept: int = Field(description="calibration items kept at the chosen threshold")
    errors: int
    risk_upper_bound: float | None
    too_few: int = Field(description="candidates skipped: they keep too few items to ever pass")
    steps: tuple[CalibrationStep, ...]

    @property
    def abstains(self) -> bool:
        return self.threshold is None

    @property
    def coverage(self) -> float:
        """Share of calibration items the tier keeps."""
        return self.kept / self.n if self.n else 0.0

    def policy(self) -> LowConfidence | Abstain:
        """The escalation policy this calibration implies for its tier."""
        if self.threshold is None:
            return Abstain(
                reason=f"no threshold keeps disagreement <= {self.alpha:g} with probability >= {1 - self.delta:g}"
            )
        return LowConfidence(threshold=self.threshold, measure=self.measure)


def _scipy() -> tuple[Any, Any, Any]:
    try:
        import numpy as np
        from scipy.stats import beta, binom
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise MissingExtraError("threshold calibration", "metrics") from exc
    return np, beta, binom


def _check_levels(alpha: float, delta: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")


def calibrate_threshold(
    confidences: Sequence[float | None],
    agrees: Sequence[bool],
    *,
    alpha: float,
    delta: float,
    candidates: Sequence[float] | None = None,
    measure: Literal["probability", "entropy"] = "probability",
    min_kept: int | None = None,
) -> ThresholdCalibration:
    """Choose a confidence threshold by fixed-sequence testing.

    ``confidences[i]`` is the tier's certainty on calibration item i (None:
    the tier failed or gave none, so it never keeps the item); ``agrees[i]``
    says whether its verdict matched the human label. Candidates default to
    the distinct confidences seen.

    Candidates that keep fewer than ``min_kept`` items are skipped rather
    than tested. By default that is the fewest items that could pass at all
    (even with no errors). Raising it avoids a common failure: the most
    conservative thresholds keep a handful of items, one error there fails
    the test and stops the sequence. The skip looks only at confidences,
    never at labels, so the guarantee stands.
    """
    _check_levels(alpha, delta)
    if len(confidences) != len(agrees):
        raise ValueError(f"confidences has {len(confidences)} items but agrees has {len(agrees)}")
    for i, c in enumerate(confidences):
        if c is not None and not math.isfinite(c):
            raise ValueError(f"confidences[{i}] is not a finite number: {c}")
    np, beta, binom = _scipy()
    conf = np.array([np.nan if c is None else float(c) for c in confidences], dtype=float)
    good = np.array([bool(a) for a in agrees], dtype=bool)
    seen = conf[~np.isnan(conf)]
    grid = sorted({float(x) for x in (candidates if candidates is not None else seen)}, reverse=True)
    # Smallest kept count at which zero errors could pass: (1 - alpha)^n <= delta.
    n_min = math.ceil(math.log(delta) / math.log(1 - alpha))
    if min_kept is not None:
        if min_kept < 1:
            raise ValueError(f"min_kept must be >= 1, got {min_kept}")
        n_min = max(n_min, min_kept)
    steps: list[CalibrationStep] = []
    too_few = 0
    chosen: CalibrationStep | None = None
    with np.errstate(invalid="ignore"):
        for lam in grid:
            kept_mask = conf >= lam
            kept = int(kept_mask.sum())
            if kept < n_min:
                too_few += 1
                continue
            errors = int((kept_mask & ~good).sum())
            p = float(binom.cdf(errors, kept, alpha))
            bound = 1.0 if errors >= kept else float(beta.ppf(1 - delta, errors + 1, kept - errors))
            step = CalibrationStep(
                threshold=lam, kept=kept, errors=errors, p_value=p, risk_upper_bound=bound, passed=p <= delta
            )
            steps.append(step)
            if not step.passed:
                break  # fixed sequence: the first failure ends testing
            chosen = step
    return ThresholdCalibration(
        alpha=alpha,
        delta=delta,
        measure=measure,
        n=len(confidences),
        threshold=chosen.threshold if chosen else None,
        kept=chosen.kept if chosen else 0,
        errors=chosen.errors if chosen else 0,
        risk_upper_bound=chosen.risk_upper_bound if chosen else None,
        too_few=too_few,
        steps=tuple(steps),
    )


def _confidences_and_agreement(
    results: Sequence[Result], labels: Sequence[Label], measure: Literal["probability", "entropy"]
) -> tuple[list[float | None], list[bool]]:
    if len(results) != len(labels):
        raise ValueError(f"results has {len(results)} items but labels has {len(labels)}")
    conf: list[float | None] = []
    agrees: list[bool] = []
    for i, (r, y) in enumerate(zip(results, labels, strict=True)):
        if not isinstance(r, PairwiseVerdict | PointwiseScore):
            raise TypeError(f"results[{i}] is a {type(r).__name__}, not a verdict or score")
        _check_label(r, y, f"labels[{i}]")
        conf.append(certainty(r, measure) if r.ok else None)
        agrees.append(matches_label(r, y))
    return conf, agrees


def calibrate_tier(
    results: Sequence[Result],
    labels: Sequence[Label],
    *,
    alpha: float,
    delta: float,
    measure: Literal["probability", "entropy"] = "probability",
    candidates: Sequence[float] | None = None,
    min_kept: int | None = None,
) -> ThresholdCalibration:
    """:func:`calibrate_threshold` from a tier's results on labelled items.
    Agreement is strict (a tie against a preference is a disagreement)."""
    conf, agrees = _confidences_and_agreement(results, labels, measure)
    return calibrate_threshold(
        conf, agrees, alpha=alpha, delta=delta, candidates=candidates, measure=measure, min_kept=min_kept
    )


class CascadeCalibration(FrozenModel):
    """One calibration per tier, cheapest first."""

    alpha: float
    delta: float
    tiers: tuple[ThresholdCalibration, ...]

    def policies(self) -> list[LowConfidence | Abstain]:
        return [t.policy() for t in self.tiers]


def calibrate_cascade(
    tier_results: Sequence[Sequence[Result]],
    labels: Sequence[Label],
    *,
    alpha: float,
    delta: float,
    measure: Literal["probability", "entropy"] = "probability",
    min_kept: int | None = None,
) -> CascadeCalibration:
    """Calibrate every tier of a cascade on one labelled set.

    ``tier_results[j][i]`` is tier j's result on item i (record every tier on
    every item, e.g. with replay). Tier j is calibrated on the items that
    the tiers before it did not keep. Each tier is tested at delta / (number
    of tiers), so by the union bound all tiers hold together with
    probability >= 1 - delta, and then so does the cascade's kept set as a
    whole (a mix of sets each with risk <= alpha).
    """
    _check_levels(alpha, delta)
    if not tier_results:
        raise ValueError("tier_results must not be empty")
    for j, rs in enumerate(tier_results):
        if len(rs) != len(labels):
            raise ValueError(f"tier_results[{j}] has {len(rs)} items but labels has {len(labels)}")
    per_tier = delta / len(tier_results)
    remaining = list(range(len(labels)))
    out: list[ThresholdCalibration] = []
    for rs in tier_results:
        sub = [rs[i] for i in remaining]
        cal = calibrate_tier(
            sub, [labels[i] for i in remaining], alpha=alpha, delta=per_tier, measure=measure, min_kept=min_kept
        )
        out.append(cal)
        if cal.threshold is not None:
            lam = cal.threshold
            remaining = [
                i for i in remaining if not (rs[i].ok and (c := certainty(rs[i], measure)) is not None and c >= lam)
            ]
    return CascadeCalibration(alpha=alpha, delta=delta, tiers=tuple(out))


def calibrated_tiers(judges: Sequence[Judge[Any, Any]], calibration: CascadeCalibration) -> list[Tier]:
    """Tiers for a :class:`CascadeJudge` with ``abstain=True`` from a calibration."""
    if len(judges) != len(calibration.tiers):
        raise ValueError(f"{len(judges)} judges for {len(calibration.tiers)} calibrated tiers")
    return [Tier(j, (p,)) for j, p in zip(judges, calibration.policies(), strict=True)]
