"""Public data shapes: judge inputs, results, provenance and policy objects.

Everything that crosses a boundary (user → judge, judge → user, backend →
judge) is a pydantic model, so bad input fails early with the field named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ConversationInput",
    "Criterion",
    "FrozenModel",
    "JudgeInputError",
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
    "Usage",
    "Winner",
    "worst_status",
]


class FrozenModel(BaseModel):
    """The one base of judgegraph's immutable data shapes: frozen, and
    unknown fields are an error rather than silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class JudgeInputError(ValueError):
    """The input to a judge is malformed; the message names the field."""


class MissingExtraError(ImportError):
    """A backend needs an optional dependency group that is not installed."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} needs the '{extra}' extra: pip install 'judgegraph[{extra}]'")
        self.extra = extra


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token's log-probability and its most likely alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


def _require_text(value: str, field: str) -> str:
    if not value or not value.strip():
        raise ValueError(f"{field} must be a non-empty string")
    return value


# ---------------------------------------------------------------- inputs


class Rubric(FrozenModel):
    """A criterion and what each score level means (Prometheus style)."""

    criterion: str
    levels: dict[int, str] = Field(description="score level -> description")

    @field_validator("criterion")
    @classmethod
    def _criterion(cls, v: str) -> str:
        return _require_text(v, "criterion")

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: dict[int, str]) -> dict[int, str]:
        if len(v) < 2:
            raise ValueError("levels needs at least two score levels")
        keys = sorted(v)
        if keys != list(range(keys[0], keys[-1] + 1)):
            raise ValueError(f"levels must be consecutive integers, got {keys}")
        for k, text in v.items():
            _require_text(text, f"levels[{k}]")
        return dict(sorted(v.items()))

    @property
    def scale(self) -> tuple[int, int]:
        keys = list(self.levels)
        return keys[0], keys[-1]


class PointwiseInput(FrozenModel):
    instruction: str
    response: str
    reference: str | None = None
    rubric: Rubric | None = None

    @field_validator("instruction", "response")
    @classmethod
    def _nonempty(cls, v: str, info: Any) -> str:
        return _require_text(v, info.field_name)


class PairwiseInput(FrozenModel):
    instruction: str
    response_a: str
    response_b: str
    reference: str | None = None
    rubric: Rubric | None = None

    @field_validator("instruction", "response_a", "response_b")
    @classmethod
    def _nonempty(cls, v: str, info: Any) -> str:
        return _require_text(v, info.field_name)

    def swapped(self) -> PairwiseInput:
        return self.model_copy(update={"response_a": self.response_b, "response_b": self.response_a})


class Message(FrozenModel):
    role: Literal["system", "user", "assistant"]
    content: str


class ConversationInput(FrozenModel):
    messages: list[Message]
    reference: str | None = None
    rubric: Rubric | None = None

    @model_validator(mode="after")
    def _has_assistant(self) -> ConversationInput:
        if not self.messages:
            raise ValueError("messages must not be empty")
        for i, m in enumerate(self.messages):
            if not m.content.strip():
                raise ValueError(f"messages[{i}].content must be a non-empty string")
        if not any(m.role == "assistant" for m in self.messages):
            raise ValueError("messages has no assistant turn to judge")
        return self


class Criterion(FrozenModel):
    """One rubric criterion for RubricJudge, with its weight in the aggregate."""

    name: str
    rubric: Rubric
    weight: float = Field(default=1.0, gt=0)


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
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class Pricing(FrozenModel):
    """USD per million tokens. Prices change; callers state them."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, usage: Usage) -> float:
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

    def to_evaluator_result(self, key: str = "score") -> dict[str, Any]:
        """The openevals / LangSmith evaluator shape ``{key, score, comment}``."""
        comment = self.rationale if self.ok else f"[{self.status.value}] {self.reason}"
        return {"key": key, "score": self.score, "comment": comment}


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

    def to_evaluator_result(self, key: str = "preference") -> dict[str, Any]:
        score = {"A": 1.0, "B": 0.0, "tie": 0.5}.get(self.winner or "", None)
        comment = self.rationale if self.ok else f"[{self.status.value}] {self.reason}"
        return {"key": key, "score": score, "comment": comment}


class RubricResult(_Result):
    criteria: dict[str, PointwiseScore]
    weighted_score: float | None = None

    def to_evaluator_result(self, key: str = "rubric") -> dict[str, Any]:
        comment = "; ".join(f"{name}: {s.score if s.ok else s.status.value}" for name, s in self.criteria.items())
        return {"key": key, "score": self.weighted_score, "comment": comment}


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
