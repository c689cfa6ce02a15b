"""Sampled judges: k draws of a model judge against a loopback server that
answers by the request's seed; their votes, cost, a reasoning model's sampled
confidence, the cache and the job store keeping k apart, a cascade tier
escalating on low sampled confidence, and properties of the vote confidence."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgegraph import PairwiseInput, PairwiseJudge, PointwiseJudge, ScriptedBackend, Status
from judgegraph.backends import CachedBackend, GenerateRequest, MemoryCache, OpenAIBackend
from judgegraph.cascade import Label, LowConfidence, Tier, create_cascade_judge, plan_cascades
from judgegraph.jobs import RunMismatchError, SourceConfig, arun_job, config_hash, fingerprint_for
from judgegraph.judges import SampledJudge, create_judge, create_sampled_judge, takes_temperature
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply, tokenize
from judgegraph.types import LabelVerdict, PairwiseVerdict, PointwiseScore, Pricing

# Timing-sensitive (draws held until all are in flight): bench/stress_tests.py runs it on a busy core.
pytestmark = pytest.mark.timing

ITEM = {"instruction": "Name a prime.", "response": "7"}
PAIR = PairwiseInput(instruction="Name a prime.", response_a="7", response_b="8")
SCORES = {0: 4, 1: 4, 2: 2, 3: 4, 4: 5}  # the server's answer for each seed
PRICE = Pricing(input_per_mtok=1_000_000, output_per_mtok=1_000_000)  # $1 per token: easy to read


def by_seed(req: LoopbackRequest) -> Reply:
    seed = req.body.get("seed")
    score = SCORES.get(seed, 3) if isinstance(seed, int) else 3
    return Reply(f"Fine. [RESULT] {score}", prompt_tokens=10)


def openai(server: LoopbackServer, model: str = "judge") -> OpenAIBackend:
    return OpenAIBackend(model, base_url=server.url + "/v1", api_key="sk-test", structured_output=False, pricing=PRICE)


async def test_k_draws_give_the_vote_distribution_and_cost_all_draws() -> None:
    seen: list[dict[str, object]] = []

    def responder(req: LoopbackRequest) -> Reply:
        seen.append(req.body)
        return by_seed(req)

    with LoopbackServer(responder) as server:
        judge = create_sampled_judge(PointwiseJudge(openai(server)), k=5, temperature=0.7)
        r = await judge.ajudge(ITEM)
    assert isinstance(r, PointwiseScore) and r.ok
    assert len(seen) == 5
    assert sorted(b["seed"] for b in seen) == [0, 1, 2, 3, 4]  # type: ignore[type-var]
    assert {b["temperature"] for b in seen} == {0.7}
    assert r.distribution == {2: 0.2, 4: 0.6, 5: 0.2}
    assert r.expected_score == pytest.approx(3.8) and r.score == 4
    # 1 - mean |score - 3.8| / 2 on 1-5: |0.2|*3 + 1.8 + 1.2 = 3.6 / 5 = 0.72 -> 0.64
    assert r.confidence == pytest.approx(1 - 0.72 / 2)
    assert [m.verdict for m in r.members] == ["4", "4", "2", "4", "5"]
    assert r.provenance is not None
    completion = len(tokenize("Fine. [RESULT] 4"))
    assert r.provenance.usage.prompt_tokens == 50
    assert r.provenance.usage.completion_tokens == 5 * completion
    assert r.provenance.cost_usd == pytest.approx(50 + 5 * completion)
    assert "mean 3.8" in (r.rationale or "")


async def test_mode_aggregation_takes_the_modal_score_and_its_share() -> None:
    with LoopbackServer(by_seed) as server:
        r = await create_sampled_judge(PointwiseJudge(openai(server)), k=5, aggregation="mode").ajudge(ITEM)
    assert isinstance(r, PointwiseScore)
    assert r.score == 4 and r.confidence == pytest.approx(0.6) and r.expected_score is None


async def test_a_reasoning_model_gets_a_sampled_confidence_without_temperature_or_logprobs() -> None:
    seen: list[dict[str, object]] = []
    winners = {0: "A", 1: "A", 2: "B", 3: "A", 4: "A"}

    def responder(req: LoopbackRequest) -> Reply:
        seen.append(req.body)
        seed = req.body["seed"]
        assert isinstance(seed, int)
        shown_first_is_7 = "⟦begin response a⟧\n7" in req.prompt
        better_shown = winners[seed] if shown_first_is_7 else {"A": "B", "B": "A"}[winners[seed]]
        return Reply(f"Because. [RESULT] {better_shown}")

    with LoopbackServer(responder) as server:
        backend = openai(server, model="o3-mini")  # a reasoning model by its name
        assert backend.capabilities.logprobs is False and not takes_temperature(backend)
        judge = create_sampled_judge(PairwiseJudge(backend, template="pairwise-choice"), k=5)
        r = await judge.ajudge(PAIR)
    assert isinstance(r, PairwiseVerdict) and r.ok
    assert len(seen) == 10  # 5 draws, both answer orders each
    assert all("temperature" not in b and "logprobs" not in b for b in seen)
    assert Counter(b["seed"] for b in seen) == {s: 2 for s in range(5)}
    assert r.winner == "A" and r.confidence == pytest.approx(0.8)
    assert r.distribution == {"A": 0.8, "B": 0.2, "tie": 0.0}
    assert "at temperature" not in (r.rationale or "")


async def test_failed_draws_are_counted_and_too_few_fail_with_the_reason() -> None:
    def some_garbage(req: GenerateRequest) -> str:
        return "no verdict here" if req.seed in (1, 3) else "Fine. [RESULT] 4"

    backend = ScriptedBackend(some_garbage)
    inner = PointwiseJudge(backend, repair=False)
    r = await create_sampled_judge(inner, k=5).ajudge(ITEM)
    assert r.ok and r.score == 4 and r.confidence == 1.0
    assert [m.status for m in r.members].count(Status.UNPARSED) == 2
    assert "3 of 5 draws" in (r.rationale or "") and "2 failed" in (r.rationale or "")
    strict = await create_sampled_judge(inner, k=5, min_ok=4).ajudge(ITEM)
    assert strict.status is Status.UNPARSED and strict.score is None
    assert "only 3 of 5 draws usable (need 4)" in (strict.reason or "")
    assert "draw 1 (seed 1)" in (strict.reason or "")
    assert strict.provenance is not None and strict.provenance.attempts == 5  # the failed draws were paid for too


async def test_the_cache_keeps_each_draw_and_never_collapses_them() -> None:
    with LoopbackServer(by_seed) as server:
        cached = CachedBackend(openai(server), MemoryCache())
        five = create_sampled_judge(PointwiseJudge(cached), k=5)
        first = await five.ajudge(ITEM)
        assert server.calls["/v1/chat/completions"] == 5  # five distinct requests, not one shared
        again = await five.ajudge(ITEM)
        assert server.calls["/v1/chat/completions"] == 5
        assert again.distribution == first.distribution and again.confidence == first.confidence
        assert again.provenance is not None and again.provenance.usage.cache_hits == 5
        one = await create_sampled_judge(PointwiseJudge(cached), k=1).ajudge(ITEM)
        plain = await PointwiseJudge(cached).ajudge(ITEM)
        # A k=1 verdict is its own: one draw (draw 0 is the same request for any k), never k=5's verdict.
        assert len(one.members) == 1 and one.confidence == 1.0 and one.distribution == {4: 1.0}
        assert server.calls["/v1/chat/completions"] == 6  # the plain judge (no seed, temperature 0) is another request
        assert plain.score == 3


async def test_the_job_store_keeps_k1_and_k5_apart(tmp_path: Path) -> None:
    src = tmp_path / "items.jsonl"
    src.write_text("".join(json.dumps({"instruction": f"q{i}", "response": f"a{i}"}) + "\n" for i in range(3)))
    backend = ScriptedBackend(lambda req: f"Fine. [RESULT] {SCORES.get(req.seed or 0, 3)}")
    ctx = {"backend": backend}
    one, five = (create_sampled_judge(PointwiseJudge(), k=k) for k in (1, 5))
    assert config_hash(fingerprint_for(one, ctx)) != config_hash(fingerprint_for(five, ctx))
    store = tmp_path / "s.db"
    cfg = SourceConfig(path=str(src))
    s1 = await arun_job(cfg, judge=one, kind="pointwise", store=store, run_id="r", context=ctx)
    assert s1.judged == 3
    with pytest.raises(RunMismatchError):
        await arun_job(cfg, judge=five, kind="pointwise", store=store, run_id="r", context=ctx)
    calls = len(backend.calls)
    s5 = await arun_job(cfg, judge=five, kind="pointwise", store=store, run_id="r5", context=ctx)
    assert s5.judged == 3 and s5.cached == 0 and len(backend.calls) - calls == 15


async def test_a_cascade_tier_escalates_on_low_sampled_confidence() -> None:
    def cheap(req: GenerateRequest) -> str:
        split = "hard" in req.messages[-1].content
        return f"Ok. [RESULT] {(req.seed or 0) % 2 + 3 if split else 4}"

    cheap_tier = create_sampled_judge(PointwiseJudge(ScriptedBackend(cheap), name="cheap"), k=4, aggregation="mode")
    strong = PointwiseJudge(ScriptedBackend(lambda req: "Sure. [RESULT] 5"), name="strong")
    cascade = create_cascade_judge([Tier(cheap_tier, (LowConfidence(threshold=0.75),)), strong])
    easy, hard = await cascade.ajudge_many(
        [{"instruction": "easy one", "response": "x"}, {"instruction": "hard one", "response": "y"}]
    )
    assert isinstance(easy, PointwiseScore) and isinstance(hard, PointwiseScore)
    assert easy.score == 4 and easy.decided_by == cheap_tier.name
    assert easy.tiers[0].confidence == 1.0
    assert hard.score == 5 and hard.decided_by == "strong"
    assert hard.tiers[0].confidence == pytest.approx(0.5) and "0.5 < 0.75" in hard.tiers[0].reason


def test_sampling_settings_are_validated_and_public() -> None:
    inner = PointwiseJudge(ScriptedBackend(["x"]))
    j = SampledJudge(inner, k=3, temperature=0.5, seed=10)
    assert (j.k, j.temperature, j.seeds, j.min_ok) == (3, 0.5, (10, 11, 12), 2)
    for bad in ({"k": 0}, {"temperature": -1.0}, {"min_ok": 4, "k": 3}, {"aggregation": "median"}):
        with pytest.raises(ValueError):
            SampledJudge(inner, **bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pairwise"):
        SampledJudge(PairwiseJudge(ScriptedBackend(["x"])), aggregation="mean")
    with pytest.raises(TypeError, match="model judge"):
        SampledJudge(j)  # type: ignore[arg-type]


# ------------------------------------------------------------ properties

_SAMPLER = SampledJudge(PointwiseJudge(ScriptedBackend(["x"])), k=7, min_ok=1, aggregation="mode")
_MEAN = SampledJudge(PointwiseJudge(ScriptedBackend(["x"])), k=7, min_ok=1)
_PAIRS = SampledJudge(PairwiseJudge(ScriptedBackend(["x"])), k=7, min_ok=1)


def _score(s: int) -> PointwiseScore:
    return PointwiseScore(status=Status.OK, score=s, scale=(1, 5))


def _fail() -> PointwiseScore:
    return PointwiseScore(status=Status.UNPARSED, scale=(1, 5), reason="no verdict")


votes = st.lists(st.one_of(st.integers(1, 5), st.none()), min_size=7, max_size=7).filter(
    lambda vs: any(v is not None for v in vs)
)


@given(votes)
def test_confidence_is_one_iff_all_usable_votes_agree(vs: list[int | None]) -> None:
    draws = [_score(v) if v is not None else _fail() for v in vs]
    usable = {v for v in vs if v is not None}
    for judge in (_SAMPLER, _MEAN):
        r = judge.combine(draws)
        assert r.ok and r.confidence is not None
        assert (r.confidence == 1.0) == (len(usable) == 1)
        assert 0.0 <= r.confidence <= 1.0


@given(st.integers(4, 7), st.integers(1, 4))
def test_mode_confidence_is_the_modal_share_and_grows_with_it(modal: int, other: int) -> None:
    # ``modal`` of 7 draws vote 5 (a majority), the rest vote ``other``.
    def conf(n: int) -> float:
        r = _SAMPLER.combine([_score(5)] * n + [_score(other)] * (7 - n))
        assert isinstance(r, PointwiseScore) and r.score == 5 and r.confidence is not None
        return r.confidence

    assert conf(modal) == pytest.approx(modal / 7)
    if modal < 7:
        assert conf(modal + 1) > conf(modal)


@given(st.lists(st.sampled_from(["A", "B", "tie"]), min_size=7, max_size=7))
def test_pairwise_winner_is_the_mode_and_confidence_its_share(ws: list[str]) -> None:
    r = _PAIRS.combine([PairwiseVerdict(status=Status.OK, winner=w) for w in ws])  # type: ignore[arg-type]
    assert isinstance(r, PairwiseVerdict) and r.winner is not None
    counts = Counter(ws)
    top = max(counts.values())
    leaders = [w for w, n in counts.items() if n == top]
    assert r.winner == (leaders[0] if len(leaders) == 1 else "tie")
    assert r.confidence == pytest.approx(counts[r.winner] / 7)
    assert (r.confidence == 1.0) == (len(counts) == 1)


async def test_the_planner_prices_a_sampled_tier_and_escalates_on_its_confidence() -> None:
    """Recorded sampled verdicts plan like any judge's: their cost is all k
    draws', and a LowConfidence threshold on the vote share is a candidate."""
    items = [{"instruction": f"{'hard' if i % 4 == 0 else 'easy'} {i}", "response": "x"} for i in range(12)]

    def cheap(req: GenerateRequest) -> str:
        hard = "hard" in req.messages[-1].content
        return f"Ok. [RESULT] {(req.seed or 0) % 2 + 3 if hard else 4}"

    price = Pricing(input_per_mtok=1.0, output_per_mtok=0.0)
    sampled = create_sampled_judge(
        PointwiseJudge(ScriptedBackend(cheap, pricing=price), name="cheap"), k=4, aggregation="mode", name="cheap@4"
    )
    strong = PointwiseJudge(ScriptedBackend(lambda req: "Sure. [RESULT] 4", pricing=price), name="strong")
    got = {
        "cheap@4": dict(zip(map(str, range(12)), await sampled.ajudge_many(items), strict=True)),
        "strong": dict(zip(map(str, range(12)), await strong.ajudge_many(items), strict=True)),
    }
    one_call = got["strong"]["0"].provenance
    assert one_call is not None and one_call.cost_usd is not None
    for r in got["cheap@4"].values():
        assert r.provenance is not None and r.provenance.cost_usd == pytest.approx(4 * one_call.cost_usd, rel=0.2)
    labels: dict[str, Label] = {str(i): 4 for i in range(12)}
    plan = plan_cascades(got, labels=labels, costs={"cheap@4": 1.0, "strong": 10.0}, target_agreement=1.0)
    assert plan.recommended is not None
    tiers = plan.recommended.tiers
    assert [t.judge for t in tiers] == ["cheap@4", "strong"]
    assert any(isinstance(p, LowConfidence) and 0.5 < p.threshold <= 1.0 for p in tiers[0].escalate)
    assert plan.recommended.reach[1] == pytest.approx(3 / 12)  # only the split items go up


async def test_the_k_draws_are_in_flight_together() -> None:
    """The server holds every request until all five draws have arrived: were
    the draws sequential, the first would wait forever (pytest-timeout)."""
    arrived: list[int] = []
    all_in = asyncio.Event()

    async def hold(req: LoopbackRequest) -> Reply:
        arrived.append(int(req.body["seed"]))  # type: ignore[call-overload]
        if len(arrived) == 5:
            all_in.set()
        await all_in.wait()
        return by_seed(req)

    with LoopbackServer(hold) as server:
        r = await create_sampled_judge(PointwiseJudge(openai(server)), k=5).ajudge(ITEM)
    assert r.ok and sorted(arrived) == [0, 1, 2, 3, 4]


async def test_a_label_judge_samples_to_its_modal_label() -> None:
    def answer(req: GenerateRequest) -> str:
        return "Because. [RESULT] " + ("yes" if (req.seed or 0) % 3 else "no")  # seeds 0, 3 say no

    judge = create_sampled_judge(create_judge("Is the answer correct?", ScriptedBackend(answer), choices=["yes", "no"]))
    r = await judge.ajudge(ITEM)
    assert isinstance(r, LabelVerdict) and r.label == "yes" and r.confidence == pytest.approx(0.6)
    assert r.provenance is not None and r.provenance.attempts == 5
    assert "no×2, yes×3" in (r.rationale or "")
