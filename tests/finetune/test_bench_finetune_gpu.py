"""bench/finetune_gpu.py, checked on CPU so that the one GPU run it exists
for does not fail on a bug: its FLOP formula against torch's FLOP counter,
and its whole path (build, pack, train, time, report) on a tiny model."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "finetune_gpu.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("finetune_gpu_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _counted_flops_per_token(model: Any, batch: int, seq: int) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    ids = torch.randint(0, model.config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    return counter.get_total_flops() / (batch * seq)


def test_flop_formula_matches_torch_flop_counter(bench: ModuleType) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Qwen2Config

    shape = dict(bench.TINY)
    seq = 256
    # Eager attention: its two matmuls are visible to the counter (CPU SDPA kernels are not).
    model = AutoModelForCausalLM.from_config(Qwen2Config(**shape), attn_implementation="eager")
    n = bench.matmul_params(model, shape)
    kw = {"matmul_params": n, "layers": shape["num_hidden_layers"], "hidden": shape["hidden_size"], "seq_len": seq}

    full = bench.flops_per_token("full", **kw)
    assert _counted_flops_per_token(model, 2, seq) == pytest.approx(full, rel=0.01)

    lora_model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    adapters = sum(p.numel() for p in lora_model.parameters() if p.requires_grad)
    counted = _counted_flops_per_token(lora_model, 2, seq)
    lora = bench.flops_per_token("lora", **kw)
    # The formula leaves the adapters' own FLOPs out (at most 6 per adapter weight per token).
    assert lora <= counted <= lora + 6 * adapters
    assert counted < 0.85 * full  # frozen weights get no weight gradient


def test_tiny_run_reports_throughput_for_both_modes(bench: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    rc = bench.main(["--tiny", "--modes", "lora,full", "--warmup", "1", "--steps", "2", "--out", str(out)])
    assert rc == 0
    report = json.loads(out.read_text())
    assert [r["mode"] for r in report["results"]] == ["lora", "full"]
    for r in report["results"]:
        assert r["timed_steps"] == 2 and r["packing"] == "wrapped"
        # Wrapped packing fills every row: the token count is exact.
        assert r["tokens_per_step"] == r["batch"] * r["seq_len"]
        assert r["tokens_per_s"] > 0 and r["mfu"] is None  # no peak figure on a CPU
    # Tied embeddings: the lookup is no matmul but the lm_head is, and they are one matrix.
    assert report["shape"]["matmul_params"] == report["shape"]["params"]


def test_bad_mode_is_refused(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--tiny", "--modes", "lora,qlora"]) == 2
    assert "qlora" in capsys.readouterr().err


def test_out_of_memory_retries_with_checkpointing_and_a_failed_mode_keeps_the_rest(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = bench.run_mode
    seen: list[tuple[str, bool]] = []

    def flaky(mode: str, *a: Any) -> dict[str, Any]:
        args = a[3]
        seen.append((mode, args.gradient_checkpointing))
        if mode == "lora":
            raise RuntimeError("no kernel for this shape")
        if not args.gradient_checkpointing:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return dict(real(mode, *a))

    monkeypatch.setattr(bench, "run_mode", flaky)
    out = tmp_path / "result.json"
    rc = bench.main(["--tiny", "--modes", "lora,full", "--warmup", "1", "--steps", "1", "--out", str(out)])
    assert rc == 1  # a mode failed
    assert seen == [("lora", False), ("full", False), ("full", True)]
    lora, full = json.loads(out.read_text())["results"]
    assert lora == {"mode": "lora", "error": "RuntimeError: no kernel for this shape"}
    assert full["gradient_checkpointing"] is True and full["tokens_per_s"] > 0
