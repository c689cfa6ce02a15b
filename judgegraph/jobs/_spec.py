"""What a job is: its source, field mapping, judge, backend and limits; and
how a source record becomes a judge input with a stable hash.

A job's results are keyed by *item hash* (the validated judge input) and
*config hash* (everything about the judge that can change a verdict), so
a finished item is never paid for twice, whichever run or engine asks.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from judgegraph.backends import Backend, canonical_json, identity_hash
from judgegraph.config import BackendConfig, JudgeConfig, JudgeKind, build_backend, build_judge
from judgegraph.judges import JudgeInputError, coerce_input, judge_fingerprint
from judgegraph.types import FrozenModel

from ..types import ConversationInput, PairwiseInput, PointwiseInput
from ._batch_api import BatchOptions
from ._sources import lookup
from ._sources_files import SourceRow
from ._sources_traces import _norm_messages

__all__ = [
    "BackendConfig",
    "JobSpec",
    "JudgeConfig",
    "JudgeKind",
    "Limits",
    "PreparedRow",
    "RowPreparer",
    "SourceConfig",
    "build_backend",
    "build_judge",
    "canonical_json",
    "config_hash",
]

INPUT_MODELS: dict[str, type[BaseModel]] = {
    "pairwise": PairwiseInput,
    "pointwise": PointwiseInput,
    "multiturn": ConversationInput,
    "rubric": PointwiseInput,
}


class SourceConfig(FrozenModel):
    """Where items come from and how the user's schema maps onto judge inputs.

    ``fields`` maps a judge input field (``instruction``, ``response_a``,
    ``messages`` ...) to a path in the user's record (``question``,
    ``inputs.prompt``, ``outputs.0.text``). Unmapped input fields are read
    from record keys of the same name. ``label`` and ``category`` name the
    human label and a grouping field for the report; ``id`` a stable item id.
    """

    path: str | list[str]
    format: Literal["auto", "jsonl", "json", "csv", "tsv", "parquet", "langsmith", "otel"] = "auto"
    fields: dict[str, str] = Field(default_factory=dict)
    label: str | None = None
    label_map: dict[str, str] | None = Field(
        default=None, description="raw label value -> A/B/tie (pairwise) or a number (scores)"
    )
    category: str | None = None
    id: str | None = None


class Limits(FrozenModel):
    """``concurrency`` is items in flight (a pairwise item with both orders
    makes two requests); ``rpm``/``tpm`` cap requests and tokens per minute."""

    concurrency: int = Field(default=32, ge=1)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)


class JobSpec(FrozenModel):
    """A whole job. ``batch_api`` sends its model calls through the provider's
    batch API with those options (``{}`` for the defaults); ``judgegraph eval
    --batch-api/--no-batch-api`` and ``arun_spec(batch_api=...)`` override it."""

    source: SourceConfig
    judge: JudgeConfig
    backend: BackendConfig
    limits: Limits = Limits()
    batch_api: BatchOptions | None = None

    def config_hash(self) -> str:
        """The config hash a run of this spec stores its results under (no
        call is made and no key is needed to know it)."""
        return config_hash(judge_fingerprint(build_judge(self.judge), _identity_backend(self.backend)))


def _identity_backend(cfg: BackendConfig) -> Backend:
    """The backend a config builds, for its identity only: never called, so
    a placeholder key stands in for one the environment may lack (keys are
    never part of an identity), and the server the SDK would default to."""
    if cfg.kind == "openai" and cfg.base_url is None:
        cfg = cfg.model_copy(update={"base_url": os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"})
    return build_backend(cfg)


# ------------------------------------------------------------------ hashing


def config_hash(fingerprint: Mapping[str, Any]) -> str:
    return identity_hash(fingerprint)[:32]


def item_hash(kind: str, item: BaseModel) -> str:
    payload = kind + "\n" + canonical_json(item.model_dump(mode="json", exclude_none=True))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


# ------------------------------------------------------------------ preparing rows


@dataclass(frozen=True, slots=True)
class PreparedRow:
    """A source row made ready to judge, or the reason it cannot be."""

    file: int
    row: int
    item: BaseModel | None
    item_hash: str | None
    item_id: str | None = None
    label: str | None = None  # JSON text
    category: str | None = None
    problem: str | None = None

    @property
    def where(self) -> str:
        return f"row {self.row}" if self.file == 0 else f"file {self.file} row {self.row}"


_PAIR_LABELS = {
    "a": "A",
    "model_a": "A",
    "response_a": "A",
    "output_a": "A",
    "output (a)": "A",
    "1": "A",
    "b": "B",
    "model_b": "B",
    "response_b": "B",
    "output_b": "B",
    "output (b)": "B",
    "2": "B",
    "tie": "tie",
    "0": "tie",
    "draw": "tie",
    "tie (bothbad)": "tie",
    "equal": "tie",
}


_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_only(field: str, value: Any) -> Any:
    """Lone surrogates (a ``"\\udcff"`` escape in JSON, or a byte that is not
    UTF-8) are not text: no model, hash or store can take them."""
    if isinstance(value, str):
        m = _SURROGATE.search(value)
        if m is not None:
            raise JudgeInputError(
                f"{field}: not valid Unicode text (lone surrogate U+{ord(m.group()):04X} at character {m.start()})"
            )
    elif isinstance(value, Mapping):
        for v in value.values():
            _text_only(field, v)
    elif isinstance(value, list | tuple):
        for v in value:
            _text_only(field, v)
    return value


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


class RowPreparer:
    """Maps source records onto one kind of judge input (pure and picklable,
    so the local and Ray engines prepare rows identically)."""

    def __init__(self, kind: str, source: SourceConfig) -> None:
        if kind not in INPUT_MODELS:
            raise ValueError(f"unknown judge kind {kind!r}")
        self.kind = kind
        self.model = INPUT_MODELS[kind]
        self.source = source
        fields = set(self.model.model_fields)
        unknown = sorted(set(source.fields) - fields)
        if unknown:
            raise ValueError(
                f"fields: {unknown} are not {self.model.__name__} fields; expected some of {sorted(fields)}"
            )

    def __call__(self, row: SourceRow) -> PreparedRow:
        if row.data is None:
            return PreparedRow(row.file, row.row, None, None, problem=f"{row.where}: {row.error}")
        try:
            return self._prepare(row)
        except JudgeInputError as exc:
            return PreparedRow(row.file, row.row, None, None, problem=f"{row.where}: {exc}")

    def _get(self, data: Any, path: str) -> Any:
        try:
            return lookup(data, path)
        except KeyError:
            return _MISSING

    def _prepare(self, row: SourceRow) -> PreparedRow:
        data = row.data
        values: dict[str, Any] = {}
        missing: list[str] = []
        for name, info in self.model.model_fields.items():
            path = self.source.fields.get(name, name)
            v = self._get(data, path)
            if v is _MISSING or _blank(v):
                if info.is_required():
                    missing.append(name if path == name else f"{name} (from {path!r})")
                continue
            values[name] = _text_only(name, self._convert(name, v))
        if missing:
            raise JudgeInputError(f"missing {', '.join(missing)}")
        item = coerce_input(self.model, values)
        item_id = None
        if self.source.id:
            v = self._get(data, self.source.id)
            item_id = None if v is _MISSING or _blank(v) else _text_only("id", str(v))
        category = None
        if self.source.category:
            v = self._get(data, self.source.category)
            category = None if v is _MISSING or _blank(v) else _text_only("category", str(v))
        label = None
        problem = None
        if self.source.label:
            raw = self._get(data, self.source.label)
            if raw is _MISSING or _blank(raw):
                problem = f"{row.where}: label {self.source.label!r} is missing; judged without it"
            else:
                try:
                    label = json.dumps(self._label(raw))
                except ValueError as exc:
                    problem = f"{row.where}: label {self.source.label!r}: {exc}; judged without it"
        return PreparedRow(row.file, row.row, item, item_hash(self.kind, item), item_id, label, category, problem)

    def _convert(self, name: str, v: Any) -> Any:
        if name == "messages":
            if isinstance(v, str):
                try:
                    v = json.loads(v)
                except ValueError:
                    raise JudgeInputError("messages: not a JSON list of {role, content} messages") from None
            msgs = _norm_messages(v)
            if isinstance(v, list) and len(msgs) != len(v[0] if len(v) == 1 and isinstance(v[0], list) else v):
                raise JudgeInputError("messages: some messages have no recognisable role/content")
            return msgs
        if name == "rubric" and isinstance(v, str):
            try:
                return json.loads(v)
            except ValueError:
                raise JudgeInputError("rubric: not a JSON object {criterion, levels}") from None
        if isinstance(v, bool):
            return v
        if isinstance(v, int | float):
            return str(v)  # a numeric answer is still an answer
        return v

    def _label(self, raw: Any) -> Any:
        if self.source.label_map is not None:
            key = str(raw)
            if key not in self.source.label_map:
                raise ValueError(f"value {raw!r} is not in label_map")
            raw = self.source.label_map[key]
        if self.kind == "pairwise":
            if isinstance(raw, float) and raw.is_integer():
                raw = int(raw)
            got = _PAIR_LABELS.get(str(raw).strip().lower())
            if got is None:
                raise ValueError(f"cannot read {raw!r} as A, B or tie (use label_map)")
            return got
        try:
            x = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"cannot read {raw!r} as a number (use label_map)") from None
        if not math.isfinite(x):
            raise ValueError(f"{raw!r} is not a finite number")
        return x


_MISSING = object()
