"""A scripted backend for users' own unit tests: no model, no network."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from judgegraph.types import Pricing, Usage

from ._protocol import BackendError, Capabilities, GenerateRequest, GenerateResult

__all__ = ["ScriptedBackend"]

Reply = str | GenerateResult | Exception


class ScriptedBackend:
    """Answers from a script instead of a model.

    ``script`` is either a sequence of replies, used in order, or a function
    from the request to a reply. A reply is the output text, a full
    :class:`GenerateResult` (e.g. with token logprobs), or an exception to
    raise (use :class:`BackendError` to simulate a failed endpoint).
    Every request is kept in ``calls`` so tests can assert on prompts.
    """

    name = "scripted"

    def __init__(
        self,
        script: Iterable[Reply] | Callable[[GenerateRequest], Reply],
        *,
        model: str = "scripted",
        structured_output: bool = False,
        logprobs: bool = False,
        latency_s: float = 0.0,
        pricing: Pricing | None = None,
    ) -> None:
        self.model = model
        self.pricing = pricing
        self.capabilities = Capabilities(structured_output=structured_output, logprobs=logprobs)
        self.latency_s = latency_s
        self.calls: list[GenerateRequest] = []
        self._fn = script if callable(script) else None
        self._queue = None if callable(script) else list(script)

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        self.calls.append(request)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self._fn is not None:
            reply = self._fn(request)
        else:
            assert self._queue is not None
            if not self._queue:
                raise BackendError("ScriptedBackend: script exhausted")
            reply = self._queue.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, GenerateResult):
            return reply
        usage = Usage(
            prompt_tokens=sum(len(m.content.split()) for m in request.messages),
            completion_tokens=len(reply.split()),
        )
        return GenerateResult(text=reply, model=self.model, usage=usage, latency_s=self.latency_s)
