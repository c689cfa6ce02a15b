"""A model endpoint described as data, and the backend built from it."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, field_validator

from judgegraph.backends import Backend, clean_url
from judgegraph.types import FrozenModel, Pricing, RetryPolicy

__all__ = ["BackendConfig", "build_backend"]


class BackendConfig(FrozenModel):
    """An OpenAI-compatible or TGI endpoint. The API key is read from the
    environment variable ``api_key_env`` at run time and never stored."""

    kind: Literal["openai", "tgi"] = "openai"
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_attempts: int = Field(default=4, ge=1)
    timeout_s: float = Field(default=60.0, gt=0)
    pricing: Pricing | None = None
    structured_output: bool = True

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("model must be a non-empty string")
        return v

    def __repr_args__(self) -> Any:  # credentials in base_url are never shown
        for k, v in super().__repr_args__():
            yield k, (clean_url(v) if k == "base_url" and isinstance(v, str) else v)


def build_backend(cfg: BackendConfig, *, max_connections: int | None = None) -> Backend:
    """The backend a config describes. ``max_connections`` sizes the HTTP
    pool (OpenAI-compatible servers): give it the job's request concurrency."""
    retry = RetryPolicy(max_attempts=cfg.max_attempts, timeout_s=cfg.timeout_s)
    key = os.environ.get(cfg.api_key_env)
    if cfg.kind == "openai":
        from judgegraph.backends import OpenAIBackend

        if key is None and cfg.base_url is None:
            raise ValueError(f"backend: no API key: set {cfg.api_key_env} (or give base_url for a local server)")
        return OpenAIBackend(
            cfg.model,
            api_key=key or "unused",
            base_url=cfg.base_url,
            retry=retry,
            pricing=cfg.pricing,
            structured_output=cfg.structured_output,
            max_connections=max_connections,
        )
    from judgegraph.backends import TGIBackend

    if cfg.base_url is None:
        raise ValueError("backend: a tgi backend needs base_url")
    return TGIBackend(
        cfg.base_url,
        model=cfg.model,
        token=key,
        retry=retry,
        pricing=cfg.pricing,
        structured_output=cfg.structured_output,
    )
