"""Compiled graphs for ``langgraph dev`` and LangGraph servers (``langgraph.json``).

In-process, the graphs take their judges from the run's context. Over HTTP a
run's context is JSON and cannot carry a judge object, so the graphs served
from here are bound to judges whose backend is an OpenAI-compatible endpoint
named by the environment, read on first use:

- ``JUDGEGRAPH_MODEL`` (required): the judge model name;
- ``JUDGEGRAPH_BASE_URL`` or ``OPENAI_BASE_URL``: e.g. a vLLM or TGI server's ``/v1``;
- ``OPENAI_API_KEY``.

This file is loaded by path, so it imports the package absolutely.
"""

from __future__ import annotations

import os

from judgegraph import create_multiturn_judge, create_pairwise_judge, create_pointwise_judge
from judgegraph.backends import Backend, BackendError, Capabilities, GenerateRequest, GenerateResult
from judgegraph.graphs import (
    create_batch_graph,
    create_guardrail_graph,
    create_multiturn_graph,
    create_pairwise_graph,
    create_pointwise_graph,
    create_rubric_graph,
)
from judgegraph.types import Pricing

__all__ = ["EnvBackend", "batch", "guardrail", "multiturn", "pairwise", "pointwise", "rubric"]


class EnvBackend:
    """An OpenAIBackend configured from the environment when first used, so
    importing this module needs neither the openai package nor a key."""

    name = "openai"
    capabilities = Capabilities(structured_output=True, logprobs=True)
    pricing: Pricing | None = None

    def __init__(self) -> None:
        self.model = os.environ.get("JUDGEGRAPH_MODEL", "")
        self._backend: Backend | None = None

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        if self._backend is None:
            model = os.environ.get("JUDGEGRAPH_MODEL") or self.model
            if not model:
                raise BackendError("set JUDGEGRAPH_MODEL to the judge model the served graphs should call")
            from judgegraph.backends import OpenAIBackend

            base_url = os.environ.get("JUDGEGRAPH_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
            self.model = model
            self._backend = OpenAIBackend(model, base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY"))
        return await self._backend.generate(request)


_backend = EnvBackend()

pairwise = create_pairwise_graph(judge=create_pairwise_judge(_backend))
pointwise = create_pointwise_graph(judge=create_pointwise_judge(_backend))
rubric = create_rubric_graph(judge=create_pointwise_judge(_backend))
multiturn = create_multiturn_graph(
    turn_policy="min",
    turn_judge=create_multiturn_judge(_backend, mode="turn"),
    conversation_judge=create_multiturn_judge(_backend, mode="conversation"),
)
guardrail = create_guardrail_graph(
    judge=create_pointwise_judge(_backend), threshold=4, fail_policy="closed", timeout_s=10.0
)
batch = create_batch_graph(judge=create_pointwise_judge(_backend))
