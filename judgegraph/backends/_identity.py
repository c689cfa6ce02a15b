"""What makes two verdicts the same: one identity for every key.

:func:`verdict_identity` is the one place a verdict's identity is put
together: who answers (:func:`backend_identity`: the backend's kind, model,
capabilities, server and the options it sends with every call), what is
asked (:func:`request_identity`: every :class:`GenerateRequest` field,
template id and version included) and, for a job, the judge's own settings.
The judge-call cache, the job store's config hash, cassettes and every batch
engine key their verdicts by it, so a field added to any of these is keyed
everywhere at once. A backend says what it adds by an ``identity()`` method
(:class:`IdentifiedBackend`); credentials never go in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from enum import Enum
from types import NotImplementedType
from typing import Any, Protocol, cast, runtime_checkable

from pydantic import BaseModel, SecretStr

from judgegraph.types import JSONValue

from ._protocol import Backend, GenerateRequest
from ._secrets import clean_url, credential_headers, strip_userinfo

__all__ = [
    "REQUEST_FIELDS_EXCLUDED",
    "IdentifiedBackend",
    "backend_identity",
    "canonical_json",
    "identity_hash",
    "identity_value",
    "public_headers",
    "request_identity",
    "scrub_strings",
    "verdict_identity",
]

# GenerateRequest fields that cannot change a verdict, each with why.
REQUEST_FIELDS_EXCLUDED: Mapping[str, str] = {
    # A repair's messages differ from the first call's already, and keys
    # stayed as they were before the flag existed.
    "repair": "a repair's messages already differ",
}

# Where a backend is served: left out of a portable identity (cassettes),
# since a recording made against a local server must replay in CI.
SERVER = "server"


@runtime_checkable
class IdentifiedBackend(Protocol):
    """A backend that says what, beyond its kind, model and capabilities, its
    answers depend on: ``{"server": <base URL>, <option>: <value>, ...}``.
    JSON-able values only, and never a credential."""

    def identity(self) -> dict[str, JSONValue]: ...


def identity_value(
    value: object, special: Callable[[object], JSONValue | NotImplementedType] | None = None, depth: int = 0
) -> JSONValue:
    """A JSON-able picture of a configuration value. ``special`` may picture a
    value itself (return ``NotImplemented`` to leave it to this function);
    secrets are never pictured."""
    if depth > 8:
        return type(value).__name__
    if special is not None:
        got = special(value)
        if got is not NotImplemented:
            return got
    if isinstance(value, str):
        return strip_userinfo(value)  # a URL's user info is a credential
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, SecretStr):
        return "[secret]"
    if isinstance(value, Enum):
        return identity_value(value.value, special, depth + 1)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: identity_value(getattr(value, f.name), special, depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, dict | Mapping):
        return {str(k): identity_value(v, special, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [identity_value(v, special, depth + 1) for v in value]
        return sorted(items, key=canonical_json) if isinstance(value, set | frozenset) else items
    if isinstance(value, Backend):  # after the plain kinds: a protocol check is slow
        return backend_identity(value)
    if callable(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__qualname__)}"
    return type(value).__qualname__


def scrub_strings(value: JSONValue, scrub: Callable[[str], str]) -> JSONValue:
    """``value`` (an identity) with ``scrub`` applied to every string in it:
    a backend's known credentials, wherever in its settings they sit."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: scrub_strings(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_strings(v, scrub) for v in value]
    return value


def public_headers(headers: Mapping[str, Any] | None) -> dict[str, str]:
    """The headers (or query parameters) that may steer an answer (a route, an
    API version), without those that carry credentials."""
    return {str(k): str(v) for k, v in (headers or {}).items() if not credential_headers({str(k): str(v)})}


def _fallback_server(backend: Backend) -> str | None:
    # A backend of the user's own that says nothing: its URL where it has one.
    for attr in ("endpoint", "base_url", "_base_url"):
        url = getattr(backend, attr, None)
        if isinstance(url, str) and url:
            return clean_url(url).rstrip("/")
    return None


def backend_identity(backend: Backend) -> dict[str, JSONValue]:
    """Who answers: kind, model, capabilities (they shape the request), and what
    the backend's ``identity()`` adds (server, options sent with every call).
    Two servers serving the same model name may answer differently, so their
    verdicts are never shared."""
    out: dict[str, JSONValue] = {
        "kind": backend.name,
        "model": backend.model,
        "structured_output": backend.capabilities.structured_output,
        "logprobs": backend.capabilities.logprobs,
    }
    if isinstance(backend, IdentifiedBackend):
        # A mapping pictures as a mapping.
        out.update(cast(dict[str, JSONValue], identity_value(backend.identity())))
    else:
        server = _fallback_server(backend)
        if server is not None:
            out[SERVER] = server
    return out


def request_identity(request: GenerateRequest) -> dict[str, JSONValue]:
    """Every request field (messages, sampling, schema, logprob settings,
    template id and version) but those in :data:`REQUEST_FIELDS_EXCLUDED`."""
    out = {
        f.name: identity_value(getattr(request, f.name))
        for f in dataclasses.fields(request)
        if f.name not in REQUEST_FIELDS_EXCLUDED and f.name != "messages"
    }
    out["messages"] = [m.model_dump(mode="json") for m in request.messages]
    return out


def _portable(value: JSONValue) -> JSONValue:
    """``value`` with the server taken out of every backend identity in it."""
    if isinstance(value, Mapping):
        is_backend = "kind" in value and "model" in value
        return {k: _portable(v) for k, v in value.items() if not (is_backend and k == SERVER)}
    if isinstance(value, list):
        return [_portable(v) for v in value]
    return value


def verdict_identity(
    *,
    backend: Backend | None = None,
    request: GenerateRequest | None = None,
    judge: Mapping[str, object] | None = None,
    context_backends: Mapping[str, Backend] | None = None,
    engine: Mapping[str, object] | None = None,
    server: str | None = None,
    portable: bool = False,
) -> dict[str, JSONValue]:
    """Everything that can change a verdict, as one JSON-able mapping.

    ``backend``: who answers; ``request``: one call (the cache);
    ``judge``: a judge's own settings, pictured by the judge layer (a job);
    ``context_backends``: the backends a judge may look up by key when it
    names no single one; ``engine``: what answers instead of the backend's
    server (vLLM's offline runner on a model folder); ``server`` overrides
    the backend's server. ``portable`` leaves every server out (cassettes).
    """
    out: dict[str, JSONValue] = {}
    if backend is not None:
        who = backend_identity(backend)
        if server is not None:
            who[SERVER] = server
        out["backend"] = who
    if request is not None:
        out["request"] = request_identity(request)
    if judge is not None:
        out["judge"] = identity_value(judge)
    if context_backends:
        out["context_backends"] = {k: backend_identity(v) for k, v in sorted(context_backends.items())}
    if engine is not None:
        out["engine"] = identity_value(engine)
    return cast(dict[str, JSONValue], _portable(out)) if portable else out


def canonical_json(value: JSONValue) -> str:
    """``value`` as compact JSON with sorted keys: the text every identity hash is taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def identity_hash(identity: Mapping[str, JSONValue]) -> str:
    """The SHA-256 (hex) of an identity's canonical JSON."""
    return hashlib.sha256(canonical_json(identity).encode()).hexdigest()
