"""How graphs find their judges: from the run's context, like backends.

A graph is built once and reused; which model judges is decided per run.
So a graph holds ``from_context(key)`` (or, if you prefer, a fixed judge
object), and each node looks the key up in ``runtime.context``. The judge
then finds its own backend in the same context (see ``Judge.resolve_backend``).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel
from typing_extensions import TypedDict

from judgegraph.judges import AsyncJudge, Context, FromContext, as_async_judge
from judgegraph.types import JudgeResult, PointwiseInput

__all__ = [
    "CONTEXT_JUDGE",
    "JudgeContext",
    "JudgeLike",
    "JudgeSpec",
    "check_backends",
    "check_judge_kind",
    "check_spec",
    "emit",
    "lookup_judge",
]


JudgeLike = AsyncJudge
"""The judge contract, :class:`~judgegraph.judges.AsyncJudge` (the name graphs gave it first)."""

JudgeSpec = AsyncJudge[JudgeResult] | FromContext
"""A judge object, or ``from_context(key)``: the judge the run's context holds under ``key``."""

CONTEXT_JUDGE = FromContext("judge")
"""The default judge of every graph: the one under ``"judge"`` in the run's context."""


class JudgeContext(TypedDict, total=False):
    """The default runtime context of every graph here.

    It is a plain dict at run time, so it may hold more keys than these:
    e.g. the backend keys an ensemble's members look up. The values are
    typed ``Any`` because LangGraph derives a JSON schema from this class,
    and protocols have none: judges are :class:`~judgegraph.judges.AsyncJudge`, the backend a
    :class:`~judgegraph.Backend`.
    """

    judge: Any
    turn_judge: Any
    conversation_judge: Any
    backend: Any


def check_spec(spec: object, *, graph: str) -> None:
    """A string judge is a set-up error at build: it once meant a context key."""
    if isinstance(spec, str):
        raise TypeError(
            f'{graph} graph: the judge {spec!r} is a string; write from_context("{spec}") for the judge '
            "the run's context holds, or pass a judge object"
        )


def lookup_judge(spec: JudgeSpec | object, context: Context, *, graph: str) -> AsyncJudge[JudgeResult]:
    """The judge ``spec`` names, under the judge contract (see
    :func:`~judgegraph.judges.as_async_judge`). A missing or wrong judge is a
    set-up error and raises, naming the key, rather than yielding a failed verdict."""
    if not isinstance(spec, FromContext):
        return as_async_judge(spec)
    found = spec.lookup(context)
    key = spec.key
    if found is None:
        raise LookupError(f"{graph} graph: no judge under {key!r} in the runtime context")
    try:
        return as_async_judge(found)
    except TypeError:
        raise TypeError(
            f"{graph} graph: context[{key!r}] is a {type(found).__name__}, which has no async ajudge()"
        ) from None


def check_judge_kind(judge: AsyncJudge[JudgeResult], *, graph: str, accepts: type[BaseModel] = PointwiseInput) -> None:
    """A judge declares what it grades (``input_model``); one that grades
    something else here is a set-up error, raised at once. Judges that do
    not declare it are checked by what they return."""
    model = judge.input_model
    if model is not None and not issubclass(model, accepts):
        raise TypeError(
            f"{graph} graph: {judge_name(judge)} grades {model.__name__} inputs; this graph needs a judge "
            f"of {accepts.__name__} (a pointwise or rubric judge)"
        )


def check_backends(judge: AsyncJudge[JudgeResult], context: Context, *, graph: str) -> None:
    """Raise now, not as a failed verdict, when a backend the judge (or any
    judge inside it) looks up in the run context is not there."""
    try:
        judge.check_context(context)
    except LookupError as exc:
        raise LookupError(f"{graph} graph: {exc}") from None


def judge_name(judge: AsyncJudge[JudgeResult]) -> str:
    return judge.name


def emit(runtime: Runtime[Any] | None, payload: dict[str, Any]) -> None:
    """Put a verdict on the ``custom`` stream as soon as it exists."""
    if runtime is not None:
        runtime.stream_writer(payload)
