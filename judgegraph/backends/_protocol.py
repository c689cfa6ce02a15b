"""The one async interface every model backend implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from judgegraph.types import Message, MissingExtraError, Pricing, TokenLogprob, Usage

__all__ = [
    "Backend",
    "BackendError",
    "Capabilities",
    "GenerateRequest",
    "GenerateResult",
    "MissingExtraError",
    "TokenLogprob",
]


class BackendError(RuntimeError):
    """A backend gave up: retries exhausted or a non-retryable failure.

    ``attempts`` is how many calls were made. The message never includes
    request headers, so API keys cannot leak through it.
    """

    def __init__(self, message: str, *, attempts: int = 1, retryable: bool = False) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    messages: tuple[Message, ...]
    max_tokens: int = 512
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    seed: int | None = None
    # Which prompt template made the messages: backends ignore it; a
    # judge-call cache keys on it, since a new version may parse differently.
    template_id: str | None = None
    template_version: int | None = None
    # A second request after an unreadable verdict. The model sees the same
    # messages either way; the batch engine may send repairs live by option.
    repair: bool = False


@dataclass(frozen=True, slots=True)
class GenerateResult:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    tokens: tuple[TokenLogprob, ...] | None = None
    finish_reason: str | None = None
    attempts: int = 1
    latency_s: float = 0.0
    # What this call was billed, when the backend knows better than its own
    # pricing (a batch engine's live repair, billed at the live price).
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Capabilities:
    structured_output: bool = False
    logprobs: bool = False


@runtime_checkable
class Backend(Protocol):
    """Anything with ``name``, ``model``, ``capabilities`` and async ``generate``."""

    name: str
    model: str
    capabilities: Capabilities
    pricing: Pricing | None

    async def generate(self, request: GenerateRequest) -> GenerateResult: ...
