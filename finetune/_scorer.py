"""The interface between classifier models and :class:`ClassifierJudge`.

A pair scorer gives class probabilities for one answer order. It also has
the attributes of a :class:`judgegraph.Backend` (name, model, capabilities,
pricing), so it can sit in a graph's runtime context like any backend and
be found by key. It does not generate text.
"""

from __future__ import annotations

from collections.abc import Sequence

from judgegraph._backend import BackendError, Capabilities, GenerateRequest, GenerateResult
from judgegraph.types import PairwiseInput, Pricing

__all__ = ["PairScorer"]


class PairScorer:
    name = "pair-scorer"

    def __init__(self, *, model: str, labels: Sequence[str]) -> None:
        if tuple(labels[:2]) != ("A", "B") or len(labels) not in (2, 3) or (len(labels) == 3 and labels[2] != "tie"):
            raise ValueError(f"labels must be ('A', 'B') or ('A', 'B', 'tie'), got {tuple(labels)}")
        self.model = model
        self.labels: tuple[str, ...] = tuple(labels)
        self.capabilities = Capabilities(structured_output=False, logprobs=False)
        self.pricing: Pricing | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, labels={self.labels})"

    def predict_proba(self, items: Sequence[PairwiseInput]) -> list[list[float]]:
        """One row per item: probabilities in ``labels`` order, for the order given."""
        raise NotImplementedError

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        raise BackendError(f"{self.name} scores answer pairs and does not generate text; judge with ClassifierJudge")
