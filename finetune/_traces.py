"""Traces: judged items kept as training data.

A trace is one labelled judging example, whatever produced the label: a
human, a teacher model, one of our judges in a graph run, or the eval store.
Traces travel as JSONL, one record per line, so any run can be exported and
any labelled set imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from judgegraph._internal.text_files import open_text, read_text
from judgegraph.types import PairwiseInput, PairwiseVerdict, PointwiseInput, PointwiseScore, Rubric, Winner

__all__ = [
    "PairwiseTrace",
    "PointwiseTrace",
    "Trace",
    "TraceFormatError",
    "read_traces",
    "trace_from_result",
    "traces_from_pandalm",
    "write_traces",
]


class TraceFormatError(ValueError):
    """A trace record is malformed; the message names the line and the field."""


class _TraceBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str | None = None
    instruction: str
    reference: str | None = None
    rubric: Rubric | None = None
    rationale: str | None = None
    source: str = Field(default="judge", description="who gave the label: human, teacher, judge, eval-store, ...")
    judge: str | None = Field(default=None, description="the model or person behind the label")
    confidence: float | None = Field(default=None, ge=0, le=1)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("instruction")
    @classmethod
    def _instruction(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("instruction must be a non-empty string")
        return v


class PointwiseTrace(_TraceBase):
    """One response and its score on a scale."""

    kind: Literal["pointwise"] = "pointwise"
    response: str
    score: int
    scale: tuple[int, int] = (1, 5)

    @model_validator(mode="before")
    @classmethod
    def _scale_from_rubric(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("scale") is None and data.get("rubric") is not None:
            rubric = Rubric.model_validate(data["rubric"])
            data = {**data, "rubric": rubric, "scale": rubric.scale}
        return data

    @model_validator(mode="after")
    def _check(self) -> PointwiseTrace:
        if not self.response.strip():
            raise ValueError("response must be a non-empty string")
        if self.rubric is not None and self.rubric.scale != self.scale:
            raise ValueError(f"scale {self.scale} disagrees with the rubric's levels {self.rubric.scale}")
        lo, hi = self.scale
        if lo >= hi:
            raise ValueError(f"scale {self.scale} must run from low to high")
        if not lo <= self.score <= hi:
            raise ValueError(f"score {self.score} is outside the scale {lo}-{hi}")
        return self


class PairwiseTrace(_TraceBase):
    """Two responses and which one won; optionally a score for each."""

    kind: Literal["pairwise"] = "pairwise"
    response_a: str
    response_b: str
    winner: Winner
    score_a: int | None = None
    score_b: int | None = None
    scale: tuple[int, int] = (1, 10)

    @model_validator(mode="before")
    @classmethod
    def _winner_from_scores(cls, data: Any) -> Any:
        # Scores alone determine the winner; that is a derivation, not a default.
        if isinstance(data, Mapping) and data.get("winner") is None:
            a, b = data.get("score_a"), data.get("score_b")
            if isinstance(a, int | float) and isinstance(b, int | float):
                data = {**data, "winner": "A" if a > b else "B" if b > a else "tie"}
        return data

    @model_validator(mode="after")
    def _check(self) -> PairwiseTrace:
        for name in ("response_a", "response_b"):
            if not getattr(self, name).strip():
                raise ValueError(f"{name} must be a non-empty string")
        if (self.score_a is None) != (self.score_b is None):
            raise ValueError("give both score_a and score_b, or neither")
        if self.score_a is not None and self.score_b is not None:
            lo, hi = self.scale
            for name, s in (("score_a", self.score_a), ("score_b", self.score_b)):
                if not lo <= s <= hi:
                    raise ValueError(f"{name} {s} is outside the scale {lo}-{hi}")
            implied = "A" if self.score_a > self.score_b else "B" if self.score_b > self.score_a else "tie"
            if implied != self.winner:
                raise ValueError(f"winner {self.winner!r} contradicts the scores {self.score_a} and {self.score_b}")
        return self

    def swapped(self) -> PairwiseTrace:
        """The same judgement with the responses in the other order."""
        flip: dict[str, Winner] = {"A": "B", "B": "A", "tie": "tie"}
        return self.model_copy(
            update={
                "response_a": self.response_b,
                "response_b": self.response_a,
                "winner": flip[self.winner],
                "score_a": self.score_b,
                "score_b": self.score_a,
            }
        )

    def to_input(self) -> PairwiseInput:
        return PairwiseInput(
            instruction=self.instruction,
            response_a=self.response_a,
            response_b=self.response_b,
            reference=self.reference,
            rubric=self.rubric,
        )


Trace = Annotated[PointwiseTrace | PairwiseTrace, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[PointwiseTrace | PairwiseTrace] = TypeAdapter(Trace)


def _problems(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if p not in ("pointwise", "pairwise")) or "(record)"
        parts.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def parse_trace(record: Mapping[str, Any], *, where: str = "") -> PointwiseTrace | PairwiseTrace:
    """Validate one record; errors name ``where`` and the field."""
    if not isinstance(record, Mapping):
        raise TraceFormatError(f"{where}expected a JSON object, got {type(record).__name__}")
    if "kind" not in record:
        raise TraceFormatError(f"{where}kind: missing (use 'pointwise' or 'pairwise')")
    try:
        return _ADAPTER.validate_python(dict(record))
    except ValidationError as exc:
        raise TraceFormatError(f"{where}{_problems(exc)}") from None


def read_traces(path: str | Path) -> list[PointwiseTrace | PairwiseTrace]:
    """Read a JSONL file of traces. Blank lines are allowed; anything else
    that is not a valid trace raises :class:`TraceFormatError` naming the line."""
    p = Path(path)
    out: list[PointwiseTrace | PairwiseTrace] = []
    with open_text(p) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{p}:{lineno}: "
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceFormatError(f"{where}not valid JSON: {exc.msg} at column {exc.colno}") from None
            out.append(parse_trace(record, where=where))
    return out


def write_traces(path: str | Path, traces: Iterable[PointwiseTrace | PairwiseTrace]) -> int:
    """Write traces as JSONL; returns how many were written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("w", encoding="utf-8") as fh:
        for t in traces:
            fh.write(t.model_dump_json(exclude_defaults=False) + "\n")
            n += 1
    return n


def trace_from_result(
    item: PairwiseInput | PointwiseInput | Mapping[str, Any],
    result: PairwiseVerdict | PointwiseScore,
    *,
    source: str = "judge",
    id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> PointwiseTrace | PairwiseTrace:
    """Turn one judged input and its result into a trace.

    Only a result with status ``ok`` carries a label; any other raises
    ValueError, since a failed verdict must not become a training label.
    """
    if not result.ok:
        raise ValueError(f"result has status {result.status.value!r} ({result.reason}); only ok results become traces")
    judge = result.provenance.model if result.provenance is not None else None
    common: dict[str, Any] = {
        "id": id,
        "rationale": result.rationale,
        "source": source,
        "judge": judge,
        "confidence": result.confidence,
        "metadata": dict(metadata or {}),
    }
    if isinstance(result, PairwiseVerdict):
        pin = item if isinstance(item, PairwiseInput) else PairwiseInput.model_validate(dict(item))
        scores: dict[str, Any] = {}
        if result.score_a is not None and result.score_b is not None:
            if result.score_a.is_integer() and result.score_b.is_integer():
                scores = {"score_a": int(result.score_a), "score_b": int(result.score_b)}
            else:  # swap-averaged scores like 7.5 are not a single judgement's scores
                common["metadata"] |= {"score_a": result.score_a, "score_b": result.score_b}
        return PairwiseTrace(
            instruction=pin.instruction,
            response_a=pin.response_a,
            response_b=pin.response_b,
            reference=pin.reference,
            rubric=pin.rubric,
            winner=result.winner,  # type: ignore[arg-type]  # ok results always carry one
            **scores,
            **common,
        )
    pt = item if isinstance(item, PointwiseInput) else PointwiseInput.model_validate(dict(item))
    assert result.score is not None
    return PointwiseTrace(
        instruction=pt.instruction,
        response=pt.response,
        reference=pt.reference,
        rubric=pt.rubric,
        score=result.score,
        scale=result.scale,
        **common,
    )


_PANDALM_LABEL: dict[int, Winner] = {0: "tie", 1: "A", 2: "B"}


def traces_from_pandalm(path: str | Path, *, skip_empty: bool = True) -> list[PairwiseTrace]:
    """Read PandaLM's test-set JSON (three annotators per item) as traces.

    The label is the annotators' majority (0 = tie, 1 = first, 2 = second);
    an item without a majority raises, naming its index. Some items have an
    empty response, which no judge input accepts: ``skip_empty`` leaves them
    out (the default; compare ``len`` with the file to see how many), otherwise
    they raise. A few responses are JSON booleans in the file; they are read as
    their text (``True``).
    """
    p = Path(path)
    data = json.loads(read_text(p))
    if not isinstance(data, list):
        raise TraceFormatError(f"{p}: expected a JSON list of PandaLM items")
    out = []
    for i, row in enumerate(data):
        where = f"{p}: item {row.get('idx', i) if isinstance(row, dict) else i}: "
        if not isinstance(row, dict):
            raise TraceFormatError(f"{where}expected an object")
        try:
            votes = [int(row[f"annotator{k}"]) for k in (1, 2, 3)]
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFormatError(f"{where}annotator fields: {exc}") from None
        top = max(set(votes), key=votes.count)
        if votes.count(top) < 2 or top not in _PANDALM_LABEL:
            raise TraceFormatError(f"{where}annotators {votes} have no majority label")
        a, b = (str(row.get(k, "")) for k in ("response1", "response2"))
        if skip_empty and (not a.strip() or not b.strip()):
            continue
        instruction = str(row.get("instruction", ""))
        if row.get("input"):
            instruction += "\n\n" + str(row["input"])
        out.append(
            parse_trace(
                {
                    "kind": "pairwise",
                    "id": f"pandalm-{row.get('idx', i)}",
                    "instruction": instruction,
                    "response_a": a,
                    "response_b": b,
                    "winner": _PANDALM_LABEL[top],
                    "source": "human",
                    "metadata": {"cmp_key": row.get("cmp_key"), "votes": votes},
                },
                where=where,
            )
        )
    return out  # type: ignore[return-value]
