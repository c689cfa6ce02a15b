"""Rate limits: requests per minute, tokens per minute settled to real usage, and a
rate-limited backend or job that gives the same results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _loopback_job import Judge, _items, _spec

from judgegraph import ScriptedBackend
from judgegraph.jobs import RateLimitedBackend, RateLimiter, Store, arun_spec

# ------------------------------------------------------------------ rate limits


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.now += s


async def test_rpm_spaces_requests_evenly() -> None:
    t = FakeTime()
    lim = RateLimiter(rpm=120, clock=t.clock, sleep=t.sleep)
    times = []
    for _ in range(6):
        await lim.acquire(1)
        times.append(round(t.now, 6))
    # A one-second burst (2 requests), then one every half second.
    assert times == [0.0, 0.0, 0.5, 1.0, 1.5, 2.0]


async def test_tpm_charges_estimates_then_settles_to_real_usage() -> None:
    t = FakeTime()
    lim = RateLimiter(tpm=600, clock=t.clock, sleep=t.sleep)  # 10 tokens/s, burst 10
    await lim.acquire(50)  # a full bucket lets a big request through, leaving a debt of 40
    assert t.now == 0.0
    await lim.acquire(10)  # waits until the level is back to 10: (10 + 40) / 10 s
    assert t.now == pytest.approx(5.0)
    lim.settle(estimated=10, actual=2)  # it used less: the difference comes back
    await lim.acquire(8)
    assert t.now == pytest.approx(5.0)


async def test_rate_limited_backend_is_transparent_and_charges_every_request() -> None:
    t = FakeTime()
    lim = RateLimiter(rpm=60, clock=t.clock, sleep=t.sleep)
    inner = ScriptedBackend(lambda req: "[SCORES] 7 2", model="mm")
    wrapped = RateLimitedBackend(inner, lim)
    assert (wrapped.name, wrapped.model) == ("scripted", "mm")
    from judgegraph import PairwiseJudge

    verdict = await PairwiseJudge(wrapped).ajudge({"instruction": "q", "response_a": "a", "response_b": "b"})
    assert verdict.ok and verdict.provenance is not None and verdict.provenance.backend == "scripted"
    assert len(inner.calls) == 2 and t.now == pytest.approx(1.0)  # two orders, one second apart at 60 rpm


async def test_rate_limited_job_gives_the_same_results(tmp_path: Path, loopback: Any) -> None:
    src = _items(tmp_path / "items.jsonl", 6)
    with loopback(Judge()) as server:
        plain = await arun_spec(_spec(src, server.url), store=tmp_path / "a.db", run_id="r")
        limited = await arun_spec(
            _spec(src, server.url, rpm=60_000, tpm=10_000_000), store=tmp_path / "b.db", run_id="r"
        )
    assert plain.config_hash == limited.config_hash
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        assert [(r.item_hash, r.result["winner"]) for r in a.rows("r")] == [
            (r.item_hash, r.result["winner"]) for r in b.rows("r")
        ]
