"""Sampled judges: k draws of one model judge, and a confidence from their votes.

Self-consistency for judges that give no logprobs (reasoning models, most
hosted chat models): the judge answers the same item ``k`` times, each draw a
distinct request (its own ``seed``, and a ``temperature`` where the model
takes one), and the draws vote. The result is the judge's usual result type
with ``confidence`` from the votes, so cascades (``LowConfidence``), juries
and the planner use it as they use logprob confidence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal, cast

from judgegraph.backends import Backend, GenerateRequest, GenerateResult, backend_identity
from judgegraph.rules import combine_provenance, spread_agreement
from judgegraph.types import (
    LabelVerdict,
    MemberRecord,
    PairwiseInput,
    PairwiseVerdict,
    PointwiseScore,
    Provenance,
    Status,
    Winner,
)
from judgegraph.types import worst_status as worst

from ._base import Judge, JudgeInputError
from ._composite import CompositeJudge, judge_name
from ._contract import Context
from ._model import ModelJudge

__all__ = ["SampledAggregation", "SampledJudge", "create_sampled_judge", "takes_temperature"]

SampledAggregation = Literal["auto", "mode", "mean"]

SampledResult = PairwiseVerdict | PointwiseScore | LabelVerdict


def takes_temperature(backend: Backend) -> bool:
    """False for a backend serving a reasoning model (it refuses a
    temperature): the ``reasoning`` flag of the backend or of a backend it
    wraps (a cache, a rate limiter); True when none says."""
    seen: Backend | None = backend
    for _ in range(8):
        if seen is None:
            break
        flag = getattr(seen, "reasoning", None)
        if isinstance(flag, bool):
            return not flag
        seen = getattr(seen, "inner", None)
    return True


class _DrawBackend:
    """The judge's backend for one draw: every request it sends carries the
    draw's seed (and temperature), so a judge-call cache keys each draw apart
    and never collapses k draws into one."""

    def __init__(self, inner: Backend, *, temperature: float | None, seed: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.capabilities = inner.capabilities
        self.pricing = inner.pricing
        self._temperature = temperature
        self._seed = seed

    def identity(self) -> dict[str, Any]:
        return backend_identity(self.inner)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        if self._temperature is None:
            request = dataclasses.replace(request, seed=self._seed)
        else:
            request = dataclasses.replace(request, seed=self._seed, temperature=self._temperature)
        return await self.inner.generate(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def _vote(r: SampledResult) -> str:
    if isinstance(r, PairwiseVerdict):
        return str(r.winner)
    if isinstance(r, LabelVerdict):
        return str(r.label)
    return str(r.score)


class SampledJudge(CompositeJudge):
    """One model judge drawn ``k`` times per item; the draws vote.

    Each draw is its own request: seed ``seeds[i]`` and ``temperature``
    (left out for a reasoning model, which refuses one: see
    :func:`takes_temperature`; then draws differ by seed, or are plain
    repeats where the server ignores seeds). Draws run concurrently.

    The verdict:

    - pairwise (and labels): the modal winner (label); a split between top
      answers gives ``tie`` for pairwise and the first label in ``choices``
      order for labels. ``confidence`` is the share of usable draws that
      voted for it; ``distribution`` holds the vote shares.
    - pointwise, ``aggregation="mean"`` (the default for scores): the mean
      score (``expected_score``; ``score`` rounds halves up), ``confidence``
      1 - the draws' mean distance from the mean over half the scale
      (:func:`~judgegraph.rules.spread_agreement`: 1 iff all draws agree).
      ``aggregation="mode"``: the modal score (a split goes to the lower),
      ``confidence`` its share.

    Every draw is listed in ``members`` (``draw i (seed s)``, its verdict,
    status, reason, cost), and the rationale states the votes and their
    spread. Provenance sums the tokens and cost of all k draws, failed ones
    included. A failed draw is left out of the vote and counted; with fewer
    than ``min_ok`` usable draws the result fails (the worst draw status,
    ``unparsed`` or ``error``) with every draw's reason.

    Sampling settings (``k``, ``temperature``, ``seeds``, ``min_ok``,
    ``aggregation``) are public attributes, so they are part of the judge's
    fingerprint: a job store never mixes k=1 and k=5 verdicts. A judge-call
    cache keys each draw by its request (seed and temperature included), so
    draw i is the same request for any k: a cached draw is reused as a draw,
    never as a verdict over a different k.
    """

    def __init__(
        self,
        judge: ModelJudge[Any, Any],
        *,
        k: int = 5,
        temperature: float | None = 1.0,
        seed: int = 0,
        min_ok: int | None = None,
        aggregation: SampledAggregation = "auto",
        name: str | None = None,
    ) -> None:
        """Any: it takes model judges of every input and result type, and
        ``ModelJudge`` is invariant in both, so only ``ModelJudge[Any, Any]``
        accepts them all."""
        if not isinstance(judge, ModelJudge):
            raise TypeError(
                f"create_sampled_judge needs a model judge (one that calls a backend), got {type(judge).__name__}"
            )
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a whole number >= 1, got {k!r}")
        if temperature is not None and not (math.isfinite(temperature) and temperature >= 0):
            raise ValueError(f"temperature must be a finite number >= 0 or None, got {temperature!r}")
        if aggregation not in ("auto", "mode", "mean"):
            raise ValueError(f"aggregation must be auto, mode or mean, got {aggregation!r}")
        if aggregation == "mean" and issubclass(judge.input_model, PairwiseInput):
            raise ValueError("aggregation='mean' is for scores; a pairwise judge's draws vote for a winner (mode)")
        min_ok = (k + 1) // 2 if min_ok is None else min_ok
        if not 1 <= min_ok <= k:
            raise ValueError(f"min_ok must be between 1 and k={k}, got {min_ok}")
        super().__init__([judge], name=name or f"sampled{k}({judge_name(judge)})", what="judge")
        self.base_judge: ModelJudge[Any, Any] = judge
        self.k = k
        self.temperature = None if temperature is None else float(temperature)
        self.seeds: tuple[int, ...] = tuple(seed + i for i in range(k))
        self.min_ok = min_ok
        self.aggregation: SampledAggregation = aggregation

    # ------------------------------------------------------------ public API

    def backend_for(self, context: Context) -> Backend | None:
        return self.base_judge.backend_for(context)

    def temperature_for(self, backend: Backend) -> float | None:
        """The temperature the draws send to ``backend``: None (the judge's
        own request, no temperature change) for a reasoning model."""
        return self.temperature if takes_temperature(backend) else None

    # ------------------------------------------------------------ running

    async def _run(self, items: list[Any], *, context: Any, max_concurrency: int) -> list[SampledResult]:
        backend = self.base_judge.resolve_backend(None, context)
        temperature = self.temperature_for(backend)
        sem = asyncio.Semaphore(max(1, max_concurrency))

        async def one(item: Any) -> SampledResult:
            async with sem:
                draws = await asyncio.gather(*(self._draw(item, backend, temperature, s) for s in self.seeds))
            return self.combine(draws, temperature=temperature)

        return list(await asyncio.gather(*(one(it) for it in items)))

    async def _draw(self, item: Any, backend: Backend, temperature: float | None, seed: int) -> SampledResult | str:
        try:
            got = await self.base_judge.ajudge(item, backend=_DrawBackend(backend, temperature=temperature, seed=seed))
        except JudgeInputError as exc:
            return f"rejected the input: {exc}"
        except Exception as exc:  # one draw's crash must not cost the other draws
            return f"{type(exc).__name__}: {exc}"
        if isinstance(got, PairwiseVerdict | PointwiseScore | LabelVerdict):
            return got
        return f"returned an unsupported {type(got).__name__}"

    # ------------------------------------------------------------ voting

    def combine(self, draws: Sequence[SampledResult | str], *, temperature: float | None = None) -> SampledResult:
        """The sampled verdict from the draws, in seed order (a string is a
        draw's crash): what ``ajudge`` returns, computable offline from
        recorded draws."""
        if len(draws) != self.k:
            raise ValueError(f"{len(draws)} draws for k={self.k}")
        records: list[MemberRecord] = []
        results = [d for d in draws if not isinstance(d, str)]
        for i, (seed, d) in enumerate(zip(self.seeds, draws, strict=True)):
            who = f"draw {i} (seed {seed})"
            if isinstance(d, str):
                records.append(MemberRecord(judge=who, status=Status.ERROR, reason=d))
                continue
            records.append(
                MemberRecord(
                    judge=who,
                    status=d.status,
                    verdict=_vote(d) if d.ok else None,
                    confidence=d.confidence,
                    reason=d.reason,
                    cost_usd=d.provenance.cost_usd if d.provenance is not None else None,
                    latency_s=d.provenance.latency_s if d.provenance is not None else 0.0,
                )
            )
        ok = [d for d in results if d.ok]
        kinds = {type(r) for r in results}
        kind: type[SampledResult] = next(iter(kinds)) if len(kinds) == 1 else self._expected_kind()
        if len(kinds) > 1:
            return self._failed(kind, results, records, Status.ERROR, "draws returned different result types")
        if len(ok) < self.min_ok:
            failed = [r for r in records if r.status is not Status.OK]
            status = worst([r.status for r in failed]) if failed else Status.ERROR
            detail = "; ".join(f"{r.judge}: {r.reason}" for r in failed)
            reason = f"only {len(ok)} of {self.k} draws usable (need {self.min_ok}): {detail}"
            return self._failed(kind, results, records, status, reason)
        usable = f"{len(ok)} of {self.k} draws" + ("" if temperature is None else f" at temperature {temperature:g}")
        failed_note = f"; {self.k - len(ok)} failed" if len(ok) < self.k else ""
        if kind is PairwiseVerdict:
            return self._pairwise(cast(list[PairwiseVerdict], ok), results, records, usable + failed_note)
        if kind is LabelVerdict:
            return self._label(cast(list[LabelVerdict], ok), results, records, usable + failed_note)
        return self._pointwise(cast(list[PointwiseScore], ok), results, records, usable + failed_note)

    def _expected_kind(self) -> type[SampledResult]:
        return PairwiseVerdict if issubclass(self.input_model, PairwiseInput) else PointwiseScore

    @staticmethod
    def _shares(votes: Sequence[str]) -> dict[str, float]:
        counts = Counter(votes)
        return {v: n / len(votes) for v, n in counts.items()}

    @staticmethod
    def _tally(votes: Sequence[str]) -> str:
        return ", ".join(f"{k}×{n}" for k, n in sorted(Counter(votes).items()))

    def _pairwise(
        self, ok: list[PairwiseVerdict], results: list[SampledResult], records: list[MemberRecord], usable: str
    ) -> PairwiseVerdict:
        votes = [str(r.winner) for r in ok]
        shares = self._shares(votes)
        top = max(shares.values())
        leaders = [k for k, s in shares.items() if s == top]
        winner = cast(Winner, leaders[0]) if len(leaders) == 1 else "tie"
        score_a = score_b = None
        if all(r.score_a is not None and r.score_b is not None for r in ok):
            score_a = statistics.fmean(cast(float, r.score_a) for r in ok)
            score_b = statistics.fmean(cast(float, r.score_b) for r in ok)
        return PairwiseVerdict(
            status=Status.OK,
            winner=winner,
            score_a=score_a,
            score_b=score_b,
            confidence=shares.get(winner, 0.0),
            distribution={k: shares.get(k, 0.0) for k in ("A", "B", "tie")},
            inconsistent=any(r.inconsistent for r in ok),
            rationale=f"mode of {usable}: {self._tally(votes)}",
            members=tuple(records),
            provenance=self._provenance(results, Status.OK),
        )

    def _label(
        self, ok: list[LabelVerdict], results: list[SampledResult], records: list[MemberRecord], usable: str
    ) -> LabelVerdict:
        votes = [str(r.label) for r in ok]
        shares = self._shares(votes)
        top = max(shares.values())
        choices = ok[0].choices
        label = next(c for c in choices if shares.get(c, 0.0) == top)
        return LabelVerdict(
            status=Status.OK,
            label=label,
            choices=choices,
            label_scores=ok[0].label_scores,
            confidence=shares[label],
            rationale=f"mode of {usable}: {self._tally(votes)}",
            members=tuple(records),
            provenance=self._provenance(results, Status.OK),
        )

    def _pointwise(
        self, ok: list[PointwiseScore], results: list[SampledResult], records: list[MemberRecord], usable: str
    ) -> PointwiseScore:
        scale = ok[0].scale
        if any(r.scale != scale for r in ok):
            return cast(
                PointwiseScore,
                self._failed(PointwiseScore, results, records, Status.ERROR, "draws scored on different scales"),
            )
        scores = [int(cast(int, r.score)) for r in ok]
        votes = [str(s) for s in scores]
        shares = self._shares(votes)
        mean = statistics.fmean(scores)
        sd = statistics.pstdev(scores)
        expected: float | None
        if self.aggregation == "mode":
            top = max(shares.values())
            score = min(int(k) for k, s in shares.items() if s == top)
            confidence = shares[str(score)]
            expected = None
            how = "mode"
        else:
            expected = mean
            score = _round_half_up(mean)
            confidence = spread_agreement(scores, mean, scale)
            how = "mean"
        return PointwiseScore(
            status=Status.OK,
            score=score,
            scale=scale,
            expected_score=expected,
            confidence=confidence,
            distribution={int(k): s for k, s in sorted(shares.items(), key=lambda kv: int(kv[0]))},
            rationale=f"{how} of {usable}: {self._tally(votes)} (mean {mean:.3g}, sd {sd:.3g})",
            members=tuple(records),
            provenance=self._provenance(results, Status.OK),
        )

    def _failed(
        self,
        kind: type[SampledResult],
        results: list[SampledResult],
        records: list[MemberRecord],
        status: Status,
        reason: str,
    ) -> SampledResult:
        prov = self._provenance(results, status)
        if kind is PairwiseVerdict:
            return PairwiseVerdict(status=status, reason=reason, members=tuple(records), provenance=prov)
        if kind is LabelVerdict:
            first = next(r for r in results if isinstance(r, LabelVerdict))
            return LabelVerdict(
                status=status,
                reason=reason,
                choices=first.choices,
                label_scores=first.label_scores,
                members=tuple(records),
                provenance=prov,
            )
        scale = next((r.scale for r in results if isinstance(r, PointwiseScore)), self.base_judge.scale)
        return PointwiseScore(status=status, scale=scale, reason=reason, members=tuple(records), provenance=prov)

    def _provenance(self, results: list[SampledResult], status: Status) -> Provenance | None:
        backend = self.base_judge.backend if isinstance(self.base_judge.backend, Backend) else None
        return combine_provenance(
            [r.provenance for r in results],
            status=status,
            timing="concurrent",  # the draws run side by side
            judge=self.name,
            backend=backend.name if backend is not None else None,
            model=backend.model if backend is not None else None,
            template_id=self.base_judge.template.id,
            template_version=self.base_judge.template.version,
        )

    def _set_parts(self, parts: list[Judge[Any, Any]]) -> None:
        super()._set_parts(parts)
        self.base_judge = cast(ModelJudge[Any, Any], parts[0])


def create_sampled_judge(
    judge: ModelJudge[Any, Any],
    *,
    k: int = 5,
    temperature: float | None = 1.0,
    seed: int = 0,
    min_ok: int | None = None,
    aggregation: SampledAggregation = "auto",
    name: str | None = None,
) -> SampledJudge:
    """``judge`` drawn ``k`` times per item (seeds ``seed .. seed+k-1``, at
    ``temperature`` where the model takes one), the draws voting: see
    :class:`SampledJudge`. ``min_ok`` (default: a majority of k) usable draws
    are needed for a verdict.

    Any: it takes model judges of every input and result type, and
    ``ModelJudge`` is invariant in both, so only ``ModelJudge[Any, Any]``
    accepts them all."""
    return SampledJudge(
        judge, k=k, temperature=temperature, seed=seed, min_ok=min_ok, aggregation=aggregation, name=name
    )
