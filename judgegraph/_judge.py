"""What every judge shares: backend resolution, one call with repair, provenance."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ValidationError

from ._backend import Backend, BackendError, GenerateRequest, GenerateResult
from ._parsing import Parsed, ParseError, json_body, parse_output, value_distribution
from ._templates import Template, get_template
from .types import Message, Provenance, Status, Usage

__all__ = ["BaseJudge", "JudgeInputError", "Outcome"]

InT = TypeVar("InT", bound=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel)
T = TypeVar("T")


class JudgeInputError(ValueError):
    """The input to a judge is malformed; the message names the field."""


def coerce_input(model: type[InT], value: Any, *, where: str = "") -> InT:
    if isinstance(value, model):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if not isinstance(value, Mapping):
        raise JudgeInputError(f"{where}expected a {model.__name__} or a mapping, got {type(value).__name__}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(input)'}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        raise JudgeInputError(f"{where}invalid {model.__name__}: {problems}") from None


@dataclass(frozen=True, slots=True)
class Outcome:
    """One judged prompt: the parsed value or why there is none."""

    status: Status
    parsed: Parsed | None
    raw_text: str | None
    reason: str | None
    usage: Usage
    attempts: int
    latency_s: float
    model: str
    distribution: dict[int | str, float] | None


_REPAIR = "Your previous answer could not be read ({reason}). Answer again in the required format. {fmt}"


class BaseJudge(Runnable[Any, OutT], Generic[InT, OutT]):
    """Shared machinery. Subclasses set ``input_model`` and implement ``_judge``.

    ``backend`` is a Backend, or a key looked up in the graph's runtime
    context (a mapping or an object with that attribute), so clients live in
    context, not in state.
    """

    input_model: type[InT]
    default_template: str

    def __init__(
        self,
        backend: Backend | str = "backend",
        *,
        name: str | None = None,
        template: str | Template | None = None,
        scale: tuple[int, int] | None = None,
        structured: bool | None = None,
        max_tokens: int = 512,
        top_logprobs: int = 10,
        repair: bool = True,
    ) -> None:
        self.backend = backend
        self.template = template if isinstance(template, Template) else get_template(template or self.default_template)
        self.name = name or type(self).__name__
        self.scale = scale or self.template.default_scale
        self.structured = structured
        self.max_tokens = max_tokens
        self.top_logprobs = top_logprobs
        self.repair = repair

    # ------------------------------------------------------------ public API

    async def ajudge(
        self, value: InT | Mapping[str, Any], *, backend: Backend | None = None, context: Any = None
    ) -> OutT:
        """Judge one input. Invalid input raises :class:`JudgeInputError`;
        every model-side failure comes back as a result with a status."""
        item = coerce_input(self.input_model, value)
        return await self._judge(item, self.resolve_backend(backend, context))

    async def ajudge_many(
        self,
        values: Sequence[InT | Mapping[str, Any]],
        *,
        max_concurrency: int = 16,
        backend: Backend | None = None,
        context: Any = None,
    ) -> list[OutT | JudgeInputError]:
        """Judge many inputs concurrently, in input order. A malformed item
        yields its :class:`JudgeInputError` in place instead of failing the rest."""
        b = self.resolve_backend(backend, context)
        sem = asyncio.Semaphore(max_concurrency)

        async def one(i: int, v: Any) -> OutT | JudgeInputError:
            try:
                item = coerce_input(self.input_model, v, where=f"item {i}: ")
            except JudgeInputError as exc:
                return exc
            async with sem:
                return await self._judge(item, b)

        return list(await asyncio.gather(*(one(i, v) for i, v in enumerate(values))))

    def resolve_backend(self, backend: Backend | None = None, context: Any = None) -> Backend:
        if backend is not None:
            return backend
        if not isinstance(self.backend, str):
            return self.backend
        key = self.backend
        found = None
        if isinstance(context, Mapping):
            found = context.get(key)
        elif context is not None:
            found = getattr(context, key, None)
        if found is None:
            raise LookupError(f"{self.name}: no backend given and none under {key!r} in the runtime context")
        return found  # type: ignore[no-any-return]

    # ------------------------------------------------------------ Runnable

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> OutT:
        context = (config or {}).get("configurable", {}).get("judge_context")
        return await self._acall_with_config(
            lambda v: self.ajudge(v, context=context), input, config, run_type="chain", **kwargs
        )

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> OutT:
        return _run_sync(self.ainvoke(input, config, **kwargs))

    # ------------------------------------------------------------ internals

    async def _judge(self, item: InT, backend: Backend) -> OutT:
        raise NotImplementedError

    def _use_structured(self, backend: Backend) -> bool:
        if self.structured is None:
            return backend.capabilities.structured_output
        return self.structured and backend.capabilities.structured_output

    async def _call(self, backend: Backend, fields: dict[str, str | None], scale: tuple[int, int]) -> Outcome:
        structured = self._use_structured(backend)
        messages = self.template.render(fields, scale=scale, structured=structured)
        request = GenerateRequest(
            messages=tuple(messages),
            max_tokens=self.max_tokens,
            json_schema=self.template.json_schema(scale) if structured else None,
            logprobs=backend.capabilities.logprobs and self.top_logprobs > 0,
            top_logprobs=self.top_logprobs if backend.capabilities.logprobs else 0,
        )
        usage, attempts, started = Usage(), 0, time.perf_counter()
        raw: str | None = None
        reason: str | None = None
        model = backend.model
        for round_ in range(2 if self.repair else 1):
            try:
                res: GenerateResult = await backend.generate(request)
            except BackendError as exc:
                return Outcome(
                    Status.ERROR,
                    None,
                    raw,
                    str(exc),
                    usage,
                    attempts + exc.attempts,
                    time.perf_counter() - started,
                    model,
                    None,
                )
            except Exception as exc:  # a backend bug must not kill a batch either
                return Outcome(
                    Status.ERROR,
                    None,
                    raw,
                    f"{type(exc).__name__}: {exc}",
                    usage,
                    attempts + 1,
                    time.perf_counter() - started,
                    model,
                    None,
                )
            usage, attempts, raw, model = usage + res.usage, attempts + res.attempts, res.text, res.model
            try:
                parsed = parse_output(res.text, kind=self.template.parser, scale=scale, structured=structured)
                if structured and _copies_input(res.text, fields):
                    # Free text is safe from this by neutralisation; a JSON
                    # verdict planted in the evaluated content is not.
                    raise ParseError("the output is a copy of text from the evaluated content, not a verdict")
            except ParseError as exc:
                this = exc.reason + (" (output was cut off at max_tokens)" if res.finish_reason == "length" else "")
                reason = this if reason is None else f"{reason}; after a repair request: {this}"
                if round_ == 0 and self.repair:
                    fmt = self.template.json_format if structured else self.template.text_format
                    fix = _REPAIR.format(reason=exc.reason, fmt=fmt.format(lo=scale[0], hi=scale[1]))
                    request = dataclasses.replace(
                        request,
                        messages=(
                            *messages,
                            Message(role="assistant", content=res.text[-2000:] or "(empty)"),
                            Message(role="user", content=fix),
                        ),
                    )
                continue
            dist = value_distribution(
                list(res.tokens) if res.tokens else None,
                res.text,
                parsed.offset,
                kind=self.template.parser,
                scale=scale,
            )
            return Outcome(Status.OK, parsed, raw, None, usage, attempts, time.perf_counter() - started, model, dist)
        return Outcome(Status.UNPARSED, None, raw, reason, usage, attempts, time.perf_counter() - started, model, None)

    def _provenance(
        self, backend: Backend, outcomes: Sequence[Outcome], status: Status, latency_s: float
    ) -> Provenance:
        usage = Usage()
        for o in outcomes:
            usage = usage + o.usage
        return Provenance(
            judge=self.name or type(self).__name__,
            backend=backend.name,
            model=outcomes[0].model if outcomes else backend.model,
            template_id=self.template.id,
            template_version=self.template.version,
            latency_s=latency_s,
            usage=usage,
            cost_usd=backend.pricing.cost(usage) if backend.pricing else None,
            attempts=sum(o.attempts for o in outcomes),
            status=status,
        )


def _copies_input(text: str, fields: Mapping[str, str | None]) -> bool:
    # Compare what the JSON parser reads (a code fence around the verdict is
    # cut off first), not the raw text: a fenced copy is still a copy.
    out = "".join(json_body(text).split())
    return bool(out) and any(v and out in "".join(v.split()) for v in fields.values())


def worst(statuses: Sequence[Status]) -> Status:
    if Status.ERROR in statuses:
        return Status.ERROR
    if Status.UNPARSED in statuses:
        return Status.UNPARSED
    return Status.OK


def _run_sync(coro: Awaitable[T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    # Called from inside a running loop: run on a private loop in a thread.
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()  # type: ignore[arg-type]
