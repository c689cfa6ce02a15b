"""Compiled graphs for ``langgraph dev`` and LangGraph servers (``langgraph.json``).

In-process, the graphs take their judges from the run's context. Over HTTP a
run's context is JSON and cannot carry a judge object, so the graphs served
from here hold their judges, and read from the context only what JSON can
carry (each field below is used; the context schemas advertise no others):

- ``model``: the judge model; default ``JUDGEGRAPH_MODEL``;
- ``base_url``: its OpenAI-compatible endpoint (a vLLM or TGI server's
  ``/v1``); default ``JUDGEGRAPH_BASE_URL`` or ``OPENAI_BASE_URL``. The
  server's ``OPENAI_API_KEY`` goes to that endpoint, so a ``base_url`` from a
  run's context must be the default or listed in
  ``JUDGEGRAPH_ALLOWED_BASE_URLS`` (comma-separated); any other is refused;
- ``threshold`` (guardrail only): the score an answer needs to pass; default 4.

A judge without a model gives verdicts with status ``error`` that say so.
The server keeps one backend (one OpenAI client and its connections) for
each of the ``MAX_SERVED_BACKENDS`` (model, endpoint) pairs used last; one
pushed out is closed as soon as no call is using it, so callers varying the
model cannot grow memory or sockets without bound.
This file is loaded by path, so it imports the package absolutely.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from judgegraph.backends import BackendError, Capabilities, GenerateRequest, GenerateResult
from judgegraph.graphs import (
    create_batch_graph,
    create_guardrail_graph,
    create_multiturn_graph,
    create_pairwise_graph,
    create_pointwise_graph,
    create_rubric_graph,
)
from judgegraph.judges import (
    AsyncJudge,
    Context,
    ajudge_one_order,
    create_multiturn_judge,
    create_pairwise_judge,
    create_pointwise_judge,
    find_in_context,
)
from judgegraph.types import JudgeResult, PairwiseInput, PairwiseVerdict, Pricing, SwapPolicy

if TYPE_CHECKING:
    from judgegraph.backends import OpenAIBackend

__all__ = [
    "MAX_SERVED_BACKENDS",
    "EnvBackend",
    "ServedContext",
    "ServedGuardrailContext",
    "ServedJudge",
    "batch",
    "guardrail",
    "multiturn",
    "pairwise",
    "pointwise",
    "rubric",
]


class ServedContext(TypedDict, total=False):
    """What a run of a served graph may set in its JSON context."""

    model: str
    base_url: str


class ServedGuardrailContext(ServedContext, total=False):
    threshold: float


class EnvBackend:
    """An OpenAIBackend for one model and endpoint, made when first used, so
    importing this module needs neither the openai package nor a key."""

    name = "openai"
    capabilities = Capabilities(structured_output=True, logprobs=True)
    pricing: Pricing | None = None

    def __init__(self, model: str = "", base_url: str | None = None) -> None:
        self.model = model
        self.base_url = base_url
        self._backend: OpenAIBackend | None = None  # made by the first call
        self._busy = 0  # calls in flight
        self.retired = False  # out of the served cache: closed whenever idle

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        if not self.model:
            raise BackendError("no judge model: set JUDGEGRAPH_MODEL on the server, or pass model in the run's context")
        if self._backend is None:
            from judgegraph.backends import OpenAIBackend

            self._backend = OpenAIBackend(self.model, base_url=self.base_url, api_key=os.environ.get("OPENAI_API_KEY"))
        self._busy += 1
        try:
            return await self._backend.generate(request)
        finally:
            self._busy -= 1
            if self.retired and not self._busy:
                # Evicted while this call ran (or called through an old reference): close it now.
                await self.aclose()

    @property
    def busy(self) -> bool:
        return self._busy > 0

    async def aclose(self) -> None:
        """Close the client (and its connections); a later call makes a new one."""
        backend, self._backend = self._backend, None
        if backend is not None:
            await backend.aclose()


MAX_SERVED_BACKENDS = 8
"""How many (model, endpoint) backends a served graph keeps open at most."""


class ServedBackends:
    """The backends served runs asked for, by (model, endpoint), least
    recently used first. Past ``size`` the oldest is retired: closed now if
    idle (see :meth:`aclose_retired`), else when its last call ends."""

    def __init__(self, size: int = MAX_SERVED_BACKENDS) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.size = size
        self._items: OrderedDict[tuple[str, str | None], EnvBackend] = OrderedDict()
        self._retired: list[EnvBackend] = []

    def get(self, model: str, base_url: str | None) -> EnvBackend:
        key = (model, base_url)
        found = self._items.pop(key, None) or EnvBackend(model, base_url)
        self._items[key] = found
        while len(self._items) > self.size:
            _, old = self._items.popitem(last=False)
            old.retired = True
            self._retired.append(old)
        return found

    async def aclose_retired(self) -> None:
        """Close the retired backends no call is using (a busy one closes itself when done)."""
        idle = [b for b in self._retired if not b.busy]
        self._retired = [b for b in self._retired if b.busy]
        for b in idle:
            await b.aclose()

    async def aclose(self) -> None:
        """Close every backend, kept or retired (a server shutting down)."""
        every = [*self._items.values(), *self._retired]
        self._items.clear()
        self._retired.clear()
        for b in every:
            await b.aclose()

    def keys(self) -> list[tuple[str, str | None]]:
        return list(self._items)

    def values(self) -> Iterator[EnvBackend]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)


def _text(context: Context, key: str) -> str | None:
    value = find_in_context(context, key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"context.{key} must be a non-empty string, got {value!r}")
    return value


def backend_for(context: Context) -> EnvBackend:
    """The backend a served run asks for, one per (model, endpoint), reused
    while it is among the ``MAX_SERVED_BACKENDS`` used last."""
    default_url = os.environ.get("JUDGEGRAPH_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    model = _text(context, "model") or os.environ.get("JUDGEGRAPH_MODEL", "")
    base_url = _text(context, "base_url") or default_url
    if base_url != default_url:
        allowed = {u.strip().rstrip("/") for u in os.environ.get("JUDGEGRAPH_ALLOWED_BASE_URLS", "").split(",")}
        if (base_url or "").rstrip("/") not in allowed - {""}:
            raise ValueError(
                f"context.base_url {base_url!r} is not the server's endpoint and not in JUDGEGRAPH_ALLOWED_BASE_URLS"
            )
    return _backends.get(model, base_url)


_backends = ServedBackends()


class ServedJudge:
    """A judge whose backend is chosen per run from the JSON context.

    It satisfies the judge contract itself: it judges a pair as a whole (one
    ``ajudge`` per answer order), and needs nothing in the context up front
    (it builds its backend from the context's model and endpoint)."""

    order_policy: SwapPolicy | None = None

    def __init__(self, judge: AsyncJudge[JudgeResult]) -> None:
        self.judge = judge
        self.name = judge.name
        self.input_model: type[BaseModel] | None = judge.input_model

    @property
    def needs_batch(self) -> bool:
        return self.judge.needs_batch

    async def ajudge(self, value: Any, *, context: Context = None) -> JudgeResult:
        """Judge ``value`` with the backend the context's model and endpoint name.

        Any: the wrapped judge's own input model (or a mapping of its fields),
        as :class:`~judgegraph.judges.AsyncJudge` takes it."""
        backend = backend_for(context)
        await _backends.aclose_retired()  # what this lookup pushed out, if nobody is using it
        return await self.judge.ajudge(value, context={"backend": backend})

    async def ajudge_order(self, item: PairwiseInput, *, swapped: bool, context: Context = None) -> PairwiseVerdict:
        return await ajudge_one_order(self, item, swapped=swapped, context=context)

    def check_context(self, context: Context) -> None:
        """Nothing to check: the backend is made from the context when called."""

    def config_fingerprint(self) -> Mapping[str, object] | None:
        return None


GUARDRAIL_THRESHOLD = 4.0


def threshold_from(context: Context) -> float:
    """The guardrail threshold a served run asks for, else 4."""
    value = find_in_context(context, "threshold")
    if value is None:
        return GUARDRAIL_THRESHOLD
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"context.threshold must be a number, got {value!r}")
    return float(value)


def _served(judge: AsyncJudge[JudgeResult]) -> ServedJudge:
    return ServedJudge(judge)


# The graph runs the two answer orders side by side; each node asks for one order.
pairwise = create_pairwise_graph(
    judge=_served(create_pairwise_judge(swap=SwapPolicy(mode="single"))),
    swap=SwapPolicy(),
    context_schema=ServedContext,
)
pointwise = create_pointwise_graph(judge=_served(create_pointwise_judge()), context_schema=ServedContext)
rubric = create_rubric_graph(judge=_served(create_pointwise_judge()), context_schema=ServedContext)
multiturn = create_multiturn_graph(
    turn_policy="min",
    turn_judge=_served(create_multiturn_judge(mode="turn")),
    conversation_judge=_served(create_multiturn_judge(mode="conversation")),
    context_schema=ServedContext,
)
guardrail = create_guardrail_graph(
    judge=_served(create_pointwise_judge()),
    threshold=GUARDRAIL_THRESHOLD,
    threshold_from=threshold_from,
    fail_policy="closed",
    timeout_s=10.0,
    context_schema=ServedGuardrailContext,
)
batch = create_batch_graph(judge=_served(create_pointwise_judge()), context_schema=ServedContext)
