"""The guardrail with its judge down or slow, over real HTTP.

The judge is an OpenAIBackend with a production-like retry policy (4
attempts, 0.5 s backoff, 60 s per attempt), so only the guardrail's own
``timeout_s`` ends a hang. The loopback server mixes outage kinds per
request: hangs, 503s, resets, non-JSON bodies, unreadable verdicts, and some
good answers. Every decision must follow the declared fail policy exactly
when the judge gave no usable verdict, and follow the score when it did.

No test here asserts a duration: how long decisions take against the budget
is measured side by side with a bare timer in ``bench/guardrail.py
--outage`` (results in bench/results/graphs.md). A timeout is seen here
through ``decision.timed_out``: a hang lasts until the server stops, so only
the guardrail's budget can end it, however slow the machine. Every bound
below follows from what the server served, never from how fast it ran.
"""

from __future__ import annotations

import random
import socket
from typing import Any

import pytest

from graphs import create_guardrail_graph
from judgegraph import OpenAIBackend, PointwiseJudge, RetryPolicy, Status
from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

pytestmark = pytest.mark.timing

BUDGET_S = 0.150
DECISIONS = 60  # per policy
# No jitter: the first backoff (0.5 s) then always outlasts the 0.15 s budget.
PROD_RETRY = RetryPolicy(max_attempts=4, initial_delay_s=0.5, timeout_s=60, jitter=False)
# When a decision must not time out (the judge answers at once), a budget no
# scheduler delay reaches: the test waits only as long as the answer takes.
GENEROUS_BUDGET_S = 60.0
ASK: Any = {"instruction": "How do I reset my password?", "answer": "Open Settings, then Security, then Reset."}


class Outage:
    """Per request: 35% hang (until the server stops), 15% 503, 10% reset, 10% not JSON,
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
            return Fault("hang", delay_s=3600.0)  # released when the server stops
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


async def _decide(policy: str, backend: Any, n: int, *, budget_s: float = BUDGET_S) -> list[Any]:
    graph = create_guardrail_graph(fail_policy=policy, threshold=3, timeout_s=budget_s)  # type: ignore[arg-type]
    ctx = {"judge": PointwiseJudge(structured=False), "backend": backend}
    outs = []
    for _ in range(n):
        out = await graph.ainvoke(ASK, context=ctx)
        outs.append(out)
        _check(out["decision"], out.get("verdict"), policy)
    return outs


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_mixed_outage_follows_the_declared_policy(policy: str) -> None:
    outage = Outage(seed=1 if policy == "open" else 2)
    with LoopbackServer(outage) as server:
        backend = OpenAIBackend("judge", base_url=server.url + "/v1", api_key="k", retry=PROD_RETRY)
        outs = await _decide(policy, backend, DECISIONS)
    decisions = [o["decision"] for o in outs]
    timed_out = sum(d.timed_out for d in decisions)
    applied = sum(d.fail_policy_applied for d in decisions)
    served = outage.served
    # The outage was real and mixed (the kinds follow from the seed alone).
    assert {"hang", "503", "good"} <= set(served) and served.count("hang") >= DECISIONS // 5
    # Each hang ends the decision it belongs to, by the budget: so at least that many time out.
    assert timed_out >= served.count("hang")
    # A decision decided by its score used up one good answer; all others fell to the policy.
    assert DECISIONS - applied <= served.count("good")
    assert all(d.fail_policy_applied and d.score is None for d in decisions if d.timed_out)
    # (That good verdicts get through at all is checked without a tight budget, below:
    # here a starved machine may time out a good answer too, and must then apply the policy.)


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_judge_unreachable_is_decided_by_policy(policy: str) -> None:
    # A port with nothing listening: every attempt is refused, and retries back off past the budget.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = OpenAIBackend("judge", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", retry=PROD_RETRY)
    outs = await _decide(policy, backend, 6)
    assert all(o["decision"].fail_policy_applied and o.get("verdict") is None for o in outs)
    assert all(o["decision"].timed_out for o in outs)  # the backoff outlasts the budget: the timeout decides


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_judge_recovering_from_an_outage_is_trusted_again(policy: str) -> None:
    state = {"down": True}

    def respond(req: LoopbackRequest) -> Reply | Fault:
        return Fault("status", 503) if state["down"] else Reply("Clear steps. [RESULT] 2")

    with LoopbackServer(respond) as server:
        backend = OpenAIBackend(
            "judge", base_url=server.url + "/v1", api_key="k", retry=RetryPolicy(max_attempts=2, initial_delay_s=0.01)
        )
        down = await _decide(policy, backend, 5, budget_s=GENEROUS_BUDGET_S)
        state["down"] = False
        up = await _decide(policy, backend, 5, budget_s=GENEROUS_BUDGET_S)
    assert all(o["decision"].fail_policy_applied and not o["decision"].timed_out for o in down)
    assert all(o["decision"].judge_status is Status.ERROR for o in down)
    # Back up: the score decides (2 < 3 blocks), whatever the fail policy.
    assert all(not o["decision"].fail_policy_applied and o["decision"].action == "block" for o in up)
