"""A judged eval run becomes training data: traces read back from the job store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from judgegraph import ScriptedBackend
from judgegraph.cli import app
from judgegraph.finetune import (
    DatasetConfig,
    PairwiseTrace,
    PointwiseTrace,
    build_dataset,
    read_traces,
    traces_from_store,
)
from judgegraph.jobs import JudgeConfig, SourceConfig, arun_job, build_judge
from judgegraph.types import Criterion, Rubric, SwapPolicy


def _pairs(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as fp:
        for i in range(n):
            rec: dict[str, Any] = {"prompt": f"item-{i:02d}: which is better?", "left": f"L{i}", "right": f"R{i}"}
            if i != 3:  # row 3 has no human label
                rec["gold"] = "B" if i % 3 == 0 else "A"
            fp.write(json.dumps(rec) + "\n")
    return path


def _pairwise_reply(req: Any) -> str:
    text = req.messages[-1].content
    if "item-05" in text:
        return "I cannot decide."  # unparsed: never a label
    return "Both are fine, A is closer. [RESULT] A"


async def _pairwise_run(tmp_path: Path, run_id: str = "pw") -> Path:
    src = _pairs(tmp_path / "items.jsonl", 8)
    cfg = SourceConfig(
        path=str(src), fields={"instruction": "prompt", "response_a": "left", "response_b": "right"}, label="gold"
    )
    single = SwapPolicy(mode="single")
    judge = build_judge(JudgeConfig(kind="pairwise", template="pairwise-choice", swap=single, repair=False))
    ctx = {"backend": ScriptedBackend(_pairwise_reply)}
    summary = await arun_job(cfg, judge=judge, kind="pairwise", store=tmp_path / "s.db", run_id=run_id, context=ctx)
    assert (summary.ok, summary.unparsed) == (7, 1)
    return tmp_path / "s.db"


async def test_judge_labelled_traces_skip_unparsed_rows(tmp_path: Path) -> None:
    store = await _pairwise_run(tmp_path)
    export = traces_from_store(store)
    assert export.run_id == "pw" and export.kind == "pairwise"
    assert export.counts == {"rows": 8, "exported": 7, "unparsed": 1}
    assert all(isinstance(t, PairwiseTrace) and t.winner == "A" and t.source == "eval-store" for t in export.traces)
    assert [t.metadata["row"] for t in export.traces] == [0, 1, 2, 3, 4, 6, 7]
    assert export.traces[0].instruction == "item-00: which is better?" and export.traces[0].response_b == "R0"
    assert export.traces[0].rationale and "closer" in export.traces[0].rationale


async def test_human_labelled_traces_use_the_source_labels(tmp_path: Path) -> None:
    store = await _pairwise_run(tmp_path)
    export = traces_from_store(store, labels="human")
    # Row 5 (unparsed by the judge) still has a human label; row 3 has none.
    assert export.counts == {"rows": 8, "exported": 7, "no_label": 1}
    winners = {t.metadata["row"]: t.winner for t in export.traces}
    assert winners == {0: "B", 1: "A", 2: "A", 4: "A", 5: "A", 6: "B", 7: "A"}
    assert {t.source for t in export.traces} == {"human"}
    # They feed the dataset builder like any traces.
    ds = build_dataset(export.traces, DatasetConfig(formats=("pairwise-choice",), validation_fraction=0.25))
    assert ds.stats["train_traces"] + ds.stats["validation_traces"] == 7


async def test_pointwise_human_scores_off_the_judges_scale_are_named(tmp_path: Path) -> None:
    src = tmp_path / "answers.jsonl"
    rows = [{"q": f"q{i}", "a": f"answer {i}", "score": s} for i, s in enumerate([4, 2, 9, 5])]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = SourceConfig(path=str(src), fields={"instruction": "q", "response": "a"}, label="score")
    judge = build_judge(JudgeConfig(kind="pointwise", scale=(1, 5)))
    ctx = {"backend": ScriptedBackend(lambda req: "Solid. [RESULT] 3")}
    await arun_job(cfg, judge=judge, kind="pointwise", store=tmp_path / "s.db", run_id="pt", context=ctx)

    export = traces_from_store(tmp_path / "s.db", labels="human")
    assert export.counts == {"rows": 4, "exported": 3, "bad_row": 1}
    assert len(export.problems) == 1 and "row 2" in export.problems[0] and "outside the scale 1-5" in export.problems[0]
    assert [(t.score, t.scale) for t in export.traces if isinstance(t, PointwiseTrace)] == [
        (4, (1, 5)),
        (2, (1, 5)),
        (5, (1, 5)),
    ]
    judged = traces_from_store(tmp_path / "s.db")
    assert [t.score for t in judged.traces if isinstance(t, PointwiseTrace)] == [3, 3, 3, 3]


async def test_run_choice_and_unsupported_kinds_are_refused(tmp_path: Path) -> None:
    store = await _pairwise_run(tmp_path, run_id="first")
    src = tmp_path / "answers.jsonl"
    src.write_text(json.dumps({"q": "q", "a": "a"}) + "\n")
    cfg = SourceConfig(path=str(src), fields={"instruction": "q", "response": "a"})
    crit = Criterion(name="x", rubric=Rubric(criterion="x", levels={1: "bad", 2: "ok", 3: "good"}))
    rubric = build_judge(JudgeConfig(kind="rubric", criteria=[crit]))
    ctx = {"backend": ScriptedBackend(lambda req: "x: [RESULT] 2")}
    await arun_job(cfg, judge=rubric, kind="rubric", store=store, run_id="rub", context=ctx)

    with pytest.raises(ValueError, match=r"2 runs; name one with run_id: \['first', 'rub'\]"):
        traces_from_store(store)
    with pytest.raises(ValueError, match="rubric run"):
        traces_from_store(store, run_id="rub")
    with pytest.raises(FileNotFoundError, match="no eval store"):
        traces_from_store(tmp_path / "missing.db")
    assert traces_from_store(store, run_id="first").counts["exported"] == 7


async def test_cli_export_traces_round_trips(tmp_path: Path) -> None:
    store = await _pairwise_run(tmp_path)
    out = tmp_path / "traces.jsonl"
    result = CliRunner().invoke(app, ["finetune", "export-traces", str(store), str(out), "--labels", "human"])
    assert result.exit_code == 0, result.output
    assert "wrote 7 traces" in result.output and "no_label 1" in result.output
    assert [t.model_dump() for t in read_traces(out)] == [
        t.model_dump() for t in traces_from_store(store, labels="human").traces
    ]
    bad = CliRunner().invoke(app, ["finetune", "export-traces", str(store), str(out), "--labels", "teacher"])
    assert bad.exit_code == 2 and "--labels must be judge or human" in bad.output
