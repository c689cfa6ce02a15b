"""Every prebuilt graph runs under ``invoke`` as under ``ainvoke``, with the
same verdict, and under ``invoke`` from inside a running loop (a notebook)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from judgegraph import Criterion, Rubric, ScriptedBackend
from judgegraph.backends import GenerateRequest
from judgegraph.graphs import (
    create_batch_graph,
    create_guardrail_graph,
    create_multiturn_graph,
    create_pairwise_graph,
    create_pointwise_graph,
    create_rubric_graph,
)
from judgegraph.judges import create_multiturn_judge, create_pairwise_judge, create_pointwise_judge


def _user(req: GenerateRequest) -> str:
    return req.messages[1].content


def pair_grader(req: GenerateRequest) -> str:
    m = re.search(r"begin response a⟧\n(.*?)\n", _user(req))
    return "Checked. [SCORES] 9 2" if m and m.group(1) == "seven" else "Checked. [SCORES] 2 9"


def chat_grader(req: GenerateRequest) -> str:
    return "Fine. [RESULT] 4" if "begin response" in _user(req) else "Recovered. [RESULT] 3"


def rubric_grader(req: GenerateRequest) -> str:
    return "Exact. [RESULT] 5" if "accurate" in _user(req) else "A bit flat. [RESULT] 2"


def answer_grader(req: GenerateRequest) -> str:
    return "Complete. [RESULT] 5" if "email" in _user(req) else "Misses the email step. [RESULT] 2"


CRITERIA = [
    Criterion(
        name="accuracy",
        rubric=Rubric(criterion="Is it accurate?", levels={1: "no", 2: "barely", 3: "partly", 4: "mostly", 5: "fully"}),
        weight=2,
    ),
    Criterion(name="tone", rubric=Rubric(criterion="Is the tone kind?", levels={1: "harsh", 2: "flat", 3: "kind"})),
]


def add_email_step(state: dict[str, Any]) -> dict[str, Any]:
    return {"answer": state["answer"] + " Then follow the link in the email."}


@dataclass
class Case:
    graph: Callable[[], Any]
    input: dict[str, Any]
    context: Callable[[], dict[str, Any]]
    summary: Callable[[dict[str, Any]], Any]
    expected: Any


CASES = {
    "pointwise": Case(
        lambda: create_pointwise_graph(),
        {"instruction": "2+2?", "response": "4"},
        lambda: {"judge": create_pointwise_judge(), "backend": ScriptedBackend(lambda r: "Right. [RESULT] 5")},
        lambda out: (out["verdict"].status.value, out["verdict"].score),
        ("ok", 5),
    ),
    "pairwise": Case(
        lambda: create_pairwise_graph(),
        {"instruction": "Name a prime.", "response_a": "seven", "response_b": "eight"},
        lambda: {"judge": create_pairwise_judge(), "backend": ScriptedBackend(pair_grader)},
        lambda out: (out["verdict"].winner, [o.winner for o in out["verdict"].orders]),
        ("A", ["A", "A"]),
    ),
    "rubric": Case(
        lambda: create_rubric_graph(criteria=CRITERIA),
        {"instruction": "Explain DNS.", "response": "It maps names to addresses."},
        lambda: {"judge": create_pointwise_judge(), "backend": ScriptedBackend(rubric_grader)},
        lambda out: (out["verdict"].status.value, out["verdict"].rationale, round(out["verdict"].weighted_score, 3)),
        ("ok", "accuracy: Exact.\ntone: A bit flat.", round((2 * 1.0 + 1 * 0.5) / 3, 3)),
    ),
    "multiturn": Case(
        lambda: create_multiturn_graph(turn_policy="min"),
        {
            "messages": [
                {"role": "user", "content": "Capital of France?"},
                {"role": "assistant", "content": "Paris."},
                {"role": "user", "content": "And of Italy?"},
                {"role": "assistant", "content": "Rome."},
            ]
        },
        lambda: {
            "turn_judge": create_multiturn_judge(mode="turn"),
            "conversation_judge": create_multiturn_judge(mode="conversation"),
            "backend": ScriptedBackend(chat_grader),
        },
        lambda out: ([(t.turn, t.verdict.score) for t in out["verdict"].turns], out["verdict"].conversation.score),
        ([(1, 4), (3, 4)], 3),
    ),
    "guardrail": Case(
        # The revise loop too: a sync reviser of the app's, then the judge again.
        lambda: create_guardrail_graph(threshold=4, fail_policy="closed", reviser=add_email_step, max_revisions=2),
        {"instruction": "How do I reset my password?", "answer": "Click 'Forgot password'."},
        lambda: {"judge": create_pointwise_judge(), "backend": ScriptedBackend(answer_grader)},
        lambda out: (out["decision"].action, out["decision"].revisions, out["verdict"].score),
        ("pass", 1, 5),
    ),
    "batch": Case(
        lambda: create_batch_graph(),
        {"items": [{"instruction": "q", "response": f"answer-{i}"} for i in range(5)]},
        lambda: {
            "judge": create_pointwise_judge(),
            "backend": ScriptedBackend(lambda r: f"[RESULT] {int(_user(r).split('answer-')[1][0]) + 1}"),
        },
        lambda out: [r.score for r in out["results"]],
        [1, 2, 3, 4, 5],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_prebuilt_graph_runs_under_invoke(name: str) -> None:
    case = CASES[name]
    assert case.summary(case.graph().invoke(case.input, context=case.context())) == case.expected


@pytest.mark.parametrize("name", list(CASES))
async def test_each_prebuilt_graph_gives_the_same_under_ainvoke_and_invoke_in_a_running_loop(name: str) -> None:
    case = CASES[name]
    graph = case.graph()
    assert case.summary(await graph.ainvoke(case.input, context=case.context())) == case.expected
    assert case.summary(graph.invoke(case.input, context=case.context())) == case.expected
