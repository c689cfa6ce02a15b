"""The run configuration: one TOML or JSON file for ``judgegraph finetune train``.

Relative paths in the file are resolved against the file's own folder.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from judgegraph._internal.text_files import read_text

from ._classifier import ClassifierOptions
from ._dataset import DatasetConfig
from ._probe import ProbeOptions
from ._sft import SFTOptions

__all__ = ["ConfigError", "DataSource", "FinetuneConfig", "load_config"]

EXAMPLE_CONFIG = """\
# judgegraph finetune train this-file.toml
head = "probe"                 # "sft" (generative judge), "classifier" (sequence head) or "probe"
model = "path/to/model"        # a causal LM for sft; an encoder (or decoder) for classifier and probe
output_dir = "runs/judge"

[data]
traces = ["traces.jsonl"]      # JSONL files of traces (judgegraph finetune import-pandalm writes one)

[dataset]                      # how traces become examples (sft renders prompts with these templates)
formats = ["pairwise-choice", "pointwise-rubric"]
swap = true
reference_drop = 0.2
phrasings = 3
validation_fraction = 0.3

[sft]
method = "lora"                # "lora", "qlora" (4-bit base; the qlora extra) or "full"
max_steps = 400
batch_size = 8
# bf16 = true                  # default: on where the GPU supports it, off on CPU
# gradient_checkpointing = true
# packing = true
# packing_strategy = "bfd"     # whole examples (exact); "wrapped" crosses example boundaries (fast on SDPA)
# attn_implementation = "flash_attention_2"   # a varlen kernel makes bfd packing fast; needs flash-attn

[classifier]
labels = 3
num_train_epochs = 3

[probe]
labels = 3
"""


class ConfigError(ValueError):
    """The config file is malformed; the message names the file and field."""


class DataSource(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    traces: list[Path] = Field(default_factory=list, description="JSONL trace files")
    pandalm: list[Path] = Field(default_factory=list, description="PandaLM test-set JSON files, read as traces")

    @model_validator(mode="after")
    def _some(self) -> DataSource:
        if not self.traces and not self.pandalm:
            raise ValueError("give at least one file under traces or pandalm")
        return self


class FinetuneConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    head: Literal["sft", "classifier", "probe"]
    model: str = Field(description="model directory to start from")
    output_dir: Path
    data: DataSource
    dataset: DatasetConfig = DatasetConfig()
    sft: SFTOptions = SFTOptions()
    classifier: ClassifierOptions = ClassifierOptions()
    probe: ProbeOptions = ProbeOptions()
    evaluate: bool = Field(default=True, description="judge the held-out split after training")
    eval_max_tokens: int = Field(default=256, ge=4, description="generation budget when evaluating an sft judge")
    export_dir: Path | None = Field(default=None, description="sft only: also export a servable directory here")

    def resolved(self, base: Path) -> FinetuneConfig:
        def fix(p: Path) -> Path:
            return p if p.is_absolute() else (base / p)

        model = self.model
        if not Path(model).is_absolute() and (base / model).exists():
            model = str(base / model)
        return self.model_copy(
            update={
                "model": model,
                "output_dir": fix(self.output_dir),
                "export_dir": fix(self.export_dir) if self.export_dir else None,
                "data": DataSource(
                    traces=[fix(p) for p in self.data.traces], pandalm=[fix(p) for p in self.data.pandalm]
                ),
            }
        )


def load_config(path: str | Path) -> FinetuneConfig:
    """Read and validate a ``.toml`` or ``.json`` config file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such config file")
    text = read_text(p)
    try:
        if p.suffix == ".toml":
            raw: Any = tomllib.loads(text)
        elif p.suffix == ".json":
            raw = json.loads(text)
        else:
            raise ConfigError(f"{p}: config must be a .toml or .json file")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{p}: {exc}") from None
    try:
        cfg = FinetuneConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or '(file)'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigError(f"{p}: {problems}") from None
    return cfg.resolved(p.parent.resolve())
