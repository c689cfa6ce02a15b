"""Multi-turn graph: every assistant turn judged in its context, side by
side (``Send``), plus the conversation as a whole; turn scores are combined
by a declared policy.

Input keys: ``messages`` and optionally ``reference`` and ``rubric``.
``messages`` takes what :class:`~judgegraph.ConversationInput` takes:
LangChain messages (a ``MessagesState`` app's own), their dict forms,
OpenAI-style dicts or :class:`~judgegraph.Message` objects.
Output key: ``verdict`` (a :class:`ConversationVerdict`).

A turn is an assistant message that answers: one whose next message is not a
tool result. An agent's intermediate steps (a tool call, its result, the next
call) are the context of the turn they lead to, not turns of their own.

Turn ``i`` is judged by giving the turn judge the conversation cut after
message ``i``: a ``MultiTurnJudge(mode="turn")`` grades the last assistant
turn of what it is given, so any judge with that contract works. The
reference answer is about the conversation's outcome, so only the whole
conversation and the final assistant turn see it.
"""

from __future__ import annotations

from statistics import fmean
from typing import Annotated, Any, Literal, Required

from langchain_core.messages import AnyMessage
from langgraph.cache.base import BaseCache
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import CachePolicy, Checkpointer, Send
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from judgegraph.judges import FromContext, coerce_input, graph_node, worst
from judgegraph.types import ConversationInput, Message, PointwiseScore, Rubric, Status

from ._context import JudgeContext, JudgeSpec, check_spec, emit, lookup_judge
from ._reducers import merge_or_reset

__all__ = [
    "ConversationVerdict",
    "MultiTurnGraphInput",
    "MultiTurnGraphOutput",
    "MultiTurnState",
    "TurnPolicy",
    "TurnVerdict",
    "create_multiturn_graph",
]

# The default keys: the run's context holds the two judges under these.
_TURN_JUDGE = FromContext("turn_judge")
_CONVERSATION_JUDGE = FromContext("conversation_judge")

TurnPolicy = Literal["min", "mean", "last"]


class TurnVerdict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int  # index into messages
    verdict: PointwiseScore


class ConversationVerdict(BaseModel):
    """Per-turn scores, their aggregate under ``policy``, and the
    whole-conversation score.

    ``turn_score`` is only set when every turn was scored: dropping a failed
    turn would quietly change what min/mean/last mean. ``status`` is the
    worst status of all judgements, and ``reason`` names the failed ones.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Status
    reason: str | None = None
    policy: TurnPolicy
    turn_score: float | None = None
    turns: tuple[TurnVerdict, ...] = ()
    conversation: PointwiseScore | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


class MultiTurnGraphInput(TypedDict, total=False):
    messages: Required[list[AnyMessage | Message | dict[str, Any]]]
    reference: str | None
    rubric: Rubric | None


class MultiTurnGraphOutput(TypedDict):
    verdict: ConversationVerdict


class MultiTurnState(MultiTurnGraphInput, total=False):
    conversation: ConversationInput
    turns: Annotated[dict[int, PointwiseScore], merge_or_reset]
    whole: PointwiseScore | None
    verdict: ConversationVerdict


class _WholeTask(TypedDict):
    conversation: ConversationInput


class _TurnTask(_WholeTask):
    turn: int


def _turns(messages: list[Message]) -> list[int]:
    """Indices of the assistant messages that end a turn (not followed by a tool result)."""
    return [
        i
        for i, m in enumerate(messages)
        if m.role == "assistant" and (i + 1 == len(messages) or messages[i + 1].role != "tool")
    ]


def _aggregate(policy: TurnPolicy, scores: list[int]) -> float:
    if policy == "min":
        return float(min(scores))
    if policy == "mean":
        return fmean(scores)
    return float(scores[-1])


def create_multiturn_graph(
    *,
    turn_policy: TurnPolicy,
    turn_judge: JudgeSpec = _TURN_JUDGE,
    conversation_judge: JudgeSpec | None = _CONVERSATION_JUDGE,
    context_schema: type[Any] = JudgeContext,
    checkpointer: Checkpointer = None,
    cache: BaseCache[Any] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    name: str = "multiturn",
) -> CompiledStateGraph[MultiTurnState, Any, MultiTurnGraphInput, MultiTurnGraphOutput]:
    """A compiled multi-turn graph.

    ``turn_policy`` says how turn scores combine: ``min`` (a conversation is
    as good as its worst turn), ``mean``, or ``last``. ``turn_judge`` and
    ``conversation_judge`` are ``from_context(key)`` or judge objects;
    ``conversation_judge=None`` skips the whole-conversation judgement.

    Any: ``context_schema`` is the caller's own context type (the compiled graph's context
    parameter follows it), and LangGraph's ``BaseCache`` and ``CachePolicy`` are generic in
    types it leaves to the caller, so only ``Any`` accepts every one.
    """
    check_spec(turn_judge, graph="multiturn")
    check_spec(conversation_judge, graph="multiturn")

    async def prepare(state: MultiTurnState, runtime: Runtime[Any]) -> dict[str, Any]:
        fields = {k: state.get(k) for k in ConversationInput.model_fields if state.get(k) is not None}
        conversation = coerce_input(ConversationInput, fields)
        lookup_judge(turn_judge, runtime.context, graph="multiturn")
        if conversation_judge is not None:
            lookup_judge(conversation_judge, runtime.context, graph="multiturn")
        return {"conversation": conversation, "turns": None, "whole": None}

    def fan_out(state: MultiTurnState) -> list[Send]:
        conversation = state["conversation"]
        sends = [
            Send("judge_turn", _TurnTask(conversation=conversation, turn=i)) for i in _turns(conversation.messages)
        ]
        if conversation_judge is not None:
            sends.append(Send("judge_conversation", _WholeTask(conversation=conversation)))
        return sends

    async def turn(task: _TurnTask, runtime: Runtime[Any]) -> dict[str, Any]:
        full, i = task["conversation"], task["turn"]
        last = max(j for j, m in enumerate(full.messages) if m.role == "assistant")
        prefix = full.model_copy(
            update={"messages": full.messages[: i + 1], "reference": full.reference if i == last else None}
        )
        found = lookup_judge(turn_judge, runtime.context, graph="multiturn")
        verdict = await found.ajudge(prefix, context=runtime.context)
        emit(runtime, {"graph": name, "turn": i, "verdict": verdict})
        return {"turns": {i: verdict}}

    async def whole(task: _WholeTask, runtime: Runtime[Any]) -> dict[str, Any]:
        assert conversation_judge is not None
        found = lookup_judge(conversation_judge, runtime.context, graph="multiturn")
        verdict = await found.ajudge(task["conversation"], context=runtime.context)
        emit(runtime, {"graph": name, "turn": "conversation", "verdict": verdict})
        return {"whole": verdict}

    async def aggregate(state: MultiTurnState, runtime: Runtime[Any]) -> dict[str, Any]:
        turns = tuple(TurnVerdict(turn=i, verdict=v) for i, v in sorted(state["turns"].items()))
        conv = state.get("whole")
        judged = [t.verdict for t in turns] + ([conv] if conv is not None else [])
        status = worst([v.status for v in judged])
        failed = [f"turn {t.turn}: {t.verdict.reason}" for t in turns if not t.verdict.ok]
        if conv is not None and not conv.ok:
            failed.append(f"conversation: {conv.reason}")
        turn_ok = all(t.verdict.ok for t in turns)
        verdict = ConversationVerdict(
            status=status,
            reason="; ".join(failed) or None,
            policy=turn_policy,
            turn_score=_aggregate(turn_policy, [t.verdict.score for t in turns if t.verdict.score is not None])
            if turn_ok
            else None,
            turns=turns,
            conversation=conv,
        )
        emit(runtime, {"graph": name, "verdict": verdict})
        return {"verdict": verdict}

    builder = StateGraph(
        MultiTurnState,
        context_schema=context_schema,
        input_schema=MultiTurnGraphInput,
        output_schema=MultiTurnGraphOutput,
    )
    builder.add_node("prepare", graph_node(prepare))
    # The ignore: langgraph's stubs reject any TypedDict input_schema; it works at run time.
    builder.add_node(
        "judge_turn",
        graph_node(turn, judge=turn_judge, cache_policy=cache_policy),
        input_schema=_TurnTask,
        cache_policy=cache_policy,
    )  # type: ignore[arg-type]
    whole_node = graph_node(
        whole, judge=conversation_judge or turn_judge, cache_policy=cache_policy
    )  # unused without one
    builder.add_node("judge_conversation", whole_node, input_schema=_WholeTask, cache_policy=cache_policy)  # type: ignore[arg-type]
    builder.add_node("aggregate", graph_node(aggregate))
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", fan_out, ["judge_turn", "judge_conversation"])
    builder.add_edge("judge_turn", "aggregate")
    builder.add_edge("judge_conversation", "aggregate")
    builder.add_edge("aggregate", END)
    return builder.compile(checkpointer=checkpointer, cache=cache, name=name)
