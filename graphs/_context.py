"""How graphs find their judges: from the run's context, like backends.

A graph is built once and reused; which model judges is decided per run.
So a graph holds ``from_context(key)`` (or, if you prefer, a fixed judge
object), and each node looks the key up in ``runtime.context``. The judge
then finds its own backend in the same context (see ``Judge.resolve_backend``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from langgraph.runtime import Runtime
from pydantic import BaseModel
from typing_extensions import TypedDict

from judgegraph.judges import FromContext
from judgegraph.types import PointwiseInput

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


@runtime_checkable
class JudgeLike(Protocol):
    """Anything with Judge's async API: judges, ensembles, cascades."""

    async def ajudge(self, value: Any, *, context: Any = None) -> Any: ...


JudgeSpec = JudgeLike | FromContext
"""A judge object, or ``from_context(key)``: the judge the run's context holds under ``key``."""

CONTEXT_JUDGE = FromContext("judge")
"""The default judge of every graph: the one under ``"judge"`` in the run's context."""


class JudgeContext(TypedDict, total=False):
    """The default runtime context of every graph here.

    It is a plain dict at run time, so it may hold more keys than these:
    e.g. the backend keys an ensemble's members look up. The values are
    typed ``Any`` because LangGraph derives a JSON schema from this class,
    and protocols have none: judges are :class:`JudgeLike`, the backend a
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


def lookup_judge(spec: JudgeSpec, context: Any, *, graph: str) -> JudgeLike:
    """The judge ``spec`` names. A missing or wrong judge is a set-up error
    and raises, naming the key, rather than yielding a failed verdict."""
    if not isinstance(spec, FromContext):
        return spec
    found = spec.lookup(context)
    key = spec.key
    if found is None:
        raise LookupError(f"{graph} graph: no judge under {key!r} in the runtime context")
    if not callable(getattr(found, "ajudge", None)):
        raise TypeError(f"{graph} graph: context[{key!r}] is a {type(found).__name__}, which has no async ajudge()")
    return found  # type: ignore[no-any-return]


def check_judge_kind(judge: Any, *, graph: str, accepts: type[BaseModel] = PointwiseInput) -> None:
    """A judge declares what it grades (``input_model``); one that grades
    something else here is a set-up error, raised at once. Judges that do
    not declare it are checked by what they return."""
    model = getattr(judge, "input_model", None)
    if isinstance(model, type) and not issubclass(model, accepts):
        raise TypeError(
            f"{graph} graph: {judge_name(judge)} grades {model.__name__} inputs; this graph needs a judge "
            f"of {accepts.__name__} (a pointwise or rubric judge)"
        )


def check_backends(judge: Any, context: Any, *, graph: str) -> None:
    """Raise now, not as a failed verdict, when a backend the judge (or any
    judge inside it) looks up in the run context is not there."""
    try:
        check = getattr(judge, "check_context", None)
        if callable(check):
            check(context)
        elif callable(resolve := getattr(judge, "resolve_backend", None)):
            resolve(None, context)
    except LookupError as exc:
        raise LookupError(f"{graph} graph: {exc}") from None


def judge_name(judge: Any) -> str:
    return str(getattr(judge, "name", None) or type(judge).__name__)


def emit(runtime: Runtime[Any] | None, payload: dict[str, Any]) -> None:
    """Put a verdict on the ``custom`` stream as soon as it exists."""
    if runtime is not None:
        runtime.stream_writer(payload)
