"""The judge flywheel: rounds, promotion both ways, no held-out leakage, resume, rollback, report.

The local judge is the real one (frozen encoder + the probe head from
judgegraph.finetune) on the tiny untrained Qwen2 as encoder; the task is
synthetic: the longer answer wins (the head sees the log-length difference),
so a few dozen traces teach it. The teacher replays the true labels.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from judgegraph.finetune._dataset import instruction_key
from judgegraph.finetune._traces import PairwiseTrace, read_traces
from judgegraph.flywheel import (
    Flywheel,
    FlywheelError,
    FlywheelItem,
    FlywheelSettings,
    HeldoutEval,
    ItemDecision,
    ProbeTrainer,
    promotion_decision,
    read_items,
    write_flywheel_report,
)
from judgegraph.flywheel._rules import evaluate_on_heldout
from judgegraph.judges import ReplayJudge, item_key
from judgegraph.types import PairwiseInput, PairwiseVerdict, Status, Winner

WORDS = "alpha beta gamma delta the answer is good bad fine ok".split()
COST = 0.001


def _pair(rng: random.Random, instruction: str, *, shorter_wins: bool = False) -> tuple[PairwiseInput, Winner]:
    short = rng.randint(2, 10)
    long = short + rng.randint(6, 20)
    a_long = rng.random() < 0.5
    la, lb = (long, short) if a_long else (short, long)
    a = " ".join(rng.choice(WORDS) for _ in range(la))
    b = " ".join(rng.choice(WORDS) for _ in range(lb))
    winner: Winner = "A" if a_long != shorter_wins else "B"
    return PairwiseInput(instruction=instruction, response_a=a, response_b=b), winner


class World:
    """Synthetic items with true labels; held-out prompts never appear in the stream."""

    def __init__(self, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.heldout_pairs = [_pair(rng, f"held-out prompt {i}") for i in range(60)]
        self.stream = [_pair(rng, f"stream prompt {i}") for i in range(240)]
        self.drifted = [_pair(rng, f"new kind of prompt {i}", shorter_wins=True) for i in range(150)]
        table = {item_key(x): PairwiseVerdict(status=Status.OK, winner=w) for x, w in self.everything()}
        self.truth = {item_key(x): w for x, w in self.everything()}
        self.teacher = ReplayJudge(table, name="teacher", cost_usd=COST)

    def everything(self) -> list[tuple[PairwiseInput, Winner]]:
        return self.heldout_pairs + self.stream + self.drifted

    @property
    def heldout(self) -> list[PairwiseTrace]:
        return [
            PairwiseTrace(
                instruction=x.instruction, response_a=x.response_a, response_b=x.response_b, winner=w, source="human"
            )
            for x, w in self.heldout_pairs
        ]

    @staticmethod
    def batch(pairs: list[tuple[PairwiseInput, Winner]]) -> list[FlywheelItem]:
        return [FlywheelItem(input=x, id=f"item-{i}") for i, (x, _) in enumerate(pairs)]


@pytest.fixture(scope="module")
def world() -> World:
    return World()


@pytest.fixture(scope="module")
def trainer(tiny_model: Path) -> ProbeTrainer:
    return ProbeTrainer(encoder=str(tiny_model), options={"max_length": 48, "labels": 2, "max_iter": 50})


SETTINGS = FlywheelSettings(alpha=0.2, delta=0.1, audit_rate=0.25, chunk_size=16)


def _flywheel(path: Path, world: World, trainer: ProbeTrainer, **kw: Any) -> Flywheel:
    settings = kw.pop("settings", SETTINGS)
    teacher = kw.pop("teacher", world.teacher)
    return Flywheel(path, heldout=world.heldout, teacher=teacher, trainer=trainer, settings=settings, **kw)


def _decisions(fw: Flywheel, n: int) -> list[ItemDecision]:
    path = fw.round_dir(n) / "decisions.jsonl"
    return [ItemDecision.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


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


# ------------------------------------------------------------------ resume


class Crash(BaseException):
    """Stands for the process dying (it is not an Exception, so nothing catches it)."""


class CountingTeacher(ReplayJudge):
    def __init__(self, world: World, *, crash_after: int | None = None) -> None:
        table = {item_key(x): PairwiseVerdict(status=Status.OK, winner=w) for x, w in world.everything()}
        super().__init__(table, name="teacher", cost_usd=COST)
        self.calls: list[str] = []
        self.crash_after = crash_after

    async def _ajudge_item(self, item: Any, context: Any) -> Any:
        if self.crash_after is not None and len(self.calls) >= self.crash_after:
            raise Crash
        self.calls.append(item_key(item))
        return await super()._ajudge_item(item, context)


def _round_view(fw: Flywheel, n: int) -> dict[str, Any]:
    rec = fw.record(n)
    assert rec.training is not None
    return {
        "decisions": sorted((d.key, d.verdict, d.decided_by, d.audited) for d in _decisions(fw, n)),
        "training": rec.training.sha256,
        "batch": rec.batch.model_dump(exclude={"drift_p_value"}) if rec.batch else None,
        "challenger": rec.challenger.model_dump() if rec.challenger else None,
        "decision": rec.decision.model_dump() if rec.decision else None,
    }


def test_an_interrupted_round_resumes_without_asking_the_teacher_twice(
    tmp_path: Path, world: World, trainer: ProbeTrainer
) -> None:
    b1, b2 = world.batch(world.stream[150:180]), world.batch(world.stream[180:240])
    whole = _flywheel(tmp_path / "whole", world, trainer)
    whole.run_round(b1)
    shutil.copytree(tmp_path / "whole", tmp_path / "cut")  # the same round 1 in both folders
    whole.run_round(b2)

    fw = _flywheel(tmp_path / "cut", world, trainer)
    # Round 2 dies after a few teacher calls, in its second chunk.
    dying = CountingTeacher(world, crash_after=3)
    with pytest.raises(Crash):
        _flywheel(tmp_path / "cut", world, trainer, teacher=dying).run_round(b2)
    pending = fw.pending()
    assert pending is not None and pending.round == 2 and pending.stage == "started"
    committed = {d.key for d in _decisions(fw, 2)}
    assert 0 < len(committed) < 60  # some chunks written, not all
    with (fw.round_dir(2) / "decisions.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"key": "cut off mid-wri')  # the crash also cut a line short

    with pytest.raises(FlywheelError, match="unfinished"):
        fw.run_round(b1)  # another batch is refused while round 2 is open
    with pytest.raises(FlywheelError, match="unfinished"):
        fw.rollback(1)
    resumed_teacher = CountingTeacher(world)
    resumed = _flywheel(tmp_path / "cut", world, trainer, teacher=resumed_teacher)
    rec = resumed.run_round()
    assert rec.stage == "done" and rec.round == 2
    assert not set(resumed_teacher.calls) & committed  # nothing committed is asked again
    assert _round_view(resumed, 2) == _round_view(whole, 2)
    assert _round_view(resumed, 1) == _round_view(whole, 1)
    assert resumed.state.champion == whole.state.champion


def test_stop_after_a_stage_then_resume(tmp_path: Path, world: World, trainer: ProbeTrainer) -> None:
    fw = _flywheel(tmp_path / "work", world, trainer)
    batch = world.batch(world.stream[:30])
    rec = fw.run_round(batch, stop_after="judged")
    assert rec.stage == "judged" and not (fw.round_dir(1) / "model").exists()
    rec = fw.run_round(batch, stop_after="trained")  # the same batch resumes
    assert rec.stage == "trained" and (fw.round_dir(1) / "model").is_dir()
    assert fw.state.champion is None
    # A model folder written completely before a crash is kept, not retrained.
    rec = fw.run_round()
    assert rec.stage == "done" and fw.state.champion == 1
    with pytest.raises(ValueError, match="give a batch"):
        fw.run_round()


def test_the_folder_is_tied_to_one_heldout_set(tmp_path: Path, world: World, trainer: ProbeTrainer) -> None:
    _flywheel(tmp_path / "work", world, trainer)
    other = World(seed=5)
    with pytest.raises(FlywheelError, match="another held-out set"):
        Flywheel(tmp_path / "work", heldout=other.heldout, teacher=world.teacher, trainer=trainer, settings=SETTINGS)


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


# ------------------------------------------------------------------ report, CLI


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


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_run_status_report_rollback(tmp_path: Path, world: World, tiny_model: Path) -> None:
    from typer.testing import CliRunner

    from judgegraph.finetune._traces import write_traces
    from judgegraph.flywheel.cli import flywheel_app
    from judgegraph.judges import VerdictRecord, write_verdicts

    data = tmp_path / "data"
    data.mkdir()
    _write_jsonl(
        data / "items.jsonl",
        [{**x.model_dump(exclude_none=True), "id": i} for i, (x, _) in enumerate(world.stream[:40])],
    )
    write_traces(data / "heldout.jsonl", world.heldout)
    write_verdicts(
        data / "teacher.jsonl",
        (
            VerdictRecord(key=item_key(x), judge="gpt", result=PairwiseVerdict(status=Status.OK, winner=w))
            for x, w in world.everything()
        ),
    )
    config = {
        "items": "data/items.jsonl",
        "batch_size": 30,
        "heldout": "data/heldout.jsonl",
        "teacher": {"kind": "replay", "path": "data/teacher.jsonl", "cost_usd_per_call": COST},
        "local": {"encoder": str(tiny_model), "options": {"max_length": 48, "labels": 2, "max_iter": 50}},
        "settings": {"alpha": 0.2, "audit_rate": 0.2},
    }
    (tmp_path / "flywheel.json").write_text(json.dumps(config), encoding="utf-8")
    work = tmp_path / "work"
    runner = CliRunner(env={"COLUMNS": "200"})

    def state() -> dict[str, Any]:
        return dict(json.loads((work / "state.json").read_text(encoding="utf-8")))

    def stages() -> list[tuple[int, str]]:
        recs = [json.loads(f.read_text(encoding="utf-8")) for f in sorted(work.glob("rounds/*/round.json"))]
        return [(r["batch_size"], r["stage"]) for r in recs]

    cfg = str(tmp_path / "flywheel.json")
    got = runner.invoke(flywheel_app, ["run", "--workdir", str(work), "--config", cfg, "--stop-after", "judged"])
    assert got.exit_code == 0, got.output
    assert "stopped after stage judged" in got.output
    assert stages() == [(30, "judged")] and state()["champion"] is None
    assert (work / "config.json").is_file()
    # No --config: the copy in the folder. Round 1 resumes, round 2 takes the last 10 items, then the stream is used up.
    got = runner.invoke(flywheel_app, ["run", "--workdir", str(work), "--rounds", "2"])
    assert got.exit_code == 0, got.output
    assert "used up" in got.output and "promoted" in got.output, got.output
    assert stages() == [(30, "done"), (10, "done")]
    got = runner.invoke(flywheel_app, ["status", "--workdir", str(work)])
    assert got.exit_code == 0 and "round" in got.output
    got = runner.invoke(flywheel_app, ["report", "--workdir", str(work)])
    assert got.exit_code == 0, got.output
    assert (work / "report.html").is_file()
    assert "Teacher cost per round" in (work / "report.html").read_text(encoding="utf-8")
    before = state()["champion"]
    got = runner.invoke(flywheel_app, ["rollback", "--workdir", str(work), "--to", "1"])
    assert got.exit_code == 0, got.output
    assert f"round {before} -> round 1" in got.output
    assert state()["champion"] == 1 and state()["events"][-1]["action"] == "rollback"
    got = runner.invoke(flywheel_app, ["run", "--workdir", str(tmp_path / "elsewhere")])
    assert got.exit_code != 0 and "give --config" in got.output


def test_items_file_errors_name_the_line(tmp_path: Path) -> None:
    p = _write_jsonl(
        tmp_path / "items.jsonl",
        [
            {"instruction": "q", "response_a": "a", "response_b": "b", "human_label": "A"},
            {"instruction": "q", "response_a": "a"},
        ],
    )
    with pytest.raises(ValueError, match=r"items.jsonl:2: not an item \(response_b"):
        read_items(p)
    p = _write_jsonl(tmp_path / "ok.jsonl", [{"instruction": "q", "response_a": "a", "response_b": "b", "id": 7}])
    (item,) = read_items(p)
    assert item.id == "7" and item.human_label is None and item.key == item_key(item.input)
