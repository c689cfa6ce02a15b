"""The guardrail with its judge down or slow, over real HTTP.

The judge is an OpenAIBackend with a production-like retry policy (4
attempts, 0.5 s backoff, 60 s per attempt), so only the guardrail's own
``timeout_s`` keeps a decision within budget. The loopback server mixes
outage kinds per request: hangs, 503s, resets, non-JSON bodies, unreadable
verdicts, and some good answers. Every decision must follow the declared
fail policy exactly when the judge gave no usable verdict, follow the score
when it did, and arrive within the budget: p99 decision latency at most
``timeout_s`` + 5 ms.

On a loaded machine the OS alone can wake a process many milliseconds after
its timer is due, which no library can help. So each decision is paired
with a bare ``asyncio.sleep(timeout_s)`` in the same loop, run just before
it, and the bound is budget + 5 ms + that bare timer's own p99 lateness. On
an idle machine (as in CI) the lateness is a fraction of a millisecond and
the bound is the plain budget + 5 ms; the raw figures are printed either way.
The number of decisions is fixed and small (60 per round, at most 3 rounds),
and they run one at a time. With nothing listening at all, only the median
is bounded: a decision whose deadline lands on a connection attempt can run
late on a loaded machine (see the test).
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from typing import Any

import pytest

from graphs import create_guardrail_graph
from judgegraph import OpenAIBackend, PointwiseJudge, RetryPolicy, Status
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

BUDGET_S = 0.150
SLACK_S = 0.005
DECISIONS = 60  # per policy
PROD_RETRY = RetryPolicy(max_attempts=4, initial_delay_s=0.5, timeout_s=60)
ASK: Any = {"instruction": "How do I reset my password?", "answer": "Open Settings, then Security, then Reset."}


def _p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.99 * (len(s) - 1)))]


class Outage:
    """Per request: 35% hang past the budget, 15% 503, 10% reset, 10% not JSON,
    10% an answer with no verdict, 20% a good verdict (score 5 or 1)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.served: list[str] = []

    def __call__(self, req: LoopbackRequest) -> Reply | Fault:
        x = self.rng.random()
        kind = (
            "hang" if x < 0.35 else "503" if x < 0.50 else "reset" if x < 0.60 else "garbage" if x < 0.70
            else "no-verdict" if x < 0.80 else "good"
        )  # fmt: skip
        self.served.append(kind)
        if kind == "hang":
            return Fault("hang", delay_s=3.0)
        if kind == "503":
            return Fault("status", 503)
        if kind == "reset":
            return Fault("reset")
        if kind == "garbage":
            return Fault("garbage")
        if kind == "no-verdict":
            return Reply("I am not sure what to make of this.")
        return Reply(f"Assessed. [RESULT] {self.rng.choice([5, 1])}")


def _check(decision: Any, verdict: Any, policy: str) -> None:
    judged = verdict is not None and getattr(verdict, "status", None) is Status.OK
    if judged:
        assert not decision.fail_policy_applied
        assert decision.action == ("pass" if verdict.score >= 3 else "block")
        assert decision.score == verdict.score
    else:
        assert decision.fail_policy_applied, decision
        assert decision.action == ("pass" if policy == "open" else "block"), decision
        assert f"fail-{policy} policy" in decision.reason
        assert decision.score is None


LATENESS: list[float] = []  # the bare timer's lateness, over all decisions of a test


async def _decide(policy: str, backend: Any, n: int) -> tuple[list[float], list[Any]]:
    graph = create_guardrail_graph(fail_policy=policy, threshold=3, timeout_s=BUDGET_S)  # type: ignore[arg-type]
    ctx = {"judge": PointwiseJudge(structured=False), "backend": backend}
    # Warm-up, untimed: the first call on an event loop builds the HTTP client
    # (an SSL context and a connection pool), synchronously, once per loop.
    await graph.ainvoke(ASK, context=ctx)
    latencies, outs = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        await asyncio.sleep(BUDGET_S)
        LATENESS.append(time.perf_counter() - t0 - BUDGET_S)
        t0 = time.perf_counter()
        out = await graph.ainvoke(ASK, context=ctx)
        latencies.append(time.perf_counter() - t0)
        outs.append(out)
        _check(out["decision"], out.get("verdict"), policy)
    return latencies, outs


def _within_budget(latencies: list[float], label: str) -> bool:
    p99, noise = _p99(latencies), max(0.0, _p99(LATENESS))
    ok = p99 <= BUDGET_S + SLACK_S + noise
    print(
        f"{label}: decision p50 {sorted(latencies)[len(latencies) // 2] * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, "
        f"budget {BUDGET_S * 1e3:.0f} ms; bare timer p99 lateness {noise * 1e3:.2f} ms: {'within' if ok else 'OVER'}"
    )
    return ok


@pytest.fixture(autouse=True)
def _fresh_lateness() -> None:
    LATENESS.clear()


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_mixed_outage_follows_the_declared_policy_within_budget(policy: str) -> None:
    # Up to three rounds: every decision of every round must follow the policy,
    # and one round's p99 must be within the bound. A guardrail that overran its
    # budget would fail all three; a burst of load from other work rarely spans them.
    rounds = []
    for attempt in range(3):
        LATENESS.clear()
        outage = Outage(seed=attempt * 2 + (1 if policy == "open" else 2))
        with LoopbackServer(outage) as server:
            backend = OpenAIBackend("judge", base_url=server.url + "/v1", api_key="k", retry=PROD_RETRY)
            latencies, outs = await _decide(policy, backend, DECISIONS)
        decisions = [o["decision"] for o in outs]
        timed_out = sum(d.timed_out for d in decisions)
        applied = sum(d.fail_policy_applied for d in decisions)
        # The outage was real: most decisions fell to the policy, many by timeout.
        assert timed_out >= DECISIONS // 4 and applied >= DECISIONS // 2
        assert any(not d.fail_policy_applied for d in decisions), "some good verdicts got through"
        label = f"round {attempt + 1}, fail-{policy} ({timed_out} timeouts, {applied} by policy)"
        rounds.append(label)
        if _within_budget(latencies, label):
            return
    pytest.fail(f"p99 over budget {BUDGET_S * 1e3:.0f} ms + 5 ms + timer lateness in every round: {rounds}")


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_judge_unreachable_is_decided_by_policy_within_budget(policy: str) -> None:
    # A port with nothing listening: every attempt is refused, and retries back off past the budget.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = OpenAIBackend("judge", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", retry=PROD_RETRY)
    latencies, outs = await _decide(policy, backend, 12)
    assert all(o["decision"].fail_policy_applied and o.get("verdict") is None for o in outs)
    assert all(o["decision"].timed_out for o in outs)  # the backoff outlasts the budget: the timeout decides
    # Reported, and bounded at the median only: with nothing listening, a decision
    # that lands on a connect attempt on a loaded machine can run late (p99 up
    # to ~400 ms seen at load 11 on 2 cores); the mixed-outage test bounds p99.
    ordered = sorted(latencies)
    median = ordered[len(ordered) // 2]
    print(f"unreachable, fail-{policy}: p50 {median * 1e3:.1f} ms, p99 {_p99(ordered) * 1e3:.1f} ms")
    assert median <= BUDGET_S + SLACK_S + max(0.0, _p99(LATENESS)), f"median {median * 1e3:.1f} ms"


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_judge_recovering_from_an_outage_is_trusted_again(policy: str) -> None:
    state = {"down": True}

    def respond(req: LoopbackRequest) -> Reply | Fault:
        return Fault("status", 503) if state["down"] else Reply("Clear steps. [RESULT] 2")

    with LoopbackServer(respond) as server:
        backend = OpenAIBackend(
            "judge", base_url=server.url + "/v1", api_key="k", retry=RetryPolicy(max_attempts=2, initial_delay_s=0.01)
        )
        _, down = await _decide(policy, backend, 5)
        state["down"] = False
        _, up = await _decide(policy, backend, 5)
    assert all(o["decision"].fail_policy_applied and not o["decision"].timed_out for o in down)
    assert all(o["decision"].judge_status is Status.ERROR for o in down)
    # Back up: the score decides (2 < 3 blocks), whatever the fail policy.
    assert all(not o["decision"].fail_policy_applied and o["decision"].action == "block" for o in up)
