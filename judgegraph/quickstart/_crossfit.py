"""Calibration by cross-fitting: every train-side item is judged by a head
that never saw its prompt.

The quickstart used to hold a quarter of the train prompts out of training
for the planner. Cross-fitting keeps both uses of them: the train prompts are
cut into ``folds`` groups; for each group a head is fitted on the other
groups and judges that group (its out-of-fold verdicts are the calibration
results the planner sees); the judge that goes on to the held-out items is
fitted on all train items. Heads fit in under a second on cached
embeddings, so the extra cost is K small fits. The calibration verdicts come
from heads trained on (K-1)/K of the data, so they are a little less sure
than the final judge; the threshold they give is slightly conservative.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judgegraph.datasets import PandaLMItem
from judgegraph.finetune import assign_folds as deal_folds
from judgegraph.finetune import fold_heads
from judgegraph.judges import CompositeJudge
from judgegraph.types import PairwiseInput

__all__ = ["CrossFitJudge", "assign_folds", "fold_judges"]


def assign_folds(items: Sequence[PandaLMItem], *, folds: int, seed: int) -> dict[str, int]:
    """prompt -> fold, dealt by :func:`judgegraph.finetune.assign_folds`."""
    return deal_folds((it.prompt for it in items), folds=folds, seed=seed)


def fold_judges(probe: Any, traces: Sequence[Any], fold_of: dict[str, int], *, folds: int) -> list[Any]:
    """One judge per fold, its head fitted on the traces of the other folds.
    Each shares the probe's encoder and embedding cache."""
    from ._local import LocalClassifierJudge

    heads = fold_heads(probe, traces, [fold_of[t.instruction] for t in traces], folds=folds)
    return [LocalClassifierJudge(h, name=f"local-fold{k + 1}") for k, h in enumerate(heads)]


class CrossFitJudge(CompositeJudge):
    """Judges an item with the fold judge whose head did not see its prompt."""

    def __init__(self, judges: Sequence[Any], fold_of: dict[str, int], *, name: str = "local (cross-fitted)") -> None:
        super().__init__(list(judges), name=name, what="fold judges")
        self.fold_of = dict(fold_of)

    async def _run(self, items: list[PairwiseInput], *, context: Any, max_concurrency: int) -> list[Any]:
        out: list[Any] = [None] * len(items)
        by_fold: dict[int, list[int]] = {}
        for i, it in enumerate(items):
            fold = self.fold_of.get(it.instruction)
            if fold is None:
                raise ValueError(f"{self.name}: item {i}'s prompt is in no fold (it was not on the train side)")
            by_fold.setdefault(fold, []).append(i)
        for fold, idx in by_fold.items():
            got = await self.parts[fold].ajudge_many(
                [items[i] for i in idx], context=context, max_concurrency=max_concurrency
            )
            for i, v in zip(idx, got, strict=True):
                out[i] = v
        return out
