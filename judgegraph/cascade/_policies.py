"""Escalation policies: when a cascade tier hands an item up.

They are small pydantic models, so a policy chosen by the planner or by
calibration can be stored, printed and reloaded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Literal, TypeAlias

from pydantic import Field

from judgegraph.judges import Result
from judgegraph.types import FrozenModel, PairwiseVerdict

__all__ = [
    "Abstain",
    "Budget",
    "EscalationPolicy",
    "LowConfidence",
    "ScoreMargin",
    "SwapInconsistency",
    "certainty",
    "decide_tier",
    "score_margin",
]


def certainty(result: Result, measure: Literal["probability", "entropy"] = "probability") -> float | None:
    """How sure a result is, in [0, 1]; None when the judge did not say.

    ``probability`` is the result's own ``confidence`` (token probability of
    the verdict, swap agreement, or jury agreement). ``entropy`` is
    1 - H(distribution) / log(K) over the K outcomes the distribution names.
    """
    if measure == "probability":
        return result.confidence
    dist = result.distribution
    if not dist or len(dist) < 2:
        return None
    total = sum(dist.values())
    if total <= 0:
        return None
    h = -sum((p / total) * math.log(p / total) for p in dist.values() if p > 0)
    return max(0.0, 1.0 - h / math.log(len(dist)))


def score_margin(result: Result) -> float | None:
    """|score_a - score_b| for a pairwise verdict; the gap between the two
    most likely scores for a pointwise one. None when not available."""
    if isinstance(result, PairwiseVerdict):
        if result.score_a is None or result.score_b is None:
            return None
        return abs(result.score_a - result.score_b)
    if not result.distribution or len(result.distribution) < 2:
        return None
    top = sorted(result.distribution.values(), reverse=True)
    return top[0] - top[1]


class LowConfidence(FrozenModel):
    """Escalate when certainty is below ``threshold`` (missing certainty escalates too)."""

    kind: Literal["low_confidence"] = "low_confidence"
    threshold: float = Field(ge=0, le=1)
    measure: Literal["probability", "entropy"] = "probability"

    def check(self, r: Result) -> tuple[bool, str]:
        c = certainty(r, self.measure)
        what = "confidence" if self.measure == "probability" else "certainty (1 - normalised entropy)"
        if c is None:
            return True, f"no {what} to compare with {self.threshold:g}"
        if c < self.threshold:
            return True, f"{what} {c:.3g} < {self.threshold:g}"
        return False, f"{what} {c:.3g} >= {self.threshold:g}"


class SwapInconsistency(FrozenModel):
    """Escalate pairwise verdicts whose two answer orders disagree."""

    kind: Literal["swap_inconsistency"] = "swap_inconsistency"

    def check(self, r: Result) -> tuple[bool, str]:
        if not isinstance(r, PairwiseVerdict):
            return True, "not a pairwise verdict: swap consistency unknown"
        if len(r.orders) < 2 and not r.inconsistent:
            return True, "judged in one order only: swap consistency unknown"
        if r.inconsistent:
            return True, "the two answer orders disagree"
        return False, "both answer orders agree"


class ScoreMargin(FrozenModel):
    """Escalate when the score margin (see :func:`score_margin`) is below ``min_margin``."""

    kind: Literal["score_margin"] = "score_margin"
    min_margin: float = Field(ge=0)

    def check(self, r: Result) -> tuple[bool, str]:
        m = score_margin(r)
        if m is None:
            return True, f"no score margin to compare with {self.min_margin:g}"
        if m < self.min_margin:
            return True, f"score margin {m:.3g} < {self.min_margin:g}"
        return False, f"score margin {m:.3g} >= {self.min_margin:g}"


class Budget(FrozenModel):
    """Escalate the ``fraction`` least sure items of each batch that reaches the tier.

    It needs a batch (``ajudge_many`` or a batch node). The count is
    ``floor(fraction * batch size)``, so it never exceeds the budget; equally
    sure items are taken in input order. Failed items always escalate and
    use up the budget first; only when they alone exceed it does the tier
    send more than ``fraction``.
    """

    kind: Literal["budget"] = "budget"
    fraction: float = Field(ge=0, le=1)
    rank_by: Literal["confidence", "entropy", "margin"] = "confidence"

    def key(self, r: Result) -> float:
        if self.rank_by == "margin":
            v = score_margin(r)
        else:
            v = certainty(r, "probability" if self.rank_by == "confidence" else "entropy")
        return -math.inf if v is None else v


class Abstain(FrozenModel):
    """Escalate everything: the tier is not trusted on its own (e.g. no calibrated threshold qualified)."""

    kind: Literal["abstain"] = "abstain"
    reason: str = "the tier abstains"

    def check(self, r: Result) -> tuple[bool, str]:
        return True, self.reason


EscalationPolicy: TypeAlias = Annotated[
    LowConfidence | SwapInconsistency | ScoreMargin | Budget | Abstain, Field(discriminator="kind")
]
_ItemPolicy: TypeAlias = LowConfidence | SwapInconsistency | ScoreMargin | Abstain


def decide_tier(answers: Sequence[Result | str], policies: Sequence[EscalationPolicy]) -> list[tuple[bool, str]]:
    """(escalate?, why) for each answer of one tier's batch.

    A failed answer (a result that is not ok, or the text of a crash) always
    escalates. Otherwise an item escalates when any policy fires.
    """
    out: list[tuple[bool, list[str], list[str]]] = []
    for a in answers:
        if isinstance(a, str):
            out.append((True, [f"failed: {a}"], []))
        elif not a.ok:
            out.append((True, [f"failed ({a.status.value}): {a.reason}"], []))
        else:
            fired: list[str] = []
            kept: list[str] = []
            for p in policies:
                if isinstance(p, Budget):
                    continue
                hit, why = p.check(a)
                (fired if hit else kept).append(why)
            out.append((bool(fired), fired, kept))
    for p in policies:
        if not isinstance(p, Budget):
            continue
        ok = {i: a for i, a in enumerate(answers) if not isinstance(a, str) and a.ok}
        ok_idx = list(ok)
        failed = len(answers) - len(ok_idx)
        take = max(0, math.floor(p.fraction * len(answers) + 1e-9) - failed)
        ranked = sorted(ok_idx, key=lambda i: (p.key(ok[i]), i))
        rank = {i: failed + r + 1 for r, i in enumerate(ranked)}  # failed items rank first
        chosen = set(ranked[:take])
        pct = f"{p.fraction:.0%}"
        for i in ok_idx:
            esc, fired, kept = out[i]
            where = f"rank {rank[i]} of {len(answers)} by {p.rank_by}"
            if i in chosen:
                out[i] = (True, [*fired, f"among the {pct} least sure of the batch ({where})"], kept)
            else:
                out[i] = (esc, fired, [*kept, f"outside the {pct} least sure of the batch ({where})"])
    return [(esc, "; ".join(fired) if esc else ("; ".join(kept) or "no escalation rule")) for esc, fired, kept in out]
