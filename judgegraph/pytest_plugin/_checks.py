"""Pure checks: k verdicts and a threshold in, a pass/fail with a message a
person can act on out. An unreadable verdict fails as unreadable, never as a score."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from judgegraph.types import PairwiseVerdict, Status

__all__ = ["Check", "Outcome", "check_not_worse", "check_scores", "clip", "score_of"]

Outcome = Literal["pass", "fail", "unreadable", "missing", "error"]
_PREFERENCE = {"A": 1.0, "tie": 0.5, "B": 0.0}
_SHOW = 300


@dataclass(frozen=True)
class Check:
    """One assertion's result: what the summary table and JUnit show."""

    outcome: Outcome
    value: float | None
    shown: str  # the score or winner as the table shows it
    threshold: str
    spread: str
    message: str = ""  # why it failed; empty when it passed
    verdicts: tuple[Any, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"


def score_of(verdict: Any) -> float | None:
    """The number a score assertion compares: a pointwise score, or a rubric's weighted score."""
    score = getattr(verdict, "score", None)
    if score is None:
        score = getattr(verdict, "weighted_score", None)
    return None if score is None else float(score)


def clip(text: str | None) -> str:
    if not text:
        return "(none)"
    text = " ".join(text.split())
    return text if len(text) <= _SHOW else text[: _SHOW - 1] + "…"


def _unreadable(verdicts: Sequence[Any], threshold: str) -> Check | None:
    bad = [(i, v) for i, v in enumerate(verdicts) if v.status is not Status.OK]
    if not bad:
        return None
    i, v = bad[0]
    message = (
        f"the judge's verdict could not be read: verdict {i + 1} of {len(verdicts)} has status "
        f"{v.status.value} ({len(bad)} of {len(verdicts)} unreadable).\n"
        f"  reason: {clip(v.reason)}\n"
        f"  raw text: {clip(v.raw_text)}\n"
        "This is not a score: check the judge's model, template and server, then rerun."
    )
    return Check("unreadable", None, v.status.value, threshold, "", message, tuple(verdicts))


def _spread(values: Sequence[float]) -> str:
    if len(values) < 2:
        return ""
    sd = statistics.stdev(values)
    return f"{min(values):g}..{max(values):g} sd {sd:.2f}"


def check_scores(
    verdicts: Sequence[Any], *, threshold: float, aggregate: Literal["mean", "majority"], what: str = ""
) -> Check:
    """Pass when the mean score reaches ``threshold`` (``mean``), or more than
    half of the verdicts do (``majority``)."""
    shown_threshold = f">= {threshold:g}"
    failed = _unreadable(verdicts, shown_threshold)
    if failed is not None:
        return failed
    scores = [s for s in (score_of(v) for v in verdicts) if s is not None]
    if len(scores) != len(verdicts):
        raise TypeError("a score assertion needs verdicts with a score (PointwiseScore or RubricResult)")
    mean = statistics.fmean(scores)
    reaching = sum(s >= threshold for s in scores)
    k = len(scores)
    if aggregate == "mean":
        ok, shown = mean >= threshold, f"{mean:.3g}" if k == 1 else f"{mean:.3g} (mean of {k})"
        claim = f"score {mean:g}" if k == 1 else f"mean score {mean:.3g} over {k} verdicts {scores}"
    else:
        ok, shown = reaching * 2 > k, f"{reaching}/{k} >= {threshold:g}"
        claim = f"{reaching} of {k} verdicts {scores} reach the threshold (a majority needs {k // 2 + 1})"
    if ok:
        return Check("pass", mean, shown, shown_threshold, _spread(scores), "", tuple(verdicts))
    low = min(range(k), key=lambda i: scores[i])
    message = (
        f"judged {claim}; the test needs {shown_threshold} ({aggregate}).\n"
        f"  lowest verdict ({scores[low]:g}), rationale: {clip(verdicts[low].rationale)}" + what
    )
    return Check("fail", mean, shown, shown_threshold, _spread(scores), message, tuple(verdicts))


def check_not_worse(
    verdicts: Sequence[PairwiseVerdict], *, aggregate: Literal["mean", "majority"], what: str = ""
) -> Check:
    """The new answer (A) against the baseline (B), each verdict swap-debiased:
    pass when the mean preference (A 1, tie 0.5, B 0) is at least 0.5, or
    when a majority of verdicts are A or tie."""
    shown_threshold = "not worse (pref >= 0.5)"
    failed = _unreadable(verdicts, shown_threshold)
    if failed is not None:
        return failed
    winners = [v.winner or "" for v in verdicts]
    prefs = [_PREFERENCE[w] for w in winners]
    mean = statistics.fmean(prefs)
    k = len(prefs)
    not_worse = sum(w != "B" for w in winners)
    ok = mean >= 0.5 if aggregate == "mean" else not_worse * 2 > k
    names = {"A": "new", "B": "baseline", "tie": "tie"}
    shown = names[winners[0]] if k == 1 else f"pref {mean:.2g} ({'/'.join(names[w] for w in winners)})"
    if ok:
        return Check("pass", mean, shown, shown_threshold, _spread(prefs), "", tuple(verdicts))
    lost = next(v for v in verdicts if v.winner == "B")
    orders = " / ".join(f"{o.winner or o.status.value}" for o in lost.orders) or "one order"
    message = (
        f"the new answer is worse than the baseline: the judge preferred the baseline in "
        f"{k - not_worse} of {k} verdict(s) (mean preference {mean:.2g}, {aggregate}; needs {shown_threshold}).\n"
        f"  orders (A/B, B/A mapped back; A = new): {orders}; inconsistent: {lost.inconsistent}\n"
        f"  rationale: {clip(lost.rationale or next((o.rationale for o in lost.orders if o.rationale), None))}" + what
    )
    return Check("fail", mean, shown, shown_threshold, _spread(prefs), message, tuple(verdicts))
