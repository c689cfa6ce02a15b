"""The promotion rules, the held-out evaluation figures, and that held-out items never
enter training.

The local judge is the real one (frozen encoder + the probe head from
judgegraph.finetune) on the tiny untrained Qwen2 as encoder; the task is
synthetic (see _flywheel_world.py): the longer answer wins, so a few dozen
traces teach it. The teacher replays the true labels.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("torch")

from _flywheel_world import World, _flywheel, _pair

from judgegraph.finetune._dataset import instruction_key
from judgegraph.finetune._traces import read_traces
from judgegraph.flywheel import FlywheelItem, FlywheelSettings, HeldoutEval, ProbeTrainer, promotion_decision
from judgegraph.flywheel._rules import evaluate_on_heldout
from judgegraph.judges import item_key
from judgegraph.types import PairwiseVerdict, Status, Winner


def test_promotion_rule() -> None:
    def ev(n: int, agreement: float) -> HeldoutEval:
        from judgegraph.cascade import calibrate_threshold

        cal = calibrate_threshold([0.9] * 10, [True] * 10, alpha=0.3, delta=0.1)
        return HeldoutEval(
            round=n,
            n=10,
            local_agreement=agreement,
            calibration=cal,
            escalation_share=0.0,
            cascade_agreement=agreement,
            teacher_agreement_on_kept=None,
            equal_agreement_escalation=0.0,
        )

    assert promotion_decision(ev(2, 0.71), ev(1, 0.70), tolerance=0).promoted
    assert promotion_decision(ev(2, 0.70), ev(1, 0.70), tolerance=0).promoted  # equal: does not lose
    kept = promotion_decision(ev(2, 0.69), ev(1, 0.70), tolerance=0)
    assert not kept.promoted and kept.champion_after == 1 and "0.690 < champion (round 1) 0.700" in kept.reason
    assert promotion_decision(ev(2, 0.69), ev(1, 0.70), tolerance=0.02).promoted
    first = promotion_decision(ev(1, 0.2), None, tolerance=0)
    assert first.promoted and first.champion_after == 1
    none = promotion_decision(None, ev(1, 0.7), tolerance=0, skipped="only 1 training trace(s)")
    assert not none.promoted and none.champion_after == 1 and "only 1 training trace" in none.reason


def test_promotion_on_escalation() -> None:
    """promote_on="escalation": fewer held-out escalations at the calibrated
    threshold, without losing cascade agreement, promotes; a better judge
    alone that escalates more does not."""
    from judgegraph.cascade import calibrate_threshold

    def ev(n: int, local: float, share: float, cascade: float) -> HeldoutEval:
        cal = calibrate_threshold([0.9] * 10, [True] * 10, alpha=0.3, delta=0.1)
        return HeldoutEval(
            round=n,
            n=10,
            local_agreement=local,
            calibration=cal,
            escalation_share=share,
            cascade_agreement=cascade,
            teacher_agreement_on_kept=None,
            equal_agreement_escalation=0.0,
        )

    champ = ev(1, 0.65, 0.80, 0.70)
    cheaper = promotion_decision(ev(2, 0.63, 0.70, 0.70), champ, tolerance=0, on="escalation")
    assert cheaper.promoted and "escalates 0.700 <= champion (round 1) 0.800" in cheaper.reason
    assert not promotion_decision(ev(2, 0.63, 0.70, 0.69), champ, tolerance=0, on="escalation").promoted
    assert promotion_decision(ev(2, 0.63, 0.70, 0.69), champ, tolerance=0.02, on="escalation").promoted
    assert not promotion_decision(ev(2, 0.70, 0.85, 0.72), champ, tolerance=0, on="escalation").promoted
    assert promotion_decision(ev(2, 0.70, 0.85, 0.72), champ, tolerance=0).promoted  # the default rule


def test_heldout_evaluation_figures() -> None:
    s = FlywheelSettings(alpha=0.25, delta=0.2, audit_rate=0.0)
    labels: list[Winner] = ["A", "A", "A", "A", "A", "A", "A", "A", "B", "B", "B", "B"]
    conf = [0.95, 0.94, 0.93, 0.92, 0.91, 0.9, 0.6, 0.55, 0.8, 0.7, 0.65, 0.52]
    wins: list[Winner] = ["A", "A", "A", "A", "A", "A", "B", "B", "B", "B", "A", "A"]
    local = [PairwiseVerdict(status=Status.OK, winner=w, confidence=c) for w, c in zip(wins, conf, strict=True)]
    teacher = [PairwiseVerdict(status=Status.OK, winner=y) for y in labels]
    ev = evaluate_on_heldout(3, local, teacher, labels, s)
    assert ev.local_agreement == pytest.approx(8 / 12)
    assert ev.threshold is not None
    kept = [c >= ev.threshold for c in conf]
    assert ev.escalation_share == pytest.approx(1 - sum(kept) / 12)
    right = sum((w == y) if k else True for w, y, k in zip(wins, labels, kept, strict=True))
    assert ev.cascade_agreement == pytest.approx(right / 12)
    # The teacher is always right here, so the cascade matches it only while every kept item is right:
    # the eight most confident (0.95 .. 0.7) are; the next (0.65) is not.
    assert ev.equal_agreement_escalation == pytest.approx(1 - 8 / 12)


# ------------------------------------------------------------------ leakage


def test_heldout_items_never_enter_training(tmp_path: Path, world: World, trainer: ProbeTrainer) -> None:
    held = world.heldout
    rng = random.Random(7)
    # The stream carries the held-out items themselves, with human labels, and new
    # answer pairs to held-out prompts; the seed traces carry held-out items too.
    leaky = [FlywheelItem(input=t.to_input(), id=f"held-{i}", human_label=t.winner) for i, t in enumerate(held[:10])]
    same_prompt = [
        FlywheelItem(input=x, id=f"same-{i}", human_label=w)
        for i in range(10, 20)
        for x, w in [_pair(rng, held[i].instruction)]
    ]
    clean = world.batch(world.stream[100:130])
    seed = [*held[20:25], *World(seed=3).heldout[:5]]  # other pairs, on held-out prompts
    fw = _flywheel(tmp_path / "work", world, trainer, seed_traces=seed)
    fw.run_round([*leaky, *same_prompt, *clean])

    held_groups = {instruction_key(t) for t in held}
    held_keys = {item_key(t.to_input()) for t in held}
    trained = read_traces(fw.round_dir(1) / "training.jsonl")
    assert len(trained) == 30, "the 30 clean items, and nothing else"
    assert not {instruction_key(t) for t in trained} & held_groups
    assert not {item_key(t.to_input()) for t in trained} & held_keys  # type: ignore[union-attr]
    assert fw.training_traces(1)[0] == trained  # what the next round would use agrees
    # They were judged and collected like any traffic; only training refused them.
    collected = read_traces(fw.round_dir(1) / "collected.jsonl")
    assert {instruction_key(t) for t in collected} & held_groups
    assert sum(t.source == "human" for t in collected) == 20
    # seed: 5 + 5; round 1: 10 human + 10 teacher labels on held-out items, 10 human labels on held-out prompts
    assert fw.record(1).training.excluded_heldout == 10 + 10 + 10 + 10  # type: ignore[union-attr]
