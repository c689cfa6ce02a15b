"""A priced backend whose server reports no token usage: the cost of that call,
and of every verdict, jury, sample or job total built on it, is unknown (None),
never $0.00. A cost is known only when every call behind it reported usage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgegraph import OpenAIBackend, PointwiseJudge
from judgegraph.backends import TGIBackend
from judgegraph.cascade import create_cascade_judge
from judgegraph.jobs import SourceConfig, arun_job
from judgegraph.judges import EnsembleJudge, create_sampled_judge
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply
from judgegraph.types import Pricing

pytestmark = pytest.mark.timing  # starts a loopback server
PRICE = Pricing(input_per_mtok=2.0, output_per_mtok=6.0)
ITEM = {"instruction": "Where is my parcel?", "response": "It left the depot today."}


class _Server(LoopbackServer):
    """The loopback OpenAI server, leaving ``usage`` out of the calls ``plan`` says to
    (in order of arrival; an empty plan reports usage on every call)."""

    def __init__(self) -> None:
        # The model "cheap" never gives a verdict: a cascade escalates past it.
        super().__init__(lambda req: Reply("No idea." if req.body.get("model") == "cheap" else "Fine. [RESULT] 4"))
        self.plan: list[bool] = []
        self.served: list[bool] = []  # whether each call, in order of arrival, reported usage

    def _body(self, req: LoopbackRequest, reply: Reply) -> Any:
        body = super()._body(req, reply)
        reported = self.plan.pop(0) if self.plan else True
        self.served.append(reported)
        if not reported:
            if isinstance(body, dict) and "usage" in body:  # chat completions
                body.pop("usage")
            else:  # TGI generate: no prompt tokens in the details
                for one in body if isinstance(body, list) else [body]:
                    if one.get("details"):
                        one["details"]["prefill"] = []
        return body


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    with _Server() as s:
        yield s


def _backend(server: _Server, kind: str = "openai", model: str = "priced") -> Any:
    if kind == "openai":
        return OpenAIBackend(model, base_url=server.url + "/v1", api_key="x", structured_output=False, pricing=PRICE)
    mode: Any = "chat" if kind == "tgi-chat" else "generate"
    return TGIBackend(server.url, mode=mode, structured_output=False, pricing=PRICE)


async def test_a_call_without_usage_has_an_unknown_cost_not_zero(server: _Server) -> None:
    server.plan = [False]
    v = await PointwiseJudge(_backend(server)).ajudge(ITEM)
    assert v.provenance is not None and v.provenance.cost_usd is None
    assert v.provenance.usage.unreported == 1
    server.plan = [True]
    v = await PointwiseJudge(_backend(server)).ajudge(ITEM)
    assert v.provenance is not None and v.provenance.cost_usd is not None and v.provenance.cost_usd > 0


async def test_a_job_with_one_call_without_usage_has_an_unknown_total(server: _Server, tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_text("".join(json.dumps({**ITEM, "response": f"Reply {i}.", "id": f"i{i}"}) + "\n" for i in range(4)))
    server.plan = [True, True, False, True]
    summary = await arun_job(
        SourceConfig(path=str(src), id="id"),
        judge=PointwiseJudge(_backend(server)),
        kind="pointwise",
        store=tmp_path / "runs.db",
        concurrency=1,
    )
    assert summary.ok == 4 and summary.cost_usd is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.sampled_from(["single", "sampled", "jury", "cascade"]),
    kinds=st.lists(st.sampled_from(["openai", "tgi-chat", "tgi-generate"]), min_size=5, max_size=5),
    reports=st.lists(st.booleans(), min_size=1, max_size=5),
)
def test_cost_is_known_iff_every_call_reported_usage(
    server: _Server, shape: str, kinds: list[str], reports: list[bool]
) -> None:
    if shape == "single":
        reports = reports[:1]
    n = len(reports) if shape == "jury" else 1

    async def judged() -> Any:
        backends = [_backend(server, kinds[i]) for i in range(n)]
        judge: Any = PointwiseJudge(backends[0])
        if shape == "sampled":
            judge = create_sampled_judge(judge, k=len(reports))
        elif shape == "jury":  # of mixed backends
            judge = EnsembleJudge([PointwiseJudge(b, name=f"m{i}") for i, b in enumerate(backends)])
        elif shape == "cascade":  # a tier that fails (with its repair calls), then one that decides
            backends.append(_backend(server, "openai", model="cheap"))
            judge = create_cascade_judge([PointwiseJudge(backends[-1]), judge])
        try:
            return await judge.ajudge(ITEM)
        finally:
            for b in backends:
                if hasattr(b, "aclose"):
                    await b.aclose()

    server.plan, server.served = list(reports), []
    v = asyncio.run(judged())
    served = server.served  # a cascade makes as many calls as it needs: judge by the calls made
    prov = v.provenance
    assert prov is not None and served
    if shape == "cascade":
        assert [t.decided for t in v.tiers] == [False, True]  # both tiers' calls are behind its cost
    if all(served):
        # Priced from the reported tokens; the sum over calls and the price of the summed
        # tokens differ only by float rounding (a few ulps of cents).
        assert prov.cost_usd == pytest.approx(PRICE.cost(prov.usage), rel=1e-9)
        assert prov.usage.unreported == 0
    else:
        assert prov.cost_usd is None
        assert prov.usage.unreported == served.count(False)
    for part in list(getattr(v, "members", ())) + list(getattr(v, "samples", ()) or ()):
        cost = getattr(part, "cost_usd", None)
        assert cost is None or cost > 0  # a member's own cost is never a silent $0.00


@settings(max_examples=60)
@given(
    prompt=st.integers(0, 10**7),
    completion=st.integers(0, 10**7),
    unreported=st.integers(0, 3),
    price_in=st.floats(0, 100),
    price_out=st.floats(0, 100),
)
def test_pricing_tokens_some_call_did_not_report_is_unknown_everywhere(
    prompt: int, completion: int, unreported: int, price_in: float, price_out: float
) -> None:
    """The rule lives in ``Pricing.cost`` itself, so every caller (live calls,
    batch repairs, estimates, quickstart) keeps it: unknown, never a partial sum."""
    from judgegraph.types import Pricing, Usage

    usage = Usage(prompt_tokens=prompt, completion_tokens=completion, unreported=unreported)
    cost = Pricing(input_per_mtok=price_in, output_per_mtok=price_out).cost(usage)
    if unreported:
        assert cost is None
    else:
        # Computed the same way: no tolerance needed beyond float equality.
        assert cost == (prompt * price_in + completion * price_out) / 1e6
