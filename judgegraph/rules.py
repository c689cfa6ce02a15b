"""The judging rules, each written once as a pure function.

Judges and the prebuilt graphs both call these, so a verdict is the same
whichever way it was produced:

- :func:`flip_verdict` and :func:`merge_orders` / :func:`combine_orders`:
  a pairwise verdict from the swapped order, and the two orders merged under
  a :class:`~judgegraph.SwapPolicy`;
- :func:`validate_criteria` and :func:`aggregate_rubric`: rubric criteria and
  their weighted aggregate;
- :func:`spread_agreement`: how much a jury's scores agree with their mean
  or median (the confidence of a mean / median ensemble);
- :func:`combine_provenance`: usage, cost, attempts and latency of a result
  made of parts. **Latency rule**: parts that run side by side (both answer
  orders, rubric criteria, ensemble members, graph branches) take the slowest
  part's latency; parts that run one after another (cascade tiers) take the
  sum. Cost is the sum, or None when any part is unpriced.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Literal

from .types import (
    Criterion,
    JudgeInputError,
    PairwiseVerdict,
    PointwiseScore,
    Provenance,
    RubricResult,
    Status,
    SwapPolicy,
    Usage,
    Winner,
    worst_status,
)

__all__ = [
    "SWAPPED_WINNER",
    "aggregate_rubric",
    "combine_orders",
    "combine_provenance",
    "flip_verdict",
    "merge_orders",
    "spread_agreement",
    "sum_costs",
    "validate_criteria",
    "weighted_score",
]

SWAPPED_WINNER: dict[str, Winner] = {"A": "B", "B": "A", "tie": "tie"}
"""The same winner seen from the other answer order."""

ORDER_LABELS = ("A/B", "B/A")

Timing = Literal["concurrent", "sequential"]


# ---------------------------------------------------------------- pairwise orders


def flip_verdict(v: PairwiseVerdict) -> PairwiseVerdict:
    """A verdict given on the swapped pair, stated for the original order."""
    if v.winner is None:
        return v
    dist = {SWAPPED_WINNER.get(k, k): p for k, p in v.distribution.items()} if v.distribution else None
    return v.model_copy(
        update={
            "winner": SWAPPED_WINNER[v.winner],
            "score_a": v.score_b,
            "score_b": v.score_a,
            "expected_score_a": v.expected_score_b,
            "expected_score_b": v.expected_score_a,
            "distribution": dist,
        }
    )


def merge_orders(ab: PairwiseVerdict, ba: PairwiseVerdict, *, policy: SwapPolicy) -> PairwiseVerdict:
    """Two readable orders (``ba`` already flipped back) as one verdict.

    Agreeing orders keep their winner. Disagreeing orders give a tie, or with
    ``on_inconsistent="flag"`` the mean-score winner (else the first order's);
    ``inconsistent`` is set either way. Confidence is the mean token
    probability of the winner when both orders have a distribution, else swap
    agreement (1.0 or 0.5).
    """
    consistent = ab.winner == ba.winner
    score_a = score_b = None
    if ab.score_a is not None and ba.score_a is not None:
        score_a = (ab.score_a + ba.score_a) / 2
        score_b = (ab.score_b or 0.0) / 2 + (ba.score_b or 0.0) / 2
    winner: Winner | None
    if consistent:
        winner = ab.winner
    elif policy.on_inconsistent == "tie":
        winner = "tie"
    elif score_a is not None and score_b is not None:
        winner = "A" if score_a > score_b else "B" if score_b > score_a else "tie"
    else:
        winner = ab.winner
    expected_a = expected_b = None
    if ab.expected_score_a is not None and ba.expected_score_a is not None:
        expected_a = (ab.expected_score_a + ba.expected_score_a) / 2
        expected_b = ((ab.expected_score_b or 0.0) + (ba.expected_score_b or 0.0)) / 2
    distribution = None
    if ab.distribution is not None and ba.distribution is not None:
        keys = set(ab.distribution) | set(ba.distribution)
        distribution = {k: (ab.distribution.get(k, 0.0) + ba.distribution.get(k, 0.0)) / 2 for k in sorted(keys)}
        confidence = distribution.get(winner or "tie", 0.0)
    else:
        confidence = 1.0 if consistent else 0.5
    return PairwiseVerdict(
        status=Status.OK,
        winner=winner,
        score_a=score_a,
        score_b=score_b,
        expected_score_a=expected_a,
        expected_score_b=expected_b,
        rationale=ab.rationale,
        confidence=confidence,
        distribution=distribution,
        inconsistent=not consistent,
        orders=(ab, ba),
    )


def combine_orders(
    orders: Sequence[PairwiseVerdict], *, policy: SwapPolicy, provenance: Provenance | None
) -> PairwiseVerdict:
    """One verdict from one or two orders (the second already flipped back).

    A failed order fails the verdict, naming the order and keeping both raw
    verdicts; one order is returned as it is; two are merged by
    :func:`merge_orders`. ``provenance`` is set on the result.
    """
    if not 1 <= len(orders) <= 2:
        raise ValueError(f"a pairwise verdict has one or two orders, got {len(orders)}")
    status = worst_status([o.status for o in orders])
    if status is not Status.OK:
        bad = next(i for i, o in enumerate(orders) if o.status is not Status.OK)
        return PairwiseVerdict(
            status=status,
            reason=f"order {ORDER_LABELS[bad]}: {orders[bad].reason}",
            raw_text=orders[bad].raw_text,
            orders=tuple(orders) if len(orders) > 1 else (),
            provenance=provenance,
        )
    merged = orders[0] if len(orders) == 1 else merge_orders(orders[0], orders[1], policy=policy)
    return merged.model_copy(update={"provenance": provenance})


# ---------------------------------------------------------------- rubrics


def validate_criteria(value: Any) -> list[Criterion]:
    """A non-empty list of criteria with unique names, or a
    :class:`JudgeInputError` naming the problem."""
    from pydantic import ValidationError

    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise JudgeInputError("criteria: give a non-empty list of criteria")
    out: list[Criterion] = []
    for i, c in enumerate(value):
        try:
            out.append(c if isinstance(c, Criterion) else Criterion.model_validate(c))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise JudgeInputError(f"criteria[{i}]: invalid Criterion: {problems}") from None
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise JudgeInputError(f"criteria: names must be unique, got {names}")
    return out


def weighted_score(criteria: Sequence[Criterion], scores: dict[str, PointwiseScore]) -> float:
    """Weighted mean of each criterion's score, normalised to 0-1 by its own
    scale, so criteria on different scales can be combined."""
    total = sum(c.weight for c in criteria)
    acc = 0.0
    for c in criteria:
        s = scores[c.name]
        if s.score is None:
            raise ValueError(f"criterion {c.name!r} has no score")
        lo, hi = s.scale
        acc += c.weight * (s.score - lo) / (hi - lo)
    return acc / total


def aggregate_rubric(
    criteria: Sequence[Criterion], scores: dict[str, PointwiseScore], *, provenance: Provenance | None
) -> RubricResult:
    """Each criterion's score as one result. The weighted aggregate is given
    only when every criterion was scored (a missing one would shift the
    weights); otherwise the result takes the worst status and names the
    failed criteria. Confidence is the lowest criterion's, when all have one."""
    ordered = {c.name: scores[c.name] for c in criteria}
    status = worst_status([s.status for s in ordered.values()])
    if status is not Status.OK:
        failed = "; ".join(f"{n}: {s.reason}" for n, s in ordered.items() if s.status is not Status.OK)
        return RubricResult(status=status, criteria=ordered, reason=failed, provenance=provenance)
    confidences = [s.confidence for s in ordered.values() if s.confidence is not None]
    return RubricResult(
        status=Status.OK,
        criteria=ordered,
        weighted_score=weighted_score(criteria, ordered),
        rationale="\n".join(f"{n}: {s.rationale}" for n, s in ordered.items() if s.rationale),
        confidence=min(confidences) if len(confidences) == len(ordered) else None,
        provenance=provenance,
    )


# ---------------------------------------------------------------- provenance


def sum_costs(costs: Sequence[float | None]) -> float | None:
    """Total cost, or None when any part's cost is unknown (a partial sum would understate it)."""
    if any(c is None for c in costs):
        return None
    return float(sum(c for c in costs if c is not None))


def combine_provenance(
    parts: Sequence[Provenance | None],
    *,
    status: Status,
    timing: Timing,
    judge: str | None = None,
    backend: str | None = None,
    model: str | None = None,
    template_id: str | None = None,
    template_version: int | None = None,
) -> Provenance | None:
    """One provenance for a result made of ``parts`` (None parts are skipped).

    Usage and attempts are summed, cost by :func:`sum_costs`, latency by the
    module's latency rule (``timing``). The identity fields come from the
    keyword arguments given, else from the first part; with no parts and no
    identity there is nothing to say and the result is None.
    """
    known = [p for p in parts if p is not None]
    first = known[0] if known else None
    identity = {
        "judge": judge,
        "backend": backend,
        "model": model,
        "template_id": template_id,
        "template_version": template_version,
    }
    if first is None and any(v is None for v in identity.values()):
        return None
    usage = Usage()
    for p in known:
        usage = usage + p.usage
    latencies = [p.latency_s for p in known]
    fields: dict[str, Any] = {k: v if v is not None else getattr(first, k) for k, v in identity.items()}
    return Provenance(
        **fields,
        latency_s=(max(latencies, default=0.0) if timing == "concurrent" else sum(latencies)),
        usage=usage,
        cost_usd=sum_costs([p.cost_usd for p in known]) if known else None,
        attempts=sum(p.attempts for p in known),
        status=status,
        notes=tuple(dict.fromkeys(n for p in known for n in p.notes)),
    )


# ---------------------------------------------------------------- juries


def spread_agreement(scores: Sequence[float], centre: float, scale: tuple[int, int]) -> float:
    """Agreement of scores with an aggregate of them that need not be a vote.

    1 minus the scores' mean distance from ``centre``, over half the scale's
    width (the most that distance can be for a mean or a median): 1 when all
    agree, 0 when they split between the two ends. Votes of 4 and 5 on 1-5
    give a mean of 4.5 and 0.75; a share of votes would say 0, since no one
    voted 4.5.
    """
    if not scores:
        raise ValueError("no scores to agree")
    half_width = (scale[1] - scale[0]) / 2
    if half_width <= 0:
        return 1.0
    spread = statistics.fmean(abs(s - centre) for s in scores)
    return max(0.0, 1.0 - spread / half_width)
