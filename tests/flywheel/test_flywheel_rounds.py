"""Three real flywheel rounds: the teacher hands over to the local judge, promotion both
ways, the audit catching drift, teacher failures, rollback, and the report.

The local judge is the real one (frozen encoder + the probe head from
judgegraph.finetune) on the tiny untrained Qwen2 as encoder; the task is
synthetic (see _flywheel_world.py): the longer answer wins, so a few dozen
traces teach it. The teacher replays the true labels.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from _flywheel_world import COST, SETTINGS, WORDS, World, _decisions, _flywheel, _pair

from judgegraph.finetune._traces import read_traces
from judgegraph.flywheel import Flywheel, FlywheelError, ProbeTrainer, write_flywheel_report
from judgegraph.types import PairwiseInput, Status

# ------------------------------------------------------------------ rounds


@pytest.fixture(scope="module")
def three_rounds(tmp_path_factory: pytest.TempPathFactory, world: World, trainer: ProbeTrainer) -> Flywheel:
    fw = _flywheel(tmp_path_factory.mktemp("fw") / "work", world, trainer)
    fw.run_round(world.batch(world.stream[:40]))
    fw.run_round(world.batch(world.stream[40:100]))
    # The traffic changes: on these prompts the shorter answer wins. Every
    # confidently decided item is audited, so the teacher's view reaches training.
    drifted = _flywheel(fw.workdir, world, trainer, settings=SETTINGS.model_copy(update={"audit_rate": 1.0}))
    drifted.run_round(world.batch(world.drifted[:120]))
    return fw


def test_round_one_has_no_local_judge_so_the_teacher_decides_everything(three_rounds: Flywheel) -> None:
    rec = three_rounds.record(1)
    assert rec.batch is not None and rec.training is not None and rec.decision is not None
    assert rec.batch.champion is None
    assert rec.batch.escalated == rec.batch.items == 40
    assert rec.batch.teacher_calls == 40
    assert rec.batch.cost_usd == pytest.approx(40 * COST)
    assert rec.batch.collected == {"escalated": 40}
    assert rec.training.traces == 40 and rec.training.by_source == {"teacher": 40}
    assert rec.decision.promoted and "no local judge in service yet" in rec.decision.reason
    d = three_rounds.round_dir(1)
    for name in ("batch.jsonl", "decisions.jsonl", "collected.jsonl", "training.jsonl", "heldout.jsonl", "round.json"):
        assert (d / name).is_file(), name
    assert (d / "model" / "classifier.json").is_file()
    assert not (d / "model.partial").exists()


def test_the_trained_local_judge_takes_over_and_escalation_falls(three_rounds: Flywheel, world: World) -> None:
    one, two = three_rounds.record(1), three_rounds.record(2)
    assert one.challenger is not None and one.challenger.local_agreement > 0.9
    assert one.challenger.threshold is not None  # calibrated: it keeps items
    assert two.batch is not None and two.batch.champion == 1
    assert two.batch.threshold == one.challenger.threshold
    assert two.batch.escalation_share < 0.5  # was 1.0 in round 1
    decisions = _decisions(three_rounds, 2)
    assert len(decisions) == 60
    for dec in decisions:
        assert dec.escalated == (dec.decided_by == "teacher")
        if dec.decided_by == "local":
            assert dec.local_confidence is not None and dec.local_confidence >= two.batch.threshold
            assert dec.verdict == dec.local_verdict
        if dec.escalated or dec.audited:
            assert dec.teacher is not None and dec.teacher.winner == world.truth[dec.key]
            assert dec.teacher_calls == 1 and dec.teacher_cost_usd == pytest.approx(COST)
        else:
            assert dec.teacher is None and dec.teacher_calls == 0
    assert two.batch.audited == sum(d.audited for d in decisions) > 0
    assert two.batch.teacher_calls == two.batch.escalated + two.batch.audited
    assert two.batch.cost_usd == pytest.approx(two.batch.teacher_calls * COST)
    # Traces accumulate: round 2 trains on round 1's and its own (escalated + audited).
    assert two.training is not None and two.training.rounds == [1, 2]
    assert two.training.traces == 40 + two.batch.escalated + two.batch.audited
    assert len(read_traces(three_rounds.round_dir(2) / "training.jsonl")) == two.training.traces


def test_promotion_both_ways_on_real_rounds(three_rounds: Flywheel) -> None:
    two, three = three_rounds.record(2), three_rounds.record(3)
    # Round 2: as good as the champion (ties promote: "does not lose agreement").
    assert two.decision is not None and two.decision.promoted
    assert two.challenger is not None and two.champion is not None and two.champion.round == 1
    assert two.challenger.local_agreement >= two.champion.local_agreement
    # Round 3 trained mostly on the drifted traffic, where the shorter answer wins:
    # it loses agreement on the held-out set, so the champion stays.
    assert three.decision is not None and not three.decision.promoted
    assert three.challenger is not None and three.champion is not None
    assert three.challenger.local_agreement < three.champion.local_agreement
    assert three.decision.champion_after == three.decision.champion_before == 2
    assert three_rounds.state.champion == 2
    assert [e.action for e in three_rounds.state.events] == ["promoted", "promoted", "kept"]
    assert (three_rounds.round_dir(3) / "model").is_dir()  # kept on file, not in service


def test_audit_of_confident_items_flags_the_drift(three_rounds: Flywheel) -> None:
    two, three = three_rounds.record(2), three_rounds.record(3)
    assert two.batch is not None and two.batch.drift is False
    assert three.batch is not None
    assert three.batch.audited > 50
    assert three.batch.audit_agreement is not None and three.batch.audit_agreement < 0.2
    assert three.batch.audit_reference is not None and three.batch.audit_reference > 0.9
    assert three.batch.drift is True and three.batch.drift_p_value is not None and three.batch.drift_p_value < 1e-6


def test_teacher_failures_fall_back_and_never_become_traces(
    three_rounds: Flywheel, tmp_path: Path, world: World, trainer: ProbeTrainer
) -> None:
    shutil.copytree(three_rounds.workdir, tmp_path / "work")
    settings = SETTINGS.model_copy(update={"on_teacher_failure": "fallback", "audit_rate": 1.0})
    fw = _flywheel(tmp_path / "work", world, trainer, settings=settings)
    rng = random.Random(11)
    # The teacher has no verdict for any of these. Half are close calls (equal lengths), which the champion escalates.
    clear = [_pair(rng, f"unrecorded prompt {i}") for i in range(20)]
    close = [
        PairwiseInput(instruction=f"close call {i}", response_a=" ".join(words[:n]), response_b=" ".join(words[n:]))
        for i in range(20)
        for n in [rng.randint(3, 8)]
        for words in [[rng.choice(WORDS) for _ in range(2 * n)]]
    ]
    rec = fw.run_round(world.batch([*clear, *[(x, "A") for x in close]]))
    assert rec.batch is not None and rec.training is not None
    decisions = _decisions(fw, 4)
    escalated = [d for d in decisions if d.escalated]
    assert len(escalated) >= 10, "the champion escalates the close calls"
    for d in escalated:  # the teacher failed: the local verdict stands, flagged, and is not audited again
        assert d.decided_by == "local" and d.verdict == d.local_verdict and d.status is Status.OK
        assert d.teacher is not None and not d.teacher.ok and not d.audited and d.teacher_calls == 1
    assert rec.batch.audited == len(decisions) - len(escalated)
    assert rec.batch.teacher_calls == len(decisions) and rec.batch.teacher_failures == len(decisions)
    assert rec.batch.collected == {} and rec.training.traces == three_rounds.record(3).training.traces  # type: ignore[union-attr]


# ------------------------------------------------------------------ rollback


def test_rollback(three_rounds: Flywheel, tmp_path: Path, world: World, trainer: ProbeTrainer) -> None:
    shutil.copytree(three_rounds.workdir, tmp_path / "work")
    fw = _flywheel(tmp_path / "work", world, trainer)
    records = [r.model_dump() for r in fw.rounds()]
    assert fw.state.champion == 2
    state = fw.rollback()  # to the champion before the current one
    assert state.champion == 1 and state.events[-1].action == "rollback"
    assert state.excluded_rounds == ()
    # The serving cascade is now round 1's judge at its calibrated threshold, then the teacher.
    cascade, ev = asyncio.run(fw.acascade())
    assert ev is not None and ev.round == 1 and cascade.name == "flywheel:1"
    verdict = asyncio.run(cascade.ajudge(world.stream[200][0]))
    assert verdict.ok and verdict.tiers[0].judge == "local:round-001"
    assert fw.rollback().champion == 2  # and back
    # Round 3 learnt from drifted traffic: drop its traces from future training.
    state = fw.rollback(1, drop_traces=True)
    assert state.champion == 1 and state.excluded_rounds == (2, 3)
    state = fw.rollback(2)
    assert state.champion == 2 and state.excluded_rounds == (2, 3)  # a rollback never re-includes traces
    rec = fw.run_round([])  # retrain only
    assert rec.batch is not None and rec.batch.items == 0 and rec.batch.champion == 2
    assert rec.training is not None and rec.training.rounds == [1]
    assert rec.training.traces == fw.record(1).training.traces  # type: ignore[union-attr]
    with pytest.raises(FlywheelError, match="no trained"):
        fw.rollback(9)
    # Rollbacks never touch the round records.
    assert [r.model_dump() for r in fw.rounds()][:3] == records
    assert [e.action for e in fw.state.events] == ["promoted", "promoted", "kept", *["rollback"] * 4, "promoted"]


def test_rollback_needs_an_earlier_judge_and_a_free_folder(tmp_path: Path, world: World, trainer: ProbeTrainer) -> None:
    from judgegraph.flywheel._workdir import _exclusive

    fw = _flywheel(tmp_path / "work", world, trainer)
    with pytest.raises(FlywheelError, match="no earlier"):
        fw.rollback()
    with _exclusive(fw.workdir), pytest.raises(FlywheelError, match="in use by another process"):
        fw.rollback()
    with pytest.raises(FlywheelError, match="no earlier"):  # the lock is gone with its holder
        fw.rollback()


# ------------------------------------------------------------------ report


def test_report_has_rounds_and_plots(three_rounds: Flywheel, tmp_path: Path) -> None:
    paths = write_flywheel_report(three_rounds.workdir, tmp_path / "report")
    html = paths["html"].read_text(encoding="utf-8")
    assert html.count('<svg class="plot"') == 3
    for kind in ("flywheel-agreement", "flywheel-escalation", "flywheel-cost"):
        assert f'data-plot="{kind}"' in html
    md = paths["markdown"].read_text(encoding="utf-8")
    rows = [line for line in md.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 3
    assert "| 3 | 2 | 120 |" in rows[2] and "| kept |" in rows[2]
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert [r["promoted"] for r in data["rows"]] == [True, True, False]
    assert data["rows"][0]["escalation_share"] is not None
