"""The quickstart's judges: the local classifier judge (with an embedding
cache), the recorded teacher, live endpoints, and the pairwise graph as a
judge the jobs runner can drive."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from judgegraph.backends import Backend, Endpoint
from judgegraph.datasets import PandaLMItem
from judgegraph.judges import AsyncJudge, Judge, PairwiseJudge, ReplayJudge, from_context, item_key

if TYPE_CHECKING:
    from judgegraph.graphs.pairwise import PairwiseGraphInput

from judgegraph.types import PairwiseInput, PairwiseVerdict, Pricing, Provenance, SwapPolicy, Usage

__all__ = [
    "GPT35_PRICING",
    "GraphJudge",
    "build_endpoint_judge",
    "estimate_teacher_usage",
    "recorded_teacher",
]

#: gpt-3.5-turbo-0125 list price (USD per million tokens), used to put an
#: estimated price on the recorded verdicts, which carry no token counts.
GPT35_PRICING = Pricing(input_per_mtok=0.50, output_per_mtok=1.50)

#: Tokens of instructions around the task in a judge prompt (an estimate).
_PROMPT_OVERHEAD_TOKENS = 120


def _tokens(text: str | None) -> int:
    # About four characters per token for English text.
    return max(1, round(len(text or "") / 4))


def estimate_teacher_usage(item: PandaLMItem) -> Usage:
    """Estimated tokens of the recorded teacher call for one item: the prompt
    (instruction, input, both responses and an instruction overhead) and the
    recorded answer (verdict and reason), at four characters per token."""
    prompt = _tokens(item.prompt) + _tokens(item.response1) + _tokens(item.response2) + _PROMPT_OVERHEAD_TOKENS
    completion = _tokens(item.gpt35_result) + _tokens(item.gpt35_reason)
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def recorded_teacher(items: Sequence[PandaLMItem], *, name: str = "teacher") -> ReplayJudge:
    """gpt-3.5-turbo's recorded PandaLM verdicts as a replay judge.

    Unparseable recorded outputs ("garbage") come back as unparsed verdicts.
    Each verdict is priced at :data:`GPT35_PRICING` on the estimated usage
    (:func:`estimate_teacher_usage`): the files record no token counts.
    """
    table: dict[str, PairwiseVerdict] = {}
    for it in items:
        verdict = it.recorded_verdict("gpt-3.5-turbo")
        usage = estimate_teacher_usage(it)
        prov = Provenance(
            judge=name,
            backend="replay",
            model="gpt-3.5-turbo (recorded by PandaLM)",
            template_id="pandalm-gpt-3.5-turbo",
            template_version=1,
            latency_s=0.0,
            usage=usage,
            cost_usd=GPT35_PRICING.cost(usage),
            status=verdict.status,
        )
        table[item_key(it.to_pairwise_input())] = verdict.model_copy(update={"provenance": prov})
    return ReplayJudge(table, name=name, input_model=PairwiseInput)


# ---------------------------------------------------------------- endpoints


def build_endpoint_judge(endpoint: Endpoint, *, name: str, concurrency: int = 16) -> PairwiseJudge:
    """A pairwise judge (both answer orders) on the endpoint, built with the jobs module's backend config."""
    from judgegraph.config import BackendConfig, build_backend

    backend: Backend = build_backend(
        BackendConfig(kind=endpoint.kind, model=endpoint.model, base_url=endpoint.base_url),
        max_connections=2 * concurrency,
    )
    return PairwiseJudge(backend, name=name)


# ---------------------------------------------------------------- the graph as a judge


class GraphJudge(Judge[PairwiseInput, PairwiseVerdict]):
    """The pairwise graph, driven one item at a time like a judge.

    ``judgegraph.jobs.arun_job`` calls ``ajudge(item, context=...)``; this runs
    the compiled pairwise graph on the item with that context (which holds
    the judge under ``"judge"``) and returns the graph's verdict. A
    :class:`PairwiseJudge` keeps its own swap policy (the graph fans out both
    orders); any other judge (the classifier, which scores both orders itself;
    a replay of one recorded order; a cascade) is called once per item.
    """

    input_model = PairwiseInput

    def __init__(self, judge: AsyncJudge[Any], *, name: str, fingerprint: Mapping[str, Any]) -> None:
        from judgegraph.graphs import create_pairwise_graph

        swap = None if judge.order_policy is not None else SwapPolicy(mode="single")
        self.name = name
        self.inner = judge  # not ``judge``: that name is Judge's sync method
        self.graph = create_pairwise_graph(judge=from_context("judge"), swap=swap, name=name)
        self._fingerprint = {"graph": "pairwise", "swap": None if swap is None else swap.mode, **fingerprint}

    def context(self) -> dict[str, Any]:
        return {"judge": self.inner}

    def config_fingerprint(self) -> dict[str, Any]:
        return dict(self._fingerprint)

    async def _ajudge_item(self, item: PairwiseInput, context: Any) -> PairwiseVerdict:
        ctx = context if context is not None else self.context()
        state = cast("PairwiseGraphInput", item.model_dump(exclude_none=True))
        out = await self.graph.ainvoke(state, context=ctx)
        verdict = out["verdict"]
        if not isinstance(verdict, PairwiseVerdict):
            raise TypeError(f"{self.name}: the graph returned a {type(verdict).__name__}, not a PairwiseVerdict")
        return verdict


def file_digest(paths: Sequence[Path]) -> str:
    """A short content hash of files (model weights, data), for fingerprints."""
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]
