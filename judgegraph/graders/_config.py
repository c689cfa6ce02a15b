"""OpenAI Evals grader configs as pydantic models, field for field.

The shapes follow OpenAI's documented grader objects (``string_check``,
``text_similarity``, ``score_model``, ``label_model``, ``python``, ``multi``)
plus the ``pass_threshold`` their eval testing criteria add. Every model
forbids unknown fields, so a field judgegraph has no mapping for is refused
with its name instead of being dropped: a grader that silently ignored part
of its config would grade something else than its author meant.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

__all__ = [
    "GraderConfig",
    "GraderConfigError",
    "InputMessage",
    "LabelModelConfig",
    "MultiConfig",
    "PythonConfig",
    "SamplingParams",
    "ScoreModelConfig",
    "StringCheckConfig",
    "TextContent",
    "TextSimilarityConfig",
    "parse_grader_config",
]

GRADER_TYPES = ("string_check", "text_similarity", "score_model", "label_model", "python", "multi")
SimilarityMetric = Literal[
    "cosine", "fuzzy_match", "bleu", "gleu", "meteor", "rouge_1", "rouge_2", "rouge_3", "rouge_4", "rouge_5", "rouge_l"
]


class GraderConfigError(ValueError):
    """A grader config judgegraph cannot run as written; the message names each field."""


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _finite(v: float | None, info: Any) -> float | None:
    if v is not None and not math.isfinite(v):
        raise ValueError("must be a finite number")
    return v


class StringCheckConfig(_Config):
    type: Literal["string_check"]
    name: str | None = None
    input: str
    reference: str
    operation: Literal["eq", "ne", "like", "ilike"]


class TextSimilarityConfig(_Config):
    type: Literal["text_similarity"]
    name: str | None = None
    input: str
    reference: str
    evaluation_metric: SimilarityMetric
    # Required by an eval's testing criterion, absent from the fine-tuning shape.
    pass_threshold: float | None = None

    _check_threshold = field_validator("pass_threshold")(_finite)


class TextContent(_Config):
    """A text part of a message (``input_text`` or ``output_text``)."""

    type: Literal["input_text", "output_text"]
    text: str


class InputMessage(_Config):
    role: Literal["user", "assistant", "system", "developer"]
    content: str | TextContent | list[TextContent]
    type: Literal["message"] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_only(cls, v: Any) -> Any:
        parts = v if isinstance(v, list) else [v]
        for i, part in enumerate(parts):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind in ("input_image", "input_audio"):
                where = f"part {i} is " if isinstance(v, list) else ""
                raise ValueError(f"{where}{kind}, which is not supported (judgegraph's judges take text only)")
        return v

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        parts = self.content if isinstance(self.content, list) else [self.content]
        return "\n".join(p.text for p in parts)


class SamplingParams(_Config):
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_completions_tokens: int | None = Field(default=None, ge=1)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None

    @field_validator("top_p")
    @classmethod
    def _no_top_p(cls, v: float | None) -> float | None:
        # judgegraph's requests carry no top_p; 1 (all tokens) is the same as none.
        if v is not None and v != 1:
            raise ValueError("not supported (judgegraph's backends send no top_p); remove it or set it to 1")
        return v


class _ModelConfig(_Config):
    name: str | None = None
    model: str
    input: list[InputMessage] = Field(min_length=1)

    @model_validator(mode="after")
    def _has_user_turn(self) -> _ModelConfig:
        if not any(m.role == "user" for m in self.input):
            raise ValueError("input: needs at least one user message")
        return self


class ScoreModelConfig(_ModelConfig):
    type: Literal["score_model"]
    range: list[float] | None = None
    pass_threshold: float | None = None
    sampling_params: SamplingParams | None = None

    _check_threshold = field_validator("pass_threshold")(_finite)

    @field_validator("range")
    @classmethod
    def _whole_range(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return v
        if len(v) != 2 or not all(math.isfinite(x) for x in v) or not v[0] < v[1]:
            raise ValueError("must be [low, high] with low < high")
        # judgegraph reads whole-number scores only, rejecting rather than rounding others.
        if any(x != int(x) for x in v):
            raise ValueError("judgegraph scores on whole numbers; give whole-number ends, e.g. [0, 10]")
        return v

    def scale(self) -> tuple[int, int]:
        lo, hi = self.range or [0, 1]
        return int(lo), int(hi)


class LabelModelConfig(_ModelConfig):
    type: Literal["label_model"]
    labels: list[str] = Field(min_length=2)
    passing_labels: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _labels(self) -> LabelModelConfig:
        seen: set[str] = set()
        for i, label in enumerate(self.labels):
            if not label.strip() or label != label.strip() or any(c in label for c in "\n[]{}`"):
                raise ValueError(f"labels[{i}] = {label!r}: a label is one line of text without brackets or backticks")
            if label.casefold() in seen:
                raise ValueError(f"labels[{i}] = {label!r} repeats another label (labels are matched ignoring case)")
            seen.add(label.casefold())
        unknown = [p for p in self.passing_labels if p not in self.labels]
        if unknown:
            raise ValueError(f"passing_labels: {unknown} are not among labels {self.labels}")
        return self


class PythonConfig(_Config):
    type: Literal["python"]
    name: str | None = None
    source: str
    pass_threshold: float | None = None
    image_tag: str | None = None

    _check_threshold = field_validator("pass_threshold")(_finite)

    @field_validator("image_tag")
    @classmethod
    def _no_image(cls, v: str | None) -> str | None:
        if v is not None:
            raise ValueError("not supported (judgegraph runs python graders in this process, not an image)")
        return v


SubGraderConfig = Annotated[
    StringCheckConfig | TextSimilarityConfig | ScoreModelConfig | LabelModelConfig | PythonConfig,
    Field(discriminator="type"),
]


class MultiConfig(_Config):
    type: Literal["multi"]
    name: str | None = None
    graders: dict[str, SubGraderConfig] = Field(min_length=1)
    calculate_output: str


GraderConfig = Annotated[
    StringCheckConfig | TextSimilarityConfig | ScoreModelConfig | LabelModelConfig | PythonConfig | MultiConfig,
    Field(discriminator="type"),
]

_ADAPTER: TypeAdapter[Any] = TypeAdapter(GraderConfig)


def _where(loc: Sequence[int | str]) -> str:
    # A tagged union puts the tag in the location (``score_model.range``); the
    # user wrote no such key, so drop it unless it is a multi grader's own key.
    parts = [p for i, p in enumerate(loc) if not (p in GRADER_TYPES and (i == 0 or loc[i - 1] != "graders"))]
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def _message(err: Mapping[str, Any]) -> str:
    where = _where(err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{where}: unsupported field (judgegraph has no mapping for it)"
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return f"{where or 'type'}: not a grader type judgegraph knows; one of {', '.join(GRADER_TYPES)}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def parse_grader_config(config: str | os.PathLike[str] | Mapping[str, Any]) -> Any:
    """A grader config as its model: a mapping, a JSON string, or the path of a
    JSON file. :class:`GraderConfigError` names every field it cannot take."""
    if isinstance(config, os.PathLike) or (isinstance(config, str) and not config.lstrip().startswith("{")):
        path = Path(config)
        try:
            config = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise GraderConfigError(f"cannot read the grader config {str(path)!r}: {exc.strerror}") from None
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError as exc:
            raise GraderConfigError(f"the grader config is not JSON: {exc}") from None
    if not isinstance(config, Mapping):
        raise GraderConfigError(f"a grader config is a JSON object, got {type(config).__name__}")
    try:
        return _ADAPTER.validate_python(dict(config))
    except ValidationError as exc:
        name = config.get("name") or config.get("type") or "grader"
        problems = "; ".join(dict.fromkeys(_message(e) for e in exc.errors()))
        raise GraderConfigError(f"{name}: {problems}") from None
