"""Model backends: the protocol every judge model speaks, and its implementations.

``OpenAIBackend``, ``TGIBackend`` and ``TransformersBackend`` load on first use,
so their optional extras stay optional for ``import judgegraph``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._protocol import (
    Backend,
    BackendError,
    Capabilities,
    GenerateRequest,
    GenerateResult,
    MissingExtraError,
    TokenLogprob,
)
from ._ratelimit import RateLimitedBackend, RateLimiter, TokenBucket
from ._retry import Retryable, awith_retries, parse_retry_after
from ._scripted import ScriptedBackend
from ._secrets import Secrets, clean_url, strip_userinfo

if TYPE_CHECKING:
    from ._openai import OpenAIBackend
    from ._tgi import TGIBackend, chatml_prompt
    from ._transformers import TransformersBackend

__all__ = [
    "Backend",
    "BackendError",
    "Capabilities",
    "GenerateRequest",
    "GenerateResult",
    "MissingExtraError",
    "OpenAIBackend",
    "RateLimitedBackend",
    "RateLimiter",
    "Retryable",
    "ScriptedBackend",
    "Secrets",
    "TGIBackend",
    "TokenBucket",
    "TokenLogprob",
    "TransformersBackend",
    "awith_retries",
    "chatml_prompt",
    "clean_url",
    "parse_retry_after",
    "strip_userinfo",
]

_LAZY = {
    "OpenAIBackend": "._openai",
    "TGIBackend": "._tgi",
    "chatml_prompt": "._tgi",
    "TransformersBackend": "._transformers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
