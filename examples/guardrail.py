"""A guardrail in front of an app's answers.

The judge grades each answer; 4 or more passes it, less sends it to a reviser
once, and an answer still below the bar is blocked. A judge that is down or
slower than two seconds blocks too (fail_policy="closed").

    python examples/guardrail.py
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from judgegraph import PointwiseJudge
from judgegraph.graphs import GuardrailDecision, create_guardrail_graph

ANSWERS = {
    "What is the capital of France?": "Paris is the capital of France.",
    "What is 12 times 3?": "About 40.",
    "Which planet is largest?": "Saturn.",
}


class AppState(TypedDict, total=False):
    instruction: str
    answer: str
    decision: GuardrailDecision


async def draft(state: AppState) -> dict:
    """Stands in for your app."""
    return {"answer": ANSWERS[state["instruction"]]}


async def revise(state: dict) -> dict:
    """Rewrites the answer from the judge's feedback; a real one would call a model."""
    fixed = {"About 40.": "12 times 3 is 36."}
    return {"answer": fixed.get(state["answer"], state["answer"])}


guard = create_guardrail_graph(
    judge=PointwiseJudge("openai:gpt-4o-mini"),
    threshold=4,
    fail_policy="closed",
    timeout_s=2.0,
    reviser=revise,
    max_revisions=1,
)
builder = StateGraph(AppState)
builder.add_node("draft", draft)
builder.add_node("guardrail", guard)  # reads instruction and answer, writes decision (and a revised answer)
builder.add_edge(START, "draft")
builder.add_edge("draft", "guardrail")
builder.add_edge("guardrail", END)
app = builder.compile()


async def main() -> None:
    for question in ANSWERS:
        out = await app.ainvoke({"instruction": question})
        decision = out["decision"]
        print(f"{decision.action:5} {question} -> {out['answer']} ({decision.reason})")


if __name__ == "__main__":
    asyncio.run(main())
