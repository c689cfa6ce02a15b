"""Judges that ask a model: template, backend, one call with repair, provenance."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import os
import threading
import time
import typing
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from pydantic import BaseModel

from judgegraph._parsing import Parsed, ParseError, copies_evaluated, parse_output
from judgegraph._score_distribution import DistributionMethod
from judgegraph._templates import Template, get_template
from judgegraph.backends import Backend, BackendError, GenerateRequest, GenerateResult, resolve_model
from judgegraph.types import JudgeResult, Message, Pricing, Provenance, Status, Usage

from ._base import CONTEXT_BACKEND, FromContext, Judge
from ._contract import Context
from ._distribution import adistributions
from ._tracing import agenerate_traced

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["CallOptions", "ModelJudge", "ModelJudgeOptions", "Outcome", "spell_out_options"]

InT = TypeVar("InT", bound=BaseModel)
OutT = TypeVar("OutT", bound=JudgeResult)
F = TypeVar("F", bound=Callable[..., Any])


class CallOptions(TypedDict, total=False):
    """How a model judge asks its model, declared once for every model judge
    and factory (``**options: Unpack[CallOptions]``); every one is part of the
    verdict identity.

    - ``structured``: ask for a JSON verdict; None (default) when the backend
      can, False never, True when the backend can.
    - ``max_tokens``: the most tokens an answer may use (default 512).
    - ``top_logprobs``: token alternatives read for the score distribution
      when the backend has logprobs (default 10; 0 reads none).
    - ``repair``: ask once more, saying why, when an answer cannot be read (default True).
    """

    structured: bool | None
    max_tokens: int
    top_logprobs: int
    repair: bool


class ModelJudgeOptions(CallOptions, total=False):
    """Every model judge's options: :class:`CallOptions` and

    - ``name``: the judge's name in results (default: its class name).
    - ``template``: a template id or :class:`~judgegraph.judges.Template`
      (default: the judge's own).
    - ``scale``: the score scale (default: the template's).
    """

    name: str | None
    template: str | Template | None
    scale: tuple[int, int] | None


OPTION_DEFAULTS: ModelJudgeOptions = {
    "name": None,
    "template": None,
    "scale": None,
    "structured": None,
    "max_tokens": 512,
    "top_logprobs": 10,
    "repair": True,
}
"""The defaults of :class:`ModelJudgeOptions`, the one place they are given."""


def spell_out_options(options: type[CallOptions]) -> Callable[[F], F]:
    """Give a constructor or factory that takes ``**options: Unpack[options]``
    a signature with each option spelled out as a keyword-only parameter
    with its default, for ``help()``, ``inspect.signature`` and runtime IDEs
    (mypy reads the ``Unpack`` itself)."""
    hints = typing.get_type_hints(options)

    def spell(func: F) -> F:
        sig = inspect.signature(func)
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        named = {p.name for p in params}
        params += [
            inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=OPTION_DEFAULTS.get(k), annotation=hint)
            for k, hint in hints.items()
            if k not in named
        ]
        func.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return func

    return spell


def _resolved(where: str, options: ModelJudgeOptions) -> ModelJudgeOptions:
    """``options`` with the defaults filled in; an unknown option is a TypeError, as for a spelled-out signature."""
    unknown = set(options) - set(OPTION_DEFAULTS)
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    return {**OPTION_DEFAULTS, **options}


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
    # Score B's distribution for a pair of scores; how both were read.
    second_distribution: dict[int | str, float] | None = None
    distribution_method: DistributionMethod | None = None
    # Calls whose backend said what they were billed: that cost, and their
    # tokens (not priced again by the backend's own pricing).
    billed: tuple[float, Usage] = (0.0, Usage())
    # What the verdict lacks and why (a distribution refused), for its provenance.
    notes: tuple[str, ...] = ()


_REPAIR = "Your previous answer could not be read ({reason}). Answer again in the required format. {fmt}"


class ModelJudge(Judge[InT, OutT]):
    """A judge that asks a model: a template, a backend, one call with repair,
    and provenance. Subclasses set ``input_model`` and ``default_template``
    and implement :meth:`_judge` for one validated item and a backend.

    ``backend`` is a Backend, a LangChain chat model (wrapped in a
    :class:`~judgegraph.backends.ChatModelBackend`), a model id
    (``"openai:gpt-4o"``, ``"anthropic:..."``, ``"vllm:MODEL@URL"``, ``"tgi:URL"``;
    see :func:`~judgegraph.backends.resolve_model`), or
    :func:`~judgegraph.from_context` to take it from the run's context at call
    time, so clients live in context, not in state (the default:
    ``from_context("backend")``).
    """

    default_template: str

    @spell_out_options(ModelJudgeOptions)
    def __init__(
        self,
        backend: Backend | BaseChatModel | str | FromContext = CONTEXT_BACKEND,
        **options: Unpack[ModelJudgeOptions],
    ) -> None:
        o = _resolved(type(self).__name__, options)
        template = o["template"]
        self.backend: Backend | FromContext = backend if isinstance(backend, FromContext) else _as_backend(backend)
        self.template = template if isinstance(template, Template) else get_template(template or self.default_template)
        self.name = o["name"] or type(self).__name__
        self.scale = o["scale"] or self.template.default_scale
        self.structured = o["structured"]
        self.max_tokens = o["max_tokens"]
        self.top_logprobs = o["top_logprobs"]
        self.repair = o["repair"]

    # ------------------------------------------------------------ public API

    def resolve_backend(self, backend: Backend | None = None, context: Context = None) -> Backend:
        """The backend for a call: ``backend`` if given, else the judge's own,
        else the one ``context`` holds under its ``from_context`` key."""
        if backend is not None:
            return _as_backend(backend)
        if not isinstance(self.backend, FromContext):
            return self.backend
        found = self.backend.lookup(context)
        if found is None:
            key = self.backend.key
            raise LookupError(f"{self.name}: no backend given and none under {key!r} in the runtime context")
        return _as_backend(found)

    def check_context(self, context: Context) -> None:
        self.resolve_backend(None, context)

    def backend_for(self, context: Context) -> Backend | None:
        return self.resolve_backend(None, context)

    def with_backends(self, wrap: Callable[[Backend], Backend]) -> ModelJudge[InT, OutT]:
        if isinstance(self.backend, FromContext):
            return self
        clone = copy.copy(self)
        clone.backend = wrap(self.backend)
        return clone

    # ------------------------------------------------------------ internals

    def _runner(self, backend: Backend | None, context: Context) -> Callable[[InT], Awaitable[OutT]]:
        # ``backend`` overrides the judge's own for this call; resolved once per batch.
        b = self.resolve_backend(backend, context)
        return lambda item: self._judge(item, b)

    async def _ajudge_item(self, item: InT, context: Context) -> OutT:
        return await self._judge(item, self.resolve_backend(None, context))

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
            template_id=self.template.id,
            template_version=self.template.version,
        )
        usage, attempts, started = Usage(), 0, time.perf_counter()
        billed: tuple[float, Usage] = (0.0, Usage())
        raw: str | None = None
        reason: str | None = None
        model = backend.model
        for round_ in range(2 if self.repair else 1):
            try:
                res: GenerateResult = await agenerate_traced(backend, request)
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
                    billed=billed,
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
                    billed=billed,
                )
            usage, attempts, raw, model = usage + res.usage, attempts + res.attempts, res.text, res.model
            if res.cost_usd is not None:
                billed = (billed[0] + res.cost_usd, billed[1] + res.usage)
            try:
                parsed = parse_output(
                    res.text,
                    kind=self.template.parser,
                    scale=scale,
                    structured=structured,
                    labels=self.template.labels,
                )
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
                        repair=True,
                    )
                continue
            dists = await adistributions(
                backend,
                request,
                res.text,
                res.tokens,
                parsed.offset,
                kind=self.template.parser,
                scale=scale,
                structured=structured,
            )
            return Outcome(
                Status.OK,
                parsed,
                raw,
                None,
                usage,
                attempts,
                time.perf_counter() - started,
                model,
                dists.first,
                dists.second,
                dists.method,
                billed=billed,
                notes=(dists.note,) if dists.note else (),
            )
        return Outcome(
            Status.UNPARSED,
            None,
            raw,
            reason,
            usage,
            attempts,
            time.perf_counter() - started,
            model,
            None,
            billed=billed,
        )

    def _provenance(
        self, backend: Backend, outcomes: Sequence[Outcome], status: Status, latency_s: float
    ) -> Provenance:
        usage, known_cost, known = Usage(), 0.0, Usage()
        for o in outcomes:
            usage, known_cost, known = usage + o.usage, known_cost + o.billed[0], known + o.billed[1]
        cost = price_rest(backend.pricing, usage, known_cost, known)
        return Provenance(
            judge=self.name or type(self).__name__,
            backend=backend.name,
            model=outcomes[0].model if outcomes else backend.model,
            template_id=self.template.id,
            template_version=self.template.version,
            latency_s=latency_s,
            usage=usage,
            cost_usd=cost,
            attempts=sum(o.attempts for o in outcomes),
            status=status,
            notes=tuple(dict.fromkeys(n for o in outcomes for n in o.notes)),
        )


def price_rest(pricing: Pricing | None, usage: Usage, known_cost: float, known: Usage) -> float | None:
    """The cost of ``usage``: ``known_cost`` for the ``known`` part billed
    already, the rest at ``pricing``; None when some of it has no price, or
    when a call outside the billed part reported no usage (its tokens, so its
    price, are unknown)."""
    if usage.unreported > known.unreported:
        return None
    rest = Usage(
        prompt_tokens=usage.prompt_tokens - known.prompt_tokens,
        completion_tokens=usage.completion_tokens - known.completion_tokens,
    )
    if pricing is None:
        return known_cost if known != Usage() and rest == Usage() else None
    rest_cost = pricing.cost(rest)
    return None if rest_cost is None else known_cost + rest_cost


# Model ids a context names are resolved once and reused (a backend holds
# its HTTP client and connection pool); a new backend per call would open
# connections per call until the collector closed them. Keyed by what the
# resolution reads from the environment too, so a changed key or server is
# a new backend. Bounded: a caller naming many models keeps only the last few.
_RESOLVED_MAX = 16
_shared_backends: OrderedDict[tuple[str, str], Backend] = OrderedDict()
_shared_lock = threading.Lock()


def _environment_digest() -> str:
    read = sorted((k, v) for k, v in os.environ.items() if any(w in k.upper() for w in ("KEY", "URL", "BASE")))
    return hashlib.sha256(repr(read).encode()).hexdigest()


def resolve_shared(spec: str) -> Backend:
    """:func:`~judgegraph.backends.resolve_model` for ``spec``, the same
    backend object for as long as it is among the last ``_RESOLVED_MAX``
    ids resolved and the environment it read is unchanged."""
    key = (spec, _environment_digest())
    with _shared_lock:
        found = _shared_backends.pop(key, None)
        if found is not None:
            _shared_backends[key] = found
            return found
    made = resolve_model(spec)  # outside the lock: a LangChain model may take a while to build
    with _shared_lock:
        made = _shared_backends.setdefault(key, made)
        _shared_backends.move_to_end(key)
        while len(_shared_backends) > _RESOLVED_MAX:
            _shared_backends.popitem(last=False)
    return made


def _as_backend(obj: Any) -> Backend:
    """A backend as is; a model id resolved (once, see :func:`resolve_shared`);
    a LangChain chat model wrapped (once per model)."""
    if isinstance(obj, str):
        return resolve_shared(obj)
    if hasattr(obj, "generate") and hasattr(obj, "capabilities"):
        return obj  # type: ignore[no-any-return]
    from judgegraph.backends import as_backend

    return as_backend(obj)


def _copies_input(text: str, fields: Mapping[str, str | None]) -> bool:
    return copies_evaluated(text, fields.values())
