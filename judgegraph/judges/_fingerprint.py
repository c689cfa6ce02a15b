"""A judge's verdict identity: everything about a judge and the backend it
calls that can change a verdict.

Jobs key their stores by it, cassettes their recordings and judge nodes
LangGraph's node cache (:func:`node_identity`), so a setting is keyed
everywhere once it is keyed here. The backend's half is
:func:`judgegraph.backends.verdict_identity`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import NotImplementedType

from judgegraph.backends import Backend, identity_hash, identity_value, verdict_identity
from judgegraph.types import JSONValue, JudgeResult

from ._base import FromContext, Judge
from ._contract import AsyncJudge, Context

__all__ = ["fingerprint_for", "judge_fingerprint", "node_identity"]


def _judge_value(value: object) -> JSONValue | NotImplementedType:
    return _judge_settings(value, own_backend=True) if isinstance(value, Judge) else NotImplemented


# Attributes that change how fast a judge runs, not what it answers.
_RUNTIME_ONLY = {"max_concurrency", "concurrency"}


def _judge_settings(judge: AsyncJudge[JudgeResult], *, own_backend: bool) -> dict[str, JSONValue]:
    """A judge's own settings: its ``config_fingerprint()`` where it says them
    itself, else its public attributes, judges nested in it included (cascade
    tiers, ensemble members); ``own_backend`` keeps its ``backend`` attribute
    (a nested judge's, or a key), else the caller keys the backend."""
    own = judge.config_fingerprint()
    if own is not None:
        fp: dict[str, JSONValue] = {"custom": identity_value(own, _judge_value)}
    else:
        fp = {
            k: identity_value(v, _judge_value)
            for k, v in sorted(vars(judge).items())
            if not k.startswith("_") and k not in _RUNTIME_ONLY and (own_backend or k != "backend")
        }
    fp["class"] = f"{type(judge).__module__}.{type(judge).__qualname__}"
    return fp


def judge_fingerprint(
    judge: AsyncJudge[JudgeResult],
    backend: Backend | None,
    *,
    context_backends: Mapping[str, Backend] | None = None,
    engine: Mapping[str, object] | None = None,
    portable: bool = False,
) -> dict[str, JSONValue]:
    """Everything about a judge and the backend it calls that can change a
    verdict: :func:`~judgegraph.backends.verdict_identity` of the backend and
    the judge's own settings (see there for the other arguments)."""
    return verdict_identity(
        backend=backend,
        judge=_judge_settings(judge, own_backend=backend is None),
        context_backends=context_backends,
        engine=engine,
        portable=portable,
    )


def fingerprint_for(
    judge: AsyncJudge[JudgeResult],
    context: Context,
    *,
    engine: Mapping[str, object] | None = None,
    portable: bool = False,
) -> dict[str, JSONValue]:
    """The judge's fingerprint with the backend it calls in ``context``; a
    judge that names no single backend (a cascade) is keyed by every backend
    the context offers. ``engine`` and ``portable``: see :func:`judge_fingerprint`."""
    found = judge.backend_for(context) if isinstance(judge, Judge) else None
    offered = (
        {k: v for k, v in (context or {}).items() if isinstance(v, Backend)}
        if found is None and isinstance(context, Mapping)
        else None
    )
    return judge_fingerprint(judge, found, context_backends=offered, engine=engine, portable=portable)


def node_identity(judge: AsyncJudge[JudgeResult] | FromContext) -> str | None:
    """The verdict identity of a judge node, for LangGraph's node cache (whose
    key sees the node's input only): the fingerprint's hash when the judge
    holds everything it calls; a key for this judge object alone when its
    settings cannot be pictured (a user's object under the contract); None
    when the judge, or its model, comes from the run's context, which the
    node cache cannot see, so no node cache can serve it safely."""
    if isinstance(judge, FromContext):
        return None
    try:
        judge.check_context({})
    except LookupError:
        return None
    if not isinstance(judge, Judge):
        return f"object-{id(judge):x}"  # never shared: its settings are opaque to us
    return identity_hash(fingerprint_for(judge, None))[:32]
