"""The smaller defects of issue 15: each with the part that showed it."""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from judgegraph import PointwiseJudge, RetryPolicy, ScriptedBackend
from judgegraph.backends import GenerateRequest, TGIBackend
from judgegraph.cascade import agreement_credit
from judgegraph.datasets import DatasetNotFoundError, list_llmbar_runs, load_llmbar, load_llmbar_run
from judgegraph.finetune import launch_commands
from judgegraph.jobs import SourceConfig, arun_job
from judgegraph.judges import llmbar_replay
from judgegraph.testing import LoopbackServer, Reply, tokenize
from judgegraph.types import Message, Pricing


@pytest.mark.parametrize("folder", ["plain", "with space", "it's"])
def test_the_exported_backend_line_is_valid_python(tmp_path: Path, folder: str) -> None:
    d = tmp_path / folder
    d.mkdir()
    line = launch_commands(d)["in_process"]
    call = ast.parse(line, mode="eval").body
    assert isinstance(call, ast.Call) and ast.literal_eval(call.args[0]) == str(d.resolve())
    for key in ("vllm_backend", "sglang_backend", "tgi_backend"):
        ast.parse(launch_commands(d, name="my 'judge'")[key], mode="eval")


async def test_tgi_generate_reports_input_tokens() -> None:
    with LoopbackServer(lambda req: Reply("[RESULT] 4")) as server:
        backend = TGIBackend(server.url, mode="generate", retry=RetryPolicy(max_attempts=1))
        messages = (Message(role="user", content="How good is this answer? It is fine."),)
        out = await backend.generate(GenerateRequest(messages=messages))
    assert out.usage.prompt_tokens == len(tokenize(backend._prompt_format(messages))) > 0
    assert out.usage.completion_tokens == len(tokenize("[RESULT] 4"))


async def test_an_unpriced_run_reports_its_cost_as_unpriced(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"instruction": "Q?", "response": "a"}) + "\n", encoding="utf-8")

    async def cost(pricing: Pricing | None) -> float | None:
        backend = ScriptedBackend(lambda req: "[RESULT] 4", pricing=pricing)
        judge = PointwiseJudge(backend, structured=False, repair=False)
        s = await arun_job(SourceConfig(path=str(src)), judge=judge, kind="pointwise", store=tmp_path / f"{pricing}.db")
        return s.cost_usd

    assert await cost(None) is None
    priced = await cost(Pricing(input_per_mtok=1.0, output_per_mtok=1.0))
    assert priced is not None and priced >= 0.0


def _llmbar_root(tmp_path: Path, subset_dir: str, first: list[str | None], second: list[str | None]) -> Path:
    root = tmp_path / "llmbar"
    d = root / subset_dir
    rows = [{"input": f"q{i}", "output_1": f"good {i}", "output_2": f"bad {i}", "label": 1} for i in range(len(first))]
    (d / "evaluators" / "GPT-4" / "Vanilla").mkdir(parents=True)
    (d / "dataset.json").write_text(json.dumps(rows), encoding="utf-8")
    results = [
        {**r, "results": [{"swap = False": {"winner": a}, "swap = True": {"winner": b}}]}
        for r, a, b in zip(rows, first, second, strict=True)
    ]
    (d / "evaluators" / "GPT-4" / "Vanilla" / "result.json").write_text(json.dumps(results), encoding="utf-8")
    (d / "evaluators" / "GPT-4" / "Vanilla" / "statistics.json").write_text("{}", encoding="utf-8")
    return root


@pytest.mark.parametrize("subset", ["GPTInst", "GPTOut", "Manual", "Neighbor"])
def test_llmbar_adversarial_subsets_load(tmp_path: Path, subset: str) -> None:
    root = _llmbar_root(tmp_path, f"LLMBar/Adversarial/{subset}", ["1", "2"], ["1", None])
    assert [i.output_1 for i in load_llmbar(root, subset=subset)] == ["good 0", "good 1"]
    assert list_llmbar_runs(root) == [(subset, "GPT-4", "Vanilla")]
    run = load_llmbar_run(root, subset=subset, evaluator="GPT-4", strategy="Vanilla")
    assert [j.first for j in run.judgements] == ["A", "B"]


def test_list_llmbar_runs_says_when_it_does_not_recognise_the_root(tmp_path: Path) -> None:
    (tmp_path / "LLMBar" / "Somewhere").mkdir(parents=True)  # the marker, but no subset folder
    with pytest.raises(DatasetNotFoundError, match="none of the subset folders"):
        list_llmbar_runs(tmp_path)
    (tmp_path / "LLMBar" / "Natural").mkdir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list_llmbar_runs(tmp_path) == []
    assert any("no recorded evaluator runs" in str(w.message) for w in caught)


def test_a_missing_order_gets_llmbar_half_credit_by_default(tmp_path: Path) -> None:
    # Gold is answer 1 ("A") for every item. Orders: both right; right + missing; wrong + missing; both missing.
    root = _llmbar_root(tmp_path, "LLMBar/Natural", ["1", "1", "2", None], ["1", None, None, None])
    rep = llmbar_replay(load_llmbar_run(root, subset="Natural", evaluator="GPT-4", strategy="Vanilla"))
    results = [r.result for r in rep.records]
    assert [r.ok for r in results] == [True, False, False, False]  # a cascade still escalates them
    assert [agreement_credit(r, "A") for r in results] == [1.0, 0.5, 0.0, 0.0]
    assert [agreement_credit(r, "A", missing_order="zero") for r in results] == [1.0, 0.0, 0.0, 0.0]
    assert "half" in (results[1].reason or "")


def test_the_planner_cli_asks_for_cost_flags(tmp_path: Path) -> None:
    from judgegraph import PairwiseVerdict
    from judgegraph.cli import app
    from judgegraph.judges import VerdictRecord
    from judgegraph.types import Status

    path = tmp_path / "rec.jsonl"
    lines = [
        VerdictRecord(
            key=f"k{i}", judge=judge, result=PairwiseVerdict(status=Status.OK, winner="A"), label="A"
        ).model_dump_json()
        for i in range(4)
        for judge in ("small", "big")
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = CliRunner().invoke(app, ["cascade", "plan", str(path)])
    assert got.exit_code == 1
    text = got.output
    assert "--cost big=COST" in text and "--cost small=COST" in text and "costs=" not in text, text
