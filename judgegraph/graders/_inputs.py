"""What a grader takes (an item and a model sample) and what it gives back."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from judgegraph._internal.strict_json import loads_unique
from judgegraph.types import FrozenModel, Provenance, Status

__all__ = ["GraderInput", "GraderResult", "GraderSample"]


class GraderSample(FrozenModel):
    """The model output being graded: ``{{sample.output_text}}``, and
    ``{{sample.output_json.…}}`` (filled from the text when it is JSON, as
    OpenAI's grader runs do). Text whose JSON gives a key twice is ambiguous
    and fills no ``output_json``, so a reference into it fails rather than
    reading whichever copy came last."""

    output_text: str
    output_json: Any = None

    @model_validator(mode="after")
    def _json_from_text(self) -> GraderSample:
        if self.output_json is None:
            try:
                parsed = loads_unique(self.output_text)
            except ValueError:
                return self
            object.__setattr__(self, "output_json", parsed)
        return self


class GraderInput(FrozenModel):
    """One graded row: ``item`` is the data set row (``{{item.…}}``), ``sample``
    the model's output (``{{sample.…}}``)."""

    item: dict[str, Any] = Field(default_factory=dict)
    sample: GraderSample


class GraderResult(FrozenModel):
    """A grade. ``score`` is the grader's number (None when it failed, never a
    default); ``passed`` compares it with the pass threshold, or says whether a
    label model's label is a passing one (None when the config sets neither).
    A multi grader keeps its graders' results in ``sub_results``."""

    grader: str
    type: str
    status: Status
    score: float | None = None
    passed: bool | None = None
    pass_threshold: float | None = None
    label: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    rationale: str | None = None
    raw_text: str | None = None
    reason: str | None = Field(default=None, description="why status is not ok")
    sub_results: dict[str, GraderResult] = Field(default_factory=dict)
    provenance: Provenance | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @model_validator(mode="after")
    def _consistent(self) -> GraderResult:
        if self.status is Status.OK:
            if self.score is None or not math.isfinite(self.score):
                raise ValueError("an ok GraderResult needs a finite score")
        elif self.score is not None or self.passed is not None or self.label is not None:
            raise ValueError("a failed GraderResult carries no score, pass or label")
        return self


def graded(
    grader: str, type_: str, score: float, threshold: float | None, *, passed: bool | None = None, **rest: Any
) -> GraderResult:
    """An ok result; ``passed`` from the threshold unless given."""
    if passed is None and threshold is not None:
        passed = score >= threshold
    return GraderResult(
        grader=grader, type=type_, status=Status.OK, score=score, passed=passed, pass_threshold=threshold, **rest
    )
