"""Any LangChain chat model as a judge backend.

``ChatModelBackend(ChatOpenAI(...))``, or any ``BaseChatModel`` handed to a
judge directly or found in its runtime context, speaks the :class:`Backend`
protocol: the model's own structured output (``json_schema`` where it has
it, tool calling otherwise), logprobs where it returns them, usage from
``usage_metadata`` priced with :class:`Pricing`, and one retry policy, ours.

The model's call is its own LangChain run, so tracers see the judge's
prompt, model name and token usage as a child LLM run of the judge.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import threading
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import SecretStr

from judgegraph.types import JSONValue, MissingExtraError, Pricing, RetryPolicy, Usage

from ._identity import identity_value, public_headers, scrub_strings
from ._per_loop import PerLoop, aclose_quietly
from ._protocol import Backend, BackendError, Capabilities, GenerateRequest, GenerateResult, TokenLogprob
from ._reasoning import is_reasoning_model
from ._retry import Retryable, awith_retries, parse_retry_after
from ._secrets import Secrets, clean_url
from ._sync import in_sync_call

__all__ = ["CHAT_MODEL_FIELDS_EXCLUDED", "ChatModelBackend", "as_backend"]

# Chat model fields that cannot change an answer, each with why; every other
# field is in the backend's identity.
CHAT_MODEL_FIELDS_EXCLUDED: Mapping[str, str] = {
    # Credentials: never in a key (a key is stored with every job).
    "openai_api_key": "credential",
    "anthropic_api_key": "credential",
    # The SDK clients built from the other fields; the server is read from them.
    "client": "SDK client",
    "async_client": "SDK client",
    "root_client": "SDK client",
    "root_async_client": "SDK client",
    "http_client": "HTTP transport",
    "http_async_client": "HTTP transport",
    "http_socket_options": "HTTP transport",
    "openai_proxy": "HTTP transport",
    "anthropic_proxy": "HTTP transport",
    # When and how often it is asked, not what it answers; retries are ours.
    "request_timeout": "timeout",
    "default_request_timeout": "timeout",
    "stream_chunk_timeout": "timeout",
    "max_retries": "retries (ours, see ChatModelBackend)",
    "rate_limiter": "pacing",
    "streaming": "transport: the whole answer is read either way",
    "disable_streaming": "transport: the whole answer is read either way",
    "stream_usage": "usage reporting",
    "include_response_headers": "response metadata only",
    # Observation: tracing and LangChain's own bookkeeping.
    "callbacks": "tracing",
    "verbose": "logging",
    "tags": "tracing",
    "metadata": "tracing",
    "name": "tracing",
    "cache": "LangChain's response cache: ours keys the call",
    "custom_get_token_ids": "token counting",
    "tiktoken_model_name": "token counting",
    # LangChain's table of what the model supports (it changes with releases);
    # the structured-output method it may lead to is keyed as structured_method.
    "profile": "descriptive model metadata",
}
# Fields holding HTTP headers or query parameters: only their non-credential entries are keyed.
_HEADER_FIELDS = frozenset({"default_headers", "default_query"})

# Providers whose chat models take temperature/max_tokens (and, for OpenAI,
# logprobs) as call arguments; others run as configured.
_CALL_PARAMS = {"openai", "azure", "anthropic"}
_CONNECTION_ERRORS = {"APIConnectionError", "APITimeoutError", "ConnectError", "ReadTimeout", "RemoteProtocolError"}
_ROLES: dict[str, Callable[..., BaseMessage]] = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


class ChatModelBackend:
    """A LangChain ``BaseChatModel`` as a judge backend.

    Retries are ours (``retry``); the model's own are turned off on a copy of
    it where it has ``max_retries`` (``model_retries_off`` says whether that
    was possible: a model without that field keeps whatever it does itself).
    ``retry.timeout_s`` bounds each attempt. 429, 5xx, timeouts and resets
    are retried; other 4xx are not.

    OpenAI and Anthropic models get the judge's ``max_tokens`` and
    temperature 0 per call, except reasoning models (o-series, gpt-5), which
    refuse a temperature; ``reasoning_effort`` sets the model's own option.
    Other providers' models run as configured.
    """

    name = "langchain"
    traces_itself = True  # the model call is the chat model's own LangChain run
    # Constructor arguments that cannot change an answer (every other one, and
    # every field of the model but CHAT_MODEL_FIELDS_EXCLUDED, changes identity()).
    IDENTITY_EXCLUDED: ClassVar[Mapping[str, str]] = {
        "retry": "when it is asked again, not what it answers",
        "pricing": "cost only",
    }

    def __init__(
        self,
        model: BaseChatModel,
        *,
        retry: RetryPolicy | None = None,
        pricing: Pricing | None = None,
        structured_output: bool | None = None,
        structured_method: str | None = None,
        logprobs: bool | None = None,
        reasoning_effort: str | None = None,
    ) -> None:
        if not isinstance(model, BaseChatModel):
            raise TypeError(f"ChatModelBackend takes a LangChain BaseChatModel, got {type(model).__name__}")
        self.retry = retry or RetryPolicy()
        self.pricing = pricing
        ls = model._get_ls_params()
        self.provider = str(ls.get("ls_provider") or type(model).__name__)
        self.model = str(ls.get("ls_model_name") or getattr(model, "model_name", None) or type(model).__name__)
        self.reasoning = is_reasoning_model(self.model) if self.provider in ("openai", "azure") else False
        fields = type(model).model_fields
        if reasoning_effort is not None:
            if "reasoning_effort" not in fields:
                raise ValueError(f"{type(model).__name__} has no reasoning_effort option")
            model = model.model_copy(update={"reasoning_effort": reasoning_effort})
        model, self.model_retries_off = _without_retries(model)
        self.chat_model = model
        # Its key (a SecretStr field, from the argument or the environment),
        # credential headers, URL user info and its SDK clients' own: a
        # server may echo any of them in an error, which generate() scrubs.
        self._secrets = Secrets()
        self._secrets.add_held(model)
        has_structured = type(model).with_structured_output is not BaseChatModel.with_structured_output or (
            type(model).bind_tools is not BaseChatModel.bind_tools
        )
        self.capabilities = Capabilities(
            structured_output=has_structured if structured_output is None else structured_output,
            logprobs=("logprobs" in fields and not self.reasoning) if logprobs is None else logprobs,
        )
        self.structured_method = structured_method or _default_method(model)
        self._call_params = self.provider in _CALL_PARAMS
        # An OpenAI-SDK model built with LangChain's default HTTP clients
        # shares them with every other model of the same base URL (LangChain
        # caches them process-wide), and an async pool is bound to the first
        # loop that used it. Such a model gets clients of its own here: one
        # sync pair, and one async pair per event loop. Clients a user passed
        # in (http_client, http_async_client) are used as given.
        self._own_clients = _openai_sdk_model(model)
        self._sync: _Bound | None = None  # built on first use, and again after close()
        self._per_loop: PerLoop[_Bound] = PerLoop()

    @classmethod
    def from_spec(
        cls,
        spec: str,
        *,
        retry: RetryPolicy | None = None,
        pricing: Pricing | None = None,
        reasoning_effort: str | None = None,
        model_options: Mapping[str, Any] | None = None,
    ) -> ChatModelBackend:
        """A backend from an ``init_chat_model`` spec, e.g. ``"openai:gpt-4.1-mini"``;
        ``model_options`` go to ``init_chat_model`` (``base_url``, ``api_key``, ...).

        Any: ``model_options`` are passed through to LangChain's
        ``init_chat_model(**kwargs: Any)``, whose options depend on the provider."""
        try:
            from langchain.chat_models import init_chat_model
        except ImportError:
            raise MissingExtraError("ChatModelBackend.from_spec", "langchain") from None
        model = init_chat_model(spec, **dict(model_options or {}))
        return cls(model, retry=retry, pricing=pricing, reasoning_effort=reasoning_effort)

    def __repr__(self) -> str:
        return f"ChatModelBackend({type(self.chat_model).__name__}, model={self.model!r})"

    def identity(self) -> dict[str, JSONValue]:
        """The chat model's class, provider and server, how structured output
        is asked for, and every field of the model but those in
        :data:`CHAT_MODEL_FIELDS_EXCLUDED` (so a field LangChain adds later is
        keyed until someone decides it cannot change an answer)."""
        model = self.chat_model
        cls = type(model)
        options: dict[str, JSONValue] = {}
        for name in sorted(cls.model_fields):
            value = getattr(model, name, None)
            if name in CHAT_MODEL_FIELDS_EXCLUDED or isinstance(value, SecretStr):
                continue
            if name in _HEADER_FIELDS and isinstance(value, Mapping):
                value = public_headers(value)
            options[name] = identity_value(value)
        return {
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "provider": self.provider,
            "server": _served_at(model),
            "structured_method": self.structured_method,
            # A key may sit anywhere (model_kwargs, extra_body): every one it holds is redacted.
            "options": scrub_strings(options, self._secrets.scrub),
        }

    # ------------------------------------------------------------ calls

    def _with_own_client(self, *, sync: bool) -> BaseChatModel:
        """A copy of the model whose sync (or async) SDK client has an HTTP pool of its own."""
        import openai

        model: Any = self.chat_model
        if sync:
            root = model.root_client.with_options(http_client=openai.DefaultHttpxClient())
            update = {"root_client": root, "client": root.chat.completions}
        else:
            root = model.root_async_client.with_options(http_client=openai.DefaultAsyncHttpxClient())
            update = {"root_async_client": root, "async_client": root.chat.completions}
        return model.model_copy(update=update)  # type: ignore[no-any-return]

    def _bound(self) -> _Bound:
        """What this call goes through: sync calls take the model's sync API
        (see _once), async ones the running loop's client."""
        if in_sync_call() or not self._own_clients:  # without own clients: one model for every loop
            if self._sync is None:
                self._sync = _Bound(self._with_own_client(sync=True) if self._own_clients else self.chat_model)
            return self._sync
        return self._per_loop.get(lambda: _Bound(self._with_own_client(sync=False)))

    def _runnable(self, schema: dict[str, Any] | None) -> Runnable[Any, Any]:
        bound = self._bound()
        if schema is None:
            return bound.model
        key = json.dumps(schema, sort_keys=True)
        found = bound.structured.get(key)
        if found is None:
            found = bound.structured[key] = _structured_model(bound.model, schema, self.structured_method)
        return found

    def _kwargs(self, request: GenerateRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self._call_params:
            kwargs["max_tokens"] = request.max_tokens
            if not self.reasoning:
                kwargs["temperature"] = request.temperature
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.logprobs and self.capabilities.logprobs:
            kwargs["logprobs"] = True
            if request.top_logprobs:
                kwargs["top_logprobs"] = request.top_logprobs
        if request.seed is not None and self.provider in ("openai", "azure"):
            kwargs["seed"] = request.seed
        return kwargs

    async def _once(self, runnable: Runnable[Any, Any], messages: list[BaseMessage], kwargs: dict[str, Any]) -> Any:
        try:
            if in_sync_call():
                # A sync call runs on judgegraph's shared loop. The model's async
                # HTTP client binds to the first loop that uses it, and the app's
                # own loop (a notebook's, asyncio.run's) uses it too; so sync
                # calls take the model's sync API, which binds to no loop.
                return await _in_thread(functools.partial(runnable.invoke, messages, **kwargs))
            return await runnable.ainvoke(messages, **kwargs)
        except Exception as exc:
            raise _classify(exc, self.model) from None

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        runnable = self._runnable(request.json_schema)
        messages = [_ROLES[m.role](content=m.content) for m in request.messages]
        kwargs = self._kwargs(request)
        try:
            out, attempts, latency = await awith_retries(
                lambda: self._once(runnable, messages, kwargs), self.retry, f"chat model {self.model}"
            )
        except BackendError as exc:
            raise self._secrets.scrub_error(exc) from None
        return _to_result(out, attempts, latency, self.model)

    async def aclose(self) -> None:
        """Close the HTTP clients this backend built for itself. The model's
        own are left open: LangChain shares its default ones with every model
        of the same base URL, and clients a user passed in are theirs."""
        if not self._own_clients:
            return
        sync, self._sync = self._sync, None
        if sync is not None:
            sync.model.root_client.close()  # type: ignore[attr-defined]
        for bound in self._per_loop.drain():
            await aclose_quietly(bound.model.root_async_client)  # type: ignore[attr-defined]

    def close(self) -> None:
        from ._sync import run_sync

        run_sync(self.aclose())


# ---------------------------------------------------------------- helpers


@dataclass
class _Bound:
    """A model the calls of one event loop (or the sync calls) go through, and
    its structured-output runnables, by schema."""

    model: BaseChatModel
    structured: dict[str, Runnable[Any, Any]] = field(default_factory=dict)


def _openai_sdk_model(model: BaseChatModel) -> bool:
    """Whether ``model`` calls through OpenAI SDK clients built on LangChain's
    shared default HTTP pools (ChatOpenAI, AzureChatOpenAI and their kin)."""
    try:
        import openai
    except ImportError:
        return False
    return (
        isinstance(getattr(model, "root_async_client", None), openai.AsyncOpenAI)
        and isinstance(getattr(model, "root_client", None), openai.OpenAI)
        and getattr(model, "http_client", None) is None
        and getattr(model, "http_async_client", None) is None
    )


# Threads for sync calls' model calls: as many as a sync batch runs at once,
# not the loop's default pool (cpu count + 4). A timed-out attempt's thread
# finishes in the background, bounded by the model's own request timeout.
_POOL_THREADS = 64
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


async def _in_thread(call: Callable[[], Any]) -> Any:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_POOL_THREADS, thread_name_prefix="judgegraph-chat-model")
    # The run (and tracer) context travels along, as with asyncio.to_thread.
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_pool, context.run, call)


_wrapped: dict[int, ChatModelBackend] = {}


def as_backend(obj: BaseChatModel | Backend) -> Backend:
    """``obj`` as a backend: a chat model is wrapped once (and the wrapper
    reused for as long as the model lives), a backend is returned as is."""
    if isinstance(obj, BaseChatModel):
        key = id(obj)
        found = _wrapped.get(key)
        if found is None:
            found = _wrapped[key] = ChatModelBackend(obj)
            weakref.finalize(obj, _wrapped.pop, key, None)
        return found
    return obj


def _served_at(model: BaseChatModel) -> str | None:
    """The base URL the model's SDK client sends to (it resolves the
    environment's defaults), without user info."""
    for name in ("root_async_client", "root_client", "async_client", "client"):
        url = getattr(getattr(model, name, None), "base_url", None)
        if url is not None:
            return clean_url(str(url)).rstrip("/")
    return None


def _default_method(model: BaseChatModel) -> str:
    import inspect

    try:
        method = inspect.signature(type(model).with_structured_output).parameters.get("method")
    except (TypeError, ValueError):
        return "function_calling"
    if method is not None and "json_schema" in str(method.annotation):
        return "json_schema"
    return "function_calling"


def _structured_model(model: BaseChatModel, schema: dict[str, Any], method: str) -> Runnable[Any, Any]:
    """The model bound to answer in ``schema``, without LangChain's parser:
    the judge parses (and repairs) the raw answer itself."""
    titled = {"title": "verdict", **schema}
    options: dict[str, Any] = {"method": method}
    if method == "json_schema" and "strict" in str(_signature(type(model).with_structured_output)):
        options["strict"] = True
    chain = model.with_structured_output(titled, **options)
    first = getattr(chain, "first", None)
    if isinstance(first, Runnable):
        return first  # the bound model; the parser after it is dropped
    return model.with_structured_output(titled, include_raw=True, **options) | RunnableLambda(_raw)


def _raw(out: Mapping[str, Any]) -> Any:
    return out["raw"]


@functools.cache
def _signature(fn: Any) -> Any:
    import inspect

    return inspect.signature(fn)


def _without_retries(model: BaseChatModel) -> tuple[BaseChatModel, bool]:
    if "max_retries" not in type(model).model_fields:
        return model, False
    clone = model.model_copy(update={"max_retries": 0})
    for name in ("root_client", "root_async_client"):
        client = getattr(clone, name, None)
        if client is not None and hasattr(client, "with_options"):
            # OpenAI-style models build their SDK clients at validation time,
            # which a copy does not repeat: retarget the clients themselves.
            setattr(clone, name, client.with_options(max_retries=0))
    if getattr(clone, "root_client", None) is not None and hasattr(clone, "client"):
        clone.client = clone.root_client.chat.completions  # type: ignore[attr-defined]
    if getattr(clone, "root_async_client", None) is not None and hasattr(clone, "async_client"):
        clone.async_client = clone.root_async_client.chat.completions  # type: ignore[attr-defined]
    for name, attr in vars(type(model)).items():
        # Lazily built clients (Anthropic's) must be rebuilt with max_retries=0.
        if isinstance(attr, functools.cached_property):
            clone.__dict__.pop(name, None)
    return clone, True


def _classify(exc: Exception, model: str) -> Exception:
    if isinstance(exc, BackendError | Retryable):
        return exc
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if status == 429:
            response = getattr(exc, "response", None)
            hint = parse_retry_after(response.headers.get("retry-after")) if response is not None else None
            return Retryable(f"HTTP 429 from {model}", hint)
        if status >= 500:
            return Retryable(f"HTTP {status} from {model}")
        return BackendError(f"HTTP {status} from {model}: {getattr(exc, 'message', exc)}")
    names = {c.__name__ for c in type(exc).__mro__}
    if names & _CONNECTION_ERRORS or isinstance(exc, TimeoutError | ConnectionError):
        return Retryable(f"connection to {model} failed: {type(exc).__name__}")
    return BackendError(f"{type(exc).__name__} from {model}: {exc}")


def _text(message: AIMessage) -> str:
    if message.tool_calls:  # structured output by tool calling: the arguments are the answer
        return json.dumps(message.tool_calls[0]["args"])
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, str | dict))


def _tokens(meta: Mapping[str, Any]) -> tuple[TokenLogprob, ...] | None:
    lp = meta.get("logprobs")
    content = lp.get("content") if isinstance(lp, Mapping) else None
    if not content:
        return None
    return tuple(
        TokenLogprob(
            t["token"],
            float(t["logprob"]),
            tuple((a["token"], float(a["logprob"])) for a in t.get("top_logprobs") or ()),
        )
        for t in content
    )


def _to_result(out: Any, attempts: int, latency: float, model: str) -> GenerateResult:
    if not isinstance(out, AIMessage):
        raise BackendError(f"chat model {model} answered a {type(out).__name__}, not a message", attempts=attempts)
    meta = out.response_metadata or {}
    um = out.usage_metadata
    # A model that reports no usage_metadata leaves the call's tokens, so its cost, unknown.
    usage = (
        Usage(prompt_tokens=um["input_tokens"], completion_tokens=um["output_tokens"]) if um else Usage(unreported=1)
    )
    finish = meta.get("finish_reason") or meta.get("stop_reason")
    return GenerateResult(
        text=_text(out),
        model=str(meta.get("model_name") or meta.get("model") or model),
        usage=usage,
        tokens=_tokens(meta),
        finish_reason="length" if finish == "max_tokens" else finish,
        attempts=attempts,
        latency_s=latency,
    )
