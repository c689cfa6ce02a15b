"""Cascade planner: frontier, recommendation, agreement with live replayed cascades, CLI."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from judgegraph import PairwiseInput, PairwiseVerdict, Provenance, Status
from judgegraph.cascade import (
    Budget,
    CascadeJudge,
    LowConfidence,
    PlannedPolicy,
    PlannedTier,
    SwapInconsistency,
    Tier,
    plan_cascades,
    simulate_cascade,
)
from judgegraph.cascade.cli import cascade_app
from judgegraph.judges import ReplayJudge, VerdictRecord, item_key, write_verdicts

N = 40
ITEMS = [PairwiseInput(instruction=f"q{i}", response_a=f"a{i}", response_b=f"b{i}") for i in range(N)]
KEYS = [item_key(it) for it in ITEMS]


def verdict(winner: str | None, confidence: float | None = None, *, inconsistent: bool = False) -> PairwiseVerdict:
    if winner is None:
        return PairwiseVerdict(status=Status.UNPARSED, reason="no answer")
    return PairwiseVerdict(status=Status.OK, winner=winner, confidence=confidence, inconsistent=inconsistent)  # type: ignore[arg-type]


def world() -> tuple[dict[str, dict[str, PairwiseVerdict]], dict[str, str]]:
    """Gold is A everywhere. 'small' is right on even items only (and unsure on odd ones),
    'mid' is right except every 5th item, 'big' is right except item 0."""
    labels = dict.fromkeys(KEYS, "A")
    small = {k: verdict("A", 0.9) if i % 2 == 0 else verdict("B", 0.6) for i, k in enumerate(KEYS)}
    mid = {k: verdict("B" if i % 5 == 0 else "A", 0.8) for i, k in enumerate(KEYS)}
    big = {k: verdict("B" if i == 0 else "A", 1.0) for i, k in enumerate(KEYS)}
    return {"small": small, "mid": mid, "big": big}, labels


COSTS = {"small": 0.01, "mid": 0.1, "big": 1.0}


def dominated_by_frontier(c: PlannedPolicy, frontier: tuple[PlannedPolicy, ...]) -> bool:
    return any(f.cost_per_item <= c.cost_per_item + 1e-12 and f.agreement >= c.agreement - 1e-12 for f in frontier)


def test_single_judges_frontier_and_recommendations() -> None:
    results, labels = world()
    plan = plan_cascades(results, labels=labels, costs=COSTS, target_agreement=0.97)
    alone = {c.name: c for c in plan.candidates if len(c.tiers) == 1}
    assert alone["small"].agreement == pytest.approx(0.5) and alone["small"].cost_per_item == 0.01
    assert alone["mid"].agreement == pytest.approx(32 / 40)
    assert alone["big"].agreement == pytest.approx(39 / 40)
    # small -> big on low confidence: odd items (confidence 0.6) go up; big is right on all of them.
    cascade = next(c for c in plan.candidates if c.name == "small -(if confidence < 0.9)-> big")
    assert cascade.agreement == pytest.approx(1.0) and cascade.reach == (1.0, 0.5)
    assert cascade.cost_per_item == pytest.approx(0.01 + 0.5 * 1.0)
    # The frontier is Pareto-optimal and covers every candidate.
    costs = [f.cost_per_item for f in plan.frontier]
    accs = [f.agreement for f in plan.frontier]
    assert costs == sorted(costs) and all(b > a for a, b in itertools.pairwise(accs))
    assert all(dominated_by_frontier(c, plan.frontier) for c in plan.candidates)
    # Recommendation: the cheapest candidate reaching the target, found by brute force.
    hits = [c for c in plan.candidates if c.agreement >= 0.97]
    assert plan.recommended is not None
    assert plan.recommended.cost_per_item == min(c.cost_per_item for c in hits)
    budget = plan_cascades(results, labels=labels, costs=COSTS, max_cost=0.3)
    within = [c for c in budget.candidates if c.cost_per_item <= 0.3]
    assert budget.recommended is not None
    assert budget.recommended.agreement == max(c.agreement for c in within)
    assert budget.recommended.cost_per_item <= 0.3


def test_unreachable_target_and_no_target() -> None:
    results, labels = world()
    plan = plan_cascades(results, labels=labels, costs=COSTS, target_agreement=1.0, max_cost=0.05)
    assert plan.recommended is None and plan.recommendation.startswith("no policy reaches agreement 1 within cost 0.05")
    assert plan_cascades(results, labels=labels, costs=COSTS).recommended is None


def test_costs_default_to_recorded_cost_and_are_checked() -> None:
    prov = Provenance(judge="j", backend="b", model="m", template_id="t", template_version=1, latency_s=0.0)
    recs = [
        VerdictRecord(
            key=k,
            judge="priced",
            result=verdict("A", 1.0).model_copy(
                update={"provenance": prov.model_copy(update={"cost_usd": 0.002 * (i % 2 + 1)})}
            ),
            label="A",
        )
        for i, k in enumerate(KEYS)
    ]
    plan = plan_cascades(recs)
    assert plan.costs == {"priced": pytest.approx(0.003)}
    unpriced = [*recs, *(VerdictRecord(key=k, judge="free", result=verdict("A", 1.0)) for k in KEYS)]
    with pytest.raises(ValueError, match=r"no cost for judges \['free'\]"):
        plan_cascades(unpriced)
    with pytest.raises(ValueError, match="no recordings"):
        plan_cascades(recs, costs={"priced": 1, "ghost": 2})
    with pytest.raises(ValueError, match="conflicting labels"):
        plan_cascades([*recs, VerdictRecord(key=KEYS[0], judge="x", result=verdict("A"), label="B")])


def test_missing_recording_counts_as_a_failure() -> None:
    results, labels = world()
    del results["small"][KEYS[2]]
    one = simulate_cascade([PlannedTier(judge="small")], results, labels, costs=COSTS)
    assert one.failed == pytest.approx(1 / N) and one.agreement == pytest.approx(19 / 40)
    gate = (LowConfidence(threshold=0.5),)
    two = simulate_cascade(
        [PlannedTier(judge="small", escalate=gate), PlannedTier(judge="big")], results, labels, costs=COSTS
    )
    assert two.reach == (1.0, pytest.approx(1 / N))  # only the missing item goes up: every confidence is >= 0.6
    # Verdicts judged in one order say nothing about swap consistency, so that policy sends them all up.
    swap = simulate_cascade(
        [PlannedTier(judge="small", escalate=(SwapInconsistency(),)), PlannedTier(judge="big")],
        results,
        labels,
        costs=COSTS,
    )
    assert swap.reach == (1.0, 1.0)


async def replayed(
    tiers: tuple[PlannedTier, ...], results: dict[str, dict[str, PairwiseVerdict]]
) -> list[PairwiseVerdict]:

    judges = {name: ReplayJudge(table, name=name) for name, table in results.items()}
    cascade = CascadeJudge([Tier(judges[t.judge], t.escalate) for t in tiers])
    return await cascade.ajudge_many(ITEMS)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.lists(
        st.tuples(
            st.sampled_from(["A", "B", "tie", None]),
            st.sampled_from([0.5, 0.7, 0.9, 1.0]),
            st.sampled_from(["A", "B", None]),
            st.sampled_from([0.6, 1.0]),
            st.sampled_from(["A", "B"]),
        ),
        min_size=N,
        max_size=N,
    )
)
def test_planner_numbers_equal_live_replayed_cascades(
    data: list[tuple[str | None, float, str | None, float, str]],
) -> None:
    results = {
        "cheap": {k: verdict(w, c) for k, (w, c, _, _, _) in zip(KEYS, data, strict=True)},
        "dear": {k: verdict(w, c) for k, (_, _, w, c, _) in zip(KEYS, data, strict=True)},
    }
    labels = {k: y for k, (*_, y) in zip(KEYS, data, strict=True)}
    plan = plan_cascades(results, labels=labels, costs={"cheap": 0.1, "dear": 1.0}, budgets=(0.25, 0.5))
    assert all(dominated_by_frontier(c, plan.frontier) for c in plan.candidates)
    for cand in plan.candidates:
        out = asyncio.run(replayed(cand.tiers, results))
        credit = 0.0
        for v, k in zip(out, KEYS, strict=True):  # agreement written out: 1 exact, 0.5 tie vs preference
            if v.ok:
                credit += 1.0 if v.winner == labels[k] else 0.5 if v.winner == "tie" else 0.0
        assert cand.agreement == pytest.approx(credit / N), cand.name
        reached_second = sum(len(v.tiers) > 1 for v in out) / N
        assert cand.reach[-1] == pytest.approx(reached_second if len(cand.tiers) > 1 else 1.0), cand.name
        assert cand.failed == pytest.approx(sum(not v.ok for v in out) / N), cand.name


async def test_to_cascade_builds_the_recommended_policy() -> None:
    results, labels = world()
    plan = plan_cascades(results, labels=labels, costs=COSTS, target_agreement=1.0)
    assert plan.recommended is not None
    judges = {name: ReplayJudge(table, name=name) for name, table in results.items()}
    cascade = plan.to_cascade(judges)
    out = await cascade.ajudge_many(ITEMS)
    assert sum(v.winner == "A" for v in out) / N == pytest.approx(plan.recommended.agreement)
    with pytest.raises(KeyError, match="no judge given"):
        plan.to_cascade({})


def test_llmbar_swap_policy_matches_the_raw_files(shared_data: Path) -> None:
    from judgegraph.datasets import load_llmbar_run
    from judgegraph.judges import llmbar_replay

    root = shared_data / "llmbar"
    if not (root / "LLMBar/Natural/dataset.json").is_file():
        pytest.skip("LLMBar Natural is not in ../shared/data/llmbar")
    recs = []
    for ev in ("GPT-4", "ChatGPT"):
        recs += llmbar_replay(load_llmbar_run(root, subset="Natural", evaluator=ev, strategy="Vanilla")).records
    plan = plan_cascades(recs, costs={"GPT-4": 1.0, "ChatGPT": 0.05}, budgets=(0.5,))
    swap = next(c for c in plan.candidates if c.name == "ChatGPT -(if swap-inconsistent)-> GPT-4")

    def raw(ev: str) -> list[tuple[str, str, int]]:
        rows = json.loads((root / "LLMBar/Natural/evaluators" / ev / "Vanilla/result.json").read_text())
        return [
            (r["results"][-1]["swap = False"]["winner"], r["results"][-1]["swap = True"]["winner"], r["label"])
            for r in rows
        ]

    weak, strong = raw("ChatGPT"), raw("GPT-4")
    up = [w1 != w2 or w1 is None for w1, w2, _ in weak]

    def credit(w1: str, w2: str, gold: int) -> float:
        return 0.5 if w1 != w2 else float(w1 == str(gold))

    expected = sum(credit(*(s if u else w)) for u, w, s in zip(up, weak, strong, strict=True)) / len(up)
    assert swap.agreement == pytest.approx(expected, abs=1e-12)
    assert swap.reach[1] == pytest.approx(sum(up) / len(up), abs=1e-12)
    assert swap.cost_per_item == pytest.approx(0.05 + sum(up) / len(up))
    budget = next(c for c in plan.candidates if c.name == "ChatGPT -(least sure 50%)-> GPT-4")
    assert budget.reach[1] == 0.5


# ---------------------------------------------------------------- CLI


def write_world(tmp_path: Path) -> list[str]:
    results, labels = world()
    paths = []
    for name, table in results.items():
        p = tmp_path / f"{name}.jsonl"
        write_verdicts(p, [VerdictRecord(key=k, judge=name, result=v, label=labels[k]) for k, v in table.items()])
        paths.append(str(p))
    return paths


def test_cli_plan_prints_frontier_and_recommendation(tmp_path: Path) -> None:
    paths = write_world(tmp_path)
    costs = ["--cost", "small=0.01", "--cost", "mid=0.1", "--cost", "big=1"]
    res = CliRunner().invoke(cascade_app, ["plan", *paths, *costs, "--target", "0.97"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    api = plan_cascades(world()[0], labels=world()[1], costs=COSTS, target_agreement=0.97)
    assert api.recommended is not None
    assert f"Recommended (cheapest policy with agreement >= 0.97): {api.recommended.name}" in res.output
    for f in api.frontier:
        assert f.name in res.output

    as_json = CliRunner().invoke(cascade_app, ["plan", *paths, *costs, "--budget", "0.3", "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    direct = plan_cascades(world()[0], labels=world()[1], costs=COSTS, max_cost=0.3)
    assert data["recommended"]["name"] == direct.recommended.name  # type: ignore[union-attr]
    assert len(data["candidates"]) == len(direct.candidates)


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    paths = write_world(tmp_path)
    bad = CliRunner().invoke(cascade_app, ["plan", *paths, "--cost", "small"])
    assert bad.exit_code == 2 and "expected JUDGE=COST" in bad.output
    missing = CliRunner().invoke(cascade_app, ["plan", *paths, "--cost", "small=1"])
    assert missing.exit_code == 1 and "no cost for judges ['big', 'mid']" in missing.output
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    res = CliRunner().invoke(cascade_app, ["plan", str(broken)])
    assert res.exit_code == 2 and "broken.jsonl:1" in res.output


def test_labels_file_overrides_record_labels(tmp_path: Path) -> None:
    paths = write_world(tmp_path)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"key": k, "label": "B"}) + "\n" for k in KEYS))
    costs = ["--cost", "small=0.01", "--cost", "mid=0.1", "--cost", "big=1", "--json"]
    res = CliRunner().invoke(cascade_app, ["plan", *paths, "--labels", str(labels), *costs])
    assert res.exit_code == 0, res.output
    big = next(c for c in json.loads(res.output)["candidates"] if c["name"] == "big")
    assert big["agreement"] == pytest.approx(1 / 40)  # only item 0 says B


def test_policy_objects_in_candidates() -> None:
    results, labels = world()
    plan = plan_cascades(results, labels=labels, costs=COSTS, budgets=(0.5,))
    kinds = {type(t.escalate[0]) for c in plan.candidates for t in c.tiers if t.escalate}
    assert {LowConfidence, Budget} <= kinds
    assert not any(math.isnan(c.agreement) for c in plan.candidates)
