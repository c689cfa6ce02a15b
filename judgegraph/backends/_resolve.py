"""A model named by a string: the one reading of model ids, shared by judges
(``PointwiseJudge("openai:gpt-4o")``) and the command line (``--judge``).

- ``openai:MODEL`` (key and base URL from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``),
  ``openai:MODEL@URL`` or ``vllm:MODEL@URL`` (any OpenAI-compatible server):
  an :class:`~judgegraph.backends.OpenAIBackend`;
- ``tgi:URL``: a :class:`~judgegraph.backends.TGIBackend`;
- any other ``provider:model`` that LangChain's ``init_chat_model`` knows
  (``anthropic:claude-sonnet-4-5``, ``google_genai:...``): a
  :class:`~judgegraph.backends.ChatModelBackend`.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._protocol import Backend

__all__ = ["Endpoint", "parse_endpoint", "resolve_model"]

# The schemes read here; every other provider prefix goes to init_chat_model.
_OWN_SCHEMES = ("openai", "vllm", "tgi")


class Endpoint(BaseModel):
    """A judge model behind an HTTP endpoint, as given on the command line.

    ``openai:MODEL`` (OpenAI, key from ``OPENAI_API_KEY``),
    ``openai:MODEL@URL`` or ``vllm:MODEL@URL`` (any OpenAI-compatible server,
    e.g. vLLM at ``http://host:8000/v1``), ``tgi:URL`` (Text Generation Inference).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["openai", "tgi"]
    model: str = Field(min_length=1)
    base_url: str | None = None

    @property
    def label(self) -> str:
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.model}{where}"


def parse_endpoint(spec: str) -> Endpoint:
    """Read ``openai:MODEL[@URL]``, ``vllm:MODEL@URL`` or ``tgi:URL``."""
    scheme, sep, rest = spec.partition(":")
    scheme = scheme.strip().lower()
    if not sep or not rest.strip():
        raise ValueError(f"{spec!r}: expected openai:MODEL[@URL], vllm:MODEL@URL or tgi:URL")
    rest = rest.strip()
    if scheme == "tgi":
        if not rest.startswith(("http://", "https://")):
            raise ValueError(f"{spec!r}: a TGI endpoint is tgi:http://host:port")
        return Endpoint(kind="tgi", model="tgi", base_url=rest)
    if scheme in ("openai", "vllm"):
        model, at, url = rest.partition("@")
        if scheme == "vllm" and not at:
            raise ValueError(f"{spec!r}: a vLLM endpoint is vllm:MODEL@http://host:port/v1")
        if at and not url.startswith(("http://", "https://")):
            raise ValueError(f"{spec!r}: the part after @ must be an http(s) URL")
        return Endpoint(kind="openai", model=model.strip(), base_url=url or None)
    raise ValueError(f"{spec!r}: unknown endpoint kind {scheme!r}; use openai:, vllm: or tgi:")


def _not_a_model(spec: str, why: str = "") -> ValueError:
    # The old meaning of a bare string was a runtime-context key: say both ways out.
    name = spec.partition(":")[2] or spec
    return ValueError(
        f"{spec!r} is not a model id{why}: a string names a model as provider:model "
        '("openai:gpt-4o", "anthropic:claude-sonnet-4-5", any id init_chat_model takes), '
        '"vllm:MODEL@http://host:8000/v1" or "tgi:http://host:8080". '
        f'Did you mean "openai:{name}", or from_context("{spec}") for the backend the run\'s context holds?'
    )


def resolve_model(spec: str) -> Backend:
    """The backend a model id names (see the module docstring for the forms).
    Nothing is called yet; a string that names no model raises ``ValueError``."""
    provider, sep, rest = spec.strip().partition(":")
    if not sep or not provider or not rest.strip():
        raise _not_a_model(spec)
    if provider.lower() in _OWN_SCHEMES:
        ep = parse_endpoint(spec)
        if ep.kind == "tgi":
            from ._tgi import TGIBackend

            return TGIBackend(str(ep.base_url))
        from ._openai import OpenAIBackend

        # A local server needs no key, but the client insists on one.
        key = os.environ.get("OPENAI_API_KEY") or ("unused" if ep.base_url else None)
        return OpenAIBackend(ep.model, api_key=key, base_url=ep.base_url)
    from ._langchain import ChatModelBackend

    try:
        return ChatModelBackend.from_spec(spec.strip())
    except ValueError as exc:  # init_chat_model's "unsupported provider" and the like
        raise _not_a_model(spec, f" ({str(exc).splitlines()[0]})") from exc
