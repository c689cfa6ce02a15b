"""Requests-per-minute and tokens-per-minute limits, as a backend wrapper.

Limits apply per model request, not per item: a pairwise item with both
orders, a repair round or a rubric with five criteria each make several.
Each request reserves one request and an estimate of its tokens (prompt
characters / 4 plus ``max_tokens``, as providers count it) before it is
sent; when the answer comes back the estimate is replaced by the real usage,
and retries the backend made on its own are charged after the fact.

The usage a server reports is bounded by what the request could have used
(:func:`bounded_result`), and a bucket's debt by one minute's worth: no
number from a server can make a job wait longer than one window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from judgegraph.types import JSONValue, Pricing

from ._identity import backend_identity
from ._protocol import Backend, Capabilities, GenerateRequest, GenerateResult, bounded_result

__all__ = ["RateLimitedBackend", "RateLimiter", "TokenBucket"]


class TokenBucket:
    """A bucket refilled at ``per_minute / 60`` per second, holding at most
    ``burst_s`` seconds' worth. Taking more than is there is allowed once the
    bucket is full, leaving a debt that later takers wait out: so one huge
    request is never stuck, and the long-run rate still holds."""

    def __init__(self, per_minute: float, *, burst_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self._clock = clock
        self._t = clock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._t) * self.rate)
        self._t = now

    def wait_time(self, amount: float) -> float:
        """Seconds until ``amount`` may be taken (0 if now)."""
        self._refill()
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def take(self, amount: float) -> None:
        self._refill()
        # At most one minute's worth of debt: whatever was taken, the next
        # taker waits at most one window (plus the burst).
        self.level = max(self.level - amount, -60.0 * self.rate)

    def give_back(self, amount: float) -> None:
        self._refill()
        self.level = min(self.capacity, self.level + amount)


class RateLimiter:
    """rpm and/or tpm, shared by every request of a job. Waiters are served
    in arrival order, so one big request cannot be starved by small ones."""

    def __init__(
        self,
        *,
        rpm: float | None = None,
        tpm: float | None = None,
        burst_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.requests = TokenBucket(rpm, burst_s=burst_s, clock=clock) if rpm else None
        self.tokens = TokenBucket(tpm, burst_s=burst_s, clock=clock) if tpm else None
        self._sleep = sleep
        self._lock = asyncio.Lock()
        self.waited_s = 0.0

    async def acquire(self, tokens: int) -> None:
        async with self._lock:
            wait = max(
                self.requests.wait_time(1) if self.requests else 0.0,
                self.tokens.wait_time(tokens) if self.tokens else 0.0,
            )
            # One wait, not a loop of them: waiters are served one at a time, so
            # after it both buckets hold enough. Asking again could spin
            # forever on a shortfall smaller than the clock's resolution.
            if wait > 0:
                self.waited_s += wait
                await self._sleep(wait)
            if self.requests:
                self.requests.take(1)
            if self.tokens:
                self.tokens.take(tokens)

    def settle(self, *, estimated: int, actual: int, extra_requests: int = 0) -> None:
        """Replace a request's token estimate by what it used; charge retries."""
        if self.tokens:
            if actual > estimated:
                self.tokens.take(actual - estimated)
            elif estimated > actual:
                self.tokens.give_back(estimated - actual)
        if self.requests and extra_requests > 0:
            self.requests.take(extra_requests)


def estimate_tokens(request: GenerateRequest) -> int:
    chars = sum(len(m.content) for m in request.messages)
    return chars // 4 + 4 * len(request.messages) + request.max_tokens


class RateLimitedBackend:
    """Any backend, behind a :class:`RateLimiter`. It reports the wrapped
    backend's name and model, so results do not depend on the wrapper."""

    def __init__(self, inner: Backend, limiter: RateLimiter) -> None:
        self.inner = inner
        self.limiter = limiter
        self.name: str = inner.name
        self.model: str = inner.model
        self.capabilities: Capabilities = inner.capabilities
        self.pricing: Pricing | None = inner.pricing

    def identity(self) -> dict[str, JSONValue]:  # a limit changes when it answers, not what
        return backend_identity(self.inner)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        estimate = estimate_tokens(request)
        await self.limiter.acquire(estimate)
        try:
            result = await self.inner.generate(request)
        except BaseException as exc:
            attempts = getattr(exc, "attempts", 1)
            self.limiter.settle(estimated=estimate, actual=estimate, extra_requests=max(0, attempts - 1))
            raise
        result = bounded_result(request, result)  # the server's count drives the waits: bounded first
        used = result.usage.prompt_tokens + result.usage.completion_tokens
        self.limiter.settle(estimated=estimate, actual=used or estimate, extra_requests=max(0, result.attempts - 1))
        return result
