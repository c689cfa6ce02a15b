"""CascadeJudge: real judges on scripted backends, escalating by each policy."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph
from pydantic import TypeAdapter

from judgegraph import (
    BackendError,
    PairwiseJudge,
    PairwiseVerdict,
    PointwiseJudge,
    PointwiseScore,
    ScriptedBackend,
    Status,
    SwapPolicy,
    from_context,
)
from judgegraph.backends import GenerateRequest, GenerateResult
from judgegraph.cascade import (
    Abstain,
    Budget,
    CascadeJudge,
    EscalationPolicy,
    LowConfidence,
    ScoreMargin,
    SwapInconsistency,
    Tier,
    create_cascade_judge,
    decide_tier,
)
from judgegraph.judges import create_batch_judge_node
from judgegraph.types import Pricing, TokenLogprob

FLIP = {"A": "B", "B": "A"}


def pair(i: int) -> dict[str, str]:
    return {
        "instruction": f"Task #{i:02d}: which answer is better?",
        "response_a": f"alpha {i}",
        "response_b": f"beta {i}",
    }


def _which(req: GenerateRequest) -> tuple[int, bool]:
    """(item number, whether the responses are in their original order)."""
    prompt = req.messages[1].content
    m = re.search(r"Task #(\d\d)", prompt)
    assert m is not None
    i = int(m.group(1))
    return i, prompt.index(f"alpha {i}") < prompt.index(f"beta {i}")


def choice_backend(
    winners: Mapping[int, str],
    *,
    biased: set[int] = frozenset(),  # type: ignore[assignment]
    down: set[int] = frozenset(),  # type: ignore[assignment]
    probs: Mapping[int, float] | None = None,
    **kw: Any,
) -> ScriptedBackend:
    """Answers each item's original-order verdict from ``winners`` (mapped for
    the swapped order). ``biased`` items always answer A, so their two orders
    disagree; ``down`` items raise; ``probs`` sets P(answer) via logprobs."""

    def reply(req: GenerateRequest) -> str | GenerateResult | Exception:
        i, original = _which(req)
        if i in down:
            return BackendError(f"endpoint down for item {i}")
        letter = "A" if i in biased else winners[i] if original else FLIP[winners[i]]
        if probs is None:
            return f"Compared them. [RESULT] {letter}"
        p = probs[i]
        other = FLIP[letter]
        alts = ((" " + letter, math.log(p)), (" " + other, math.log(1 - p)))
        tokens = (TokenLogprob("Compared them. [RESULT]", 0.0), TokenLogprob(" " + letter, math.log(p), alts))
        return GenerateResult(text=f"Compared them. [RESULT] {letter}", model="m", tokens=tokens)

    return ScriptedBackend(reply, logprobs=probs is not None, **kw)


def chooser(backend: ScriptedBackend, name: str, *, both: bool = True) -> PairwiseJudge:
    swap = SwapPolicy(mode="both" if both else "single")
    return PairwiseJudge(backend, template="pairwise-choice", swap=swap, name=name)


def items_seen(backend: ScriptedBackend) -> list[int]:
    return sorted({_which(r)[0] for r in backend.calls})


async def test_swap_inconsistent_items_go_up_and_carry_the_stronger_verdict() -> None:
    weak_b = choice_backend(dict.fromkeys(range(6), "A"), biased={1, 4})
    strong_b = choice_backend(dict.fromkeys(range(6), "B"))
    cascade = create_cascade_judge([chooser(weak_b, "weak"), chooser(strong_b, "strong")], escalate=SwapInconsistency())
    out = await cascade.ajudge_many([pair(i) for i in range(6)])
    assert items_seen(strong_b) == [1, 4]  # only the inconsistent items reach the strong judge
    for i, v in enumerate(out):
        assert isinstance(v, PairwiseVerdict) and v.status is Status.OK
        if i in (1, 4):
            assert v.decided_by == "strong" and v.winner == "B"  # the strong judge's verdict, not the weak tie
            assert [t.judge for t in v.tiers] == ["weak", "strong"]
            assert v.tiers[0].verdict == "tie" and not v.tiers[0].decided
            assert v.tiers[0].reason == "the two answer orders disagree"
            assert v.tiers[1].decided and v.tiers[1].reason == "last tier"
        else:
            assert v.decided_by == "weak" and v.winner == "A" and len(v.tiers) == 1
            assert v.tiers[0].reason == "both answer orders agree"


async def test_low_confidence_threshold_on_token_probabilities() -> None:
    probs = {0: 0.95, 1: 0.55, 2: 0.7, 3: 0.69}
    weak_b = choice_backend(dict.fromkeys(probs, "A"), probs=probs)
    strong_b = choice_backend(dict.fromkeys(probs, "B"))
    cascade = CascadeJudge(
        [Tier(chooser(weak_b, "weak", both=False), (LowConfidence(threshold=0.7),)), chooser(strong_b, "strong")]
    )
    out = await cascade.ajudge_many([pair(i) for i in probs])
    assert items_seen(strong_b) == [1, 3]
    assert [v.decided_by for v in out] == ["weak", "strong", "weak", "strong"]
    assert out[1].tiers[0].reason == "confidence 0.55 < 0.7"
    assert out[1].tiers[0].confidence == pytest.approx(0.55)
    assert out[2].tiers[0].reason == "confidence 0.7 >= 0.7"


async def test_missing_confidence_escalates() -> None:
    weak_b = choice_backend({0: "A"})  # no logprobs: single order gives no confidence
    strong_b = choice_backend({0: "B"})
    cascade = create_cascade_judge(
        [chooser(weak_b, "weak", both=False), chooser(strong_b, "strong")], escalate=LowConfidence(threshold=0.5)
    )
    v = await cascade.ajudge(pair(0))
    assert v.decided_by == "strong" and v.tiers[0].reason == "no confidence to compare with 0.5"


def score_reply(dists: Mapping[str, Mapping[int, float]]) -> Callable[[GenerateRequest], GenerateResult]:
    """A pointwise backend: the response text selects a score distribution."""

    def reply(req: GenerateRequest) -> GenerateResult:
        prompt = req.messages[1].content
        key = next(k for k in dists if k in prompt)
        dist = dists[key]
        best = max(dist, key=lambda s: dist[s])
        alts = tuple((" " + str(s), math.log(p)) for s, p in dist.items() if p > 0)
        tokens = (TokenLogprob("Fine. [RESULT]", 0.0), TokenLogprob(" " + str(best), math.log(dist[best]), alts))
        return GenerateResult(text=f"Fine. [RESULT] {best}", model="m", tokens=tokens)

    return reply


async def test_entropy_measure_on_pointwise_scores() -> None:
    dists = {
        "sharp answer": {1: 0.01, 2: 0.01, 3: 0.02, 4: 0.95, 5: 0.01},
        "vague answer": {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.25, 5: 0.15},
    }
    weak = PointwiseJudge(ScriptedBackend(score_reply(dists), logprobs=True), name="weak")
    strong = PointwiseJudge(ScriptedBackend(lambda r: "Careful. [RESULT] 2"), name="strong")
    cascade = create_cascade_judge([weak, strong], escalate=LowConfidence(threshold=0.5, measure="entropy"))
    sharp, vague = await cascade.ajudge_many(
        [{"instruction": "q", "response": "sharp answer"}, {"instruction": "q", "response": "vague answer"}]
    )
    assert isinstance(sharp, PointwiseScore) and sharp.decided_by == "weak" and sharp.score == 4
    assert vague.decided_by == "strong" and vague.score == 2

    def certainty(d: Mapping[int, float]) -> float:
        total = sum(d.values())
        h = -sum(p / total * math.log(p / total) for p in d.values())
        return 1 - h / math.log(len(d))

    expected = certainty(dists["vague answer"])
    assert expected < 0.5 < certainty(dists["sharp answer"])
    assert vague.tiers[0].reason == f"certainty (1 - normalised entropy) {expected:.3g} < 0.5"


async def test_score_margin_on_pairwise_scores() -> None:
    def reply(req: GenerateRequest) -> str:
        i, original = _which(req)
        a, b = {0: (9, 2), 1: (6, 5)}[i]
        return f"Scored. [SCORES] {a} {b}" if original else f"Scored. [SCORES] {b} {a}"

    weak = PairwiseJudge(ScriptedBackend(reply), name="weak")
    strong = chooser(choice_backend({0: "B", 1: "B"}), "strong")
    cascade = create_cascade_judge([weak, strong], escalate=ScoreMargin(min_margin=3))
    wide, narrow = await cascade.ajudge_many([pair(0), pair(1)])
    assert wide.decided_by == "weak" and wide.winner == "A" and wide.tiers[0].reason == "score margin 7 >= 3"
    assert narrow.decided_by == "strong" and narrow.winner == "B" and narrow.tiers[0].reason == "score margin 1 < 3"


async def test_budget_escalates_the_least_confident_share_of_the_batch() -> None:
    probs = {0: 0.9, 1: 0.6, 2: 0.99, 3: 0.7, 4: 0.6, 5: 0.95, 6: 0.8, 7: 0.85, 8: 0.75, 9: 0.97}
    weak_b = choice_backend(dict.fromkeys(probs, "A"), probs=probs)
    strong_b = choice_backend(dict.fromkeys(probs, "B"))
    cascade = create_cascade_judge(
        [chooser(weak_b, "weak", both=False), chooser(strong_b, "strong", both=False)], escalate=Budget(fraction=0.3)
    )
    out = await cascade.ajudge_many([pair(i) for i in probs])
    lowest3 = sorted(probs, key=lambda i: (probs[i], i))[:3]
    assert sorted(lowest3) == [1, 3, 4]
    assert items_seen(strong_b) == [1, 3, 4]
    assert [i for i, v in enumerate(out) if v.decided_by == "strong"] == [1, 3, 4]
    assert out[1].tiers[0].reason == "among the 30% least sure of the batch (rank 1 of 10 by confidence)"
    assert out[6].tiers[0].reason == "outside the 30% least sure of the batch (rank 5 of 10 by confidence)"
    with pytest.raises(ValueError, match="ajudge_many"):
        await cascade.ajudge(pair(0))


async def test_budget_counts_failed_items_first() -> None:
    probs = {i: 0.6 + i / 100 for i in range(10)}
    weak_b = choice_backend(dict.fromkeys(probs, "A"), probs=probs, down={7, 8})
    strong_b = choice_backend(dict.fromkeys(probs, "B"))
    cascade = create_cascade_judge(
        [chooser(weak_b, "weak", both=False), chooser(strong_b, "strong", both=False)], escalate=Budget(fraction=0.3)
    )
    out = await cascade.ajudge_many([pair(i) for i in probs])
    assert items_seen(strong_b) == [0, 7, 8]  # two failures plus the one least confident item
    assert out[7].tiers[0].reason.startswith("failed (error): order A/B: endpoint down for item 7")


@given(
    confs=st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=40),
    failed=st.lists(st.booleans(), min_size=40, max_size=40),
    fraction=st.floats(0, 1),
)
def test_budget_decisions_property(confs: list[float | None], failed: list[bool], fraction: float) -> None:
    answers: list[PairwiseVerdict | str] = [
        "crashed" if bad else PairwiseVerdict(status=Status.OK, winner="A", confidence=c)
        for c, bad in zip(confs, failed, strict=False)
    ]
    decisions = decide_tier(answers, (Budget(fraction=fraction),))
    n_failed = sum(isinstance(a, str) for a in answers)
    escalated = [i for i, (esc, _) in enumerate(decisions) if esc]
    assert len(escalated) == max(n_failed, math.floor(fraction * len(answers) + 1e-9))
    assert all(decisions[i][0] for i, a in enumerate(answers) if isinstance(a, str))

    def key(a: PairwiseVerdict) -> float:
        return -math.inf if a.confidence is None else a.confidence

    up = [key(a) for a, (esc, _) in zip(answers, decisions, strict=True) if esc and not isinstance(a, str)]
    kept = [key(a) for a, (esc, _) in zip(answers, decisions, strict=True) if not esc and not isinstance(a, str)]
    if up and kept:
        assert max(up) <= min(kept)  # nothing kept is less sure than something escalated


async def test_failures_escalate_and_a_failing_last_tier_is_reported() -> None:
    weak_b = choice_backend({0: "A", 1: "A"}, biased={1}, down={0})
    strong_b = choice_backend({0: "B", 1: "B"}, down={0, 1})
    weak, strong = chooser(weak_b, "weak"), chooser(strong_b, "strong")
    out = await create_cascade_judge([weak, strong], escalate=SwapInconsistency()).ajudge_many([pair(0), pair(1)])
    for v in out:
        assert v.status is Status.ERROR and v.winner is None and v.decided_by is None
        assert v.reason is not None and v.reason.startswith("tier 1 (strong) failed: order A/B: endpoint down")
        assert len(v.tiers) == 2 and not any(t.decided for t in v.tiers)
    assert out[0].tiers[0].reason.startswith("failed (error)")

    fallback = create_cascade_judge([weak, strong], escalate=SwapInconsistency(), on_last_failure="fallback")
    first, second = await fallback.ajudge_many([pair(0), pair(1)])
    assert first.status is Status.ERROR  # no tier had a usable verdict
    assert second.status is Status.OK and second.winner == "tie" and second.decided_by == "weak"
    assert second.tiers[0].reason.endswith("used as fallback: the last tier failed")


async def test_cost_and_latency_per_tier() -> None:
    cheap = Pricing(input_per_mtok=1.0, output_per_mtok=1.0)
    dear = Pricing(input_per_mtok=30.0, output_per_mtok=60.0)
    weak_b = choice_backend({0: "A", 1: "A"}, biased={1}, pricing=cheap, latency_s=0.01)
    strong_b = choice_backend({0: "B", 1: "B"}, pricing=dear, latency_s=0.05)
    kept, up = await create_cascade_judge(
        [chooser(weak_b, "weak"), chooser(strong_b, "strong")], escalate=SwapInconsistency()
    ).ajudge_many([pair(0), pair(1)])
    assert kept.provenance is not None and up.provenance is not None
    assert kept.provenance.cost_usd == pytest.approx(kept.tiers[0].cost_usd)
    t0, t1 = up.tiers
    assert t0.cost_usd is not None and t1.cost_usd is not None and t1.cost_usd > t0.cost_usd > 0
    assert up.provenance.cost_usd == pytest.approx(t0.cost_usd + t1.cost_usd)
    assert t0.latency_s >= 0.01 and t1.latency_s >= 0.05  # timing-lint: lower bounds the backends' sleeps set
    assert up.provenance.latency_s == pytest.approx(t0.latency_s + t1.latency_s)  # timing-lint: a sum, not a speed
    assert up.provenance.judge == "cascade" and up.provenance.attempts == 4  # two orders per tier


async def test_three_tiers_and_abstention() -> None:
    probs = {0: 0.95, 1: 0.6, 2: 0.6}
    t0 = chooser(choice_backend(dict.fromkeys(probs, "A"), probs=probs), "small", both=False)
    t1 = chooser(choice_backend(dict.fromkeys(probs, "B"), probs={0: 0.9, 1: 0.9, 2: 0.65}), "medium", both=False)
    t2 = chooser(choice_backend(dict.fromkeys(probs, "A"), probs={0: 0.9, 1: 0.9, 2: 0.7}), "large", both=False)
    gate = (LowConfidence(threshold=0.8),)
    plain = CascadeJudge([Tier(t0, gate), Tier(t1, gate), t2])
    out = await plain.ajudge_many([pair(i) for i in probs])
    assert [v.decided_by for v in out] == ["small", "medium", "large"]
    assert [len(v.tiers) for v in out] == [1, 2, 3]

    strict = CascadeJudge([Tier(t0, gate), Tier(t1, gate), Tier(t2, gate)], abstain=True)
    out = await strict.ajudge_many([pair(i) for i in probs])
    assert out[2].status is Status.ERROR and out[2].winner is None
    assert out[2].reason == "abstained: confidence 0.7 < 0.8"
    assert out[2].tiers[2].status is Status.OK and not out[2].tiers[2].decided


def test_bad_configuration_is_refused() -> None:
    weak = chooser(choice_backend({}), "weak")
    with pytest.raises(ValueError, match="abstain=True"):
        CascadeJudge([weak, Tier(chooser(choice_backend({}), "s"), (SwapInconsistency(),))])
    with pytest.raises(ValueError, match="needs a pairwise judge"):
        Tier(PointwiseJudge(ScriptedBackend([])), (SwapInconsistency(),))
    with pytest.raises(ValueError, match="same input type"):
        CascadeJudge([weak, PointwiseJudge(ScriptedBackend([]))])
    with pytest.raises(TypeError, match="not an escalation policy"):
        Tier(weak, ("swap",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a judge"):
        CascadeJudge([weak, "gpt-4"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        Budget(fraction=1.5)


def test_policies_round_trip_as_json() -> None:
    adapter: TypeAdapter[list[EscalationPolicy]] = TypeAdapter(list[EscalationPolicy])
    policies = [
        LowConfidence(threshold=0.8, measure="entropy"),
        SwapInconsistency(),
        ScoreMargin(min_margin=2),
        Budget(fraction=0.5, rank_by="margin"),
        Abstain(reason="not calibrated"),
    ]
    assert adapter.validate_json(adapter.dump_json(policies)) == policies


class State(TypedDict, total=False):
    items: list[dict[str, str]]
    results: list[Any]


@dataclass
class Ctx:
    weak: Any
    strong: Any


async def test_budget_cascade_as_a_batch_node_and_via_abatch() -> None:
    probs = {i: 0.5 + i / 20 for i in range(4)}
    cascade = create_cascade_judge(
        [
            PairwiseJudge(
                from_context("weak"), template="pairwise-choice", swap=SwapPolicy(mode="single"), name="weak"
            ),
            PairwiseJudge(
                from_context("strong"), template="pairwise-choice", swap=SwapPolicy(mode="single"), name="strong"
            ),
        ],
        escalate=Budget(fraction=0.5),
    )
    ctx = Ctx(
        weak=choice_backend(dict.fromkeys(probs, "A"), probs=probs), strong=choice_backend(dict.fromkeys(probs, "B"))
    )
    g: StateGraph[State, Ctx, State, State] = StateGraph(State, context_schema=Ctx)
    g.add_node("judge", create_batch_judge_node(cascade))
    g.add_edge(START, "judge")
    g.add_edge("judge", END)
    out = await g.compile().ainvoke({"items": [pair(i) for i in probs]}, context=ctx)
    assert [r.winner for r in out["results"]] == ["B", "B", "A", "A"]  # the two least confident went up

    batch = await cascade.abatch([pair(i) for i in probs], config={"configurable": {"judge_context": ctx}})
    assert [r.decided_by for r in batch] == ["strong", "strong", "weak", "weak"]


async def test_a_jury_can_be_a_tier_and_bad_items_stay_in_place() -> None:
    from judgegraph import JudgeInputError
    from judgegraph.judges import EnsembleJudge

    split = EnsembleJudge(
        [
            chooser(choice_backend({0: "A", 1: "A"}), "yes", both=False),
            chooser(choice_backend({0: "A", 1: "B"}), "maybe", both=False),
        ]
    )
    strong_b = choice_backend({0: "B", 1: "B"})
    cascade = CascadeJudge([Tier(split, LowConfidence(threshold=0.75)), chooser(strong_b, "strong")])  # type: ignore[arg-type]
    agreed, bad, disputed = await cascade.ajudge_many([pair(0), {"instruction": "no answers"}, pair(1)])
    assert isinstance(bad, JudgeInputError) and "item 1" in str(bad) and "response_a" in str(bad)
    assert agreed.decided_by == "ensemble" and agreed.winner == "A" and len(agreed.members) == 2
    assert disputed.decided_by == "strong" and disputed.winner == "B"
    assert disputed.tiers[0].verdict == "tie" and disputed.tiers[0].confidence == 0.0
    assert items_seen(strong_b) == [1]
