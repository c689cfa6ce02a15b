"""One round's per-item work: the audit sample, each item's decision, the traces collected, the batch summary."""

from __future__ import annotations

import hashlib
import math
from collections import Counter

from judgegraph.finetune import PairwiseTrace, trace_from_result

from ..types import PairwiseVerdict, Status
from ._records import BatchSummary, FlywheelItem, HeldoutEval, ItemDecision

__all__ = ["collect_traces", "decide_item", "summarise_batch"]


def _audit_pick(seed: int, round_no: int, key: str, rate: float) -> bool:
    if rate <= 0:
        return False
    h = int.from_bytes(hashlib.sha256(f"{seed}:{round_no}:{key}".encode()).digest()[:8], "big")
    return h / 2**64 < rate


def _binom_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def decide_item(item: FlywheelItem, r: PairwiseVerdict, *, local: bool) -> ItemDecision:
    if not local:  # the teacher alone
        return ItemDecision(
            key=item.key,
            id=item.id,
            status=r.status,
            decided_by="teacher" if r.ok else "none",
            verdict=r.winner,
            escalated=True,
            reason="no local judge in service yet",
            teacher=r.model_copy(update={"tiers": ()}),
            teacher_calls=1,
            teacher_cost_usd=r.provenance.cost_usd if r.provenance is not None else None,
        )
    first = r.tiers[0]
    local_verdict = first.verdict if first.verdict in ("A", "B", "tie") else None
    escalated = len(r.tiers) > 1
    decided = next((t for t in r.tiers if t.decided), None)
    by = "none" if decided is None else ("local" if decided.tier == 0 else "teacher")
    teacher: PairwiseVerdict | None = None
    cost: float | None = None
    if escalated:
        second = r.tiers[1]
        cost = second.cost_usd
        if by == "teacher":
            teacher = r.model_copy(update={"tiers": ()})
        else:  # the teacher failed; keep why, as a failed verdict
            teacher = PairwiseVerdict(
                status=second.status if second.status is not Status.OK else Status.ERROR,
                reason=r.reason or second.reason,
            )
    return ItemDecision(
        key=item.key,
        id=item.id,
        status=r.status,
        decided_by=by,  # type: ignore[arg-type]
        verdict=r.winner,
        escalated=escalated,
        reason=first.reason,
        local_verdict=local_verdict,  # type: ignore[arg-type]
        local_confidence=first.confidence,
        teacher=teacher,
        teacher_calls=1 if escalated else 0,
        teacher_cost_usd=cost,
    )


def collect_traces(n: int, items: list[FlywheelItem], decisions: list[ItemDecision]) -> list[PairwiseTrace]:
    out: list[PairwiseTrace] = []
    for it, dec in zip(items, decisions, strict=True):
        meta = {"round": n, "key": it.key}
        if it.human_label is not None:
            out.append(
                PairwiseTrace(
                    id=it.id,
                    instruction=it.input.instruction,
                    response_a=it.input.response_a,
                    response_b=it.input.response_b,
                    reference=it.input.reference,
                    winner=it.human_label,
                    source="human",
                    metadata={**meta, "why": "human"},
                )
            )
        if dec.teacher is not None and dec.teacher.ok:
            why = "audit" if dec.audited else "escalated"
            t = trace_from_result(it.input, dec.teacher, source="teacher", id=it.id, metadata={**meta, "why": why})
            assert isinstance(t, PairwiseTrace)
            out.append(t)
    return out


def summarise_batch(
    champion: int | None,
    ref: HeldoutEval | None,
    decisions: list[ItemDecision],
    collected: list[PairwiseTrace],
) -> BatchSummary:
    audited = [d for d in decisions if d.audited and d.teacher is not None and d.teacher.ok]
    agree = sum(d.local_verdict == d.teacher.winner for d in audited if d.teacher is not None)
    audit_agreement = agree / len(audited) if audited else None
    reference = ref.teacher_agreement_on_kept if ref is not None else None
    drift: bool | None = None
    p: float | None = None
    if audited and reference is not None:
        p = _binom_cdf(agree, len(audited), reference)  # P(this few agreements | the reference rate)
        drift = p < 0.05
    costs = [d.teacher_cost_usd for d in decisions if d.teacher_calls]
    calls = sum(d.teacher_calls for d in decisions)
    return BatchSummary(
        champion=champion,
        threshold=ref.threshold if ref is not None else None,
        items=len(decisions),
        local_decided=sum(d.decided_by == "local" for d in decisions),
        escalated=sum(d.escalated for d in decisions),
        failed=sum(d.decided_by == "none" for d in decisions),
        audited=sum(d.audited for d in decisions),
        audit_agreement=audit_agreement,
        audit_reference=reference,
        drift=drift,
        drift_p_value=p,
        teacher_calls=calls,
        teacher_failures=sum(1 for d in decisions if d.teacher is not None and not d.teacher.ok),
        cost_usd=None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None)),
        collected=dict(Counter(str(t.metadata.get("why")) for t in collected)),
    )
