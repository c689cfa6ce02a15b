"""Cross-fitting: judge each trace with a head that never saw its prompt.

A threshold calibrated on a judge's own training traces would be calibrated
on items it has memorised. Cross-fitting deals the prompts into ``folds``
groups and, for each group, fits a head on the others; the out-of-fold
verdicts are then as honest as verdicts on new prompts, and every trace
counts for calibration. The quickstart and the flywheel both deal folds
with :func:`assign_folds`.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterable, Sequence

from ._probe import EncoderProbe
from ._traces import PairwiseTrace

__all__ = ["assign_folds", "fold_heads"]


def assign_folds(keys: Iterable[str], *, folds: int, seed: int) -> dict[str, int]:
    """key (a prompt, or an instruction key) -> fold: the distinct keys, sorted,
    shuffled with ``seed`` and dealt round-robin, so folds differ in size by at most one key."""
    if folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    distinct = sorted(set(keys))
    if len(distinct) < folds:
        raise ValueError(f"{folds} folds need at least {folds} prompts, got {len(distinct)}")
    random.Random(seed).shuffle(distinct)
    return {k: i % folds for i, k in enumerate(distinct)}


def fold_heads(
    probe: EncoderProbe, traces: Sequence[PairwiseTrace], fold_of: Sequence[int], *, folds: int
) -> list[EncoderProbe]:
    """One probe per fold, its head fitted on the traces of the other folds
    (``fold_of[i]`` is trace i's fold). All share ``probe``'s encoder and
    embedding cache, so the texts are embedded once."""
    if len(fold_of) != len(traces):
        raise ValueError(f"{len(traces)} traces but {len(fold_of)} fold numbers")
    heads = []
    for k in range(folds):
        others = [t for t, f in zip(traces, fold_of, strict=True) if f != k]
        if not others:
            raise ValueError(f"fold {k}: every trace is in this fold, so no head can be fitted without it")
        part = copy.copy(probe)  # shallow: same encoder and cache; fit() gives it its own head
        heads.append(part.fit(others))
    return heads
