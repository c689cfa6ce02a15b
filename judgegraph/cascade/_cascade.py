"""Cascades: a cheap judge answers first and hands the doubtful items up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from judgegraph.backends import Backend
from judgegraph.judges import (
    CompositeJudge,
    EnsembleJudge,
    Judge,
    JudgeInputError,
    Result,
    arun_part,
    context_from_config,
    cost_of,
    judge_name,
    latency_of,
    run_sync,
    verdict_text,
)
from judgegraph.rules import combine_provenance
from judgegraph.types import PairwiseInput, PairwiseVerdict, PointwiseScore, Provenance, Status, TierRecord

from ._policies import (
    Abstain,
    Budget,
    EscalationPolicy,
    LowConfidence,
    ScoreMargin,
    SwapInconsistency,
    certainty,
    decide_tier,
    score_margin,
)

__all__ = [
    "Abstain",
    "Budget",
    "CascadeJudge",
    "EscalationPolicy",
    "LowConfidence",
    "ScoreMargin",
    "SwapInconsistency",
    "Tier",
    "certainty",
    "create_cascade_judge",
    "create_jury",
    "decide_tier",
    "jury_name",
    "score_margin",
]


@dataclass(frozen=True)
class Tier:
    """A judge in a cascade and the rules that send its items further up."""

    judge: Judge[Any, Any]
    escalate: tuple[EscalationPolicy, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.judge, Judge):
            raise TypeError(f"Tier.judge must be a judge, got {type(self.judge).__name__}")
        given: Any = self.escalate  # a single policy is accepted too
        object.__setattr__(self, "escalate", (given,) if isinstance(given, BaseModel) else tuple(given))
        for i, p in enumerate(self.escalate):
            if not isinstance(p, LowConfidence | SwapInconsistency | ScoreMargin | Budget | Abstain):
                raise TypeError(f"Tier({judge_name(self.judge)}).escalate[{i}] is not an escalation policy: {p!r}")
            if isinstance(p, SwapInconsistency) and not issubclass(self.judge.input_model, PairwiseInput):
                raise ValueError(f"Tier({judge_name(self.judge)}): swap inconsistency needs a pairwise judge")

    @property
    def needs_batch(self) -> bool:
        return any(isinstance(p, Budget) for p in self.escalate)


class CascadeJudge(CompositeJudge):
    """Tiers in order of cost; each item stops at the first tier trusted with it.

    A tier's item goes up when the tier fails on it or any of its escalation
    policies fires. The last tier decides whatever reaches it, unless
    ``abstain=True``: then its own policies apply, and an item no tier is
    trusted with comes back failed with reason ``abstained: ...``.

    When the last tier fails on an item, ``on_last_failure="error"`` returns
    that failure; ``"fallback"`` returns the latest ok verdict from a lower
    tier instead (its tier record says so).

    Every result lists in ``tiers`` what each tier answered, whether it
    decided or escalated and why, and its cost and latency.
    ``provenance.cost_usd`` is the sum over the tiers the item went through
    (None when any of them is unpriced); ``latency_s`` is their sum too.
    """

    def __init__(
        self,
        tiers: Sequence[Tier | Judge[Any, Any]],
        *,
        escalate: EscalationPolicy | Sequence[EscalationPolicy] | None = None,
        abstain: bool = False,
        on_last_failure: Literal["error", "fallback"] = "error",
        name: str | None = None,
    ) -> None:
        if len(tiers) < 1:
            raise ValueError("tiers must not be empty")
        default: tuple[EscalationPolicy, ...] = ()
        if escalate is not None:
            default = (escalate,) if isinstance(escalate, BaseModel) else tuple(escalate)
        built: list[Tier] = []
        for i, t in enumerate(tiers):
            if isinstance(t, Tier):
                built.append(t)
            elif isinstance(t, Judge):
                is_last = i == len(tiers) - 1
                built.append(Tier(t, () if is_last and not abstain else default))
            else:
                raise TypeError(f"tiers[{i}] is a {type(t).__name__}, not a judge or Tier")
        if built[-1].escalate and not abstain:
            raise ValueError("the last tier decides everything it gets; its policies only apply with abstain=True")
        if on_last_failure not in ("error", "fallback"):
            raise ValueError(f"on_last_failure must be 'error' or 'fallback', got {on_last_failure!r}")
        super().__init__([t.judge for t in built], name=name or "cascade", what="tiers")
        self.tiers = built
        self.abstain = abstain
        self.on_last_failure = on_last_failure

    @property
    def needs_batch(self) -> bool:
        return any(t.needs_batch for t in self.tiers)

    async def ajudge(self, value: Any, *, backend: Backend | None = None, context: Any = None) -> Any:
        if self.needs_batch:
            raise ValueError(
                f"{self.name}: a budget policy ranks a batch, so judge with ajudge_many "
                "(or create_batch_judge_node), not one item at a time"
            )
        return await super().ajudge(value, backend=backend, context=context)

    async def abatch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Any]:
        """The whole list is one batch, so budget policies rank across it."""
        cfg = config[0] if isinstance(config, list) and config else config
        context = context_from_config(cfg) if isinstance(cfg, dict) else None
        out = await self.ajudge_many(inputs, context=context)
        if not return_exceptions:
            for r in out:
                if isinstance(r, JudgeInputError):
                    raise r
        return out

    def batch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Any]:
        return run_sync(self.abatch(inputs, config, return_exceptions=return_exceptions))

    # ------------------------------------------------------------ internals

    async def _run(self, items: list[Any], *, context: Any, max_concurrency: int) -> list[Result]:
        n = len(items)
        records: list[list[TierRecord]] = [[] for _ in range(n)]
        answers: list[list[Result | str]] = [[] for _ in range(n)]
        final: list[Result | None] = [None] * n
        active = list(range(n))
        last = len(self.tiers) - 1
        for t, tier in enumerate(self.tiers):
            if not active:
                break
            batch = [items[i] for i in active]
            got = await arun_part(tier.judge, batch, context=context, max_concurrency=max_concurrency)
            policies = tier.escalate if (t < last or self.abstain) else ()
            decisions = decide_tier(got, policies)
            moving: list[int] = []
            for i, a, (esc, why) in zip(active, got, decisions, strict=True):
                answers[i].append(a)
                usable = not isinstance(a, str) and a.ok
                decided = usable and (not esc or (t == last and not self.abstain))
                if t == last and not self.abstain and usable:
                    why = "last tier"
                records[i].append(self._record(t, tier, a, decided=decided, reason=why))
                if decided and not isinstance(a, str):
                    final[i] = a
                elif t < last:
                    moving.append(i)
            active = moving
        return [self._finish(items[i], final[i], answers[i], records[i]) for i in range(n)]

    def _record(self, t: int, tier: Tier, a: Result | str, *, decided: bool, reason: str) -> TierRecord:
        if isinstance(a, str):
            return TierRecord(tier=t, judge=judge_name(tier.judge), status=Status.ERROR, decided=False, reason=reason)
        return TierRecord(
            tier=t,
            judge=judge_name(tier.judge),
            status=a.status,
            decided=decided,
            reason=reason,
            verdict=verdict_text(a),
            confidence=a.confidence,
            cost_usd=cost_of(a),
            latency_s=latency_of(a),
        )

    def _finish(
        self, item: Any, chosen: Result | None, answers: list[Result | str], records: list[TierRecord]
    ) -> Result:
        results = [a for a in answers if not isinstance(a, str)]
        if chosen is None and self.on_last_failure == "fallback":
            earlier = [(k, a) for k, a in enumerate(results) if a.ok]  # the last tier failed, so all lower
            if earlier and not self._abstained(records):
                _, chosen = earlier[-1]
                tier_idx = next(j for j, a in enumerate(answers) if a is chosen)
                rec = records[tier_idx]
                records[tier_idx] = rec.model_copy(
                    update={"decided": True, "reason": f"{rec.reason}; used as fallback: the last tier failed"}
                )
        if chosen is not None:
            return chosen.model_copy(update={"tiers": tuple(records), "provenance": self._prov(chosen, results)})
        # No usable verdict: say why, in the shape of the judged item.
        last = answers[-1]
        if self._abstained(records):
            status, reason = Status.ERROR, f"abstained: {records[-1].reason}"
        elif isinstance(last, str):
            status, reason = Status.ERROR, f"tier {len(answers) - 1} ({records[-1].judge}) failed: {last}"
        else:
            status, reason = last.status, f"tier {len(answers) - 1} ({records[-1].judge}) failed: {last.reason}"
        prov = self._prov(None, results, status=status)
        if issubclass(self.input_model, PairwiseInput):
            return PairwiseVerdict(status=status, reason=reason, tiers=tuple(records), provenance=prov)
        scale = next((a.scale for a in reversed(results) if isinstance(a, PointwiseScore)), None)
        if scale is None:
            scale = getattr(self.tiers[len(answers) - 1].judge, "scale", None) or (1, 5)
        return PointwiseScore(status=status, scale=scale, reason=reason, tiers=tuple(records), provenance=prov)

    def _abstained(self, records: list[TierRecord]) -> bool:
        r = records[-1]
        return self.abstain and r.tier == len(self.tiers) - 1 and r.status is Status.OK and not r.decided

    def _prov(self, chosen: Result | None, results: list[Result], *, status: Status | None = None) -> Provenance:
        base = chosen.provenance if chosen is not None else None
        prov = combine_provenance(
            [r.provenance for r in results],
            status=status if status is not None else (chosen.status if chosen is not None else Status.ERROR),
            timing="sequential",  # tiers run one after another
            judge=judge_name(self),
            backend=base.backend if base else "cascade",
            model=base.model if base else "+".join(r.provenance.model for r in results if r.provenance) or "cascade",
            template_id=base.template_id if base else "cascade",
            template_version=base.template_version if base else 1,
        )
        assert prov is not None  # the identity is given, so there is always one
        return prov

    def _set_parts(self, parts: list[Judge[Any, Any]]) -> None:
        super()._set_parts(parts)
        self.tiers = [Tier(p, t.escalate) for p, t in zip(parts, self.tiers, strict=True)]


def create_cascade_judge(
    tiers: Sequence[Tier | Judge[Any, Any]],
    *,
    escalate: EscalationPolicy | Sequence[EscalationPolicy] | None = None,
    abstain: bool = False,
    on_last_failure: Literal["error", "fallback"] = "error",
    name: str | None = None,
) -> CascadeJudge:
    """A cascade over ``tiers`` (cheapest first). ``escalate`` applies to every
    tier given as a bare judge, except the last."""
    return CascadeJudge(tiers, escalate=escalate, abstain=abstain, on_last_failure=on_last_failure, name=name)


def jury_name(members: Sequence[str]) -> str:
    """The name a jury tier goes by, from its members' names (the planner's too)."""
    return "jury(" + "+".join(members) + ")"


def create_jury(
    members: Sequence[Judge[Any, Any]],
    *,
    min_ok: int | None = None,
    votes: Literal["orders", "probabilities"] = "orders",
    weights: Sequence[float] | None = None,
    name: str | None = None,
) -> EnsembleJudge:
    """A jury for a cascade tier: its members judge concurrently and fail
    independently; its ``confidence`` is the share of the whole jury's votes
    (each member's answer orders, or their A / B / tie probabilities with
    ``votes="probabilities"``) that back its verdict, a member without a usable
    answer counting against it. So ``Tier(create_jury(...), (LowConfidence(threshold=t),))``
    escalates on disagreement and on lost members alike. With fewer than
    ``min_ok`` usable members (default: a strict majority) the jury fails, and
    a failed tier always escalates: never a verdict from a rump jury.
    """
    if not members:
        raise ValueError("a jury needs members")
    quorum = len(members) // 2 + 1 if min_ok is None else min_ok
    return EnsembleJudge(
        members,
        aggregation="majority" if weights is None else "weighted",
        weights=weights,
        min_ok=quorum,
        votes=votes,
        missing="against",
        name=name or jury_name([judge_name(m) for m in members]),
    )
