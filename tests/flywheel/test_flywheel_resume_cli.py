"""Flywheel rounds that crash or stop after a stage and then resume, the folder's tie
to one held-out set, the flywheel CLI, and items-file errors.

The local judge is the real one (frozen encoder + the probe head from
judgegraph.finetune) on the tiny untrained Qwen2 as encoder; the task is
synthetic (see _flywheel_world.py): the longer answer wins, so a few dozen
traces teach it. The teacher replays the true labels.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from _flywheel_world import COST, SETTINGS, World, _decisions, _flywheel

from judgegraph.flywheel import Flywheel, FlywheelError, ProbeTrainer, read_items
from judgegraph.judges import ReplayJudge, item_key
from judgegraph.types import PairwiseVerdict, Status

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


# ------------------------------------------------------------------ CLI


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
