"""Judge behaviour with the scripted backend: swap debiasing, confidence, rubric, multi-turn, bad input."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from judgegraph import (
    BackendError,
    ConversationInput,
    Criterion,
    JudgeInputError,
    MultiTurnJudge,
    PairwiseJudge,
    PointwiseJudge,
    Rubric,
    RubricJudge,
    ScriptedBackend,
    Status,
    SwapPolicy,
)
from judgegraph.backends import GenerateRequest, GenerateResult
from judgegraph.judges import create_pairwise_judge
from judgegraph.types import TokenLogprob

PAIR = {"instruction": "Name a prime.", "response_a": "7", "response_b": "8"}


def by_order(first: str, second: str) -> ScriptedBackend:
    """Answer ``first`` when response A is "7" (original order), else ``second``."""

    def reply(req: GenerateRequest) -> str:
        prompt = req.messages[1].content  # the judge prompt, also during a repair request
        original = prompt.index("\n7\n") < prompt.index("\n8\n")
        return first if original else second

    return ScriptedBackend(reply)


async def test_swap_consistent_scores_are_averaged() -> None:
    judge = PairwiseJudge(by_order("A right. [SCORES] 9 2", "B right. [SCORES] 3 8"))
    v = await judge.ajudge(PAIR)
    assert v.status is Status.OK
    assert v.winner == "A" and not v.inconsistent
    assert (v.score_a, v.score_b) == (8.5, 2.5)  # (9+8)/2 and (2+3)/2, second order mapped back
    assert v.confidence == 1.0
    assert [o.winner for o in v.orders] == ["A", "A"]


async def test_swap_inconsistent_tie_policy_and_flag_policy() -> None:
    backend = by_order("[SCORES] 9 2", "[SCORES] 9 5")  # each order prefers the first position
    tie = await PairwiseJudge(backend).ajudge(PAIR)
    assert tie.winner == "tie" and tie.inconsistent
    assert tie.confidence == 0.5
    assert [o.winner for o in tie.orders] == ["A", "B"]
    flag = await PairwiseJudge(backend, swap=SwapPolicy(on_inconsistent="flag")).ajudge(PAIR)
    # Mean scores: A = (9+5)/2 = 7, B = (2+9)/2 = 5.5 -> A, flagged.
    assert flag.winner == "A" and flag.inconsistent


async def test_single_order_mode_makes_one_call() -> None:
    backend = ScriptedBackend(["[RESULT] B"])
    v = await create_pairwise_judge(backend, template="pairwise-choice", swap=SwapPolicy(mode="single")).ajudge(PAIR)
    assert v.winner == "B" and len(backend.calls) == 1 and v.orders == ()


def _choice_result(letter: str, probs: dict[str, float]) -> GenerateResult:
    text = f"Reasoning. [RESULT] {letter}"
    alts = tuple((" " + k, math.log(p)) for k, p in probs.items())
    tokens = (TokenLogprob("Reasoning. [RESULT]", 0.0), TokenLogprob(" " + letter, math.log(probs[letter]), alts))
    return GenerateResult(text=text, model="m", tokens=tokens)


async def test_confidence_from_token_probabilities_over_both_orders() -> None:
    first = _choice_result("A", {"A": 0.8, "B": 0.15, "T": 0.05})
    second = _choice_result("B", {"B": 0.6, "A": 0.3, "T": 0.1})  # swapped: B here is the original A

    def reply(req: GenerateRequest) -> GenerateResult:
        prompt = req.messages[-1].content
        return first if prompt.index("\n7\n") < prompt.index("\n8\n") else second

    backend = ScriptedBackend(reply, logprobs=True)
    v = await PairwiseJudge(backend, template="pairwise-choice").ajudge(PAIR)
    assert v.winner == "A" and not v.inconsistent
    assert v.confidence == pytest.approx((0.8 + 0.6) / 2)
    assert v.distribution == pytest.approx({"A": 0.7, "B": 0.225, "tie": 0.075})


async def test_one_failed_order_fails_the_verdict_explicitly() -> None:
    backend = by_order("[SCORES] 9 2", "I cannot decide.")
    v = await PairwiseJudge(backend).ajudge(PAIR)
    assert v.status is Status.UNPARSED
    assert v.winner is None and v.score_a is None
    assert v.reason is not None and v.reason.startswith("order B/A: no [SCORES] marker")
    assert v.orders[0].status is Status.OK  # the good order is kept for inspection
    assert v.to_evaluator_result()["score"] is None


async def test_backend_error_is_a_result_not_an_exception() -> None:
    v = await PointwiseJudge(ScriptedBackend([BackendError("endpoint down", attempts=3)])).ajudge(
        {"instruction": "q", "response": "r"}
    )
    assert v.status is Status.ERROR and v.reason == "endpoint down" and v.score is None
    assert v.provenance is not None and v.provenance.attempts == 3


async def test_rubric_judge_weights_and_failures() -> None:
    def reply(req: GenerateRequest) -> str:
        prompt = req.messages[-1].content
        return "[RESULT] 5" if "Criterion: accuracy" in prompt else "[RESULT] 2"

    levels = {1: "bad", 2: "weak", 3: "ok", 4: "good", 5: "great"}
    criteria = [
        Criterion(name="accuracy", rubric=Rubric(criterion="accuracy", levels=levels), weight=3),
        Criterion(name="style", rubric=Rubric(criterion="style", levels=levels), weight=1),
    ]
    r = await RubricJudge(ScriptedBackend(reply), criteria=criteria).ajudge({"instruction": "q", "response": "r"})
    assert r.status is Status.OK
    assert r.criteria["accuracy"].score == 5 and r.criteria["style"].score == 2
    assert r.weighted_score == pytest.approx((3 * 1.0 + 1 * 0.25) / 4)

    def half_broken(req: GenerateRequest) -> str:
        return "[RESULT] 5" if "Criterion: accuracy" in req.messages[-1].content else "no verdict"

    bad = await RubricJudge(ScriptedBackend(half_broken), criteria=criteria).ajudge(
        {"instruction": "q", "response": "r"}
    )
    assert bad.status is Status.UNPARSED and bad.weighted_score is None
    assert bad.reason is not None and bad.reason.startswith("style:")


CONVO = {
    "messages": [
        {"role": "user", "content": "Hi, what's 2+2?"},
        {"role": "assistant", "content": "It is 4."},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "It is 7."},
    ]
}


async def test_multiturn_modes() -> None:
    backend = ScriptedBackend(lambda req: "[RESULT] 2")
    whole = await MultiTurnJudge(backend).ajudge(CONVO)
    assert whole.score == 2
    assert "It is 4." in backend.calls[-1].messages[-1].content
    last = await MultiTurnJudge(backend, mode="turn").ajudge(CONVO)
    prompt = backend.calls[-1].messages[-1].content
    assert last.score == 2
    # The judged turn is the response; earlier turns are its context only.
    assert prompt.index("It is 4.") < prompt.index("begin response") < prompt.index("It is 7.")
    await MultiTurnJudge(backend, mode="turn").ajudge_turn(CONVO, 1)
    assert "And 3+3?" not in backend.calls[-1].messages[-1].content
    with pytest.raises(JudgeInputError, match=r"messages\[2\] is not an assistant message"):
        await MultiTurnJudge(backend, mode="turn").ajudge_turn(CONVO, 2)


@pytest.mark.parametrize(
    ("judge", "value", "field"),
    [
        (PointwiseJudge, {"response": "r"}, "instruction: Field required"),
        (PointwiseJudge, {"instruction": "q", "response": "  "}, "response must be a non-empty string"),
        (PairwiseJudge, {"instruction": "q", "response_a": "a"}, "response_b: Field required"),
        (MultiTurnJudge, {"messages": [{"role": "user", "content": "hi"}]}, "no assistant turn"),
        (MultiTurnJudge, {"messages": []}, "messages must not be empty"),
    ],
)
async def test_bad_input_names_the_field(judge: type, value: dict[str, object], field: str) -> None:
    backend = ScriptedBackend(["[RESULT] 3"])
    with pytest.raises(JudgeInputError, match=field):
        await judge(backend).ajudge(value)
    assert backend.calls == []


async def test_ajudge_many_isolates_bad_items_in_order() -> None:
    backend = ScriptedBackend(lambda req: "[RESULT] 4")
    items = [{"instruction": "q", "response": "a"}, {"instruction": "q"}, {"instruction": "q", "response": "c"}]
    out = await PointwiseJudge(backend).ajudge_many(items)
    assert isinstance(out[1], JudgeInputError) and "item 1:" in str(out[1])
    assert [getattr(r, "score", None) for r in out] == [4, None, 4]


def test_conversation_input_validates() -> None:
    with pytest.raises(ValueError, match=r"messages\[1\].content"):
        ConversationInput.model_validate(
            {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}]}
        )


def test_missing_extra_names_it() -> None:
    # A fresh interpreter where the openai package cannot be imported.
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "import judgegraph\n"
        "try:\n    judgegraph.OpenAIBackend('gpt-4o')\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'judgegraph[openai]'" in out


def test_core_import_stays_light() -> None:
    heavy = "('torch', 'transformers', 'openai', 'huggingface_hub', 'peft')"
    code = f"import sys, judgegraph; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
