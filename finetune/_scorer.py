"""The interface between classifier models and :class:`ClassifierJudge`.

A pair scorer gives class probabilities for one answer order. It is not a
model backend (it generates no text); a :class:`ClassifierJudge` holds one,
or finds it in the runtime context (``from_context(key)``).
"""

from __future__ import annotations

from collections.abc import Sequence

from judgegraph.types import PairwiseInput

__all__ = ["PairScorer"]


class PairScorer:
    name = "pair-scorer"

    def __init__(self, *, model: str, labels: Sequence[str]) -> None:
        if tuple(labels[:2]) != ("A", "B") or len(labels) not in (2, 3) or (len(labels) == 3 and labels[2] != "tie"):
            raise ValueError(f"labels must be ('A', 'B') or ('A', 'B', 'tie'), got {tuple(labels)}")
        self.model = model
        self.labels: tuple[str, ...] = tuple(labels)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, labels={self.labels})"

    def predict_proba(self, items: Sequence[PairwiseInput]) -> list[list[float]]:
        """One row per item: probabilities in ``labels`` order, for the order given."""
        raise NotImplementedError
