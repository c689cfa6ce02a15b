"""Public data shapes: judge inputs, results, provenance and policy objects.

Everything that crosses a boundary (user → judge, judge → user, backend →
judge) is a pydantic model, so bad input fails early with the field named.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal, NotRequired, Protocol, TypedDict, runtime_checkable

from pydantic import Field, model_validator

from ._core_types import FrozenModel, JSONValue, JudgeInputError, MissingExtraError, TokenLogprob
from ._input_types import (
    ConversationInput,
    Criterion,
    Message,
    PairwiseInput,
    PointwiseInput,
    Rubric,
    ToolCall,
    check_messages,
)

__all__ = [
    "ConversationInput",
    "Criterion",
    "EvaluatorResult",
    "FrozenModel",
    "JSONValue",
    "JudgeInputError",
    "JudgeResult",
    "LabelVerdict",
    "MemberRecord",
    "Message",
    "MissingExtraError",
    "PairwiseInput",
    "PairwiseVerdict",
    "PointwiseInput",
    "PointwiseScore",
    "Pricing",
    "Provenance",
    "RetryPolicy",
    "Rubric",
    "RubricResult",
    "Status",
    "SwapPolicy",
    "TierRecord",
    "TokenLogprob",
    "ToolCall",
    "Usage",
    "Winner",
    "check_messages",
    "worst_status",
]


# ---------------------------------------------------------------- results


class Status(StrEnum):
    OK = "ok"
    UNPARSED = "unparsed"  # the model answered but not in a form we accept
    ERROR = "error"  # no usable answer: transport failure, timeout, ...


Winner = Literal["A", "B", "tie"]


def worst_status(statuses: Sequence[Status]) -> Status:
    """The status of a result made of parts: any error, else any unparsed, else ok."""
    if Status.ERROR in statuses:
        return Status.ERROR
    if Status.UNPARSED in statuses:
        return Status.UNPARSED
    return Status.OK


class Usage(FrozenModel):
    """Tokens spent. ``cache_hits``/``cache_misses`` count calls a judge-call
    cache answered or passed on (both 0 when no cache is in the way); a hit
    spends no tokens. ``unreported`` counts calls whose server said nothing of
    the tokens they spent: the counts leave those out, so any cost priced from
    them is unknown, never zero."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    unreported: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_hits=self.cache_hits + other.cache_hits,
            cache_misses=self.cache_misses + other.cache_misses,
            unreported=self.unreported + other.unreported,
        )


class Pricing(FrozenModel):
    """USD per million tokens. Prices change; callers state them."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, usage: Usage) -> float | None:
        """What ``usage`` cost; None (unknown, never zero) when any call in it
        reported no usage, so every caller that prices tokens keeps that rule."""
        if usage.unreported:
            return None
        return (usage.prompt_tokens * self.input_per_mtok + usage.completion_tokens * self.output_per_mtok) / 1e6


class Provenance(FrozenModel):
    judge: str
    backend: str
    model: str
    template_id: str
    template_version: int
    latency_s: float
    usage: Usage = Usage()
    cost_usd: float | None = None
    attempts: int = 1
    status: Status = Status.OK
    notes: tuple[str, ...] = Field(
        default=(), description="what the verdict lacks and why (e.g. a score distribution refused for bad logprobs)"
    )


@runtime_checkable
class JudgeResult(Protocol):
    """What every judge's result is, whatever else it carries: a status, why
    it is not ok, and where it came from. :class:`PointwiseScore`,
    :class:`PairwiseVerdict`, :class:`RubricResult`, :class:`LabelVerdict`
    and the graders' results all are; a judge's own result type must be too
    (a frozen pydantic model with these fields is), so jobs can store it and
    graphs can read its status without knowing its kind.
    """

    @property
    def status(self) -> Status: ...

    @property
    def reason(self) -> str | None:
        """Why ``status`` is not ok (None when it is)."""

    @property
    def provenance(self) -> Provenance | None:
        """Judge, backend, model, template, usage and cost, when known."""

    @property
    def ok(self) -> bool: ...

    def model_dump_json(self) -> str:
        """The result as JSON, as a job stores it."""
        ...


class TierRecord(FrozenModel):
    """What one cascade tier did with an item: answered, and either decided or escalated."""

    tier: int = Field(ge=0)
    judge: str
    status: Status
    decided: bool = Field(description="this tier's verdict is the final one")
    reason: str = Field(description="why the tier kept or escalated the item")
    verdict: str | None = Field(default=None, description="the tier's own winner or score")
    confidence: float | None = None
    cost_usd: float | None = None
    latency_s: float = 0.0


class MemberRecord(FrozenModel):
    """One ensemble member's vote, or why it was left out."""

    judge: str
    status: Status
    weight: float = 1.0
    verdict: str | None = None
    confidence: float | None = None
    reason: str | None = None
    cost_usd: float | None = None
    latency_s: float = 0.0


class EvaluatorResult(TypedDict):
    """The openevals evaluator result, key for key (``openevals.types.EvaluatorResult``),
    which LangSmith's ``evaluate`` also accepts.

    ``score`` is normalised: a bool for yes/no verdicts, else a float in 0-1.
    A failed verdict (status ``unparsed`` or ``error``) carries ``score=None``:
    any number would be a verdict the judge never gave and would average into
    an experiment's scores; LangSmith records a missing score instead, and
    ``metadata["status"]``/``metadata["reason"]`` say what went wrong.
    ``metadata`` also holds the raw score, its scale and the provenance.
    """

    key: str
    score: float | bool | None
    comment: str | None
    metadata: dict[str, Any] | None
    # openevals sets it only when the judge call was traced; so do we (never).
    source_run_id: NotRequired[str | None]


def _evaluator_result(result: _Result, key: str, score: float | bool | None, extra: dict[str, Any]) -> EvaluatorResult:
    comment = result.rationale if result.ok else f"[{result.status.value}] {result.reason}"
    metadata: dict[str, Any] = {
        "status": result.status.value,
        "reason": result.reason,
        **extra,
        "confidence": result.confidence,
        "provenance": result.provenance.model_dump(mode="json") if result.provenance else None,
    }
    return EvaluatorResult(key=key, score=score if result.ok else None, comment=comment, metadata=metadata)


class _Result(FrozenModel):
    status: Status
    rationale: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    raw_text: str | None = None
    reason: str | None = Field(default=None, description="why status is not ok")
    provenance: Provenance | None = None
    tiers: tuple[TierRecord, ...] = Field(default=(), description="cascade tiers this item went through")
    members: tuple[MemberRecord, ...] = Field(default=(), description="ensemble members' votes")

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def decided_by(self) -> str | None:
        """The judge whose verdict this is, when a cascade produced it."""
        return next((t.judge for t in self.tiers if t.decided), None)


class PointwiseScore(_Result):
    score: int | None = None
    scale: tuple[int, int]
    expected_score: float | None = None
    distribution: dict[int, float] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> PointwiseScore:
        if self.status is Status.OK:
            if self.score is None:
                raise ValueError("an ok PointwiseScore needs a score")
            lo, hi = self.scale
            if not lo <= self.score <= hi:
                raise ValueError(f"score {self.score} outside scale {self.scale}")
        elif self.score is not None:
            raise ValueError("a failed PointwiseScore carries no score")
        return self

    def to_evaluator_result(self, key: str = "score") -> EvaluatorResult:
        """The openevals / LangSmith shape; the score is mapped from the scale
        onto 0-1 (4 on 1-5 is 0.75), the raw score and scale are in metadata.
        A failure scores None (see :class:`EvaluatorResult`)."""
        lo, hi = self.scale
        norm = None if self.score is None else (self.score - lo) / (hi - lo) if hi > lo else 1.0
        extra = {"raw_score": self.score, "scale": list(self.scale), "expected_score": self.expected_score}
        return _evaluator_result(self, key, norm, extra)


class PairwiseVerdict(_Result):
    winner: Winner | None = None
    score_a: float | None = None
    score_b: float | None = None
    # From the score distributions, when the backend gives them (pairs of scores).
    expected_score_a: float | None = None
    expected_score_b: float | None = None
    inconsistent: bool = False
    distribution: dict[str, float] | None = Field(default=None, description="P(A), P(B), P(tie) when known")
    orders: tuple[PairwiseVerdict, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> PairwiseVerdict:
        if self.status is Status.OK and self.winner is None:
            raise ValueError("an ok PairwiseVerdict needs a winner")
        if self.status is not Status.OK and self.winner is not None:
            raise ValueError("a failed PairwiseVerdict carries no winner")
        return self

    def to_evaluator_result(self, key: str = "preference") -> EvaluatorResult:
        """Preference for answer A: 1.0 A, 0.0 B, 0.5 tie; None on failure."""
        score = {"A": 1.0, "B": 0.0, "tie": 0.5}.get(self.winner or "")
        extra = {
            "winner": self.winner,
            "score_a": self.score_a,
            "score_b": self.score_b,
            "inconsistent": self.inconsistent,
        }
        return _evaluator_result(self, key, score, extra)


class RubricResult(_Result):
    criteria: dict[str, PointwiseScore]
    weighted_score: float | None = None

    def to_evaluator_result(self, key: str = "rubric") -> EvaluatorResult:
        """The weighted aggregate (already 0-1); each criterion's raw score in metadata."""
        summary = "; ".join(f"{name}: {s.score if s.ok else s.status.value}" for name, s in self.criteria.items())
        extra = {
            "criteria": {
                name: {"raw_score": s.score, "scale": list(s.scale), "status": s.status.value, "reason": s.reason}
                for name, s in self.criteria.items()
            }
        }
        out = _evaluator_result(self, key, self.weighted_score, extra)
        out["comment"] = summary if self.ok else f"{out['comment']} ({summary})"
        return out


class LabelVerdict(_Result):
    """A verdict that is one of a fixed list of labels (``choices``), from a
    judge made from a sentence. ``label_scores`` maps each label to its score
    in the evaluator shape."""

    label: str | None = None
    choices: tuple[str, ...]
    label_scores: dict[str, float | bool]

    @model_validator(mode="after")
    def _consistent(self) -> LabelVerdict:
        if self.status is Status.OK and self.label not in self.choices:
            raise ValueError(f"an ok LabelVerdict needs a label among {list(self.choices)}, got {self.label!r}")
        if self.status is not Status.OK and self.label is not None:
            raise ValueError("a failed LabelVerdict carries no label")
        return self

    def to_evaluator_result(self, key: str = "label") -> EvaluatorResult:
        """The label's score from ``label_scores``; None on failure."""
        score = self.label_scores[self.label] if self.label is not None else None
        return _evaluator_result(self, key, score, {"label": self.label, "choices": list(self.choices)})


# ---------------------------------------------------------------- policies


class RetryPolicy(FrozenModel):
    """Bounded retries with exponential backoff and full jitter.

    A server's ``retry-after`` replaces the computed delay; one longer than
    ``max_retry_after_s`` ends the retries rather than stall the caller.
    """

    max_attempts: int = Field(default=4, ge=1)
    initial_delay_s: float = Field(default=0.5, ge=0)
    backoff: float = Field(default=2.0, ge=1)
    max_delay_s: float = Field(default=20.0, ge=0)
    jitter: bool = True
    timeout_s: float = Field(default=60.0, gt=0, description="per attempt")
    max_retry_after_s: float = Field(default=60.0, ge=0, description="a longer retry-after than this ends the retries")


class SwapPolicy(FrozenModel):
    """How pairwise judges handle position bias.

    ``both``: judge A/B and B/A concurrently. When the orders disagree,
    ``on_inconsistent="tie"`` turns the verdict into a tie; ``"flag"`` keeps
    the mean-score (or first-order) winner. Either way ``inconsistent`` is set.
    """

    mode: Literal["both", "single"] = "both"
    on_inconsistent: Literal["tie", "flag"] = "tie"
