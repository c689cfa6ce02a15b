"""EnsembleJudge: juries of real judges over scripted backends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from _waiting import await_until
from langgraph.graph import END, START, StateGraph

from judgegraph import (
    BackendError,
    JudgeInputError,
    PairwiseJudge,
    PairwiseVerdict,
    PointwiseInput,
    PointwiseJudge,
    PointwiseScore,
    ScriptedBackend,
    Status,
    SwapPolicy,
    create_judge_node,
    from_context,
)
from judgegraph.judges import EnsembleJudge, ModelJudge, create_batch_judge_node, create_ensemble_judge
from judgegraph.types import Pricing

PAIR = {"instruction": "Name a prime.", "response_a": "7", "response_b": "8"}
ITEM = {"instruction": "Explain rain.", "response": "Water falls."}


def voter(letter: str, *, name: str, **backend_kw: Any) -> PairwiseJudge:
    """A single-order pairwise judge whose backend always answers ``letter``."""
    backend = ScriptedBackend(lambda req: f"Looked at both. [RESULT] {letter}", **backend_kw)
    return PairwiseJudge(backend, template="pairwise-choice", swap=SwapPolicy(mode="single"), name=name)


def scorer(score: int, *, name: str, **backend_kw: Any) -> PointwiseJudge:
    return PointwiseJudge(ScriptedBackend(lambda req: f"Fine. [RESULT] {score}", **backend_kw), name=name)


def failing(name: str, kind: str = "pair") -> ModelJudge[Any, Any]:
    backend = ScriptedBackend(lambda req: BackendError("endpoint down", attempts=2))
    if kind == "pair":
        return PairwiseJudge(backend, template="pairwise-choice", swap=SwapPolicy(mode="single"), name=name)
    return PointwiseJudge(backend, name=name)


async def test_majority_vote_and_agreement_as_confidence() -> None:
    jury = EnsembleJudge([voter("A", name="j1"), voter("A", name="j2"), voter("B", name="j3")])
    v = await jury.ajudge(PAIR)
    assert isinstance(v, PairwiseVerdict) and v.status is Status.OK
    assert v.winner == "A"
    assert v.confidence == pytest.approx(2 / 3)
    assert v.distribution == pytest.approx({"A": 2 / 3, "B": 1 / 3, "tie": 0.0})
    assert [(m.judge, m.verdict, m.status) for m in v.members] == [
        ("j1", "A", Status.OK),
        ("j2", "A", Status.OK),
        ("j3", "B", Status.OK),
    ]


async def test_weighted_vote_overrules_head_count() -> None:
    members = [voter("A", name="j1"), voter("A", name="j2"), voter("B", name="j3")]
    v = await create_ensemble_judge(members, weights={"j1": 1, "j2": 1, "j3": 3}).ajudge(PAIR)
    assert v.winner == "B"
    assert v.confidence == pytest.approx(3 / 5)
    assert [m.weight for m in v.members] == [1.0, 1.0, 3.0]


async def test_even_split_is_a_tie_for_votes_and_for_the_mean() -> None:
    members = [voter("A", name="j1"), voter("B", name="j2")]
    assert (await EnsembleJudge(members).ajudge(PAIR)).winner == "tie"
    mean = await EnsembleJudge(members, aggregation="mean").ajudge(PAIR)
    assert mean.winner == "tie" and mean.confidence == 0.0  # nobody voted tie


async def test_pairwise_mean_and_median_of_preferences() -> None:
    members = [voter("A", name="j1"), voter("tie", name="j2"), voter("B", name="j3"), voter("A", name="j4")]
    mean = await EnsembleJudge(members, aggregation="mean").ajudge(PAIR)  # (1 + .5 + 0 + 1) / 4 = .625
    assert mean.winner == "A" and mean.confidence == pytest.approx(0.5)
    median = await EnsembleJudge(members, aggregation="median").ajudge(PAIR)  # median of 0, .5, 1, 1 = .75
    assert median.winner == "A"


async def test_pointwise_mean_median_and_majority() -> None:
    members = [scorer(2, name="a"), scorer(4, name="b"), scorer(5, name="c")]
    mean = await EnsembleJudge(members, aggregation="mean").ajudge(ITEM)
    assert isinstance(mean, PointwiseScore)
    assert mean.expected_score == pytest.approx(11 / 3) and mean.score == 4
    # Distances from 11/3: 5/3, 1/3, 4/3, mean 10/9, over half the 1-5 scale (2).
    assert mean.confidence == pytest.approx(1 - (10 / 9) / 2)
    assert mean.distribution == pytest.approx({2: 1 / 3, 4: 1 / 3, 5: 1 / 3})
    median = await EnsembleJudge(members, aggregation="median").ajudge(ITEM)
    assert median.score == 4 and median.expected_score == 4.0
    majority = await EnsembleJudge(members).ajudge(ITEM)
    assert majority.score == 2  # a three-way split goes to the lowest score
    halves = await EnsembleJudge([scorer(3, name="a"), scorer(4, name="b")], aggregation="mean").ajudge(ITEM)
    assert halves.expected_score == 3.5 and halves.score == 4  # halves round up


@pytest.mark.parametrize("aggregation", ["mean", "median"])
async def test_a_mean_between_the_votes_is_not_zero_confidence(aggregation: Any) -> None:
    # Regression: 4 and 5 aggregate to 4.5 (score 5 for the mean, 4.5 -> 5 for
    # the median of two), and the confidence was the share of members who
    # said exactly that: one or none, so a low-confidence cascade always escalated.
    def jury(*votes: int) -> EnsembleJudge:
        return EnsembleJudge([scorer(v, name=f"j{i}") for i, v in enumerate(votes)], aggregation=aggregation)

    close = await jury(4, 5).ajudge(ITEM)
    assert close.expected_score == 4.5 and close.confidence == pytest.approx(0.75)
    between = await jury(3, 5).ajudge(ITEM)  # 4, which nobody voted
    assert between.score == 4 and between.confidence == pytest.approx(0.5)
    assert (await jury(4, 4, 4).ajudge(ITEM)).confidence == 1.0
    assert (await jury(1, 5).ajudge(ITEM)).confidence == 0.0  # split between the two ends
    # More agreement never lowers it.
    assert (await jury(4, 4, 5).ajudge(ITEM)).confidence > close.confidence > between.confidence


async def test_failing_member_is_left_out_and_reported() -> None:
    jury = EnsembleJudge([voter("B", name="j1"), failing("down"), voter("B", name="j3")])
    v = await jury.ajudge(PAIR)
    assert v.status is Status.OK and v.winner == "B" and v.confidence == 1.0
    down = next(m for m in v.members if m.judge == "down")
    assert down.status is Status.ERROR and down.reason == "order A/B: endpoint down" and down.verdict is None
    assert "2/3 members" in (v.rationale or "")


async def test_quorum_not_met_fails_naming_every_failed_member() -> None:
    jury = EnsembleJudge([voter("A", name="ok"), failing("x"), failing("y")], min_ok=2)
    v = await jury.ajudge(PAIR)
    assert v.status is Status.ERROR and v.winner is None
    assert v.reason is not None
    assert "only 1 of 3 members answered (need 2)" in v.reason
    assert "x: order A/B: endpoint down" in v.reason and "y: order A/B: endpoint down" in v.reason
    assert len(v.members) == 3  # the one good vote is still on record


async def test_all_pointwise_members_failing_gives_a_failed_score() -> None:
    v = await EnsembleJudge([failing("x", "point"), failing("y", "point")]).ajudge(ITEM)
    assert isinstance(v, PointwiseScore)
    assert v.status is Status.ERROR and v.score is None and v.scale == (1, 5)


class _Crashes(ModelJudge[Any, Any]):
    """A user's own judge with a bug in it."""

    input_model = PointwiseInput
    default_template = "pointwise-rubric"

    async def _judge(self, item: Any, backend: Any) -> Any:
        raise RuntimeError("bug in user code")


async def test_a_member_that_crashes_does_not_sink_the_jury() -> None:
    crash = _Crashes(ScriptedBackend([]), name="buggy")
    v = await EnsembleJudge([scorer(4, name="a"), crash]).ajudge(ITEM)
    assert v.status is Status.OK and v.score == 4
    bug = next(m for m in v.members if m.judge == "buggy")
    assert bug.status is Status.ERROR and bug.reason == "RuntimeError: bug in user code"


class _Overlap(ScriptedBackend):
    """Counts how many calls are in flight at once, across its instances, and
    holds each call until ``together`` are in flight (members judged one after
    another would never get there: the test then hangs, and pytest-timeout
    fails it by name)."""

    active = 0
    peak = 0
    together = 3

    async def generate(self, request: Any) -> Any:
        _Overlap.active += 1
        _Overlap.peak = max(_Overlap.peak, _Overlap.active)
        try:
            # The peak, not the count now: it never falls back, so a call that goes on
            # (and ends) first cannot strand the others below the mark.
            await await_until(lambda: _Overlap.peak >= _Overlap.together, "every member's call in flight")
            return await super().generate(request)
        finally:
            _Overlap.active -= 1


@pytest.mark.timing  # counts calls in flight together
async def test_members_run_concurrently() -> None:
    # Measured by overlap, not by wall time: members run one after another
    # would never have two calls in flight, however fast or slow the machine.
    _Overlap.active = _Overlap.peak = 0
    members = [
        PairwiseJudge(
            _Overlap(lambda req: "Both fine. [RESULT] A"),
            template="pairwise-choice",
            swap=SwapPolicy(mode="single"),
            name=f"j{i}",
        )
        for i in range(3)
    ]
    v = await EnsembleJudge(members).ajudge(PAIR)
    assert v.status is Status.OK and v.winner == "A"
    assert _Overlap.peak == 3, f"at most {_Overlap.peak} of 3 members were judging at once"


async def test_cost_is_summed_and_an_unknown_cost_is_not_guessed() -> None:
    price = Pricing(input_per_mtok=1_000_000, output_per_mtok=0)  # $1 per prompt token: easy to read
    priced = [voter("A", name="j1", pricing=price), voter("A", name="j2", pricing=price)]
    v = await EnsembleJudge(priced).ajudge(PAIR)
    member_costs = [m.cost_usd for m in v.members]
    assert all(c is not None and c > 0 for c in member_costs)
    assert v.provenance is not None and v.provenance.cost_usd == pytest.approx(sum(member_costs))  # type: ignore[arg-type]
    mixed = await EnsembleJudge([*priced, voter("A", name="free")]).ajudge(PAIR)
    assert mixed.provenance is not None and mixed.provenance.cost_usd is None


async def test_batch_keeps_order_and_isolates_bad_items() -> None:
    jury = EnsembleJudge([scorer(3, name="a"), scorer(5, name="b")], aggregation="mean")
    out = await jury.ajudge_many([ITEM, {"instruction": "q"}, ITEM])
    assert [type(o).__name__ for o in out] == ["PointwiseScore", "JudgeInputError", "PointwiseScore"]
    assert "item 1" in str(out[1]) and "response" in str(out[1])
    with pytest.raises(JudgeInputError, match="response"):
        await jury.ajudge({"instruction": "q"})


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="same input type"):
        EnsembleJudge([voter("A", name="p"), scorer(3, name="s")])
    with pytest.raises(ValueError, match="distinct names"):
        EnsembleJudge([voter("A", name="same"), voter("B", name="same")])
    with pytest.raises(ValueError, match="only apply to aggregation='weighted'"):
        EnsembleJudge([voter("A", name="a")], weights=[1.0])
    with pytest.raises(ValueError, match="weights has no entry"):
        create_ensemble_judge([voter("A", name="a"), voter("B", name="b")], weights={"a": 1})
    with pytest.raises(ValueError, match="min_ok"):
        EnsembleJudge([voter("A", name="a")], min_ok=2)
    with pytest.raises(ValueError, match="must not be empty"):
        EnsembleJudge([])


async def test_a_backend_argument_is_refused() -> None:
    with pytest.raises(TypeError, match="takes no backend"):
        await EnsembleJudge([voter("A", name="a")]).ajudge(PAIR, backend=ScriptedBackend([]))


class State(TypedDict, total=False):
    instruction: str
    response: str
    verdict: PointwiseScore
    items: list[dict[str, str]]
    results: list[Any]


@dataclass
class Ctx:
    local: Any
    remote: Any


async def test_jury_as_a_langgraph_node_with_backends_from_context() -> None:
    jury = EnsembleJudge(
        [PointwiseJudge(from_context("local"), name="local"), PointwiseJudge(from_context("remote"), name="remote")],
        aggregation="mean",
    )
    g: StateGraph[State, Ctx, State, State] = StateGraph(State, context_schema=Ctx)
    g.add_node("judge", create_judge_node(jury))
    g.add_edge(START, "judge")
    g.add_edge("judge", END)
    ctx = Ctx(local=ScriptedBackend(lambda r: "[RESULT] 2"), remote=ScriptedBackend(lambda r: "[RESULT] 4"))
    out = await g.compile().ainvoke({"instruction": "q", "response": "r"}, context=ctx)
    assert out["verdict"].score == 3 and [m.verdict for m in out["verdict"].members] == ["2", "4"]
    with pytest.raises(LookupError, match="'remote'"):
        await g.compile().ainvoke({"instruction": "q", "response": "r"}, context=Ctx(local=ctx.local, remote=None))

    b: StateGraph[State, Ctx, State, State] = StateGraph(State, context_schema=Ctx)
    b.add_node("judge", create_batch_judge_node(jury))
    b.add_edge(START, "judge")
    b.add_edge("judge", END)
    out = await b.compile().ainvoke({"items": [ITEM, ITEM]}, context=ctx)
    assert [r.score for r in out["results"]] == [3, 3]


async def test_runnable_ainvoke_reads_context_from_config() -> None:
    jury = EnsembleJudge([PointwiseJudge(from_context("local"), name="local")])
    ctx = {"local": ScriptedBackend(lambda r: "[RESULT] 5")}
    v = await jury.ainvoke(ITEM, config={"configurable": {"judge_context": ctx}})
    assert v.score == 5
