"""Bounded retries with backoff, shared by the HTTP backends."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from judgegraph.types import RetryPolicy

from ._protocol import BackendError

T = TypeVar("T")


class Retryable(Exception):
    """Raised by a backend's single attempt when trying again may help."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # HTTP-date form: fall back to our own backoff


async def awith_retries(attempt: Callable[[], Awaitable[T]], policy: RetryPolicy, what: str) -> tuple[T, int, float]:
    """Run ``attempt`` until it succeeds; return (value, attempts, latency of the last try).

    ``attempt`` raises :class:`Retryable` for 429/5xx/timeouts/resets and
    :class:`BackendError` (or anything else) for failures not worth repeating.
    """
    delay = policy.initial_delay_s
    for n in range(1, policy.max_attempts + 1):
        started = time.perf_counter()
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for runs the attempt in
            # a task of its own, and the extra hop lets a whole wave of pooled
            # connections go idle before the caller sends its next request.
            async with asyncio.timeout(policy.timeout_s):
                value = await attempt()
            return value, n, time.perf_counter() - started
        except (Retryable, TimeoutError) as exc:
            reason = str(exc) or f"timed out after {policy.timeout_s}s"
            if n == policy.max_attempts:
                raise BackendError(
                    f"{what}: gave up after {n} attempts: {reason}", attempts=n, retryable=True
                ) from None
            wait = min(random.uniform(0, delay) if policy.jitter else delay, policy.max_delay_s)
            hint = exc.retry_after_s if isinstance(exc, Retryable) else None
            if hint is not None:
                if hint > policy.max_retry_after_s:
                    raise BackendError(
                        f"{what}: server asked to retry after {hint:g}s (over max_retry_after_s): {reason}",
                        attempts=n,
                        retryable=True,
                    ) from None
                wait = hint
            await asyncio.sleep(wait)
            delay = min(delay * policy.backoff, policy.max_delay_s)
        except BackendError as exc:
            exc.attempts = n
            raise
    raise AssertionError("unreachable")
