"""Juries: several judges answer the same item and their votes are combined."""

from __future__ import annotations

import asyncio
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from judgegraph.rules import combine_provenance, spread_agreement
from judgegraph.types import MemberRecord, PairwiseInput, PairwiseVerdict, PointwiseScore, Provenance, Status, Winner
from judgegraph.types import worst_status as worst

from ._base import Judge
from ._composite import CompositeJudge, Result, arun_part, cost_of, judge_name, latency_of, verdict_text
from ._contract import Context

__all__ = [
    "Aggregation",
    "EnsembleJudge",
    "Missing",
    "Votes",
    "create_ensemble_judge",
]

Aggregation = Literal["majority", "mean", "median", "weighted"]
Votes = Literal["members", "orders", "probabilities"]
Missing = Literal["ignore", "against"]

_PREF: dict[str, float] = {"A": 1.0, "tie": 0.5, "B": 0.0}


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


class EnsembleJudge(CompositeJudge):
    """A jury: every member judges the item concurrently, and the votes are combined.

    ``aggregation``:

    - ``majority``: the most common answer; a split between top answers
      gives ``tie`` for pairwise and the lower score for pointwise.
    - ``weighted``: the same with ``weights`` per member.
    - ``mean`` / ``median``: of the scores (pointwise; ``expected_score`` keeps the
      exact value, ``score`` rounds halves up) or of the preferences
      A=1, tie=0.5, B=0 (pairwise; above 0.5 is A, below is B).

    A member that fails is left out and listed in ``members`` with its reason.
    With fewer than ``min_ok`` usable votes the result fails, naming every
    failed member. ``confidence`` is the (weighted) share of usable votes
    that agree with the final answer; for pointwise ``mean`` / ``median``,
    their :func:`~judgegraph.rules.spread_agreement` with it (a mean between
    the votes is no disagreement). ``distribution`` holds the vote shares.

    ``votes`` (pairwise, majority / weighted): what one vote is. ``members``:
    each member's verdict. ``orders``: each answer order a member judged (its
    weight split between them), so a member whose two orders disagree is a
    split vote rather than one ``tie``. ``probabilities``: the same, each
    order's ``distribution`` over A / B / tie where it has one (pooled
    probabilities), else its verdict.

    ``missing``: how a member without a usable answer counts in
    ``confidence``. ``ignore``: not at all (the share of usable votes).
    ``against``: as a vote against the verdict (the share of the whole
    jury's weight), so a jury that lost members is less sure, which is what a
    cascade tier escalating on agreement needs.
    """

    def __init__(
        self,
        members: Sequence[Judge[Any, Any]],
        *,
        aggregation: Aggregation = "majority",
        weights: Sequence[float] | None = None,
        min_ok: int = 1,
        votes: Votes = "members",
        missing: Missing = "ignore",
        name: str | None = None,
    ) -> None:
        """Any: a jury takes judges of every input and result type, and
        ``Judge`` is invariant in both, so only ``Judge[Any, Any]`` accepts them all."""
        super().__init__(members, name=name or "ensemble", what="members")
        names = [judge_name(m) for m in members]
        if len(set(names)) != len(names):
            raise ValueError(f"members need distinct names (set name=...), got {names}")
        if aggregation not in ("majority", "mean", "median", "weighted"):
            raise ValueError(f"aggregation must be majority, mean, median or weighted, got {aggregation!r}")
        if weights is not None:
            if aggregation != "weighted":
                raise ValueError("weights only apply to aggregation='weighted'")
            if len(weights) != len(members):
                raise ValueError(f"weights has {len(weights)} entries for {len(members)} members")
            for i, w in enumerate(weights):
                if not (w > 0 and math.isfinite(w)):
                    raise ValueError(f"weights[{i}] must be a positive number, got {w}")
        if not 1 <= min_ok <= len(members):
            raise ValueError(f"min_ok must be between 1 and {len(members)}, got {min_ok}")
        if votes not in ("members", "orders", "probabilities"):
            raise ValueError(f"votes must be members, orders or probabilities, got {votes!r}")
        if votes != "members":
            if not issubclass(self.input_model, PairwiseInput):
                raise ValueError(f"votes={votes!r} needs pairwise members (answer orders, A/B/tie probabilities)")
            if aggregation not in ("majority", "weighted"):
                raise ValueError(f"votes={votes!r} needs aggregation majority or weighted, got {aggregation!r}")
        if missing not in ("ignore", "against"):
            raise ValueError(f"missing must be ignore or against, got {missing!r}")
        self.members = list(members)
        self.aggregation = aggregation
        self.votes: Votes = votes
        self.missing: Missing = missing
        self.weights = [float(w) for w in weights] if weights is not None else [1.0] * len(members)
        self.min_ok = min_ok

    async def _run(self, items: list[Any], *, context: Context, max_concurrency: int) -> list[Result]:
        per_member = await asyncio.gather(
            *(arun_part(m, items, context=context, max_concurrency=max_concurrency) for m in self.members)
        )
        return [self.combine([col[i] for col in per_member]) for i in range(len(items))]

    # ------------------------------------------------------------ aggregation

    def combine(self, answers: Sequence[Result | str]) -> Result:
        """The jury's result from its members' answers, in member order (a
        string is a member's crash): what ``ajudge`` returns, computable
        offline from recorded answers (the cascade planner does)."""
        if len(answers) != len(self.members):
            raise ValueError(f"{len(answers)} answers for {len(self.members)} members")
        records: list[MemberRecord] = []
        ok: list[tuple[Result, float]] = []
        results = [a for a in answers if not isinstance(a, str)]
        for m, w, a in zip(self.members, self.weights, answers, strict=True):
            if isinstance(a, str):
                records.append(MemberRecord(judge=judge_name(m), status=Status.ERROR, weight=w, reason=a))
                continue
            records.append(
                MemberRecord(
                    judge=judge_name(m),
                    status=a.status,
                    weight=w,
                    verdict=verdict_text(a),
                    confidence=a.confidence,
                    reason=a.reason,
                    cost_usd=cost_of(a),
                    latency_s=latency_of(a),
                )
            )
            if a.ok:
                ok.append((a, w))
        kinds = {type(r) for r in results}
        if len(kinds) > 1:
            return self._failed(results, records, Status.ERROR, "members returned different result types")
        is_pair = kinds == {PairwiseVerdict} or (not kinds and issubclass(self.input_model, PairwiseInput))
        if len(ok) < self.min_ok:
            failed = [r for r in records if r.status is not Status.OK]
            status = worst([r.status for r in failed]) if failed else Status.ERROR
            detail = "; ".join(f"{r.judge}: {r.reason}" for r in failed)
            reason = f"only {len(ok)} of {len(self.members)} members answered (need {self.min_ok}): {detail}"
            return self._failed(results, records, status, reason, pairwise=is_pair)
        if is_pair:
            return self._pairwise([(r, w) for r, w in ok if isinstance(r, PairwiseVerdict)], results, records)
        scored = [(r, w) for r, w in ok if isinstance(r, PointwiseScore)]
        scales = {r.scale for r, _ in scored}
        if len(scales) > 1:
            return self._failed(
                results,
                records,
                Status.ERROR,
                f"members scored on different scales: {sorted(scales)}",
                pairwise=False,
                scale=scored[0][0].scale,
            )
        return self._pointwise(scored, results, records)

    def _shares(self, votes: list[tuple[str, float]]) -> dict[str, float]:
        return self._pool([({v: 1.0}, w) for v, w in votes])

    @staticmethod
    def _pool(ballots: list[tuple[Mapping[str, float], float]]) -> dict[str, float]:
        total = sum(w for _, w in ballots)
        tally: dict[str, float] = {}
        for dist, w in ballots:
            for k, p in dist.items():
                tally[k] = tally.get(k, 0.0) + w * p
        return {k: t / total for k, t in tally.items()}

    def _ballots(self, ok: list[tuple[PairwiseVerdict, float]]) -> list[tuple[Mapping[str, float], float]]:
        """One ballot (a distribution over A / B / tie) per vote, with its weight."""
        out: list[tuple[Mapping[str, float], float]] = []
        for r, w in ok:
            parts = [o for o in r.orders if o.ok] if self.votes != "members" else []
            parts = parts or [r]  # a member judged in one order votes once, at full weight
            for p in parts:
                dist = p.distribution if self.votes == "probabilities" else None
                total = sum(dist.values()) if dist else 0.0
                if dist and total > 0:
                    out.append(({k: v / total for k, v in dist.items()}, w / len(parts)))
                else:
                    out.append(({str(p.winner): 1.0}, w / len(parts)))
        return out

    def _present(self, ok_weight: float) -> float:
        """The share of the jury's weight that answered, when silence counts against the verdict."""
        return ok_weight / sum(self.weights) if self.missing == "against" else 1.0

    def _pairwise(
        self, ok: list[tuple[PairwiseVerdict, float]], results: list[Result], records: list[MemberRecord]
    ) -> PairwiseVerdict:
        votes = [(str(r.winner), w) for r, w in ok]
        ballots = self._ballots(ok)
        shares = self._pool(ballots)
        winner: Winner
        if self.aggregation in ("majority", "weighted"):
            top = max(shares.values())
            leaders = [k for k, s in shares.items() if math.isclose(s, top, rel_tol=1e-12, abs_tol=1e-12)]
            winner = cast(Winner, leaders[0]) if len(leaders) == 1 else "tie"
        else:
            prefs = [_PREF[v] for v, _ in votes]
            x = statistics.fmean(prefs) if self.aggregation == "mean" else statistics.median(prefs)
            winner = "A" if x > 0.5 else "B" if x < 0.5 else "tie"
        with_scores = [r for r, _ in ok if r.score_a is not None and r.score_b is not None]
        score_a = score_b = None
        if len(with_scores) == len(ok):
            score_a = statistics.fmean(r.score_a for r in with_scores if r.score_a is not None)
            score_b = statistics.fmean(r.score_b for r in with_scores if r.score_b is not None)
        return PairwiseVerdict(
            status=Status.OK,
            winner=winner,
            score_a=score_a,
            score_b=score_b,
            confidence=shares.get(winner, 0.0) * self._present(sum(w for _, w in ok)),
            distribution={k: shares.get(k, 0.0) for k in ("A", "B", "tie")},
            inconsistent=any(r.inconsistent for r, _ in ok),
            rationale=self._summary(votes if self.votes == "members" else self._order_votes(ballots)),
            members=tuple(records),
            provenance=self._provenance_for(results, Status.OK),
        )

    @staticmethod
    def _order_votes(ballots: list[tuple[Mapping[str, float], float]]) -> list[tuple[str, float]]:
        return [(max(d, key=lambda k: d[k]), w) for d, w in ballots]

    def _pointwise(
        self, ok: list[tuple[PointwiseScore, float]], results: list[Result], records: list[MemberRecord]
    ) -> PointwiseScore:
        votes = [(str(r.score), w) for r, w in ok]
        shares = self._shares(votes)
        scores = [int(r.score) for r, _ in ok if r.score is not None]
        expected: float | None = None
        if self.aggregation in ("majority", "weighted"):
            top = max(shares.values())
            score: int = min(int(k) for k, s in shares.items() if s == top)  # a split goes to the lower score
            confidence = shares.get(str(score), 0.0)
        else:
            expected = statistics.fmean(scores) if self.aggregation == "mean" else float(statistics.median(scores))
            score = _round_half_up(expected)
            confidence = spread_agreement(scores, expected, ok[0][0].scale)
        confidence *= self._present(sum(w for _, w in ok))
        return PointwiseScore(
            status=Status.OK,
            score=score,
            scale=ok[0][0].scale,
            expected_score=expected,
            confidence=confidence,
            distribution={int(k): s for k, s in sorted(shares.items(), key=lambda kv: int(kv[0]))},
            rationale=self._summary(votes),
            members=tuple(records),
            provenance=self._provenance_for(results, Status.OK),
        )

    def _summary(self, votes: list[tuple[str, float]]) -> str:
        counts = Counter(v for v, _ in votes)
        parts = ", ".join(f"{k}×{n}" for k, n in sorted(counts.items()))
        if self.votes != "members":
            return f"{self.aggregation} of {len(votes)} votes ({self.votes}) from {len(self.members)} members: {parts}"
        return f"{self.aggregation} of {len(votes)}/{len(self.members)} members: {parts}"

    def _failed(
        self,
        results: list[Result],
        records: list[MemberRecord],
        status: Status,
        reason: str,
        *,
        pairwise: bool = True,
        scale: tuple[int, int] | None = None,
    ) -> Result:
        prov = self._provenance_for(results, status)
        if pairwise:
            return PairwiseVerdict(status=status, reason=reason, members=tuple(records), provenance=prov)
        if scale is None:
            scale = next((r.scale for r in results if isinstance(r, PointwiseScore)), (1, 5))
        return PointwiseScore(status=status, scale=scale, reason=reason, members=tuple(records), provenance=prov)

    def _provenance_for(self, results: list[Result], status: Status) -> Provenance:
        models = sorted({r.provenance.model for r in results if r.provenance is not None})
        prov = combine_provenance(
            [r.provenance for r in results],
            status=status,
            timing="concurrent",  # members run side by side
            judge=judge_name(self),
            backend="ensemble",
            model="+".join(models) or "ensemble",
            template_id=f"ensemble-{self.aggregation}",
            template_version=1,
        )
        assert prov is not None  # the identity is given, so there is always one
        return prov

    def _set_parts(self, parts: list[Judge[Any, Any]]) -> None:
        super()._set_parts(parts)
        self.members = list(parts)


def create_ensemble_judge(
    members: Sequence[Judge[Any, Any]],
    *,
    aggregation: Aggregation = "majority",
    weights: Sequence[float] | Mapping[str, float] | None = None,
    min_ok: int = 1,
    votes: Votes = "members",
    missing: Missing = "ignore",
    name: str | None = None,
) -> EnsembleJudge:
    """A jury over ``members``. ``weights`` may be a list in member order or a
    mapping from member name to weight (then ``aggregation`` defaults to weighted).

    Any: a jury takes judges of every input and result type, and ``Judge``
    is invariant in both, so only ``Judge[Any, Any]`` accepts them all."""
    if isinstance(weights, Mapping):
        unknown = set(weights) - {judge_name(m) for m in members}
        if unknown:
            raise ValueError(f"weights name unknown members: {sorted(unknown)}")
        absent = [judge_name(m) for m in members if judge_name(m) not in weights]
        if absent:
            raise ValueError(f"weights has no entry for members {absent}")
        weights = [weights[judge_name(m)] for m in members]
        if aggregation == "majority":
            aggregation = "weighted"
    return EnsembleJudge(
        members, aggregation=aggregation, weights=weights, min_ok=min_ok, votes=votes, missing=missing, name=name
    )
