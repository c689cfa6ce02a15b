"""Generative SFT of a causal LM judge with TRL, optionally through PEFT.

The model learns to answer the judge prompt exactly as the inference judges
render it (see ``_dataset``), with the loss on the completion only. The
result is a directory the TransformersBackend loads, or, after
:func:`export_for_serving`, one that TGI, vLLM and SGLang serve.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judgegraph.pretrained import detach_gguf, pretrained_source
from judgegraph.types import MissingExtraError

from ._dataset import JudgeDataset
from ._progress import rich_trainer_callback

__all__ = ["SFTOptions", "TrainResult", "train_sft"]


class SFTOptions(BaseModel):
    """Options for :func:`train_sft`. ``bf16=None`` turns bf16 on where the
    GPU supports it and keeps fp32 on CPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["lora", "qlora", "full"] = "lora"
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    lora_dropout: float = Field(default=0.0, ge=0, lt=1)
    lora_target_modules: str | list[str] = "all-linear"
    learning_rate: float | None = Field(default=None, gt=0, description="default 2e-4 for LoRA, 2e-5 for full")
    lr_scheduler_type: str = "constant_with_warmup"
    warmup_steps: int = Field(default=10, ge=0)
    max_steps: int = Field(default=-1, description="-1: run num_train_epochs")
    num_train_epochs: float = Field(default=1.0, gt=0)
    batch_size: int = Field(default=8, ge=1, description="per device")
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    max_length: int = Field(default=2048, ge=16)
    packing: bool = False
    packing_strategy: Literal["bfd", "wrapped"] = Field(
        default="bfd",
        description=(
            "bfd: whole examples, each attending only to itself (exact; the batch is flattened into one row, "
            "so without a varlen kernel attention cost grows with batch_size x max_length squared). "
            "wrapped: fixed-length rows cut across examples, so an example can attend to its neighbours; "
            "dense and fast with SDPA, for throughput runs"
        ),
    )
    attn_implementation: str | None = Field(
        default=None,
        description="passed to from_pretrained: 'sdpa', 'eager', 'flex_attention', 'flash_attention_2'; None keeps "
        "transformers' default",
    )
    bf16: bool | None = None
    gradient_checkpointing: bool = False
    completion_only_loss: bool = True
    weight_decay: float = Field(default=0.0, ge=0)
    logging_steps: int = Field(default=10, ge=1)
    save_steps: int = Field(default=200, ge=1)
    save_total_limit: int | None = Field(default=2, ge=1)
    seed: int = 0

    def resolved_lr(self) -> float:
        if self.learning_rate is not None:
            return self.learning_rate
        return 2e-5 if self.method == "full" else 2e-4


class TrainResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    output_dir: Path
    final_dir: Path = Field(description="the trained model (or LoRA adapter) with its tokenizer")
    adapter: bool = Field(description="final_dir holds a LoRA adapter, not full weights")
    steps: int
    train_loss: float | None
    runtime_s: float
    tokens_seen: int | None = None


def _bf16(requested: bool | None) -> bool:
    import torch

    cuda_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if requested and not cuda_bf16:
        raise ValueError("bf16=True needs a GPU with bfloat16 support; use bf16=false (fp32) on CPU")
    return cuda_bf16 if requested is None else requested


def load_tokenizer(model_path: str | Path) -> Any:
    """The model's tokenizer, with a pad token and a chat template (ChatML
    when the model has none, matching the backends' fallback)."""
    from transformers import AutoTokenizer

    from judgegraph.tiny_model import CHATML_TEMPLATE

    folder, gguf = pretrained_source(model_path)
    tok = AutoTokenizer.from_pretrained(folder, **gguf)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if not getattr(tok, "chat_template", None):
        tok.chat_template = CHATML_TEMPLATE
    return tok


def _load_model(model_path: str | Path, opts: SFTOptions, bf16: bool) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if bf16 else torch.float32
    folder, gguf = pretrained_source(model_path)
    kwargs: dict[str, Any] = {"dtype": dtype, **gguf}
    if opts.attn_implementation is not None:
        kwargs["attn_implementation"] = opts.attn_implementation
    if opts.method != "qlora":
        # Trained weights are saved: a GGUF-loaded model must drop its quantizer first.
        return detach_gguf(AutoModelForCausalLM.from_pretrained(folder, **kwargs))
    try:
        import bitsandbytes
    except ImportError:
        raise MissingExtraError("QLoRA", "qlora") from None
    from packaging.version import Version

    # bitsandbytes has had CPU kernels for 4-bit layers since 0.46; before, CUDA only.
    if not torch.cuda.is_available() and Version(bitsandbytes.__version__) < Version("0.46"):
        raise ValueError(
            f"method 'qlora' on CPU needs bitsandbytes >= 0.46 (found {bitsandbytes.__version__}); "
            "upgrade it, use a CUDA GPU, or use 'lora'"
        )
    from peft import prepare_model_for_kbit_training
    from transformers import BitsAndBytesConfig

    quant = BitsAndBytesConfig(  # type: ignore[no-untyped-call]
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16 if bf16 else torch.float32,
    )
    model = AutoModelForCausalLM.from_pretrained(folder, quantization_config=quant, **kwargs)
    return prepare_model_for_kbit_training(  # type: ignore[no-untyped-call]
        model, use_gradient_checkpointing=opts.gradient_checkpointing
    )


def train_sft(
    model_path: str | Path,
    dataset: JudgeDataset,
    output_dir: str | Path,
    *,
    options: SFTOptions | None = None,
    resume_from_checkpoint: bool | str | None = None,
    progress: bool = True,
    callbacks: Sequence[Any] = (),
) -> TrainResult:
    """Fine-tune ``model_path`` on ``dataset`` with TRL's SFTTrainer.

    LoRA and QLoRA go through PEFT; the adapter lands in ``final_dir`` (merge
    it with :func:`merge_lora`, or let :func:`export_for_serving` do it).
    ``resume_from_checkpoint``: True resumes from the newest checkpoint in
    ``output_dir``, a path resumes from that checkpoint.
    """
    try:
        import torch
        from trl import SFTConfig, SFTTrainer  # type: ignore[attr-defined]
    except ImportError:
        raise MissingExtraError("train_sft", "finetune") from None

    opts = options or SFTOptions()
    out = Path(output_dir)
    bf16 = _bf16(opts.bf16)
    tok = load_tokenizer(model_path)
    model = _load_model(model_path, opts, bf16)
    peft_config = None
    if opts.method in ("lora", "qlora"):
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=opts.lora_r,
            lora_alpha=opts.lora_alpha,
            lora_dropout=opts.lora_dropout,
            target_modules=opts.lora_target_modules,
            task_type="CAUSAL_LM",
        )
    data = dataset.to_hf()
    # Always set explicitly: TRL turns checkpointing on by default. transformers 5
    # renamed the option; older releases know only the old name.
    fields = getattr(SFTConfig, "__dataclass_fields__", {})
    name = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    extra: dict[str, Any] = {name: opts.gradient_checkpointing}
    args = SFTConfig(
        **extra,
        output_dir=str(out),
        max_steps=opts.max_steps,
        num_train_epochs=opts.num_train_epochs,
        per_device_train_batch_size=opts.batch_size,
        per_device_eval_batch_size=opts.batch_size,
        gradient_accumulation_steps=opts.gradient_accumulation_steps,
        learning_rate=opts.resolved_lr(),
        lr_scheduler_type=opts.lr_scheduler_type,
        warmup_steps=opts.warmup_steps,
        weight_decay=opts.weight_decay,
        max_length=opts.max_length,
        packing=opts.packing,
        packing_strategy=opts.packing_strategy,
        completion_only_loss=opts.completion_only_loss,
        bf16=bf16,
        logging_steps=opts.logging_steps,
        save_steps=opts.save_steps,
        save_total_limit=opts.save_total_limit,
        seed=opts.seed,
        report_to="none",
        disable_tqdm=True,
        include_num_input_tokens_seen="non_padding",
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=data["train"],
        processing_class=tok,
        peft_config=peft_config,
        callbacks=[rich_trainer_callback("sft", enabled=progress), *callbacks],
    )
    started = time.perf_counter()
    output = trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    runtime = time.perf_counter() - started
    final = out / "final"
    trainer.save_model(str(final))
    tok.save_pretrained(str(final))
    return TrainResult(
        output_dir=out,
        final_dir=final,
        adapter=peft_config is not None,
        steps=trainer.state.global_step,
        train_loss=output.training_loss if output is not None else None,
        runtime_s=runtime,
        tokens_seen=int(trainer.state.num_input_tokens_seen or 0) or None,
    )
