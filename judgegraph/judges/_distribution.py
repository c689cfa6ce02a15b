"""Which way a judge reads its score distribution: exact through a backend
that scores continuations, else from top-k logprobs (the approximation is
stated in :mod:`judgegraph._score_distribution`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from judgegraph._score_distribution import (
    DistributionMethod,
    ScoreDistributions,
    probability,
    second_value_offset,
    topk_distribution,
    unusable_logprob,
)
from judgegraph._templates import ParserKind
from judgegraph.backends import GenerateRequest
from judgegraph.types import TokenLogprob

__all__ = ["ScoresValues", "adistributions"]


@runtime_checkable
class ScoresValues(Protocol):
    """A backend that can score given continuations of its own output
    (``TransformersBackend``)."""

    async def avalue_logprobs(self, request: GenerateRequest, prefix: str, values: Sequence[str]) -> list[float]:
        """log P(value, then the number ends | the request's prompt + ``prefix``)
        for each value, in order."""
        ...


async def _exact(
    backend: ScoresValues, request: GenerateRequest, raw: str, offset: int, scale: tuple[int, int]
) -> dict[int | str, float] | None:
    values = list(range(scale[0], scale[1] + 1))
    lps = await backend.avalue_logprobs(request, raw[:offset], [str(v) for v in values])
    # A value's number that is no log probability raises ValueError: the caller falls back to top-k.
    mass: dict[int | str, float] = {v: probability(lp) for v, lp in zip(values, lps, strict=True)}
    total = math.fsum(mass.values())
    if total <= 0 or not math.isfinite(total):
        return None
    return {k: p / total for k, p in mass.items()}


async def adistributions(
    backend: object,
    request: GenerateRequest,
    raw: str,
    tokens: Sequence[TokenLogprob] | None,
    offset: int | None,
    *,
    kind: ParserKind,
    scale: tuple[int, int],
    structured: bool = False,
) -> ScoreDistributions:
    """The value distributions of one parsed output: exact where the backend
    can score continuations (numeric scales), else from top-k logprobs."""
    if offset is None:
        return ScoreDistributions()
    second_at = second_value_offset(raw, offset) if kind == "two_scores" and not structured else None
    if kind in ("score", "two_scores") and isinstance(backend, ScoresValues) and request.logprobs:
        try:
            first = await _exact(backend, request, raw, offset, scale)
            second = await _exact(backend, request, raw, second_at, scale) if second_at is not None else None
        except Exception:  # the verdict stands; its distribution falls back to top-k
            pass
        else:
            return ScoreDistributions(first, second, "exact")
    why = unusable_logprob(tokens)
    if why is not None:
        # The server's numbers are not log probabilities: no distribution
        # beats a wrong one, and the verdict read from the text stands.
        return ScoreDistributions(note=f"no score distribution: the server sent a bad logprob at {why}")
    first = topk_distribution(tokens, offset, kind=kind, scale=scale)
    second = topk_distribution(tokens, second_at, kind=kind, scale=scale) if second_at is not None else None
    method: DistributionMethod | None = "top-k" if first is not None else None
    return ScoreDistributions(first, second, method)
