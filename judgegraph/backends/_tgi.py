"""TGI and other OpenAI-compatible servers via ``huggingface_hub.AsyncInferenceClient``.

TGI has been in maintenance mode since December 2025, so this backend treats
vLLM and SGLang as equals: ``mode="chat"`` speaks the OpenAI-compatible
``/v1/chat/completions`` that all three serve; ``mode="generate"`` speaks TGI's
native generate route (grammar, ``top_n_tokens``, ``details``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

from judgegraph.types import JSONValue, Message, Pricing, RetryPolicy, Usage

from ._identity import identity_value, public_headers
from ._per_loop import PerLoop
from ._protocol import BackendError, Capabilities, GenerateRequest, GenerateResult, MissingExtraError, TokenLogprob
from ._retry import Retryable, awith_retries, parse_retry_after
from ._secrets import Secrets, credential_headers, split_url_credentials

__all__ = ["TGIBackend", "chatml_prompt"]


def chatml_prompt(messages: Sequence[Message]) -> str:
    """Render messages as ChatML, ending with an open assistant turn."""
    parts = [f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"


class TGIBackend:
    name = "tgi"

    def __init__(
        self,
        base_url: str,
        *,
        mode: Literal["chat", "generate"] = "chat",
        model: str | None = None,
        token: str | None = None,
        retry: RetryPolicy | None = None,
        pricing: Pricing | None = None,
        prompt_format: Callable[[Sequence[Message]], str] = chatml_prompt,
        structured_output: bool = True,
        engine: Literal["tgi", "vllm"] = "tgi",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """``model`` is the served model name sent on the chat route (vLLM and
        SGLang route by it). ``engine`` picks how a JSON schema is asked for on
        the chat route: TGI's ``response_format`` (the hub client rewrites it to
        TGI's form, which vLLM ignores) or vLLM's ``structured_outputs``.

        Credentials (``token``, a saved hub token, user info in ``base_url``,
        credential ``headers``) are scrubbed from every error; user info is
        taken out of the URL (which is shown, logged and recorded as the
        model) and sent as HTTP basic auth."""
        try:
            import huggingface_hub  # noqa: F401
        except ImportError:
            raise MissingExtraError("TGIBackend", "tgi") from None
        url, user, password = split_url_credentials(base_url)
        self.base_url = url
        self.endpoint = url.rstrip("/")
        self.mode = mode
        self.model = model or url
        self._served_model = model
        self.engine = engine
        self.retry = retry or RetryPolicy()
        self.pricing = pricing
        self.capabilities = Capabilities(structured_output=structured_output, logprobs=True)
        self._prompt_format = prompt_format
        self._token = token
        self._headers = dict(headers or {})
        if (user is not None or password is not None) and token is None:
            pair = f"{user or ''}:{password or ''}".encode()
            self._headers.setdefault("Authorization", "Basic " + base64.b64encode(pair).decode("ascii"))
        self._secrets = Secrets([token, *credential_headers(self._headers)])
        self._secrets.add_basic_auth(user, password)
        if token is None:  # the hub client sends a saved or HF_TOKEN token itself
            from huggingface_hub import get_token

            self._secrets.add(get_token())
        # The client's connection pool belongs to one event loop: keep one per loop.
        self._clients: PerLoop[Any] = PerLoop()

    @property
    def _client(self) -> Any:
        return self._clients.get(self._new_client)

    def _new_client(self) -> Any:
        from huggingface_hub import AsyncInferenceClient

        return AsyncInferenceClient(
            base_url=self.base_url, token=self._token, timeout=self.retry.timeout_s, headers=self._headers or None
        )

    def __repr__(self) -> str:
        return f"TGIBackend(base_url={self.base_url!r}, mode={self.mode!r})"

    # Constructor arguments that cannot change an answer (every other one
    # changes identity(): tests/backends/test_identity_reflection.py).
    IDENTITY_EXCLUDED: ClassVar[Mapping[str, str]] = {
        "token": "credential",
        "retry": "when it is asked again, not what it answers",
        "pricing": "cost only",
    }

    def identity(self) -> dict[str, JSONValue]:
        """Where it is served, which route and schema form it uses, how a
        generate-route prompt is rendered, and its non-credential headers."""
        return {
            "server": self.endpoint,
            "mode": self.mode,
            "engine": self.engine,
            "served_model": self._served_model,
            "prompt_format": identity_value(self._prompt_format),
            "headers": public_headers(self._headers),
        }

    async def _call(self, request: GenerateRequest) -> Any:
        import httpx2  # type: ignore[import-not-found]
        from huggingface_hub.errors import HfHubHTTPError, InferenceTimeoutError

        try:
            if self.mode == "generate":
                return await self._generate(request)
            return await self._chat(request)
        except InferenceTimeoutError:
            raise Retryable(f"request to {self.base_url} timed out") from None
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            if status == 429 or status >= 500:
                hint = parse_retry_after(exc.response.headers.get("retry-after")) if status == 429 else None
                raise Retryable(f"HTTP {status} from {self.base_url}", hint) from None
            text = _first_line(exc)  # some servers echo the key they were sent: generate() scrubs it
            raise BackendError(f"HTTP {status} from {self.base_url}: {text}") from None
        except httpx2.TimeoutException:
            raise Retryable(f"request to {self.base_url} timed out") from None
        except httpx2.TransportError as exc:
            raise Retryable(f"connection to {self.base_url} failed: {type(exc).__name__}") from None
        except (ValueError, KeyError, TypeError) as exc:
            # The client raises these on bodies that are not the protocol's JSON.
            raise Retryable(f"malformed response from {self.base_url}: {type(exc).__name__}") from None

    async def _generate(self, request: GenerateRequest) -> GenerateResult:
        kwargs: dict[str, Any] = {
            "details": True,
            # The prompt's tokens come back as ``prefill``: the input side of usage and cost.
            "decoder_input_details": True,
            "max_new_tokens": request.max_tokens,
            "stop": list(request.stop) or None,
            "seed": request.seed,
        }
        if request.temperature > 0:
            kwargs.update(do_sample=True, temperature=request.temperature)
        if request.logprobs and request.top_logprobs:
            kwargs["top_n_tokens"] = request.top_logprobs
        if request.json_schema is not None:
            kwargs["grammar"] = {"type": "json", "value": request.json_schema}
        out = await self._client.text_generation(self._prompt_format(request.messages), **kwargs)
        details = out.details
        tokens = None
        if details is not None and details.tokens:
            tops = details.top_tokens or [None] * len(details.tokens)
            tokens = tuple(
                TokenLogprob(t.text, t.logprob, _alts(top)) for t, top in zip(details.tokens, tops, strict=False)
            )
        # Without details, or without the prompt's tokens (prefill; a prompt is never
        # empty), the call's tokens, so its cost, are unknown: not zero.
        usage = (
            Usage(prompt_tokens=len(details.prefill), completion_tokens=details.generated_tokens)
            if details is not None and details.prefill
            else Usage(unreported=1)
        )
        finish = str(details.finish_reason) if details else None
        return GenerateResult(out.generated_text, self.model, usage, tokens, finish)

    async def _chat(self, request: GenerateRequest) -> GenerateResult:
        kwargs: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stop": list(request.stop) or None,
            "seed": request.seed,
        }
        if request.logprobs:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = request.top_logprobs or None
        if self._served_model is not None:
            kwargs["model"] = self._served_model
        if request.json_schema is not None and self.engine == "vllm":
            kwargs["extra_body"] = {"structured_outputs": {"json": request.json_schema}}
        elif request.json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": request.json_schema, "strict": True},
            }
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        out = await self._client.chat_completion(messages, **kwargs)
        if not out.choices:
            raise ValueError("no choices")
        choice = out.choices[0]
        tokens = None
        if choice.logprobs is not None and choice.logprobs.content:
            tokens = tuple(TokenLogprob(t.token, t.logprob, _alts(t.top_logprobs)) for t in choice.logprobs.content)
        usage = Usage(unreported=1)  # a server that sends no usage leaves the cost unknown
        if out.usage is not None:
            usage = Usage(prompt_tokens=out.usage.prompt_tokens, completion_tokens=out.usage.completion_tokens)
        return GenerateResult(
            choice.message.content or "", out.model or self.model, usage, tokens, choice.finish_reason
        )

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        try:
            result, attempts, latency = await awith_retries(
                lambda: self._call(request), self.retry, f"TGI endpoint {self.base_url}"
            )
        except BackendError as exc:
            raise self._secrets.scrub_error(exc) from None
        return GenerateResult(
            result.text, result.model, result.usage, result.tokens, result.finish_reason, attempts, latency
        )


def _alts(top: Any) -> tuple[tuple[str, float], ...]:
    if not top:
        return ()
    out = []
    for alt in top:
        # top_tokens come back as plain dicts from /generate, as objects from chat.
        if isinstance(alt, dict):
            out.append((str(alt.get("text", alt.get("token", ""))), float(alt["logprob"])))
        else:
            out.append((str(getattr(alt, "text", None) or alt.token), float(alt.logprob)))
    return tuple(out)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
