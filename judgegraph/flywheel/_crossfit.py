"""Thresholds calibrated on a round's own training traces (``calibrate_on="traces"``).

The held-out set is fixed, so a bound calibrated on it never tightens, however
many rounds go by. The traces grow every round. Each trace is judged by a head
fitted on the other folds of prompts (:func:`judgegraph.finetune.assign_folds`),
so no verdict comes from a head that saw its prompt, and the threshold is then
calibrated against the traces' own labels: mostly the teacher's verdicts,
which is what the guarantee is then about.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judgegraph.cascade import ThresholdCalibration, calibrate_tier
from judgegraph.finetune import PairwiseTrace, assign_folds, instruction_key
from judgegraph.judges import Judge

from ..types import PairwiseVerdict
from ._records import FlywheelSettings
from ._rules import as_verdict

__all__ = ["acrossfit_verdicts", "trace_calibration"]


def _train_folds(
    trainer: Any, traces: Sequence[PairwiseTrace], fold_of: list[int], folds: int, scratch: Path
) -> list[Judge[Any, Any]]:
    """Any :class:`LocalTrainer`: fit and load one model per fold under ``scratch``."""
    judges = []
    for k in range(folds):
        d = scratch / f"fold-{k + 1}"
        shutil.rmtree(d, ignore_errors=True)
        trainer.train([t for t, f in zip(traces, fold_of, strict=True) if f != k], d)
        judges.append(trainer.load(d))
    return judges


async def acrossfit_verdicts(
    trainer: Any, traces: Sequence[PairwiseTrace], *, folds: int, seed: int, scratch: Path
) -> list[PairwiseVerdict] | None:
    """Each trace's verdict from a judge trained on the other folds; None when
    the traces hold fewer than two prompts (nothing to cross-fit on).

    A trainer with ``fold_judges(traces, fold_of, folds=...)`` (ProbeTrainer)
    makes the fold judges itself, sharing one encoder; any other is trained
    and loaded once per fold."""
    keys = [instruction_key(t) for t in traces]
    k = min(folds, len(set(keys)))
    if k < 2:
        return None
    fold_of_key = assign_folds(keys, folds=k, seed=seed)
    fold_of = [fold_of_key[x] for x in keys]
    make = getattr(trainer, "fold_judges", None)
    judges = make(traces, fold_of, folds=k) if make is not None else _train_folds(trainer, traces, fold_of, k, scratch)
    if len(judges) != k:
        raise ValueError(f"{k} folds but the trainer made {len(judges)} fold judges")
    by_index: dict[int, PairwiseVerdict] = {}
    for f, judge in enumerate(judges):
        idx = [i for i, x in enumerate(fold_of) if x == f]
        got = await judge.ajudge_many([traces[i].to_input() for i in idx])
        for i, r in zip(idx, got, strict=True):
            by_index[i] = as_verdict(r)
    shutil.rmtree(scratch, ignore_errors=True)
    return [by_index[i] for i in range(len(traces))]  # every trace is in exactly one fold


def trace_calibration(
    verdicts: Sequence[PairwiseVerdict] | None, traces: Sequence[PairwiseTrace], settings: FlywheelSettings
) -> ThresholdCalibration:
    """The calibrated threshold against the traces' labels (none kept when there was nothing to cross-fit)."""
    got, labels = (list(verdicts), [t.winner for t in traces]) if verdicts is not None else ([], [])
    return calibrate_tier(got, labels, alpha=settings.alpha, delta=settings.delta, min_kept=settings.min_kept)
