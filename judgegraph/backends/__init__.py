"""Model backends: the protocol every judge model speaks, and its implementations.

``OpenAIBackend``, ``TGIBackend`` and ``TransformersBackend`` load on first use,
so their optional extras stay optional for ``import judgegraph``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._cache import CachedBackend, JudgeCache, MemoryCache, SqliteCache, cache_key, server_identity
from ._identity import (
    REQUEST_FIELDS_EXCLUDED,
    IdentifiedBackend,
    backend_identity,
    canonical_json,
    identity_hash,
    identity_value,
    request_identity,
    verdict_identity,
)
from ._protocol import (
    Backend,
    BackendError,
    Capabilities,
    GenerateRequest,
    GenerateResult,
    MissingExtraError,
    TokenLogprob,
    bounded_result,
)
from ._ratelimit import RateLimitedBackend, RateLimiter, TokenBucket
from ._resolve import Endpoint, parse_endpoint, resolve_model
from ._retry import Retryable, awith_retries, parse_retry_after
from ._scripted import ScriptedBackend
from ._secrets import Secrets, clean_url, strip_userinfo
from ._sync import run_sync

if TYPE_CHECKING:
    from ._langchain import ChatModelBackend, as_backend
    from ._openai import OpenAIBackend, chat_params, result_from_completion
    from ._tgi import TGIBackend, chatml_prompt
    from ._transformers import TransformersBackend

__all__ = [
    "REQUEST_FIELDS_EXCLUDED",
    "Backend",
    "BackendError",
    "CachedBackend",
    "Capabilities",
    "ChatModelBackend",
    "Endpoint",
    "GenerateRequest",
    "GenerateResult",
    "IdentifiedBackend",
    "JudgeCache",
    "MemoryCache",
    "MissingExtraError",
    "OpenAIBackend",
    "RateLimitedBackend",
    "RateLimiter",
    "Retryable",
    "ScriptedBackend",
    "Secrets",
    "SqliteCache",
    "TGIBackend",
    "TokenBucket",
    "TokenLogprob",
    "TransformersBackend",
    "as_backend",
    "awith_retries",
    "backend_identity",
    "bounded_result",
    "cache_key",
    "canonical_json",
    "chat_params",
    "chatml_prompt",
    "clean_url",
    "identity_hash",
    "identity_value",
    "parse_endpoint",
    "parse_retry_after",
    "request_identity",
    "resolve_model",
    "result_from_completion",
    "run_sync",
    "server_identity",
    "strip_userinfo",
    "verdict_identity",
]

_LAZY = {
    "ChatModelBackend": "._langchain",
    "as_backend": "._langchain",
    "OpenAIBackend": "._openai",
    "chat_params": "._openai",
    "result_from_completion": "._openai",
    "TGIBackend": "._tgi",
    "chatml_prompt": "._tgi",
    "TransformersBackend": "._transformers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
