"""Generative SFT with TRL on a tiny offline model, then merge, export, reload and judge.

The tiny model's tokenizer is trained on the fixed text of the judge prompts
so that each boilerplate line is one token: prompts are about 60 tokens
instead of 250, which keeps a learning run to seconds on a quiet CPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from judgegraph import PairwiseJudge, PointwiseJudge, SwapPolicy
from judgegraph.finetune import (
    DatasetConfig,
    JudgeDataset,
    SFTOptions,
    build_dataset,
    evaluate_judge,
    export_for_serving,
    merge_linear,
    merge_lora,
    synthetic_traces,
    train_sft,
)

torch = pytest.importorskip("torch")
pytest.importorskip("trl")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """On a shared 2-core machine one thread trains several times faster than
    two that keep waiting for each other; restored after the module."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def build_prompt_model(path: Path, dataset: JudgeDataset, *, vocab_size: int = 1400, seed: int = 0) -> Path:
    """A 2-layer Llama (hidden 128) whose BPE tokenizer learned the training prompts.

    Pre-tokenization splits only at line starts and digits, so frequent lines
    (the template's fixed text, the verdict lines) become single tokens while
    rarer content is spelled from shorter pieces. Llama is used because
    AutoTokenizer keeps a Llama model's own tokenizer.json as saved.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    from judgegraph.tiny_model import CHATML_TEMPLATE, SPECIALS

    texts = [m.content for e in dataset.train for m in e.messages] + [e.completion for e in dataset.train]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.Split("\n", "merged_with_next"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(texts, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<|pad|>", eos_token="<|im_end|>")  # type: ignore[no-untyped-call]
    tok.chat_template = CHATML_TEMPLATE
    tok.save_pretrained(path)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> tuple[JudgeDataset, Path]:
    # Pointwise 1/3/5 verdicts over 60 instructions; 12 held out.
    traces = synthetic_traces(600, kind="pointwise", instructions=60, seed=0)
    ds = build_dataset(traces, DatasetConfig(formats=("pointwise-rubric",), validation_fraction=0.2))
    return ds, build_prompt_model(tmp_path_factory.mktemp("sft") / "base", ds)


@pytest.fixture(scope="module")
def trained(task: tuple[JudgeDataset, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    ds, base = task
    # The recipe from NOTES: full fine-tuning, lr 1e-3 constant with warmup, batch 32.
    opts = SFTOptions(method="full", learning_rate=1e-3, batch_size=32, max_steps=80, save_steps=1000, logging_steps=20)
    out = tmp_path_factory.mktemp("sft") / "run"
    result = train_sft(base, ds, out, options=opts, progress=False)
    assert result.steps == 80 and not result.adapter
    assert result.tokens_seen is not None and result.tokens_seen > 0
    return Path(result.final_dir)


def _accuracy(model_dir: Path, ds: JudgeDataset) -> float:
    from judgegraph import TransformersBackend

    judge = PointwiseJudge(TransformersBackend(model_dir, max_batch_size=32), max_tokens=6, repair=False)
    report = evaluate_judge(judge, ds.validation_traces, max_concurrency=64)
    return float(report.agreement)


def test_tiny_model_learns_the_judging_task(task: tuple[JudgeDataset, Path], trained: Path) -> None:
    ds, base = task
    before = _accuracy(base, ds)
    after = _accuracy(trained, ds)
    # Three score levels: chance is a third.
    assert before < 0.5
    assert after >= 0.9, (before, after)


def test_export_reloads_and_judges(task: tuple[JudgeDataset, Path], trained: Path, tmp_path: Path) -> None:
    from judgegraph import TransformersBackend

    ds, _ = task
    result = export_for_serving(trained, tmp_path / "export")
    out = result.directory
    assert (out / "model.safetensors").is_file()
    assert (out / "tokenizer.json").is_file()
    assert "<|im_start|>" in (out / "chat_template.jinja").read_text()
    assert (
        "vllm.entrypoints.openai.api_server" in result.commands["vllm"]
        and str(out.resolve()) in result.commands["vllm"]
    )
    assert "text-generation-inference" in result.commands["tgi"]
    assert "sglang.launch_server" in result.commands["sglang"]
    assert _accuracy(out, ds) >= 0.9
    # A pairwise judge class runs on the same export; the model was never taught
    # that format, so only the call path is checked: a verdict with a status.
    backend = TransformersBackend(out)
    judge = PairwiseJudge(backend, template="pairwise-choice", max_tokens=6, swap=SwapPolicy(mode="single"))
    item = {"instruction": "Tell me a fact.", "response_a": "x.\nVerdict: wrong.", "response_b": "y."}
    verdict = judge.invoke(item)
    assert verdict.status.value in ("ok", "unparsed") and verdict.raw_text is not None


def test_resume_from_checkpoint_matches_an_uninterrupted_run(task: tuple[JudgeDataset, Path], tmp_path: Path) -> None:
    from safetensors.torch import load_file

    ds, base = task
    opts = SFTOptions(
        method="full",
        learning_rate=1e-3,
        batch_size=8,
        max_steps=6,
        save_steps=3,
        save_total_limit=None,
        logging_steps=3,
    )
    whole = train_sft(base, ds, tmp_path / "whole", options=opts, progress=False)
    resumed = train_sft(
        base,
        ds,
        tmp_path / "resumed",
        options=opts,
        progress=False,
        resume_from_checkpoint=str(tmp_path / "whole" / "checkpoint-3"),
    )
    assert resumed.steps == 6
    a = load_file(str(whole.final_dir / "model.safetensors"))
    b = load_file(str(resumed.final_dir / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-5, rtol=1e-4)
    # And the weights did move from the base model.
    start = load_file(str(base / "model.safetensors"))
    assert any(not torch.allclose(start[k], a[k]) for k in a)
    with pytest.raises(ValueError, match="checkpoint"):
        train_sft(base, ds, tmp_path / "empty", options=opts, progress=False, resume_from_checkpoint=True)


def test_lora_merge_and_linear_merge(task: tuple[JudgeDataset, Path], trained: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    ds, base = task
    opts = SFTOptions(method="lora", lora_r=8, learning_rate=2e-3, batch_size=16, max_steps=4, save_steps=1000)
    lora = train_sft(base, ds, tmp_path / "lora", options=opts, progress=False)
    assert lora.adapter and (lora.final_dir / "adapter_config.json").is_file()

    from peft import AutoPeftModelForCausalLM

    ids = torch.tensor([[5, 17, 42, 99, 7]])
    with torch.no_grad():
        peft_logits = AutoPeftModelForCausalLM.from_pretrained(str(lora.final_dir))(input_ids=ids).logits
        merged_dir = merge_lora(lora.final_dir, tmp_path / "merged")
        merged = AutoModelForCausalLM.from_pretrained(merged_dir)
        assert not any("lora" in k for k in merged.state_dict())
        torch.testing.assert_close(merged(input_ids=ids).logits, peft_logits, atol=1e-4, rtol=1e-4)

        # Prometheus-2-style linear merge of two judges: weights average exactly.
        mixed_dir = merge_linear([trained, merged_dir], tmp_path / "mixed", weights=[0.25, 0.75])
        mixed = AutoModelForCausalLM.from_pretrained(mixed_dir).state_dict()
        a = AutoModelForCausalLM.from_pretrained(trained).state_dict()
        b = merged.state_dict()
        for k in ("model.layers.0.self_attn.q_proj.weight", "model.norm.weight"):
            torch.testing.assert_close(mixed[k], 0.25 * a[k] + 0.75 * b[k])
    with pytest.raises(ValueError, match="sum to 1"):
        merge_linear([trained, merged_dir], tmp_path / "bad", weights=[0.5, 0.6])
    with pytest.raises(ValueError, match="not a LoRA adapter"):
        merge_lora(trained, tmp_path / "nope")


def test_packing_strategies_and_attention_choice(task: tuple[JudgeDataset, Path], tmp_path: Path) -> None:
    from transformers import TrainerCallback

    ds, base = task
    seen: dict[str, str] = {}

    class _Attn(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: object, state: object, control: object, **kw: object) -> None:
            seen["attn"] = kw["model"].config._attn_implementation  # type: ignore[attr-defined]

    common = {"method": "full", "batch_size": 2, "max_length": 128, "max_steps": 2, "save_steps": 1000}
    # wrapped: every row is max_length tokens of real data, so the count is exact.
    wrapped = SFTOptions(packing=True, packing_strategy="wrapped", attn_implementation="eager", **common)
    r = train_sft(base, ds, tmp_path / "wrapped", options=wrapped, progress=False, callbacks=[_Attn()])
    assert r.tokens_seen == 2 * 2 * 128
    assert seen["attn"] == "eager"
    # bfd keeps examples whole: rows end where an example would not fit, so fewer tokens.
    bfd = SFTOptions(packing=True, packing_strategy="bfd", **common)
    r = train_sft(base, ds, tmp_path / "bfd", options=bfd, progress=False, callbacks=[_Attn()])
    assert r.tokens_seen is not None and 0 < r.tokens_seen < 2 * 2 * 128
    assert seen["attn"] == "sdpa"


def test_qlora_trains_adapters_over_a_4bit_base(task: tuple[JudgeDataset, Path], tmp_path: Path) -> None:
    # bitsandbytes >= 0.46 runs 4-bit layers on CPU too, so QLoRA is tested here and not only on a GPU.
    bnb = pytest.importorskip("bitsandbytes")
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoModelForCausalLM, TrainerCallback

    ds, base = task
    seen: dict[str, int] = {}

    class _Layers(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: object, state: object, control: object, **kw: object) -> None:
            modules = list(kw["model"].modules())  # type: ignore[attr-defined]
            seen["4bit"] = sum(isinstance(m, bnb.nn.Linear4bit) for m in modules)
            seen["trainable"] = sum(p.numel() for p in kw["model"].parameters() if p.requires_grad)  # type: ignore[attr-defined]

    opts = SFTOptions(method="qlora", lora_r=8, learning_rate=2e-3, batch_size=8, max_steps=4, save_steps=1000)
    result = train_sft(base, ds, tmp_path / "qlora", options=opts, progress=False, callbacks=[_Layers()])
    # Every linear layer of the two blocks is 4-bit (7 each); only the adapters train.
    assert seen["4bit"] == 14 and 0 < seen["trainable"] < 100_000
    assert result.adapter and (result.final_dir / "adapter_config.json").is_file()
    assert result.train_loss is not None and math.isfinite(result.train_loss)
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    with torch.no_grad():
        plain = AutoModelForCausalLM.from_pretrained(base)(input_ids=ids).logits
        adapted = AutoPeftModelForCausalLM.from_pretrained(str(result.final_dir))(input_ids=ids).logits
    assert not torch.allclose(plain, adapted)  # the trained adapters change the full-precision base's output
