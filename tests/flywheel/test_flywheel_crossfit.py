"""``calibrate_on="traces"``: thresholds calibrated on each round's training
traces, every trace judged by a head that never saw its prompt.

Real rounds on the synthetic world (see _flywheel_world.py) with the real probe
trainer on the tiny model; the cross-fitting itself is checked through a
trainer that records what each fold was trained on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from _flywheel_world import SETTINGS, World, _flywheel
from pydantic import ValidationError

from judgegraph.cascade import calibrate_tier
from judgegraph.finetune import PairwiseTrace, instruction_key, read_traces
from judgegraph.flywheel import FlywheelSettings, ProbeTrainer, build_flywheel_report, render_flywheel_markdown
from judgegraph.flywheel._crossfit import acrossfit_verdicts, trace_calibration
from judgegraph.judges import Judge, read_verdicts
from judgegraph.types import PairwiseVerdict

TRACES = SETTINGS.model_copy(update={"calibrate_on": "traces", "folds": 3})


class RecordingTrainer:
    """A LocalTrainer without ``fold_judges``: the flywheel must train and load one model per fold."""

    def __init__(self, inner: ProbeTrainer) -> None:
        self.inner = inner
        self.trained: list[list[PairwiseTrace]] = []

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def train(self, traces: Sequence[Any], out_dir: Path) -> dict[str, float]:
        self.trained.append(list(traces))
        return self.inner.train(traces, out_dir)

    def load(self, directory: Path) -> Judge[Any, Any]:
        return self.inner.load(directory)


def test_two_rounds_calibrated_on_their_own_traces(tmp_path: Path, world: World, trainer: ProbeTrainer) -> None:
    fw = _flywheel(tmp_path / "work", world, trainer, settings=TRACES)
    fw.run_round(world.batch(world.stream[:40]))
    fw.run_round(world.batch(world.stream[40:100]))
    for n in (1, 2):
        rec = fw.record(n)
        assert rec.training is not None and rec.challenger is not None
        ev = rec.challenger
        # Calibrated on the round's traces (40, then more), not on the 60 held-out items.
        assert ev.calibrated_on == "traces" and ev.calibration.n == rec.training.traces
        d = fw.round_dir(n)
        traces = read_traces(d / "training.jsonl")
        rows = read_verdicts(d / "crossfit.jsonl")
        assert [r.label for r in rows] == [t.winner for t in traces]  # type: ignore[union-attr]
        verdicts = [r.result for r in rows]
        assert all(isinstance(v, PairwiseVerdict) and v.ok for v in verdicts)
        again = calibrate_tier(verdicts, [t.winner for t in traces], alpha=0.2, delta=0.1)  # type: ignore[union-attr]
        assert ev.calibration == again
        assert not (d / "crossfit.partial").exists()
        # The held-out set measures that threshold: its share is the items below it.
        local = [r.result for r in read_verdicts(d / "heldout.jsonl")]
        thr = ev.threshold
        below = sum(not (v.ok and v.confidence is not None and thr is not None and v.confidence >= thr) for v in local)
        assert ev.escalation_share == pytest.approx(below / len(local))
    one, two = fw.record(1), fw.record(2)
    assert one.challenger is not None and one.challenger.threshold is not None  # the world is easy: it keeps items
    assert two.batch is not None and two.batch.threshold == one.challenger.threshold
    assert two.batch.escalation_share < 1.0
    md = render_flywheel_markdown(build_flywheel_report(fw.workdir))
    assert "calibrated on each round's cross-fitted training traces" in md and "on the held-out set (" not in md
    # Re-evaluating the champion reads the out-of-fold verdicts on file; it fits nothing again.
    before = (fw.round_dir(2) / "crossfit.jsonl").stat().st_mtime_ns
    _, ev = asyncio.run(fw.acascade())
    assert ev is not None and ev.calibrated_on == "traces"
    assert (fw.round_dir(2) / "crossfit.jsonl").stat().st_mtime_ns == before


def test_each_trace_is_judged_by_a_model_that_never_saw_its_prompt(
    tmp_path: Path, world: World, trainer: ProbeTrainer
) -> None:
    traces = [
        PairwiseTrace(instruction=x.instruction, response_a=x.response_a, response_b=x.response_b, winner=w)
        for x, w in world.stream[:30]
    ]
    rec = RecordingTrainer(trainer)
    got = asyncio.run(acrossfit_verdicts(rec, traces, folds=3, seed=5, scratch=tmp_path / "scratch"))
    assert got is not None and len(got) == len(traces)
    assert len(rec.trained) == 3
    prompts = {instruction_key(t) for t in traces}
    left_out = [prompts - {instruction_key(t) for t in fold} for fold in rec.trained]
    # Every prompt is left out of exactly one fold's training, and a fold trains on everything else.
    assert sorted(p for part in left_out for p in part) == sorted(prompts)
    for fold, out in zip(rec.trained, left_out, strict=True):
        assert out and len(fold) == sum(instruction_key(t) not in out for t in traces)
    assert not (tmp_path / "scratch").exists()
    # ProbeTrainer's shortcut (one encoder, one head per fold) gives the verdicts train + load gives.
    fast = asyncio.run(acrossfit_verdicts(trainer, traces, folds=3, seed=5, scratch=tmp_path / "unused"))
    assert fast is not None
    # The two paths embed the texts in batches of different shapes, and float32 matrix
    # products block and sum by shape (the AVX2/AVX-512 kernels differently from the
    # plain ones), so the embeddings differ in their last bits and the convex head fit
    # moves with them: up to 2.4e-5 in a confidence measured on AVX-512. 1e-3 is 40x
    # that and far below any gap that would change what a cascade does with a verdict.
    tol = 1e-3
    assert [v.confidence for v in fast] == pytest.approx([v.confidence for v in got], abs=tol)
    # A winner could flip only where two classes' probabilities are within that noise;
    # this seeded world's least confident item sits at 0.507, a long way from a tie.
    assert [v.winner for v in fast] == [v.winner for v in got]


def test_one_prompt_cannot_be_cross_fitted_so_nothing_is_kept(tmp_path: Path, trainer: ProbeTrainer) -> None:
    traces = [
        PairwiseTrace(instruction="the only prompt", response_a="a " * k, response_b="b", winner="A")
        for k in range(1, 6)
    ]
    got = asyncio.run(acrossfit_verdicts(trainer, traces, folds=4, seed=0, scratch=tmp_path / "s"))
    assert got is None
    cal = trace_calibration(got, traces, TRACES)
    assert cal.threshold is None and cal.n == 0


def test_folds_are_checked() -> None:
    with pytest.raises(ValidationError, match="folds"):
        FlywheelSettings(alpha=0.2, audit_rate=0.1, calibrate_on="traces", folds=1)
    with pytest.raises(ValidationError, match="calibrate_on"):
        FlywheelSettings(alpha=0.2, audit_rate=0.1, calibrate_on="labels")  # type: ignore[arg-type]
