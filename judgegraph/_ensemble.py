"""Juries: several judges answer the same item and their votes are combined.

Also home to :class:`CompositeJudge`, the base for judges built out of other
judges (ensembles here, cascades in ``_cascade``).
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias, cast

from ._backend import Backend
from ._judge import BaseJudge, JudgeInputError, coerce_input, worst
from ._vote_rules import round_half_up, spread_agreement
from .types import MemberRecord, PairwiseInput, PairwiseVerdict, PointwiseScore, Provenance, Status, Usage, Winner

__all__ = [
    "Aggregation",
    "CompositeJudge",
    "EnsembleJudge",
    "create_ensemble_judge",
]

Result: TypeAlias = PairwiseVerdict | PointwiseScore
Aggregation = Literal["majority", "mean", "median", "weighted"]

_PREF: dict[str, float] = {"A": 1.0, "tie": 0.5, "B": 0.0}


class CompositeJudge(BaseJudge[Any, Any]):
    """A judge made of other judges.

    Each part resolves its own backend (its own, or from the runtime
    context), so a composite takes ``context`` but never ``backend``.
    Subclasses implement :meth:`_run` over a batch of validated items.
    """

    def __init__(self, parts: Sequence[BaseJudge[Any, Any]], *, name: str, what: str) -> None:
        # BaseJudge.__init__ is skipped on purpose: a composite has no template or backend.
        if not parts:
            raise ValueError(f"{what} must not be empty")
        for i, p in enumerate(parts):
            if not isinstance(p, BaseJudge):
                raise TypeError(f"{what}[{i}] is a {type(p).__name__}, not a judge")
        models = {p.input_model for p in parts}
        if len(models) > 1:
            found = ", ".join(f"{judge_name(p)}: {p.input_model.__name__}" for p in parts)
            raise ValueError(f"{what} must all judge the same input type, got {found}")
        self.input_model = parts[0].input_model
        self.name = name
        self.backend = "backend"
        self._parts_list = list(parts)

    # ------------------------------------------------------------ public API

    async def ajudge(self, value: Any, *, backend: Backend | None = None, context: Any = None) -> Any:
        self._reject_backend(backend)
        item = coerce_input(self.input_model, value)
        self.check_context(context)
        return (await self._run([item], context=context, max_concurrency=1))[0]

    async def ajudge_many(
        self,
        values: Sequence[Any],
        *,
        max_concurrency: int = 16,
        backend: Backend | None = None,
        context: Any = None,
    ) -> list[Any]:
        """Judge a batch, in input order; a malformed item yields its
        :class:`JudgeInputError` in place and the rest still run."""
        self._reject_backend(backend)
        self.check_context(context)
        out: list[Any] = [None] * len(values)
        valid: list[tuple[int, Any]] = []
        for i, v in enumerate(values):
            try:
                valid.append((i, coerce_input(self.input_model, v, where=f"item {i}: ")))
            except JudgeInputError as exc:
                out[i] = exc
        results = await self._run([it for _, it in valid], context=context, max_concurrency=max_concurrency)
        for (i, _), r in zip(valid, results, strict=True):
            out[i] = r
        return out

    def check_context(self, context: Any) -> None:
        """Fail before any call when a part's backend cannot be found."""
        for p in self._parts_list:
            if isinstance(p, CompositeJudge):
                p.check_context(context)
            else:
                p.resolve_backend(None, context)

    def resolve_backend(self, backend: Backend | None = None, context: Any = None) -> Backend:
        raise TypeError(f"{self.name} has no backend of its own: each of its judges resolves its own")

    # ------------------------------------------------------------ internals

    def _reject_backend(self, backend: Backend | None) -> None:
        if backend is not None:
            raise TypeError(
                f"{self.name}: a composite judge takes no backend= (its judges use their own); "
                "put backends in the runtime context instead"
            )

    async def _run(self, items: list[Any], *, context: Any, max_concurrency: int) -> list[Any]:
        raise NotImplementedError


async def run_part(
    judge: BaseJudge[Any, Any], items: list[Any], *, context: Any, max_concurrency: int
) -> list[Result | str]:
    """One part over a batch. A part that crashes yields the error text per
    item instead of sinking the batch."""
    if not items:
        return []
    try:
        got = await judge.ajudge_many(items, max_concurrency=max_concurrency, context=context)
    except Exception as exc:  # a bug in one part must not cost the other parts' work
        return [f"{type(exc).__name__}: {exc}"] * len(items)
    out: list[Result | str] = []
    for r in got:
        if isinstance(r, PairwiseVerdict | PointwiseScore):
            out.append(r)
        elif isinstance(r, JudgeInputError):
            out.append(f"rejected the input: {r}")
        else:
            out.append(f"returned an unsupported {type(r).__name__}")
    return out


def judge_name(judge: BaseJudge[Any, Any]) -> str:
    return judge.name or type(judge).__name__


def verdict_text(r: Result) -> str | None:
    """A result's answer as text: the winner, or the score."""
    if not r.ok:
        return None
    if isinstance(r, PairwiseVerdict):
        return r.winner
    return str(r.score)


def cost_of(r: Result) -> float | None:
    return r.provenance.cost_usd if r.provenance is not None else None


def latency_of(r: Result) -> float:
    return r.provenance.latency_s if r.provenance is not None else 0.0


def sum_costs(costs: Sequence[float | None]) -> float | None:
    """Total cost, or None when any part's cost is unknown (a partial sum would understate it)."""
    if any(c is None for c in costs):
        return None
    return float(sum(c for c in costs if c is not None))


def sum_usage(results: Sequence[Result]) -> Usage:
    usage = Usage()
    for r in results:
        if r.provenance is not None:
            usage = usage + r.provenance.usage
    return usage


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
    failed member. ``confidence`` is the (weighted) share of usable votes that
    agree with the final answer; for pointwise ``mean`` / ``median`` it is
    their ``spread_agreement`` with it. ``distribution`` holds vote shares.
    """

    def __init__(
        self,
        members: Sequence[BaseJudge[Any, Any]],
        *,
        aggregation: Aggregation = "majority",
        weights: Sequence[float] | None = None,
        min_ok: int = 1,
        name: str | None = None,
    ) -> None:
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
        self.members = list(members)
        self.aggregation = aggregation
        self.weights = [float(w) for w in weights] if weights is not None else [1.0] * len(members)
        self.min_ok = min_ok

    async def _run(self, items: list[Any], *, context: Any, max_concurrency: int) -> list[Result]:
        per_member = await asyncio.gather(
            *(run_part(m, items, context=context, max_concurrency=max_concurrency) for m in self.members)
        )
        return [self._aggregate([col[i] for col in per_member]) for i in range(len(items))]

    # ------------------------------------------------------------ aggregation

    def _aggregate(self, answers: list[Result | str]) -> Result:
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
        total = sum(w for _, w in votes)
        tally: dict[str, float] = {}
        for v, w in votes:
            tally[v] = tally.get(v, 0.0) + w
        return {k: t / total for k, t in tally.items()}

    def _pairwise(
        self, ok: list[tuple[PairwiseVerdict, float]], results: list[Result], records: list[MemberRecord]
    ) -> PairwiseVerdict:
        votes = [(str(r.winner), w) for r, w in ok]
        shares = self._shares(votes)
        winner: Winner
        if self.aggregation in ("majority", "weighted"):
            top = max(shares.values())
            leaders = [k for k, s in shares.items() if s == top]
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
            confidence=shares.get(winner, 0.0),
            distribution={k: shares.get(k, 0.0) for k in ("A", "B", "tie")},
            inconsistent=any(r.inconsistent for r, _ in ok),
            rationale=self._summary(votes),
            members=tuple(records),
            provenance=self._provenance_for(results, Status.OK),
        )

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
            score = round_half_up(expected)
            confidence = spread_agreement(scores, expected, ok[0][0].scale)
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
        return Provenance(
            judge=judge_name(self),
            backend="ensemble",
            model="+".join(models) or "ensemble",
            template_id=f"ensemble-{self.aggregation}",
            template_version=1,
            latency_s=max((latency_of(r) for r in results), default=0.0),  # members run concurrently
            usage=sum_usage(results),
            cost_usd=sum_costs([cost_of(r) for r in results]),
            attempts=sum(r.provenance.attempts for r in results if r.provenance is not None),
            status=status,
        )


def create_ensemble_judge(
    members: Sequence[BaseJudge[Any, Any]],
    *,
    aggregation: Aggregation = "majority",
    weights: Sequence[float] | Mapping[str, float] | None = None,
    min_ok: int = 1,
    name: str | None = None,
) -> EnsembleJudge:
    """A jury over ``members``. ``weights`` may be a list in member order or a
    mapping from member name to weight (then ``aggregation`` defaults to weighted)."""
    if isinstance(weights, Mapping):
        unknown = set(weights) - {judge_name(m) for m in members}
        if unknown:
            raise ValueError(f"weights name unknown members: {sorted(unknown)}")
        missing = [judge_name(m) for m in members if judge_name(m) not in weights]
        if missing:
            raise ValueError(f"weights has no entry for members {missing}")
        weights = [weights[judge_name(m)] for m in members]
        if aggregation == "majority":
            aggregation = "weighted"
    return EnsembleJudge(members, aggregation=aggregation, weights=weights, min_ok=min_ok, name=name)
