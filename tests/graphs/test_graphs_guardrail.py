"""The guardrail graph: pass / revise / block, timeouts, fail policies, and
use as a subgraph inside an app's graph."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from judgegraph import BackendError, ScriptedBackend, Status
from judgegraph.backends import GenerateRequest
from judgegraph.graphs import GuardrailDecision, create_guardrail_graph
from judgegraph.judges import create_pointwise_judge

ASK = {"instruction": "How do I reset my password?", "answer": "Click 'Forgot password'."}


def grade_by_answer(req: GenerateRequest) -> str:
    """5 for an answer that mentions the email step, 2 otherwise."""
    prompt = req.messages[1].content
    return "Complete. [RESULT] 5" if "email" in prompt else "Misses the email step. [RESULT] 2"


def ctx(backend: ScriptedBackend) -> dict[str, Any]:
    return {"judge": create_pointwise_judge(), "backend": backend}


async def add_email_step(state: dict[str, Any]) -> dict[str, Any]:
    return {"answer": state["answer"] + " Then follow the link in the email."}


async def test_passes_a_good_answer_with_one_call() -> None:
    backend = ScriptedBackend(grade_by_answer)
    graph = create_guardrail_graph(threshold=4, fail_policy="closed")
    out = await graph.ainvoke({**ASK, "answer": "Use the link in the email."}, context=ctx(backend))
    d = out["decision"]
    assert (d.action, d.score, d.judge_status, d.fail_policy_applied) == ("pass", 5.0, Status.OK, False)
    assert d.reason == "score 5 >= threshold 4"
    assert out["verdict"].score == 5 and len(backend.calls) == 1


async def test_revise_feeds_feedback_to_the_reviser_then_passes() -> None:
    seen: list[str] = []

    async def reviser(state: dict[str, Any]) -> dict[str, Any]:
        seen.append(state["feedback"])
        return await add_email_step(state)

    backend = ScriptedBackend(grade_by_answer)
    graph = create_guardrail_graph(threshold=4, fail_policy="closed", reviser=reviser, max_revisions=2)
    out = await graph.ainvoke(ASK, context=ctx(backend))
    assert seen == ["Misses the email step."]
    assert out["decision"].action == "pass" and out["decision"].revisions == 1
    assert out["answer"].endswith("follow the link in the email.")
    assert len(backend.calls) == 2


async def test_revisions_are_bounded_then_the_answer_is_blocked() -> None:
    rounds = 0

    async def useless_reviser(state: dict[str, Any]) -> dict[str, Any]:
        nonlocal rounds
        rounds += 1
        return {"answer": state["answer"] + " Really."}

    backend = ScriptedBackend(grade_by_answer)
    graph = create_guardrail_graph(threshold=4, fail_policy="open", reviser=useless_reviser, max_revisions=3)
    out = await graph.ainvoke(ASK, context=ctx(backend))
    d = out["decision"]
    assert rounds == 3 and len(backend.calls) == 4
    assert d.action == "block" and d.revisions == 3 and not d.fail_policy_applied
    assert d.reason == "score 2 < threshold 4 after 3 revision(s)"


async def test_without_a_reviser_a_low_score_is_blocked() -> None:
    out = await create_guardrail_graph(threshold=4, fail_policy="open").ainvoke(
        ASK, context=ctx(ScriptedBackend(grade_by_answer))
    )
    assert out["decision"].action == "block" and "no reviser" in out["decision"].reason


@pytest.mark.timing  # a sub-second timeout that must fire
@pytest.mark.parametrize(("policy", "action"), [("open", "pass"), ("closed", "block")])
async def test_a_slow_judge_times_out_and_the_fail_policy_decides(policy: Any, action: str) -> None:
    slow = ScriptedBackend(grade_by_answer, latency_s=3600)  # never answers first, however slow the machine
    graph = create_guardrail_graph(threshold=4, fail_policy=policy, timeout_s=0.05)
    out = await graph.ainvoke(ASK, context=ctx(slow))
    d = out["decision"]
    assert d.action == action and d.timed_out and d.fail_policy_applied
    assert d.judge_status is Status.ERROR and d.score is None and out["verdict"] is None
    assert d.reason.startswith("the judge gave no verdict within 0.05 s") and f"fail-{policy}" in d.reason


@pytest.mark.parametrize(("policy", "action"), [("open", "pass"), ("closed", "block")])
async def test_a_down_judge_is_covered_by_the_fail_policy(policy: Any, action: str) -> None:
    down = ScriptedBackend(lambda r: BackendError("connection refused", attempts=2))
    out = await create_guardrail_graph(threshold=4, fail_policy=policy).ainvoke(ASK, context=ctx(down))
    d = out["decision"]
    assert d.action == action and d.fail_policy_applied and not d.timed_out
    assert "connection refused" in d.reason and out["verdict"].status is Status.ERROR


async def test_an_unreadable_verdict_never_passes_as_a_score() -> None:
    # The lowest threshold the 1-5 scale allows (1 itself would pass every score, and is refused).
    out = await create_guardrail_graph(threshold=2, fail_policy="closed").ainvoke(
        ASK, context=ctx(ScriptedBackend(lambda r: "Looks fine to me."))
    )
    assert out["decision"].action == "block" and out["decision"].judge_status is Status.UNPARSED


@pytest.mark.timing  # a sub-second timeout that must fire, over real HTTP
async def test_timeout_cuts_a_hanging_http_judge(loopback: Any) -> None:
    pytest.importorskip("openai")
    from judgegraph import OpenAIBackend, RetryPolicy
    from judgegraph.testing import Fault, Reply

    answered: list[bool] = []

    def first_answers_then_hangs(req: Any) -> Any:
        answered.append(True)
        # The hang outlasts any machine (it ends when the server stops), so the 0.3 s timeout always fires first.
        return Reply('{"feedback": "Fine.", "score": 5}') if len(answered) == 1 else Fault("hang", delay_s=3600)

    with loopback(first_answers_then_hangs) as server:
        backend = OpenAIBackend(
            "judge", base_url=server.url + "/v1", api_key="x", retry=RetryPolicy(max_attempts=1, timeout_s=60)
        )
        judge = create_pointwise_judge()
        # Warm the client up first, so the timeout below only has the hang to cut.
        assert (await judge.ajudge({"instruction": "q", "response": "r"}, backend=backend)).score == 5
        graph = create_guardrail_graph(threshold=4, fail_policy="closed", timeout_s=0.3)
        out = await graph.ainvoke(ASK, context={"judge": judge, "backend": backend})
    assert out["decision"].action == "block" and out["decision"].timed_out
    assert server.calls["/v1/chat/completions"] == 2


async def test_revision_count_restarts_on_each_run_of_a_thread() -> None:
    graph = create_guardrail_graph(
        threshold=4, fail_policy="closed", reviser=lambda s: {"answer": s["answer"] + "!"}, checkpointer=InMemorySaver()
    )
    cfg = {"configurable": {"thread_id": "chat-1"}}
    backend = ScriptedBackend(grade_by_answer)
    first = await graph.ainvoke(ASK, cfg, context=ctx(backend))
    second = await graph.ainvoke(ASK, cfg, context=ctx(backend))
    assert first["decision"].revisions == second["decision"].revisions == 1
    assert len(backend.calls) == 4


async def test_decisions_stream_on_the_custom_channel() -> None:
    graph = create_guardrail_graph(threshold=4, fail_policy="closed", reviser=add_email_step)
    events = [e async for e in graph.astream(ASK, context=ctx(ScriptedBackend(grade_by_answer)), stream_mode="custom")]
    assert [e["decision"].action for e in events] == ["revise", "pass"]
    assert all(isinstance(e["decision"], GuardrailDecision) for e in events)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="fail_policy"):
        create_guardrail_graph(threshold=4, fail_policy="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_s"):
        create_guardrail_graph(threshold=4, fail_policy="open", timeout_s=0)  # timing-lint: refused at build time


# ---------------------------------------------------------------- in an app


class App(TypedDict, total=False):
    instruction: str
    answer: str
    decision: GuardrailDecision
    verdict: Any
    feedback: str | None
    reply: str


def app(guardrail: Any) -> Any:
    async def draft(state: App) -> dict[str, Any]:
        return {"answer": "Click 'Forgot password'."}

    async def send(state: App) -> dict[str, Any]:
        return {"reply": state["answer"]}

    async def refuse(state: App) -> dict[str, Any]:
        return {"reply": f"Sorry, I can't help with that ({state['decision'].reason})."}

    g: StateGraph[App, Any, App, App] = StateGraph(App)
    g.add_node("draft", draft)
    g.add_node("guardrail", guardrail)
    g.add_node("send", send)
    g.add_node("refuse", refuse)
    g.add_edge(START, "draft")
    g.add_edge("draft", "guardrail")
    g.add_conditional_edges("guardrail", lambda s: "send" if s["decision"].action == "pass" else "refuse")
    g.add_edge("send", END)
    g.add_edge("refuse", END)
    return g.compile()


async def test_guardrail_as_a_subgraph_revises_inside_the_app() -> None:
    guard = create_guardrail_graph(threshold=4, fail_policy="closed", reviser=add_email_step)
    out = await app(guard).ainvoke({"instruction": ASK["instruction"]}, context=ctx(ScriptedBackend(grade_by_answer)))
    assert out["reply"] == "Click 'Forgot password'. Then follow the link in the email."
    assert out["decision"].action == "pass"


@pytest.mark.timing  # a sub-second timeout that must fire
async def test_guardrail_as_a_subgraph_blocks_when_the_judge_is_slow() -> None:
    guard = create_guardrail_graph(threshold=4, fail_policy="closed", timeout_s=0.05)
    slow = ScriptedBackend(grade_by_answer, latency_s=3600)  # never answers first
    out = await app(guard).ainvoke({"instruction": ASK["instruction"]}, context=ctx(slow))
    assert out["reply"].startswith("Sorry, I can't help with that (the judge gave no verdict")
