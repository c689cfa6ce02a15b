"""Model calls as LangChain LLM runs, so tracers see what a judge asked.

A chat-model backend's call is already the model's own run. For every other
backend the judge opens a chat-model run itself, with the messages, model
name, provider, parameters and token usage, under the run it is called in
(the judge's chain run, or a graph node's). With no callbacks configured and
LangSmith tracing off this is one context-variable read per call.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import AsyncCallbackManager, BaseCallbackManager
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tracers.context import _tracing_v2_is_enabled, tracing_v2_callback_var

from judgegraph.backends import Backend, GenerateRequest, GenerateResult, bounded_result

__all__ = ["agenerate_traced", "tracing_active"]

_ROLES: dict[str, Callable[..., BaseMessage]] = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def _has_handlers(callbacks: Any) -> bool:
    if isinstance(callbacks, BaseCallbackManager):
        return bool(callbacks.handlers)
    return bool(callbacks)


_ENV = ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING")


@functools.cache
def _env_may_trace() -> bool:
    # Read once, as LangSmith itself caches these variables.
    return any(os.environ.get(k) for k in _ENV)


def _langsmith_on() -> bool:
    # The full check costs tens of microseconds; the environment (and the
    # tracing_v2_enabled() context) say cheaply whether it can be true at all.
    if tracing_v2_callback_var.get() is not None:
        return True
    # "local" (langsmith.evaluate(upload_runs=False) around its evaluators)
    # keeps runs in the process; a LangChain tracer opened here would post
    # them to the endpoint all the same, so a judge opens none.
    return _env_may_trace() and _tracing_v2_is_enabled() is True


def tracing_active(config: RunnableConfig | None = None) -> bool:
    """Whether a run opened now would reach anyone: callbacks in ``config``
    (or in the run we are inside, whose callbacks already include LangSmith's
    tracer when it is on), or, outside any run, LangSmith tracing switched on."""
    cfg = config if config is not None else var_child_runnable_config.get()
    if cfg is not None:
        return _has_handlers(cfg.get("callbacks"))
    return _langsmith_on()


async def _generate(backend: Backend, request: GenerateRequest) -> GenerateResult:
    # The usage a server reports drives costs and totals: bounded before anything reads it.
    return bounded_result(request, await backend.generate(request))


async def agenerate_traced(backend: Backend, request: GenerateRequest) -> GenerateResult:
    """``backend.generate(request)``, as a child LLM run when anyone listens."""
    if getattr(backend, "traces_itself", False):
        if _tracing_v2_is_enabled() == "local":
            # langsmith.evaluate(upload_runs=False): a chat model's own run
            # would get a LangChain tracer that posts to the endpoint all the
            # same. Nothing may leave the process, so it is not traced.
            from langsmith.run_helpers import tracing_context

            with tracing_context(enabled=False):
                return await _generate(backend, request)
        return await _generate(backend, request)
    if not tracing_active():
        return await _generate(backend, request)
    cfg = var_child_runnable_config.get() or {}
    callbacks = cfg.get("callbacks")
    params = _params(backend, request)
    manager = AsyncCallbackManager.configure(
        inheritable_callbacks=callbacks,
        inheritable_tags=cfg.get("tags"),
        inheritable_metadata=cfg.get("metadata"),
        local_metadata={
            "ls_provider": backend.name,
            "ls_model_name": backend.model,
            "ls_model_type": "chat",
            "ls_temperature": request.temperature,
            "ls_max_tokens": request.max_tokens,
        },
    )
    messages = [_ROLES[m.role](content=m.content) for m in request.messages]
    serialized = {
        "lc": 1,
        "type": "not_implemented",
        "id": ["judgegraph", type(backend).__name__],
        "name": backend.name,
    }
    (run,) = await manager.on_chat_model_start(
        serialized, [messages], invocation_params=params, options={"stop": list(request.stop)}, name=backend.model
    )
    try:
        result = await _generate(backend, request)
    except BaseException as exc:
        await run.on_llm_error(exc)
        raise
    usage = {
        "input_tokens": result.usage.prompt_tokens,
        "output_tokens": result.usage.completion_tokens,
        "total_tokens": result.usage.prompt_tokens + result.usage.completion_tokens,
    }
    message = AIMessage(
        content=result.text,
        usage_metadata=usage,  # type: ignore[arg-type]
        response_metadata={"model_name": result.model, "finish_reason": result.finish_reason},
    )
    token_usage = {
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "total_tokens": usage["total_tokens"],
    }
    await run.on_llm_end(
        LLMResult(
            generations=[[ChatGeneration(message=message, generation_info={"finish_reason": result.finish_reason})]],
            llm_output={"token_usage": token_usage, "model_name": result.model, "attempts": result.attempts},
        )
    )
    return result


def _params(backend: Backend, request: GenerateRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        "_type": backend.name,
        "model": backend.model,
        "model_name": backend.model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    if request.json_schema is not None:
        params["response_format"] = {"type": "json_schema", "schema": request.json_schema}
    if request.logprobs:
        params["logprobs"] = True
        params["top_logprobs"] = request.top_logprobs
    if request.seed is not None:
        params["seed"] = request.seed
    return params
