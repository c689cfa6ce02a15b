"""Guardrail graph, for online use inside an app's graph.

A candidate answer is judged, then passed, sent back for revision, or
blocked::

    START -> judge -> pass   -> END
                   -> block  -> END
                   -> revise -> reviser -> judge   (at most max_revisions times)

Input keys: ``instruction`` (the user's request), ``answer`` (the candidate)
and optionally ``reference``. The judge's verdict, its ``feedback`` (the
rationale, for the reviser) and a :class:`GuardrailDecision` with the action
and its reason are written to state; ``answer`` holds the last revision.

Latency budget: each judge call runs under ``timeout_s``. A judge that
times out, errors or answers unreadably is *down* for this request, and the
declared ``fail_policy`` decides: ``"open"`` lets the answer through,
``"closed"`` blocks it. Either way the decision records that the policy, not
the judge, decided.

The graph has one node on the hot path, so it adds little over the bare
judge call (see ``bench/guardrail.py``). Keep a file-backed checkpointer off
it: it costs about 10 ms per step.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any, Literal, Required

from langgraph.cache.base import BaseCache
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import CachePolicy, Checkpointer
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from judgegraph import JudgeInputError
from judgegraph.judges import FromContext, check_threshold, coerce_input, graph_node, score_scale
from judgegraph.types import PointwiseInput, Rubric, Status

from ._context import (
    CONTEXT_JUDGE,
    JudgeContext,
    JudgeSpec,
    check_backends,
    check_judge_kind,
    check_spec,
    emit,
    lookup_judge,
)

__all__ = [
    "Action",
    "FailPolicy",
    "GuardrailDecision",
    "GuardrailGraphInput",
    "GuardrailGraphOutput",
    "GuardrailState",
    "create_guardrail_graph",
]

Action = Literal["pass", "revise", "block"]
FailPolicy = Literal["open", "closed"]


class GuardrailDecision(BaseModel):
    """What the guardrail did with the answer, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Action
    reason: str
    score: float | None = None
    judge_status: Status
    timed_out: bool = False
    fail_policy_applied: bool = False  # the judge was down; the declared policy decided
    revisions: int = 0  # revisions the judged answer had been through


class GuardrailGraphInput(TypedDict, total=False):
    instruction: Required[str]
    answer: Required[str]
    reference: str | None


class GuardrailGraphOutput(TypedDict, total=False):
    answer: str
    decision: GuardrailDecision
    verdict: Any  # the judge's last result; None when it timed out
    feedback: str | None


class GuardrailState(GuardrailGraphInput, total=False):
    decision: GuardrailDecision
    verdict: Any
    feedback: str | None
    revisions: int
    revising: bool  # set only between a "revise" decision and the next judgement


def _fields(state: GuardrailState, rubric: Rubric | None) -> dict[str, Any]:
    fields: dict[str, Any] = {"instruction": state.get("instruction"), "response": state.get("answer")}
    if state.get("reference") is not None:
        fields["reference"] = state["reference"]
    if rubric is not None:
        fields["rubric"] = rubric
    return fields


_SCORE_FIELDS = ("score", "weighted_score")


def _read_score(verdict: object, scale: tuple[float, float] | None) -> tuple[float | None, str | None]:
    """The verdict's score to hold against the threshold, or why it cannot be
    (missing, not a number, not finite, off the judge's scale): one rule, for
    any judge's verdict, a custom one's included; the guardrail's policy
    decides the unusable ones."""
    value = next((v for a in _SCORE_FIELDS if (v := getattr(verdict, a, None)) is not None), None)
    if value is None:
        return None, "the verdict has no score"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"the verdict's score {value!r} is not a number"
    if not math.isfinite(value):
        return None, f"the verdict's score {value} is not finite"
    if scale is not None and not scale[0] <= value <= scale[1]:
        return None, f"the verdict's score {value:g} is off the judge's scale {scale[0]:g}-{scale[1]:g}"
    return float(value), None


def create_guardrail_graph(
    *,
    fail_policy: FailPolicy,
    threshold: float,
    threshold_from: Callable[[Any], float] | None = None,
    judge: JudgeSpec = CONTEXT_JUDGE,
    rubric: Rubric | None = None,
    timeout_s: float = 5.0,
    reviser: Any = None,
    max_revisions: int = 1,
    context_schema: type[Any] = JudgeContext,
    checkpointer: Checkpointer = None,
    cache: BaseCache[Any] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    name: str = "guardrail",
) -> CompiledStateGraph[GuardrailState, Any, GuardrailGraphInput, GuardrailGraphOutput]:
    """A compiled guardrail graph.

    ``fail_policy`` (required) is what happens when the judge is down.
    An answer passes when the judge's score (``weighted_score`` for rubric
    judges) is at least ``threshold``, or at least ``threshold_from(context)``
    when that is given: a run's threshold read from its runtime context
    (served graphs take it from their JSON context). The threshold must lie in
    ``(low, high]`` of the judge's score scale (0-1 for rubric judges, the
    rubric's levels when ``rubric`` is given): a ValueError names it otherwise,
    at build when the judge is given, else on the first call. ``rubric`` is the policy the answer
    is graded against. ``reviser`` is a node (function, runnable or graph)
    that reads ``answer`` and ``feedback`` and returns a new ``answer``;
    without one, an answer below the threshold is blocked. Each round is
    two graph steps: raise ``recursion_limit`` above 25 for more than about
    ten rounds. ``cache_policy`` is refused: a ValueError says why.

    Any: ``context_schema`` is the caller's own context type (the compiled graph's context
    parameter follows it), and LangGraph's ``BaseCache`` and ``CachePolicy`` are generic in
    types it leaves to the caller, so only ``Any`` accepts every one.
    ``threshold_from`` reads that same context, and ``reviser`` is whatever LangGraph's
    ``add_node`` takes.
    """
    check_spec(judge, graph="guardrail")
    if cache_policy is not None:
        # The node's output is a decision, not only a verdict: it depends on
        # the threshold, the policy and whether the judge answered in time,
        # and LangGraph would cache an outage's decision as readily as a verdict.
        raise ValueError(
            "cache_policy: a guardrail's decision depends on its threshold, its fail_policy and on the judge "
            "answering in time, and LangGraph's node cache would replay an outage's decision; cache the "
            "judge's model calls with judgegraph.backends.CachedBackend, which stores only usable answers"
        )
    if timeout_s <= 0:
        raise ValueError("timeout_s must be positive")
    if max_revisions < 0:
        raise ValueError("max_revisions must be >= 0")
    if fail_policy not in ("open", "closed"):
        raise ValueError(f"fail_policy must be 'open' or 'closed', got {fail_policy!r}")
    allowed = max_revisions if reviser is not None else 0
    fallback: Action = "pass" if fail_policy == "open" else "block"
    known = None if isinstance(judge, FromContext) else lookup_judge(judge, None, graph="guardrail")
    if known is not None:
        check_judge_kind(known, graph="guardrail")  # fails at build
    # A threshold off the judge's scale passes (or blocks) everything: refused
    # here when the judge is known, else on the first call, before judging.
    check_threshold(threshold, judge=known if threshold_from is None else None, rubric=rubric, option="threshold")

    async def judge_answer(state: GuardrailState, runtime: Runtime[Any]) -> dict[str, Any]:
        # A fresh run starts at zero; only a pending revision carries the count over.
        revisions = state.get("revisions", 0) if state.get("revising") else 0
        # Set-up errors raise here, on the first call: a missing judge or
        # backend, or a judge that cannot grade an answer, is not an outage.
        found = lookup_judge(judge, runtime.context, graph="guardrail")
        check_judge_kind(found, graph="guardrail")
        if threshold_from is None:
            limit = check_threshold(threshold, judge=found, rubric=rubric, option="threshold")
        else:
            limit = check_threshold(
                threshold_from(runtime.context), judge=found, rubric=rubric, option="threshold_from(context)"
            )
        check_backends(found, runtime.context, graph="guardrail")
        verdict: Any = None
        down: str | None = None
        timed_out = False
        try:
            item = coerce_input(PointwiseInput, _fields(state, rubric))
        except JudgeInputError as exc:
            # The app's answer (or request) cannot be judged: empty, blank, or
            # not text. The judge is never asked; the declared policy decides.
            item, down = None, f"nothing to judge ({exc}); the judge was not called"
        if item is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            try:
                async with asyncio.timeout_at(deadline):
                    verdict = await found.ajudge(item, context=runtime.context)
            except TimeoutError:
                down, timed_out = f"the judge gave no verdict within {timeout_s:g} s", True
            except (LookupError, TypeError, JudgeInputError):
                raise  # set-up errors (a backend missing, a judge of the wrong kind), not outages
            except Exception as exc:  # a crashing judge is down for this request, like a slow one
                down = f"the judge failed: {type(exc).__name__}: {exc}"
            if down is None and loop.time() > deadline:
                # Work that held the event loop (a huge output to parse) can
                # finish past the deadline before the timeout could fire: late is late.
                verdict, timed_out = None, True
                down = f"the judge's verdict came after the {timeout_s:g} s budget"
        status = Status.ERROR if verdict is None else getattr(verdict, "status", Status.OK)
        score, unusable = (
            _read_score(verdict, score_scale(found, rubric=rubric)) if verdict is not None else (None, None)
        )
        if down is None and status is not Status.OK:
            down = f"the judge's verdict is {status.value}: {getattr(verdict, 'reason', None)}"
        if down is None and not any(hasattr(verdict, a) for a in _SCORE_FIELDS):
            raise TypeError(
                f"guardrail graph: the judge returned a {type(verdict).__name__} with no score: "
                "it needs a pointwise or rubric judge"
            )
        if down is None and unusable is not None:
            down = f"{unusable}, so it cannot be held against the threshold"
        action: Action
        if down is not None:
            action = fallback
            reason = f"{down}; fail-{fail_policy} policy: {'pass' if action == 'pass' else 'block'}"
        elif score is not None and score >= limit:
            action, reason = "pass", f"score {score:g} >= threshold {limit:g}"
        elif revisions < allowed:
            action = "revise"
            reason = f"score {score:g} < threshold {limit:g}; revision {revisions + 1} of {allowed}"
        else:
            action = "block"
            why = f"after {revisions} revision(s)" if allowed else "and no reviser is set"
            reason = f"score {score:g} < threshold {limit:g} {why}"
        decision = GuardrailDecision(
            action=action,
            reason=reason,
            score=score,
            judge_status=status,
            timed_out=timed_out,
            fail_policy_applied=down is not None,
            revisions=revisions,
        )
        emit(runtime, {"graph": name, "decision": decision})
        revise = action == "revise"
        return {
            "verdict": verdict,
            "decision": decision,
            "feedback": getattr(verdict, "rationale", None) if verdict is not None else None,
            "revisions": revisions + 1 if revise else revisions,
            "revising": revise,
        }

    def route(state: GuardrailState) -> str:
        return "reviser" if state["decision"].action == "revise" else END

    builder = StateGraph(
        GuardrailState,
        context_schema=context_schema,
        input_schema=GuardrailGraphInput,
        output_schema=GuardrailGraphOutput,
    )
    builder.add_node("judge", graph_node(judge_answer))
    builder.add_edge(START, "judge")
    if reviser is not None:
        builder.add_node("reviser", reviser)
        builder.add_edge("reviser", "judge")
        builder.add_conditional_edges("judge", route, ["reviser", END])
    else:
        builder.add_edge("judge", END)
    return builder.compile(checkpointer=checkpointer, cache=cache, name=name)
