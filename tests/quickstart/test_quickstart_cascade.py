"""The quickstart's cascade pieces without the encoder: the teacher/local
merge of escalated items, cross-fitted calibration judges, the planner's two
ways to pick a budget, and the probe's lexical signals. Real replay judges
and a real CascadeJudge; no model is loaded."""

from __future__ import annotations

import asyncio
import math

import pytest

from judgegraph.cascade import CascadeJudge, LowConfidence, Tier
from judgegraph.finetune._probe import _lexical, _lexical_v2
from judgegraph.judges import ReplayJudge, item_key
from judgegraph.quickstart import load_bundled_pandalm
from judgegraph.quickstart._budget import BUDGET_GRID, _pick_budget
from judgegraph.quickstart._combine import CombinedTeacher, TeacherConfusion, combine_verdicts
from judgegraph.quickstart._crossfit import CrossFitJudge, assign_folds
from judgegraph.types import PairwiseInput, PairwiseVerdict, Provenance, Status


def _v(winner: str | None, dist: dict[str, float] | None = None, *, cost: float | None = None) -> PairwiseVerdict:
    prov = Provenance(
        judge="j", backend="replay", model="m", template_id="t", template_version=1, latency_s=0.0, cost_usd=cost
    )
    if winner is None:
        return PairwiseVerdict(status=Status.UNPARSED, reason="unreadable", provenance=prov)
    conf = None if dist is None else dist[winner]
    return PairwiseVerdict(status=Status.OK, winner=winner, confidence=conf, distribution=dist, provenance=prov)  # type: ignore[arg-type]


def _confusion_tie_means_a() -> TeacherConfusion:
    # On calibration the teacher said "tie" for most items humans gave to A, and was right on B and tie.
    teacher = {f"a{i}": _v("tie") for i in range(8)} | {f"a{i}": _v("A") for i in range(8, 10)}
    teacher |= {f"b{i}": _v("B") for i in range(10)} | {f"t{i}": _v("tie") for i in range(5)} | {"t5": _v(None)}
    labels = {k: k[0].replace("a", "A").replace("b", "B").replace("t", "tie") for k in teacher}
    return TeacherConfusion.count(teacher, labels)


def test_confusion_counts_and_likelihoods() -> None:
    conf = _confusion_tie_means_a()
    assert conf.counts["A"] == {"A": 2, "B": 0, "tie": 8, "failed": 0}
    assert conf.counts["tie"] == {"A": 0, "B": 0, "tie": 5, "failed": 1}
    for human in ("A", "B", "tie"):
        assert math.isclose(sum(conf.likelihood(human, s) for s in ("A", "B", "tie", "failed")), 1.0)
    with pytest.raises(ValueError, match="label 'C'"):
        TeacherConfusion.count({"x": _v("A")}, {"x": "C"})


def test_merge_keeps_the_teacher_unless_the_local_judge_knows_better() -> None:
    conf = _confusion_tie_means_a()
    unsure = {"A": 0.34, "B": 0.33, "tie": 0.33}
    sure_a = {"A": 0.8, "B": 0.1, "tie": 0.1}
    # An unsure local judge defers; a confident one overrides a "tie" the teacher is known to say for A.
    assert combine_verdicts(_v("B", unsure), _v("B"), conf).winner == "B"
    assert combine_verdicts(_v("A", unsure), _v("A"), conf).winner == "A"
    assert combine_verdicts(_v("tie", {"A": 0.2, "B": 0.2, "tie": 0.6}), _v("tie"), conf).winner == "tie"
    merged = combine_verdicts(_v("A", sure_a), _v("tie"), conf)
    assert merged.winner == "A" and merged.distribution is not None
    assert math.isclose(sum(merged.distribution.values()), 1.0) and merged.confidence == max(
        merged.distribution.values()
    )
    # The teacher is always right on B here: a confident local A does not override it.
    assert combine_verdicts(_v("A", sure_a), _v("B"), conf).winner == "B"
    # A failed teacher verdict, or a local one without probabilities, leaves the teacher's as it is.
    failed = _v(None)
    assert combine_verdicts(_v("A", sure_a), failed, conf) is failed
    assert combine_verdicts(_v("B"), _v("tie"), conf).winner == "tie"


def _items(n: int, prompts: int) -> list[PairwiseInput]:
    return [
        PairwiseInput(instruction=f"prompt {i % prompts}", response_a=f"a{i}", response_b=f"b{i}") for i in range(n)
    ]


def test_cascade_with_the_merged_teacher_tier() -> None:
    items = _items(6, 3)
    keys = [item_key(it) for it in items]
    sure_a = {"A": 0.8, "B": 0.1, "tie": 0.1}
    unsure = {"A": 0.4, "B": 0.35, "tie": 0.25}
    local_dists = [sure_a, unsure, sure_a, unsure, sure_a, sure_a]
    local = ReplayJudge({k: _v("A", d, cost=0.0) for k, d in zip(keys, local_dists, strict=True)}, name="local")
    said = ["tie", "B", "B", "tie", "A", None]
    teacher = ReplayJudge({k: _v(s, cost=0.01) for k, s in zip(keys, said, strict=True)}, name="teacher")
    conf = _confusion_tie_means_a()
    top = CombinedTeacher(teacher, local, conf)
    cascade = CascadeJudge([Tier(local, (LowConfidence(threshold=0.9),)), top], on_last_failure="fallback")
    out = asyncio.run(cascade.ajudge_many(items))
    expected = []
    for d, s in zip(local_dists, said, strict=True):
        expected.append("A" if s is None else combine_verdicts(_v("A", d), _v(s), conf).winner)
    assert [r.winner for r in out] == expected
    assert expected[:2] == ["A", "B"]  # merged: local overrides the teacher's tie; unsure local defers to B
    for r in out:
        assert len(r.tiers) == 2 and r.provenance.cost_usd == pytest.approx(0.01)


def test_crossfit_judge_uses_the_fold_that_did_not_see_the_prompt() -> None:
    items = _items(12, 4)
    fold_of = {f"prompt {p}": p % 2 for p in range(4)}
    # Each fold judge answers with its own confidence, so the answer shows which one judged.
    judges = [
        ReplayJudge({item_key(it): _v("A", {"A": 0.6 + k / 10, "B": 0.3 - k / 10, "tie": 0.1}) for it in items})
        for k in range(2)
    ]
    out = asyncio.run(CrossFitJudge(judges, fold_of).ajudge_many(items))
    for it, r in zip(items, out, strict=True):
        assert r.confidence == pytest.approx(0.6 + fold_of[it.instruction] / 10)
    stranger = PairwiseInput(instruction="never seen", response_a="x", response_b="y")
    with pytest.raises(ValueError, match="in no fold"):
        asyncio.run(CrossFitJudge(judges, fold_of).ajudge_many([stranger]))


def test_assign_folds_deals_whole_prompts() -> None:
    items = [i for i in load_bundled_pandalm() if not i.has_empty_response][:120]
    folds = assign_folds(items, folds=4, seed=3)
    assert set(folds) == {i.prompt for i in items} and set(folds.values()) == {0, 1, 2, 3}
    sizes = [sum(v == k for v in folds.values()) for k in range(4)]
    assert max(sizes) - min(sizes) <= 1
    assert folds == assign_folds(items, folds=4, seed=3) and folds != assign_folds(items, folds=4, seed=4)
    with pytest.raises(ValueError, match="at least 2"):
        assign_folds(items, folds=1, seed=0)


def _simulated(
    local: dict[str, PairwiseVerdict], up: dict[str, PairwiseVerdict], labels: dict[str, str], share: float
) -> float:
    order = sorted(labels, key=lambda k: local[k].confidence or 0.0)
    k = round(share * len(order))
    sent = set(order[:k])
    return sum((up[i] if i in sent else local[i]).winner == labels[i] for i in labels) / len(labels)


def test_planner_picks_most_agreeing_or_cheapest_budget() -> None:
    n = 40
    labels = {f"i{j}": "A" for j in range(n)}
    # Local right on its most confident items except a few; the teacher right on 34 of 40.
    local = {f"i{j}": _v("A" if j >= 14 or j % 3 == 0 else "B", {"A": 0.5, "B": 0.3, "tie": 0.2}) for j in range(n)}
    for j in range(n):
        w = local[f"i{j}"].winner
        p = 0.35 + j / (2 * n)
        local[f"i{j}"] = _v(w, {w: p, ("B" if w == "A" else "A"): 1 - p - 0.05, "tie": 0.05})  # type: ignore[dict-item]
    teacher = {f"i{j}": _v("A" if j % 7 else "B") for j in range(n)}
    grid = [0.0, *(g for g in BUDGET_GRID if g <= 0.5)]
    sims = {g: _simulated(local, teacher, labels, g) for g in grid}
    best = _pick_budget(local, teacher, labels, budget=0.5, target=None, pick="most-agreeing")
    assert best.calibration_agreement == pytest.approx(max(sims.values()))
    assert best.fraction <= 0.5
    goal = sorted(sims.values())[len(sims) // 2]
    cheap = _pick_budget(local, teacher, labels, budget=0.5, target=goal, pick="cheapest")
    assert cheap.fraction == pytest.approx(min(g for g, a in sims.items() if a >= goal))
    assert cheap.calibration_teacher == pytest.approx(sum(t.winner == "A" for t in teacher.values()) / n)


def test_lexical_v2_signals() -> None:
    base = _lexical("Name a fruit.", "An apple.")
    sig = _lexical_v2("Name a fruit.", "An apple.")
    assert sig[: len(base)] == base and len(sig) == len(base) + 4
    assert sig[5] == 1.0 and _lexical_v2("Name a fruit.", "An apple and a")[5] == 0.0  # cut off mid-sentence
    assert _lexical_v2("q", "the cat sat " * 6)[6] > 0.5 and sig[6] == 0.0  # a loop repeats trigrams
    assert _lexical_v2("q", "I'm sorry, I cannot help.")[7] == 1.0 and sig[7] == 0.0


def test_batch_threshold_caps_the_share_of_a_batch() -> None:
    from judgegraph.quickstart._budget import batch_threshold

    conf = [0.9, 0.4, 0.5, 0.45, 0.8, 0.35, 0.7, 0.6, 0.55, 0.65]

    def up(thr: float | None) -> int:
        return len(conf) if thr is None else sum(c < thr for c in conf)

    # Within the cap: the threshold stands.
    assert batch_threshold(0.42, conf, 0.5) == 0.42
    assert batch_threshold(0.47, conf, 0.3) == 0.47  # exactly the cap's 3 items: it stands
    # The threshold would send 7 of 10; a 30% cap sends the 3 least confident, halfway to the next.
    thr = batch_threshold(0.75, conf, 0.3)
    assert thr is not None and up(thr) == 3 and 0.45 < thr < 0.5
    # "Every item" is capped too; a cap below one item sends none.
    assert up(batch_threshold(None, conf, 0.5)) == 5
    assert batch_threshold(0.75, conf, 0.05) == 0.0
    # Equally sure items at the edge stay together, under the cap.
    ties = [0.3, 0.5, 0.5, 0.5, 0.9]
    assert sum(c < (batch_threshold(0.95, ties, 0.4) or 1) for c in ties) == 1
    # Failed items (no confidence) always go up and use the budget first.
    some_failed = [*conf[:8], None, None]
    thr = batch_threshold(0.75, some_failed, 0.3)
    assert thr is not None and sum(c is not None and c < thr for c in some_failed) == 1
