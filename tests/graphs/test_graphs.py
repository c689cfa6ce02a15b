"""The prebuilt pairwise, pointwise, multi-turn and rubric graphs, end to end
with the scripted backend."""

from __future__ import annotations

import re
from typing import Any

import pytest

from judgegraph import (
    BackendError,
    Criterion,
    JudgeInputError,
    PairwiseInput,
    PairwiseVerdict,
    PointwiseJudge,
    Rubric,
    RubricJudge,
    ScriptedBackend,
    Status,
    SwapPolicy,
    from_context,
)
from judgegraph.backends import GenerateRequest
from judgegraph.graphs import (
    create_multiturn_graph,
    create_pairwise_graph,
    create_pointwise_graph,
    create_rubric_graph,
)
from judgegraph.judges import create_multiturn_judge, create_pairwise_judge, create_pointwise_judge
from judgegraph.types import Winner

PAIR = {"instruction": "Name a prime.", "response_a": "seven", "response_b": "eight"}


def _user(req: GenerateRequest) -> str:
    """The judge prompt (a repair round appends messages after it)."""
    return req.messages[1].content


def _first_shown(req: GenerateRequest) -> str:
    """The answer in slot A of this prompt."""
    m = re.search(r"begin response a⟧\n(.*?)\n", _user(req))
    assert m, _user(req)
    return m.group(1)


def prefers(word: str) -> ScriptedBackend:
    """A judge model that, in either order, scores the answer ``word`` higher."""
    return ScriptedBackend(lambda r: "Checked. [SCORES] 9 2" if _first_shown(r) == word else "Checked. [SCORES] 2 9")


def position_biased() -> ScriptedBackend:
    """A judge model that always prefers whatever is shown first."""
    return ScriptedBackend(lambda r: "First looks better. [SCORES] 7 4")


# ---------------------------------------------------------------- pairwise


async def test_pairwise_runs_both_orders_and_matches_the_judge() -> None:
    backend = prefers("seven")
    judge = create_pairwise_judge()
    out = await create_pairwise_graph().ainvoke(PAIR, context={"judge": judge, "backend": backend})
    verdict = out["verdict"]
    assert verdict.status is Status.OK and verdict.winner == "A" and not verdict.inconsistent
    assert sorted(_first_shown(c) for c in backend.calls) == ["eight", "seven"]
    assert [o.winner for o in verdict.orders] == ["A", "A"]  # the B/A order is mapped back
    assert verdict.provenance is not None and verdict.provenance.attempts == 2
    assert verdict.provenance.usage.completion_tokens == sum(
        o.provenance.usage.completion_tokens for o in verdict.orders if o.provenance
    )
    direct = await judge.ajudge(PAIR, backend=prefers("seven"))
    keys = {"winner", "score_a", "score_b", "confidence", "inconsistent", "rationale"}
    assert verdict.model_dump(include=keys) == direct.model_dump(include=keys)


async def test_pairwise_inconsistent_orders_follow_the_swap_policy() -> None:
    ctx = {"judge": create_pairwise_judge(), "backend": position_biased()}
    tie = (await create_pairwise_graph().ainvoke(PAIR, context=ctx))["verdict"]
    assert tie.winner == "tie" and tie.inconsistent
    flagged = await create_pairwise_graph(swap=SwapPolicy(on_inconsistent="flag")).ainvoke(PAIR, context=ctx)
    # flag keeps the mean-score winner: both orders score A and B 5.5 on average
    assert flagged["verdict"].inconsistent and flagged["verdict"].score_a == flagged["verdict"].score_b == 5.5


async def test_pairwise_single_order_makes_one_call() -> None:
    backend = prefers("eight")
    judge = create_pairwise_judge(swap=SwapPolicy(mode="single"))
    out = await create_pairwise_graph().ainvoke(PAIR, context={"judge": judge, "backend": backend})
    assert len(backend.calls) == 1 and out["verdict"].winner == "B" and out["verdict"].orders == ()


async def test_pairwise_failed_order_names_the_order_and_has_no_winner() -> None:
    def script(r: GenerateRequest) -> str | Exception:
        return BackendError("upstream 503", attempts=3) if _first_shown(r) == "eight" else "x [SCORES] 9 1"

    out = await create_pairwise_graph().ainvoke(
        PAIR, context={"judge": create_pairwise_judge(), "backend": ScriptedBackend(script)}
    )
    v = out["verdict"]
    assert v.status is Status.ERROR and v.winner is None
    assert v.reason is not None and v.reason.startswith("order B/A:") and "upstream 503" in v.reason
    assert v.provenance is not None and v.provenance.attempts == 4  # 1 + 3 retries in the failed order


async def test_pairwise_reference_reaches_the_prompt() -> None:
    backend = prefers("seven")
    await create_pairwise_graph().ainvoke(
        {**PAIR, "reference": "Seven is prime."}, context={"judge": create_pairwise_judge(), "backend": backend}
    )
    assert all("Seven is prime." in _user(c) for c in backend.calls)


class LengthJudge:
    """A user's own pairwise judge (not a ModelJudge): prefers the longer answer."""

    def __init__(self) -> None:
        self.seen: list[PairwiseInput] = []

    async def ajudge(self, value: Any, *, context: Any = None) -> PairwiseVerdict:
        self.seen.append(value)
        a, b = len(value.response_a), len(value.response_b)
        winner: Winner = "A" if a > b else "B" if b > a else "tie"
        return PairwiseVerdict(status=Status.OK, winner=winner, score_a=float(a), score_b=float(b))


async def test_pairwise_accepts_any_judge_with_ajudge() -> None:
    judge = LengthJudge()
    out = await create_pairwise_graph().ainvoke(
        {"instruction": "q", "response_a": "a long answer", "response_b": "short"}, context={"judge": judge}
    )
    assert [s.response_a for s in judge.seen] in (["a long answer", "short"], ["short", "a long answer"])
    v = out["verdict"]
    assert v.winner == "A" and not v.inconsistent
    assert (v.score_a, v.score_b) == (13.0, 5.0)  # the swapped order's scores mapped back


async def test_pairwise_bad_input_names_the_field() -> None:
    ctx = {"judge": create_pairwise_judge(), "backend": prefers("x")}
    with pytest.raises(JudgeInputError, match="response_b"):
        await create_pairwise_graph().ainvoke({**PAIR, "response_b": "  "}, context=ctx)


async def test_missing_judge_in_context_names_the_key() -> None:
    with pytest.raises(LookupError, match="'pair_judge'"):
        await create_pairwise_graph(judge=from_context("pair_judge")).ainvoke(
            PAIR, context={"judge": create_pairwise_judge()}
        )
    with pytest.raises(TypeError, match="no async ajudge"):
        await create_pairwise_graph().ainvoke(PAIR, context={"judge": "not a judge"})


async def test_pairwise_streams_each_order_then_the_verdict() -> None:
    ctx = {"judge": create_pairwise_judge(), "backend": prefers("seven")}
    custom: list[dict[str, Any]] = []
    updated: list[str] = []
    async for mode, chunk in create_pairwise_graph().astream(PAIR, context=ctx, stream_mode=["updates", "custom"]):
        if mode == "custom":
            custom.append(chunk)
        else:
            updated.extend(chunk)
    assert sorted(e["order"] for e in custom[:2]) == ["A/B", "B/A"]
    assert "order" not in custom[2] and custom[2]["verdict"].winner == "A"
    assert updated == ["prepare", "judge_order", "judge_order", "aggregate"]


# ---------------------------------------------------------------- pointwise


async def test_pointwise_reference_free_and_reference_guided() -> None:
    backend = ScriptedBackend(lambda r: "Correct. [RESULT] 5" if "begin reference" in _user(r) else "Ok. [RESULT] 3")
    graph = create_pointwise_graph()
    ctx = {"judge": create_pointwise_judge(), "backend": backend}
    free = await graph.ainvoke({"instruction": "2+2?", "response": "4"}, context=ctx)
    guided = await graph.ainvoke({"instruction": "2+2?", "response": "4", "reference": "4"}, context=ctx)
    assert (free["verdict"].score, guided["verdict"].score) == (3, 5)
    assert free["verdict"].scale == (1, 5)


async def test_pointwise_rubric_sets_the_scale_and_input_rubric_wins() -> None:
    default = Rubric(criterion="Concise?", levels={1: "rambling", 2: "ok", 3: "tight"})
    other = Rubric(criterion="Polite?", levels={0: "rude", 1: "polite"})
    backend = ScriptedBackend(lambda r: "Fine. [RESULT] 1")
    graph = create_pointwise_graph(rubric=default)
    ctx = {"judge": create_pointwise_judge(), "backend": backend}
    a = await graph.ainvoke({"instruction": "q", "response": "r"}, context=ctx)
    b = await graph.ainvoke({"instruction": "q", "response": "r", "rubric": other}, context=ctx)
    assert a["verdict"].scale == (1, 3) and "Concise?" in _user(backend.calls[0])
    assert b["verdict"].scale == (0, 1) and "Polite?" in _user(backend.calls[1])


async def test_pointwise_unreadable_output_is_unparsed_not_a_score() -> None:
    backend = ScriptedBackend(["I refuse to grade.", "Still no."])
    out = await create_pointwise_graph().ainvoke(
        {"instruction": "q", "response": "r"}, context={"judge": create_pointwise_judge(), "backend": backend}
    )
    assert out["verdict"].status is Status.UNPARSED and out["verdict"].score is None
    assert out["verdict"].reason


# ---------------------------------------------------------------- multi-turn

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy?"},
    {"role": "assistant", "content": "Milan."},
    {"role": "user", "content": "Sure?"},
    {"role": "assistant", "content": "Sorry: Rome."},
]


def chat_grader(req: GenerateRequest) -> str:
    text = _user(req)
    if "begin response" not in text:
        return "Recovered in the end. [RESULT] 4"  # whole conversation
    graded = re.search(r"begin response⟧\n(.*?)\n", text)
    assert graded
    return {"Paris.": "Right. [RESULT] 5", "Milan.": "Wrong. [RESULT] 1", "Sorry: Rome.": "Fixed. [RESULT] 4"}[
        graded.group(1)
    ]


def chat_context(backend: ScriptedBackend) -> dict[str, Any]:
    return {
        "turn_judge": create_multiturn_judge(mode="turn"),
        "conversation_judge": create_multiturn_judge(mode="conversation"),
        "backend": backend,
    }


@pytest.mark.parametrize(("policy", "expected"), [("min", 1.0), ("mean", 10 / 3), ("last", 4.0)])
async def test_multiturn_scores_each_turn_and_aggregates_by_policy(policy: Any, expected: float) -> None:
    backend = ScriptedBackend(chat_grader)
    out = await create_multiturn_graph(turn_policy=policy).ainvoke({"messages": CHAT}, context=chat_context(backend))
    v = out["verdict"]
    assert v.status is Status.OK and v.policy == policy
    assert [(t.turn, t.verdict.score) for t in v.turns] == [(2, 5), (4, 1), (6, 4)]
    assert v.turn_score == pytest.approx(expected)
    assert v.conversation is not None and v.conversation.score == 4
    assert len(backend.calls) == 4


async def test_multiturn_turn_sees_only_earlier_turns_and_reference_only_at_the_end() -> None:
    backend = ScriptedBackend(chat_grader)
    await create_multiturn_graph(turn_policy="min").ainvoke(
        {"messages": CHAT, "reference": "Rome"}, context=chat_context(backend)
    )
    by_turn = {
        re.search(r"begin response⟧\n(.*?)\n", _user(c)).group(1): _user(c)  # type: ignore[union-attr]
        for c in backend.calls
        if "begin response⟧" in _user(c)
    }
    assert "Milan." not in by_turn["Paris."] and "Sure?" not in by_turn["Milan."]
    assert "begin reference" not in by_turn["Paris."] and "begin reference" in by_turn["Sorry: Rome."]


async def test_multiturn_failed_turn_is_named_and_blocks_the_aggregate() -> None:
    def script(req: GenerateRequest) -> str:
        return "no verdict here" if "begin response⟧\nMilan." in _user(req) else chat_grader(req)

    out = await create_multiturn_graph(turn_policy="mean", conversation_judge=None).ainvoke(
        {"messages": CHAT}, context=chat_context(ScriptedBackend(script))
    )
    v = out["verdict"]
    assert v.status is Status.UNPARSED and v.turn_score is None and v.conversation is None
    assert v.reason is not None and v.reason.startswith("turn 4:")
    assert [t.verdict.status for t in v.turns] == [Status.OK, Status.UNPARSED, Status.OK]


async def test_multiturn_rejects_a_conversation_without_assistant_turns() -> None:
    with pytest.raises(JudgeInputError, match="no assistant turn"):
        await create_multiturn_graph(turn_policy="min").ainvoke(
            {"messages": [{"role": "user", "content": "hi"}]}, context=chat_context(ScriptedBackend([]))
        )


# ---------------------------------------------------------------- rubric

CRITERIA = [
    Criterion(
        name="accuracy",
        rubric=Rubric(criterion="Is it accurate?", levels={1: "no", 2: "barely", 3: "partly", 4: "mostly", 5: "fully"}),
        weight=2,
    ),
    Criterion(name="tone", rubric=Rubric(criterion="Is the tone kind?", levels={1: "harsh", 2: "flat", 3: "kind"})),
]


def rubric_grader(req: GenerateRequest) -> str:
    return "Exact. [RESULT] 5" if "accurate" in _user(req) else "A bit flat. [RESULT] 2"


async def test_rubric_fans_out_per_criterion_and_weights_the_aggregate() -> None:
    backend = ScriptedBackend(rubric_grader)
    ctx = {"judge": create_pointwise_judge(), "backend": backend}
    item = {"instruction": "Explain DNS.", "response": "It maps names to addresses."}
    out = await create_rubric_graph(criteria=CRITERIA).ainvoke(item, context=ctx)
    v = out["verdict"]
    assert v.status is Status.OK and list(v.criteria) == ["accuracy", "tone"]
    assert v.weighted_score == pytest.approx((2 * 1.0 + 1 * 0.5) / 3)
    assert v.rationale == "accuracy: Exact.\ntone: A bit flat."
    assert len(backend.calls) == 2
    direct = await RubricJudge(criteria=CRITERIA).ajudge(item, backend=ScriptedBackend(rubric_grader))
    assert direct.weighted_score == v.weighted_score


async def test_rubric_criteria_from_input_and_their_errors() -> None:
    ctx = {"judge": PointwiseJudge(), "backend": ScriptedBackend(rubric_grader)}
    item = {"instruction": "q", "response": "r"}
    out = await create_rubric_graph().ainvoke({**item, "criteria": CRITERIA[1:]}, context=ctx)
    assert list(out["verdict"].criteria) == ["tone"] and out["verdict"].weighted_score == 0.5
    with pytest.raises(JudgeInputError, match="criteria"):
        await create_rubric_graph().ainvoke(item, context=ctx)
    with pytest.raises(JudgeInputError, match="unique"):
        await create_rubric_graph().ainvoke({**item, "criteria": [CRITERIA[0], CRITERIA[0]]}, context=ctx)


async def test_rubric_failed_criterion_is_named_and_no_aggregate_is_given() -> None:
    def script(req: GenerateRequest) -> str | Exception:
        return BackendError("timeout") if "kind" in _user(req) else "Exact. [RESULT] 5"

    ctx = {"judge": create_pointwise_judge(), "backend": ScriptedBackend(script)}
    out = await create_rubric_graph(criteria=CRITERIA).ainvoke({"instruction": "q", "response": "r"}, context=ctx)
    v = out["verdict"]
    assert v.status is Status.ERROR and v.weighted_score is None
    assert v.reason == "tone: timeout" and v.criteria["accuracy"].score == 5


async def test_fan_out_state_is_reset_between_runs_on_one_thread() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = create_rubric_graph(checkpointer=InMemorySaver())
    ctx = {"judge": create_pointwise_judge(), "backend": ScriptedBackend(rubric_grader)}
    cfg = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"instruction": "q", "response": "r", "criteria": CRITERIA}, cfg, context=ctx)
    second = await graph.ainvoke({"instruction": "q", "response": "r", "criteria": CRITERIA[1:]}, cfg, context=ctx)
    assert list(second["verdict"].criteria) == ["tone"]
