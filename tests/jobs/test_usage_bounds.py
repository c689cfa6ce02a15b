"""Numbers a server reports are bounded before they drive waits, costs or
limits (issue 26).

The example: a loopback server claiming 10^9 prompt tokens for one answer,
behind ``tpm=``, used to leave a debt the next request waited out for about
eleven days. Waits are read from the limiter's own clock (a fake one that
advances when it sleeps), so nothing here depends on real time.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import OpenAIBackend, PointwiseJudge, RetryPolicy, ScriptedBackend
from judgegraph.backends import GenerateRequest, GenerateResult
from judgegraph.jobs import RateLimitedBackend, RateLimiter
from judgegraph.testing import LoopbackServer, Reply
from judgegraph.types import Message, Pricing, Usage

# Timing-sensitive (rate-limit waits from reported usage): bench/stress_tests.py runs it on a busy core.
pytestmark = pytest.mark.timing

ITEM = {"instruction": "What is 2+2?", "response": "4."}
WINDOW_S = 60.0


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.waits.append(s)
        self.now += s


async def test_a_server_claiming_a_billion_tokens_does_not_stall_the_job(caplog: pytest.LogCaptureFixture) -> None:
    t = FakeTime()
    limiter = RateLimiter(tpm=100_000, clock=t.clock, sleep=t.sleep)
    with LoopbackServer(lambda req: Reply("Fine. [RESULT] 4", prompt_tokens=10**9)) as server:
        inner = OpenAIBackend(
            "judge",
            base_url=server.url + "/v1",
            api_key="sk-test",
            retry=RetryPolicy(max_attempts=1),
            pricing=Pricing(input_per_mtok=1.0, output_per_mtok=1.0),
        )
        judge = PointwiseJudge(RateLimitedBackend(inner, limiter), structured=False)
        with caplog.at_level(logging.WARNING, logger="judgegraph.backends"):
            first = await judge.ajudge(ITEM)
            second = await judge.ajudge(ITEM)
    assert first.ok and second.ok
    assert max(t.waits, default=0.0) <= WINDOW_S + 1.0, t.waits  # not 10^9 / (100000/60) s
    assert first.provenance is not None and first.provenance.usage.prompt_tokens < 10_000
    assert first.provenance.cost_usd is not None and first.provenance.cost_usd < 0.01  # not $1,000
    assert "reported 1000000000 prompt" in caplog.text  # flagged, not silent


_COUNTS = st.one_of(st.integers(-(10**12), 10**12), st.sampled_from([0, -1, 10**9, 10**15, 2**63 - 1]))


@given(
    reported=st.lists(st.tuples(_COUNTS, _COUNTS), min_size=1, max_size=6),
    tpm=st.sampled_from([60, 1_000, 100_000, 10_000_000]),
    prompt=st.text(max_size=300),
    max_tokens=st.integers(1, 4096),
)
@settings(max_examples=80)
def test_no_reported_usage_makes_a_wait_longer_than_a_window_or_a_count_past_the_request(
    reported: list[tuple[int, int]], tpm: int, prompt: str, max_tokens: int
) -> None:
    t = FakeTime()
    limiter = RateLimiter(tpm=tpm, clock=t.clock, sleep=t.sleep)
    answers = iter(reported)

    def server(req: GenerateRequest) -> GenerateResult:
        p, c = next(answers)
        return GenerateResult("[RESULT] 3", "m", Usage(prompt_tokens=p, completion_tokens=c))

    backend = RateLimitedBackend(ScriptedBackend(server), limiter)
    request = GenerateRequest(messages=(Message(role="user", content=prompt),), max_tokens=max_tokens)

    async def run() -> list[GenerateResult]:
        return [await backend.generate(request) for _ in reported]

    results = asyncio.run(run())
    # At most one window of debt plus the one-second burst, whatever was claimed.
    assert all(w <= WINDOW_S + 1.0 + 1e-6 for w in t.waits), t.waits
    cap = len(prompt.encode("utf-8", "surrogatepass")) + 16 + 64
    for r in results:
        assert 0 <= r.usage.prompt_tokens <= cap and 0 <= r.usage.completion_tokens <= max_tokens, r.usage
