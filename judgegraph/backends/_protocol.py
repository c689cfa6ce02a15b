"""The one async interface every model backend implements."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from judgegraph.types import JSONValue, Message, MissingExtraError, Pricing, TokenLogprob, Usage

__all__ = [
    "Backend",
    "BackendError",
    "Capabilities",
    "GenerateRequest",
    "GenerateResult",
    "MissingExtraError",
    "TokenLogprob",
    "bounded_result",
]

_log = logging.getLogger("judgegraph.backends")


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
    json_schema: dict[str, JSONValue] | None = None
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


# A chat template adds a few tokens per message and a few per request.
_TEMPLATE_TOKENS_PER_MESSAGE = 16
_TEMPLATE_TOKENS = 64


def bounded_result(request: GenerateRequest, result: GenerateResult) -> GenerateResult:
    """``result`` with the usage a server reported bounded by what
    ``request`` could have used: a prompt token covers at least one byte of
    the prompt (plus the chat template's few), and no answer is longer than
    ``max_tokens``. The count drives rate-limit waits and costs, so a wrong
    or hostile number (10^9 tokens, a negative one) must not: it is clamped,
    and logged as a warning."""
    usage = result.usage
    prompt_cap = sum(len(m.content.encode("utf-8", "surrogatepass")) for m in request.messages)
    prompt_cap += _TEMPLATE_TOKENS_PER_MESSAGE * len(request.messages) + _TEMPLATE_TOKENS
    prompt = min(max(usage.prompt_tokens, 0), prompt_cap)
    completion = min(max(usage.completion_tokens, 0), request.max_tokens)
    if (prompt, completion) == (usage.prompt_tokens, usage.completion_tokens):
        return result
    _log.warning(
        "%s reported %d prompt and %d completion tokens for a request that could use at most %d and %d; "
        "counted %d and %d",
        result.model,
        usage.prompt_tokens,
        usage.completion_tokens,
        prompt_cap,
        request.max_tokens,
        prompt,
        completion,
    )
    bounded = usage.model_copy(update={"prompt_tokens": prompt, "completion_tokens": completion})
    return dataclasses.replace(result, usage=bounded)
