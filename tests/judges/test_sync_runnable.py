"""The sync API shares one loop and leaks nothing; Runnable conventions:
failures are results, or JudgeFailedError with raise_on_failure."""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable

import pytest

from judgegraph import PointwiseJudge
from judgegraph.backends import OpenAIBackend
from judgegraph.judges import JudgeFailedError
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import RetryPolicy, Status

ITEM = {"instruction": "What is 2+2?", "response": "4."}
GOOD = Reply('{"feedback": "Right.", "score": 5}')
ONCE = RetryPolicy(max_attempts=1)


class EightAtOnce:
    """Answers GOOD, holding the first eight requests until all eight are in flight:
    the warm-up then opens exactly eight connections, however the machine schedules
    them (unheld, a fast answer could free a connection for the next request, and a
    later round of eight would open the ones the warm-up did not)."""

    def __init__(self) -> None:
        self.arrived = 0

    async def __call__(self, req: LoopbackRequest) -> Reply:
        self.arrived += 1
        while self.arrived < 8:  # counts only up: once eight came, nothing waits again
            await asyncio.sleep(0.01)
        return GOOD


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def sdk_clients() -> int:
    import openai

    gc.collect()
    return sum(isinstance(o, openai.AsyncOpenAI) for o in gc.get_objects())


@pytest.mark.timing  # concurrent calls and the connections they open
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_thousand_sync_invokes_leave_descriptors_and_clients_flat() -> None:
    with LoopbackServer(EightAtOnce()) as server:
        backend = OpenAIBackend("m", base_url=server.url + "/v1", api_key="x")
        judge = PointwiseJudge(backend)
        # Warm up the shared loop, its client and a pool of 8 connections
        # (batch() and judge_many() run concurrently, so the pool grows to 8).
        assert all(r.ok for r in judge.batch([ITEM] * 8, config={"max_concurrency": 8}))
        assert judge.judge(ITEM).ok
        fds, clients = open_fds(), sdk_clients()
        results = [judge.invoke(ITEM) for _ in range(1000)]
        assert all(r.ok for r in results)
        assert open_fds() - fds <= 2
        assert sdk_clients() == clients  # flat: no client per call (others may be alive in a full run)
        assert server.calls["/v1/chat/completions"] == 1009
        # The plain sync methods use the same loop, so the same client and pool.
        assert all(getattr(r, "ok", False) for r in judge.judge_many([ITEM] * 8, max_concurrency=8))
        assert sdk_clients() == clients and open_fds() - fds <= 2
        backend.close()
        assert open_fds() < fds  # its pooled sockets are gone with it


async def test_sync_calls_work_from_inside_a_running_loop() -> None:
    with LoopbackServer(lambda req: GOOD) as server:
        judge = PointwiseJudge(OpenAIBackend("m", base_url=server.url + "/v1", api_key="x"))
        assert judge.judge(ITEM).ok
        assert (await asyncio.to_thread(judge.invoke, ITEM)).ok


def failing_then(*outs: Reply | Fault) -> tuple[Callable[[LoopbackRequest], Reply | Fault], list[int]]:
    seen: list[int] = []

    def responder(req: LoopbackRequest) -> Reply | Fault:
        seen.append(1)
        return outs[min(len(seen), len(outs)) - 1]

    return responder, seen


def test_failures_are_results_unless_raise_on_failure() -> None:
    responder, _ = failing_then(Fault("status", status=500))
    with LoopbackServer(responder) as server:
        judge = PointwiseJudge(OpenAIBackend("m", base_url=server.url + "/v1", api_key="x", retry=ONCE))
        assert judge.invoke(ITEM).status is Status.ERROR  # the default: a result with its status
        with pytest.raises(JudgeFailedError) as info:
            judge.with_config(configurable={"raise_on_failure": True}).invoke(ITEM)
        assert info.value.result.status is Status.ERROR and "HTTP 500" in str(info.value)
        judge.raise_on_failure = True
        with pytest.raises(JudgeFailedError):
            judge.invoke(ITEM)
        assert judge.judge(ITEM).status is Status.ERROR  # the plain API never raises for it


def test_with_retry_and_with_fallbacks_fire_on_raise_on_failure() -> None:
    responder, seen = failing_then(Fault("status", status=500), GOOD)
    with LoopbackServer(responder) as server:
        judge = PointwiseJudge(OpenAIBackend("m", base_url=server.url + "/v1", api_key="x", retry=ONCE))
        judge.raise_on_failure = True
        retried = judge.with_retry(retry_if_exception_type=(JudgeFailedError,), stop_after_attempt=2)
        assert retried.invoke(ITEM).ok and len(seen) == 2

    with LoopbackServer(lambda req: Fault("status", status=500)) as bad, LoopbackServer(lambda req: GOOD) as good:
        primary = PointwiseJudge(OpenAIBackend("m", base_url=bad.url + "/v1", api_key="x", retry=ONCE))
        spare = PointwiseJudge(OpenAIBackend("m", base_url=good.url + "/v1", api_key="x"))
        chain = primary.with_config(configurable={"raise_on_failure": True}).with_fallbacks([spare])
        result = chain.invoke(ITEM)
        assert result.ok and bad.calls["/v1/chat/completions"] == 1 and good.calls["/v1/chat/completions"] == 1
