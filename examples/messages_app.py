"""A chat app (MessagesState) whose every answer a judge grades.

A score of 4 or more ends the run; a lower one sends the judge's feedback back
to the assistant, at most twice. The judge's model comes from OPENAI_API_KEY
and, for any OpenAI-compatible server, OPENAI_BASE_URL.

    python examples/messages_app.py "What is the capital of France?"
"""

from __future__ import annotations

import asyncio
import sys

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from judgegraph import PointwiseJudge, PointwiseScore, create_judge_node

MAX_REVISIONS = 2


class State(MessagesState, total=False):
    verdict: PointwiseScore
    revisions: int


async def assistant(state: State) -> dict:
    """Stands in for your model: its first draft is wrong, a revision is right."""
    draft = "Paris is the capital of France." if state.get("revisions") else "Lyon, I believe."
    return {"messages": [AIMessage(draft)]}


async def ask_for_revision(state: State) -> dict:
    feedback = state["verdict"].rationale or "The answer was judged too weak."
    request = HumanMessage(f"Please revise your answer. A reviewer said: {feedback}")
    return {"messages": [request], "revisions": state.get("revisions", 0) + 1}


def route(state: State) -> str:
    verdict = state["verdict"]
    if verdict.status == "ok" and verdict.score is not None and verdict.score >= 4:
        return "pass"
    return "revise" if state.get("revisions", 0) < MAX_REVISIONS else "give up"


judge = PointwiseJudge("openai:gpt-4o-mini")
builder = StateGraph(State)
builder.add_node("assistant", assistant)
# The judge reads the chat: the last answer, the request before it, and the turns before that.
builder.add_node("judge", create_judge_node(judge, inputs={"messages": "messages"}))
builder.add_node("revise", ask_for_revision)
builder.add_edge(START, "assistant")
builder.add_edge("assistant", "judge")
builder.add_conditional_edges("judge", route, {"pass": END, "revise": "revise", "give up": END})
builder.add_edge("revise", "assistant")
app = builder.compile()


async def main(question: str) -> None:
    state = await app.ainvoke({"messages": [HumanMessage(question)]})
    verdict = state["verdict"]
    print(f"answer: {state['messages'][-1].content}")
    print(f"revisions: {state.get('revisions', 0)}")
    print(f"verdict: {verdict.status} {verdict.score} {verdict.rationale}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "What is the capital of France?"))
