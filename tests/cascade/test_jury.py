"""Jury tiers: a jury of real judges on scripted backends as a cascade's first
tier, escalating on its agreement; the planner's jury policies and their
out-of-sample choice."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgegraph import (
    BackendError,
    PairwiseInput,
    PairwiseJudge,
    PairwiseVerdict,
    PointwiseJudge,
    ScriptedBackend,
    Status,
)
from judgegraph.backends import GenerateRequest
from judgegraph.cascade import (
    CascadeJudge,
    CascadePlan,
    Label,
    LowConfidence,
    PlannedTier,
    Tier,
    assign_folds,
    create_jury,
    cross_validate_plan,
    decide_tier,
    jury_name,
    plan_cascades,
    simulate_cascade,
)
from judgegraph.judges import EnsembleJudge, ReplayJudge, item_key

PAIR = PairwiseInput(instruction="Name a prime.", response_a="7", response_b="8")
SHOWN_FIRST = re.compile(r"⟦begin response a⟧\n(.*?)\n⟦end response a⟧", re.S)


def prefers(answer: str, *, name: str) -> PairwiseJudge:
    """A judge that always prefers ``answer``, wherever it is shown: consistent
    in both orders (the default swap policy judges A/B and B/A)."""

    def reply(req: GenerateRequest) -> str:
        first = SHOWN_FIRST.search(next(m.content for m in req.messages if m.role == "user"))
        assert first is not None, "the template shows response A in its block"
        return f"Compared. [RESULT] {'A' if first.group(1) == answer else 'B'}"

    return PairwiseJudge(ScriptedBackend(reply, model=name), template="pairwise-choice", name=name)


def down(name: str) -> PairwiseJudge:
    backend = ScriptedBackend(lambda req: BackendError("endpoint down", attempts=1), model=name)
    return PairwiseJudge(backend, template="pairwise-choice", name=name)


def crashes(name: str) -> PairwiseJudge:
    def reply(req: GenerateRequest) -> str:
        raise RuntimeError("the member's client crashed")

    return PairwiseJudge(ScriptedBackend(reply, model=name), template="pairwise-choice", name=name)


class Counted:
    """A strong tier whose calls are counted (it always prefers "7")."""

    def __init__(self) -> None:
        self.calls = 0

        def reply(req: GenerateRequest) -> str:
            self.calls += 1
            first = SHOWN_FIRST.search(next(m.content for m in req.messages if m.role == "user"))
            return f"[RESULT] {'A' if first is not None and first.group(1) == '7' else 'B'}"

        self.judge = PairwiseJudge(ScriptedBackend(reply, model="strong"), template="pairwise-choice", name="strong")


def cascade(members: list[PairwiseJudge], strong: Counted, *, agreement: float = 5 / 6) -> CascadeJudge:
    return CascadeJudge([Tier(create_jury(members), (LowConfidence(threshold=agreement),)), strong.judge])


async def test_a_unanimous_jury_decides_and_the_strong_tier_is_not_called() -> None:
    strong = Counted()
    v = await cascade([prefers("8", name="j1"), prefers("8", name="j2"), prefers("8", name="j3")], strong).ajudge(PAIR)
    assert isinstance(v, PairwiseVerdict) and v.status is Status.OK
    assert v.winner == "B" and v.confidence == pytest.approx(1.0)
    assert strong.calls == 0
    assert [(t.judge, t.decided) for t in v.tiers] == [("jury(j1+j2+j3)", True)]
    assert v.rationale is not None and "6 votes (orders) from 3 members" in v.rationale


async def test_a_split_jury_escalates_and_the_strong_tier_decides() -> None:
    strong = Counted()
    members = [prefers("8", name="j1"), prefers("8", name="j2"), prefers("7", name="j3")]
    v = await cascade(members, strong).ajudge(PAIR)
    assert v.status is Status.OK and v.winner == "A"  # the strong tier's answer, not the jury's majority
    assert strong.calls == 2  # both orders
    jury, top = v.tiers
    assert not jury.decided and jury.verdict == "B" and jury.confidence == pytest.approx(4 / 6)
    assert "confidence 0.667 < 0.833" in jury.reason
    assert top.decided


async def test_a_split_jury_is_kept_when_the_threshold_allows_it() -> None:
    strong = Counted()
    members = [prefers("8", name="j1"), prefers("8", name="j2"), prefers("7", name="j3")]
    v = await cascade(members, strong, agreement=4 / 6).ajudge(PAIR)
    assert v.winner == "B" and strong.calls == 0


@pytest.mark.parametrize("broken", [down, crashes], ids=["backend error", "crash"])
async def test_a_failing_member_degrades_to_escalation_not_to_a_silent_verdict(
    broken: Callable[[str], PairwiseJudge],
) -> None:
    # The two members left agree, but a lost member counts against the jury.
    strong = Counted()
    v = await cascade([prefers("8", name="j1"), prefers("8", name="j2"), broken("j3")], strong).ajudge(PAIR)
    jury = v.tiers[0]
    assert not jury.decided and jury.confidence == pytest.approx(4 / 6)
    assert v.winner == "A" and strong.calls == 2
    # Below quorum (one of three answering) the jury fails outright, and a failed tier escalates.
    strong = Counted()
    v = await cascade([prefers("8", name="j1"), broken("j2"), broken("j3")], strong).ajudge(PAIR)
    jury = v.tiers[0]
    assert jury.status is not Status.OK and not jury.decided and "only 1 of 3 members answered" in jury.reason
    assert v.winner == "A" and strong.calls == 2


async def test_a_jury_with_no_tier_above_fails_rather_than_answer_from_a_rump() -> None:
    lone = CascadeJudge([create_jury([prefers("8", name="j1"), down("j2"), down("j3")])])
    v = await lone.ajudge(PAIR)
    assert v.status is not Status.OK and v.winner is None
    assert "only 1 of 3 members answered (need 2)" in (v.reason or "")


# ------------------------------------------------------------ the agreement rule, as a property

MEMBER = st.one_of(st.none(), st.tuples(st.sampled_from("AB"), st.sampled_from("AB")))
VOTERS = [PairwiseJudge(ScriptedBackend("[RESULT] A", model=f"m{i}"), name=f"m{i}") for i in range(4)]


def recorded(orders: tuple[str, str] | None) -> PairwiseVerdict:
    if orders is None:
        return PairwiseVerdict(status=Status.ERROR, reason="member down")
    first, second = orders
    return PairwiseVerdict(
        status=Status.OK,
        winner=first if first == second else "tie",  # type: ignore[arg-type]
        inconsistent=first != second,
        orders=(PairwiseVerdict(status=Status.OK, winner=first), PairwiseVerdict(status=Status.OK, winner=second)),  # type: ignore[arg-type]
    )


@given(st.lists(MEMBER, min_size=2, max_size=4), st.sampled_from([0.5, 4 / 6, 0.75, 5 / 6, 1.0]))
def test_any_vote_split_below_the_threshold_escalates(members: list[tuple[str, str] | None], threshold: float) -> None:
    jury = create_jury(VOTERS[: len(members)])
    answer = jury.combine([recorded(m) for m in members])
    [(escalated, why)] = decide_tier([answer], (LowConfidence(threshold=threshold),))
    votes = [o for m in members if m is not None for o in m]
    a, b = votes.count("A"), votes.count("B")
    answered = sum(m is not None for m in members)
    backing = max(a, b) / (2 * len(members)) if a != b else 0.0  # a tied split backs nothing
    if answered < len(members) // 2 + 1:
        assert not answer.ok and escalated, why
    else:
        assert answer.confidence == pytest.approx(backing)
        assert escalated == (backing < threshold - 1e-9), why


# ------------------------------------------------------------ the planner

N = 90
ITEMS = [PairwiseInput(instruction=f"q{i}", response_a=f"a{i}", response_b=f"b{i}") for i in range(N)]
KEYS = [item_key(it) for it in ITEMS]


def both(first: str, second: str) -> PairwiseVerdict:
    return recorded((first, second))


def world() -> tuple[dict[str, dict[str, PairwiseVerdict]], dict[str, Label]]:
    """Gold is A. Three cheap judges, each confidently wrong (consistent B) on a
    different third of the items, so any one alone is wrong a third of the time
    and never swap-inconsistent, while a jury disagrees exactly where one errs;
    the strong judge is always right."""
    labels: dict[str, Label] = dict.fromkeys(KEYS, "A")
    cheap = {
        f"c{j}": {k: both("B", "B") if i % 3 == j else both("A", "A") for i, k in enumerate(KEYS)} for j in range(3)
    }
    return {**cheap, "strong": {k: both("A", "A") for k in KEYS}}, labels


COSTS = {"c0": 0.01, "c1": 0.01, "c2": 0.01, "strong": 1.0}
JURIES = [("c0", "c1"), ("c0", "c1", "c2")]


def test_the_planner_weighs_jury_policies_beside_single_judges() -> None:
    results, labels = world()
    plan = plan_cascades(results, labels=labels, costs=COSTS, juries=JURIES, target_agreement=1.0, budgets=())
    names = {c.name for c in plan.candidates}
    assert "c0 -(if swap-inconsistent)-> strong" in names  # single-judge policies are still there
    jury = jury_name(["c0", "c1", "c2"])
    alone = next(c for c in plan.candidates if c.name == jury)
    assert alone.cost_per_item == pytest.approx(0.03) and alone.agreement == pytest.approx(1.0)  # 2 of 3 always right
    # Reaching 100% cheaply: the three-member jury alone (a cascade over it would pay for escalations it never needs).
    assert plan.recommended is not None and plan.recommended.name == jury
    # No chain calls one judge twice (alone and inside a jury).
    for c in plan.candidates:
        called = [m for t in c.tiers for m in t.judges]
        assert len(called) == len(set(called)), c.name
    # A two-member jury disagrees on two thirds of the items: escalating them costs what it says.
    pair = next(c for c in plan.candidates if c.name == f"{jury_name(['c0', 'c1'])} -(if confidence < 1)-> strong")
    assert pair.agreement == pytest.approx(1.0) and pair.reach == pytest.approx((1.0, 2 / 3))
    assert pair.cost_per_item == pytest.approx(0.02 + 2 / 3)


async def test_a_planned_jury_cascade_runs_live_as_simulated() -> None:
    results, labels = world()
    plan = plan_cascades(results, labels=labels, costs=COSTS, juries=JURIES, budgets=())
    policy = next(c for c in plan.candidates if c.name == f"{jury_name(['c0', 'c1'])} -(if confidence < 1)-> strong")
    judges = {j: ReplayJudge(rs, name=j) for j, rs in results.items()}
    live = await policy.to_cascade(judges).ajudge_many(ITEMS)
    assert [len(v.tiers) for v in live] == [2 if i % 3 != 2 else 1 for i in range(N)]
    assert sum(v.winner == "A" for v in live) == N
    # Simulating the tiers from the member recordings alone (no jury table given) agrees.
    again = simulate_cascade(policy.tiers, results, labels, costs=COSTS)
    assert again.model_dump(exclude={"calibration"}) == policy.model_dump(exclude={"calibration"})


def test_calibrated_jury_candidates_carry_their_trust_or_escalate_test() -> None:
    results, labels = world()
    plan = plan_cascades(results, labels=labels, costs=COSTS, juries=JURIES, budgets=(), alpha=0.1, delta=0.1)
    calibrated = [c for c in plan.candidates if c.calibration is not None]
    assert calibrated and all(len(c.tiers) >= 2 for c in calibrated)
    pair = next(c for c in calibrated if c.tiers[0].judge == jury_name(["c0", "c1"]) and c.tiers[1].judge == "strong")
    assert pair.calibration is not None
    [step] = pair.calibration.tiers
    # Only the unanimous third (30 items, all right) passes the binomial test at alpha 0.1.
    assert step.threshold == pytest.approx(1.0) and step.kept == N // 3 and step.errors == 0


def test_the_out_of_sample_jury_choice_is_reproducible_from_a_seed() -> None:
    results, labels = world()

    def plan(train: Mapping[str, Label]) -> CascadePlan:
        return plan_cascades(results, labels=train, costs=COSTS, juries=JURIES, budgets=(), max_cost=0.7)

    runs = [cross_validate_plan(results, labels=labels, plan=plan, folds=4, seed=s) for s in (7, 7, 8)]
    assert runs[0] == runs[1]
    assert [f.keys for f in runs[0].folds] != [f.keys for f in runs[2].folds]
    first = runs[0]
    # Every item is reported once, by a policy chosen without it.
    held = [k for f in first.folds for k in f.keys]
    assert sorted(held) == sorted(KEYS)
    for f in first.folds:
        assert f.chosen.name == jury_name(["c0", "c1", "c2"])  # the cheapest at 100%, fold after fold
        assert f.held_out.agreement == pytest.approx(1.0)
    assert first.agreement == pytest.approx(1.0) and first.cost_per_item == pytest.approx(0.03)


def test_folds_keep_groups_together_and_depend_on_the_seed() -> None:
    keys = [f"k{i}" for i in range(30)]
    groups = {k: f"prompt{i // 3}" for i, k in enumerate(keys)}
    folds = assign_folds(keys, folds=5, seed=1, groups=groups)
    for _, members in itertools.groupby(range(30), key=lambda i: i // 3):
        assert len({folds[i] for i in members}) == 1
    assert folds == assign_folds(keys, folds=5, seed=1, groups=groups)
    assert folds != assign_folds(keys, folds=5, seed=2, groups=groups)
    with pytest.raises(ValueError, match="folds must be between 2 and the number of groups"):
        assign_folds(keys, folds=11, seed=1, groups=groups)


def test_jury_options_are_checked() -> None:
    results, labels = world()
    with pytest.raises(ValueError, match="no recordings"):
        plan_cascades(results, labels=labels, costs=COSTS, juries=[("c0", "nobody")])
    with pytest.raises(ValueError, match="two or more distinct members"):
        plan_cascades(results, labels=labels, costs=COSTS, juries=[("c0", "c0")])
    with pytest.raises(KeyError, match="c1"):
        tiers = (PlannedTier(judge=jury_name(["c0", "c1"]), members=("c0", "c1")), PlannedTier(judge="strong"))
        policy = simulate_cascade(tiers, results, labels, costs=COSTS)
        policy.to_cascade({"c0": ReplayJudge(results["c0"], name="c0"), "strong": ReplayJudge(results["strong"])})


def test_pooled_probabilities_are_the_confidence_where_members_give_them() -> None:
    def sure(p_a: float) -> PairwiseVerdict:
        order = PairwiseVerdict(
            status=Status.OK, winner="A" if p_a > 0.5 else "B", distribution={"A": p_a, "B": 1 - p_a}
        )
        return PairwiseVerdict(status=Status.OK, winner=order.winner, orders=(order, order))

    answers = [sure(0.9), sure(0.6), PairwiseVerdict(status=Status.ERROR, reason="down")]
    pooled = create_jury(VOTERS[:3], votes="probabilities").combine(answers)
    assert isinstance(pooled, PairwiseVerdict) and pooled.winner == "A"
    assert pooled.distribution == pytest.approx({"A": 0.75, "B": 0.25, "tie": 0.0})
    assert pooled.confidence == pytest.approx(0.75 * 2 / 3)  # the lost member counts against
    hard = create_jury(VOTERS[:3]).combine(answers)
    assert hard.confidence == pytest.approx(2 / 3)


def test_order_votes_need_pairwise_members() -> None:
    scorers = [PointwiseJudge(ScriptedBackend("[RESULT] 3"), name=f"s{i}") for i in range(2)]
    with pytest.raises(ValueError, match="needs pairwise members"):
        EnsembleJudge(scorers, votes="orders")
    with pytest.raises(ValueError, match="needs aggregation majority or weighted"):
        EnsembleJudge(VOTERS[:2], votes="orders", aggregation="mean")
