"""OpenAI (and any OpenAI-compatible server) through ``openai.AsyncOpenAI``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from judgegraph.types import JSONValue, Pricing, RetryPolicy, Usage

from ._identity import public_headers
from ._per_loop import PerLoop, aclose_quietly
from ._protocol import BackendError, Capabilities, GenerateRequest, GenerateResult, MissingExtraError, TokenLogprob
from ._reasoning import is_reasoning_model
from ._retry import Retryable, awith_retries, parse_retry_after
from ._secrets import Secrets, clean_url, credential_headers, split_url_credentials
from ._sync import run_sync

__all__ = ["OpenAIBackend", "chat_params", "result_from_completion"]


class OpenAIBackend:
    """A GPT-4-class API model, or vLLM/SGLang/TGI via ``base_url``.

    The SDK's own retries are off (``max_retries=0``): ours count attempts for
    provenance and honour ``retry-after`` the same way across backends.

    Credentials from every source (``api_key``, ``OPENAI_API_KEY``, user info
    in ``base_url``, credential ``default_headers``, a given ``client``) are
    scrubbed from every error this backend raises. User info in the URL is
    sent as HTTP basic auth and never reaches the client's URL or its logs.

    Reasoning models (``reasoning=None`` detects o-series and gpt-5 by name)
    get ``max_completion_tokens`` and no ``temperature`` or logprobs;
    ``reasoning_effort`` passes through. :meth:`aclose` closes the clients.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        retry: RetryPolicy | None = None,
        pricing: Pricing | None = None,
        structured_output: bool = True,
        max_connections: int | None = None,
        reasoning: bool | None = None,
        reasoning_effort: str | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        """Any: ``client`` is an ``openai.AsyncOpenAI`` (or one with its
        interface); the ``openai`` package is an optional extra, so its type
        cannot be named in a signature that must import without it."""
        self.model = model
        self.retry = retry or RetryPolicy()
        self.pricing = pricing
        self.reasoning = is_reasoning_model(model) if reasoning is None else reasoning
        self.reasoning_effort = reasoning_effort
        self.capabilities = Capabilities(structured_output=structured_output, logprobs=not self.reasoning)
        self._fixed_client = client
        self._secrets = Secrets([api_key, *credential_headers(default_headers)])
        self._public_headers = public_headers(default_headers)
        url, user, password = split_url_credentials(base_url) if base_url else (None, None, None)
        self._secrets.add_basic_auth(user, password)
        self._clients: PerLoop[Any] = PerLoop()
        if client is None:
            try:
                import openai
            except ImportError:
                raise MissingExtraError("OpenAIBackend", "openai") from None

            def make() -> Any:
                kwargs: dict[str, Any] = {}
                http: dict[str, Any] = {}
                if max_connections is not None:
                    # Size the pool to the concurrency: the default keeps 100
                    # idle connections and churns above that.
                    import httpx2  # type: ignore[import-not-found]

                    http["limits"] = httpx2.Limits(
                        max_connections=max_connections, max_keepalive_connections=max_connections
                    )
                if password is not None or user is not None:
                    import httpx2

                    http["auth"] = httpx2.BasicAuth(user or "", password or "")
                if http:
                    kwargs["http_client"] = openai.DefaultAsyncHttpxClient(**http)
                if default_headers:
                    kwargs["default_headers"] = dict(default_headers)
                return openai.AsyncOpenAI(
                    api_key=api_key, base_url=url, max_retries=0, timeout=self.retry.timeout_s, **kwargs
                )

            self._make_client = make
            # Built now so a missing key fails at construction; the first event
            # loop that calls generate() takes it instead of building another.
            self._unclaimed: Any = make()
            self._learn(self._unclaimed)
        else:
            self._learn(client)
        self.endpoint = clean_url(self._base_url).rstrip("/")

    def _learn(self, client: Any) -> None:
        """What a client holds: its key (from the argument or the environment),
        credential headers and any user info in its URL."""
        self._base_url = clean_url(str(client.base_url))
        _, user, password = split_url_credentials(str(client.base_url))
        self._secrets.add_basic_auth(user, password)
        self._secrets.add(getattr(client, "api_key", None), os.environ.get("OPENAI_API_KEY"))
        headers = getattr(client, "default_headers", None)
        if isinstance(headers, Mapping):
            self._secrets.add(*credential_headers(headers))

    @property
    def _client(self) -> Any:
        if self._fixed_client is not None:
            return self._fixed_client
        return self._clients.get(self._claim)

    def _claim(self) -> Any:
        client, self._unclaimed = (self._unclaimed or self._make_client()), None
        return client

    async def aclose(self) -> None:
        """Close every client this backend built (not one it was given)."""
        clients = [*self._clients.drain(), *([self._unclaimed] if self._fixed_client is None else [])]
        self._unclaimed = None
        for client in clients:
            await aclose_quietly(client)

    def close(self) -> None:
        """:meth:`aclose` from sync code (on the loop sync calls share)."""
        run_sync(self.aclose())

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIBackend(model={self.model!r}, base_url={self._base_url!r})"

    # Constructor arguments that cannot change an answer (every other one
    # changes identity(): tests/backends/test_identity_reflection.py).
    IDENTITY_EXCLUDED: ClassVar[Mapping[str, str]] = {
        "api_key": "credential",
        "client": "keyed by the server it points at",
        "retry": "when it is asked again, not what it answers",
        "pricing": "cost only",
        "max_connections": "connection pool size",
    }

    def identity(self) -> dict[str, JSONValue]:
        """Where it is served, the reasoning options and the non-credential
        headers every call carries."""
        return {
            "server": self.endpoint,
            "reasoning": self.reasoning,
            "reasoning_effort": self.reasoning_effort,
            "headers": self._public_headers,
        }

    @property
    def client(self) -> Any:
        """The ``openai.AsyncOpenAI`` client of the running event loop (the batch engine uploads through it).

        Any: the ``openai`` package is an optional extra, so its client type
        cannot be named in a signature that must import without it."""
        return self._client

    def _params(self, request: GenerateRequest) -> dict[str, JSONValue]:
        return chat_params(self.model, request, reasoning=self.reasoning, reasoning_effort=self.reasoning_effort)

    async def _once(self, params: dict[str, JSONValue]) -> Any:
        import httpx2
        import openai

        try:
            # The client's own post(), not chat.completions.create(): the body
            # is plain JSON already, and the SDK's per-call walk of its typed
            # parameters and its model construction of the response were most
            # of this backend's own CPU cost per call. Errors, retries of
            # auth and Azure's deployment paths are the client's as before.
            raw = await self._client.post("/chat/completions", body=params, cast_to=httpx2.Response)
            return json.loads(raw.content)
        except openai.RateLimitError as exc:
            raise Retryable(
                f"HTTP 429 from {self.model}",
                parse_retry_after(exc.response.headers.get("retry-after")),
            ) from None
        except openai.InternalServerError as exc:
            raise Retryable(f"HTTP {exc.status_code} from {self.model}") from None
        except openai.APITimeoutError:
            raise Retryable(f"request to {self.model} timed out") from None
        except openai.APIConnectionError as exc:
            raise Retryable(f"connection to {self.model} failed: {type(exc.__cause__).__name__}") from None
        except openai.APIStatusError as exc:
            # Some servers echo the key they were sent in their error text: generate() scrubs it.
            raise BackendError(f"HTTP {exc.status_code} from {self.model}: {exc.message}") from None
        except openai.APIResponseValidationError as exc:
            raise Retryable(f"malformed response from {self.model}: {exc.message}") from None
        except ValueError as exc:  # body that is not JSON (json.JSONDecodeError)
            raise Retryable(f"malformed response from {self.model}: {type(exc).__name__}") from None

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        params = self._params(request)
        try:
            resp, attempts, latency = await awith_retries(
                lambda: self._once(params), self.retry, f"openai model {self.model}"
            )
        except BackendError as exc:
            raise self._secrets.scrub_error(exc) from None
        return _to_result(resp, attempts, latency, self.model)


def chat_params(
    model: str, request: GenerateRequest, *, reasoning: bool = False, reasoning_effort: str | None = None
) -> dict[str, JSONValue]:
    """The chat-completions body for ``request``: live calls and batch files send the same."""
    params: dict[str, JSONValue] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
    }
    if reasoning:
        params["max_completion_tokens"] = request.max_tokens
    else:
        params["max_tokens"] = request.max_tokens
        params["temperature"] = request.temperature
    if reasoning_effort is not None:
        params["reasoning_effort"] = reasoning_effort
    if request.stop:
        params["stop"] = list(request.stop)
    if request.seed is not None:
        params["seed"] = request.seed
    if request.logprobs and not reasoning:
        params["logprobs"] = True
        if request.top_logprobs:
            params["top_logprobs"] = request.top_logprobs
    if request.json_schema is not None:
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": request.json_schema, "strict": True},
        }
    return params


def result_from_completion(resp: Mapping[str, object] | BaseModel, model: str) -> GenerateResult:
    """A chat completion (its JSON as a mapping, e.g. a batch output line's
    body, or an ``openai`` ``ChatCompletion``) as a GenerateResult."""
    if hasattr(resp, "model_dump"):
        resp = resp.model_dump(mode="json")
    return _to_result(resp, 1, 0.0, model)


def _to_result(resp: Any, attempts: int, latency: float, model: str) -> GenerateResult:
    """A chat-completions response body (decoded JSON) as a GenerateResult."""
    choices = resp.get("choices") if isinstance(resp, Mapping) else None
    if not choices or not isinstance(choices, list):
        raise BackendError(f"malformed response from {model}: no choices", attempts=attempts)
    try:
        choice = choices[0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        content = (choice.get("logprobs") or {}).get("content")
        tokens = None
        if content:
            tokens = tuple(
                TokenLogprob(
                    t["token"],
                    float(t["logprob"]),
                    tuple((alt["token"], float(alt["logprob"])) for alt in (t.get("top_logprobs") or ())),
                )
                for t in content
            )
        usage = _usage(resp.get("usage"))
        if not isinstance(text, str):
            raise TypeError("content is not text")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise BackendError(f"malformed response from {model}: {type(exc).__name__}: {exc}", attempts=attempts) from None
    return GenerateResult(
        text=text,
        model=resp.get("model") or model,
        usage=usage,
        tokens=tokens,
        finish_reason=choice.get("finish_reason"),
        attempts=attempts,
        latency_s=latency,
    )


def _usage(used: Any) -> Usage:
    """The response's token counts; a server that sent none (or no prompt or completion
    count) leaves this call's tokens, so its cost, unknown: ``unreported``, never zero."""
    if not isinstance(used, Mapping) or used.get("prompt_tokens") is None or used.get("completion_tokens") is None:
        return Usage(unreported=1)
    return Usage(prompt_tokens=int(used["prompt_tokens"]), completion_tokens=int(used["completion_tokens"]))
