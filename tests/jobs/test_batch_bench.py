"""bench/batch_cost.py on one LLMBar strategy: live and batch store the same
verdicts, the batch costs half, and the planner's cascade with its escalated
items batched meets the issue's target on ChatGPT / Metrics_Reference."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "batch_cost.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("batch_cost_bench", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


async def test_batch_cost_bench_on_metrics_reference(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = shared_data / "llmbar"
    if not (root / "LLMBar" / "Natural").is_dir():
        pytest.skip("LLMBar Natural is not in ../shared/data/llmbar")
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")
    bench = _bench()
    # One cross-validation seed for the jury rows (the bench itself runs five).
    out = await bench.strategy_rows(root, "Metrics_Reference", tmp_path, seeds=(0,))  # asserts live == batch itself
    live, batch = out["live"], out["batch"]
    assert out["n"] == 100 and batch.cost == pytest.approx(live.cost * 0.5)
    assert out["requests_billed_max"] == 1
    chatgpt = next(c for c in out["cascades"] if c["weak"] == "ChatGPT")
    m = chatgpt["measured"]
    assert chatgpt["policy"] == "if swap-inconsistent" and m.escalated == pytest.approx(0.27)
    assert m.cost <= 0.25 * live.cost and live.agreement - m.agreement <= 0.01 + 1e-9
    # The measured cascade agrees with the planner's in-sample simulation.
    assert m.agreement == pytest.approx(chatgpt["planned"][0])
    # The jury rows: every item judged out of sample exactly once, by its own fold's choice.
    jury = out["jury"]
    assert sum(len(f.keys) for f in jury["cv"].folds) == out["n"] and len(jury["folds"]) == len(jury["cv"].folds)
    assert len({k for f in jury["cv"].folds for k in f.keys}) == out["n"]
