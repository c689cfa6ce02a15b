"""Published meta-evaluation numbers, recomputed with judgegraph.metrics from the recorded files.

Each test reads the benchmark files with plain json, calls our metrics, and compares with
the figures the benchmark's authors published (the constants below are theirs, copied
from their papers / READMEs / statistics.json files, never our own outputs).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from judgegraph.metrics import (
    classification_scores,
    cohen_kappa,
    correlations,
    position_consistency,
    swap_accuracy,
)

# ------------------------------------------------------------------ PandaLM

# PandaLM paper / README: annotator agreement and judge figures on the 999-item test set.
PANDALM_ANNOTATOR_KAPPAS = {(1, 2): 0.85, (1, 3): 0.88, (2, 3): 0.86}
PANDALM_7B = (66.77, 57.38, 57.50, 57.43)  # accuracy, macro P, macro R, macro F1 (%)
GPT35_TIE = (71.07, 58.79, 57.36, 57.55)  # "Tie" and unparseable output counted as tie
GPT35_GARBAGE_WRONG_ACCURACY = 69.77


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pandalm(shared_data: Path) -> dict[str, Any]:
    root = shared_data / "pandalm"
    test = _load(root / "testset-v1.json")
    gpt = {r["idx"]: r["gpt_result"] for r in _load(root / "gpt-3.5-turbo-testset-v1.json")}
    panda = {r["idx"]: r["pandalm_result"] for r in _load(root / "pandalm-7b-testset-v1.json")}
    annot = [[row[f"annotator{k}"] for row in test] for k in (1, 2, 3)]
    majority = []
    for labels in zip(*annot, strict=True):
        label, count = Counter(labels).most_common(1)[0]
        assert count >= 2, "every PandaLM test item has a majority label"
        majority.append(label)
    # gpt-3.5-turbo wrote "1", "2", "Tie" or the unparseable marker "garbage".
    gpt_codes = {"1": 1, "2": 2, "Tie": 0, "garbage": None}
    return {
        "annotators": annot,
        "gold": majority,
        "pandalm": [panda[row["idx"]] for row in test],
        "gpt": [gpt_codes[gpt[row["idx"]]] for row in test],
    }


def _pct(x: float | None) -> float:
    assert x is not None
    return round(100 * x, 2)


def test_pandalm_gold_distribution(pandalm: dict[str, Any]) -> None:
    assert Counter(pandalm["gold"]) == {0: 105, 1: 422, 2: 472}


@pytest.mark.parametrize(("pair", "published"), sorted(PANDALM_ANNOTATOR_KAPPAS.items()))
def test_pandalm_annotator_kappa(pandalm: dict[str, Any], pair: tuple[int, int], published: float) -> None:
    a, b = (pandalm["annotators"][k - 1] for k in pair)
    result = cohen_kappa(a, b)
    assert result.counts.used == len(a) == 999
    assert result.value is not None
    assert round(result.value, 2) == published


def test_pandalm_7b_against_majority(pandalm: dict[str, Any]) -> None:
    c = classification_scores(pandalm["pandalm"], pandalm["gold"])
    assert c.counts.unparsed == 0 and c.counts.used == 999
    assert (_pct(c.accuracy), _pct(c.precision), _pct(c.recall), _pct(c.f1)) == PANDALM_7B


def test_gpt35_unparsed_as_tie(pandalm: dict[str, Any]) -> None:
    c = classification_scores(pandalm["gpt"], pandalm["gold"], unparsed="tie", tie_label=0)
    n_garbage = sum(v is None for v in pandalm["gpt"])
    assert n_garbage > 0
    assert c.counts.unparsed == n_garbage and c.counts.used == 999
    assert (_pct(c.accuracy), _pct(c.precision), _pct(c.recall), _pct(c.f1)) == GPT35_TIE


def test_gpt35_unparsed_as_wrong_and_excluded(pandalm: dict[str, Any]) -> None:
    n_garbage = sum(v is None for v in pandalm["gpt"])
    wrong = classification_scores(pandalm["gpt"], pandalm["gold"], unparsed="wrong", tie_label=0)
    assert _pct(wrong.accuracy) == GPT35_GARBAGE_WRONG_ACCURACY
    assert wrong.counts.used == 999 and wrong.counts.unparsed == n_garbage
    # Counting garbage as wrong loses exactly the garbage items that were gold ties.
    gold_tie_garbage = sum(1 for g, p in zip(pandalm["gold"], pandalm["gpt"], strict=True) if p is None and g == 0)
    tie = classification_scores(pandalm["gpt"], pandalm["gold"], unparsed="tie", tie_label=0)
    assert tie.accuracy is not None and wrong.accuracy is not None
    assert round((tie.accuracy - wrong.accuracy) * 999) == gold_tie_garbage
    # Excluding them scores the remaining items only.
    excl = classification_scores(pandalm["gpt"], pandalm["gold"], unparsed="exclude", tie_label=0)
    assert excl.counts.used == 999 - n_garbage and excl.counts.excluded == n_garbage
    kept = [(p, g) for p, g in zip(pandalm["gpt"], pandalm["gold"], strict=True) if p is not None]
    assert excl.accuracy == pytest.approx(sum(p == g for p, g in kept) / len(kept))


# ------------------------------------------------------------------ LLMBar


def _llmbar_runs(shared_data: Path) -> list[Path]:
    return sorted(p.parent for p in (shared_data / "llmbar").glob("**/evaluators/*/*/statistics.json"))


def _percent(field: str) -> float:
    """'70 / 100 = 70.0%' or '74.0%' -> 70.0 / 74.0."""
    m = re.search(r"([-\d.]+)%$", field.strip())
    assert m, field
    return float(m.group(1))


def _llmbar_orders(run: Path) -> tuple[list[str], list[str | None], list[str | None]]:
    rows = _load(run / "result.json")
    gold = [str(r["label"]) for r in rows]
    first = [r["results"][-1]["swap = False"]["winner"] for r in rows]
    second = [r["results"][-1]["swap = True"]["winner"] for r in rows]
    return gold, first, second


def test_llmbar_every_statistics_file(shared_data: Path) -> None:
    runs = _llmbar_runs(shared_data)
    assert len(runs) >= 40
    for run in runs:
        stats = _load(run / "statistics.json")
        gold, first, second = _llmbar_orders(run)
        # LLMBar scored an unparsed verdict (null winner) as matching no label, and two null
        # orders as agreeing with each other: exactly our "tie" policy (gold has no ties).
        res = swap_accuracy(first, gold, second=second, unparsed="tie", a_label="1", b_label="2")
        where = str(run.relative_to(shared_data))
        assert res.first_order.value is not None and res.second_order.value is not None
        assert res.both.value is not None and res.average is not None
        assert res.position.consistency is not None
        assert 100 * res.first_order.value == pytest.approx(_percent(stats["correct_False"])), where
        assert 100 * res.second_order.value == pytest.approx(_percent(stats["correct_True"])), where
        assert 100 * res.average == pytest.approx(_percent(stats["correct_average"])), where
        assert 100 * res.both.value == pytest.approx(_percent(stats["correct_both"])), where
        assert 100 * res.position.consistency == pytest.approx(_percent(stats["equal"])), where


def test_llmbar_unparsed_policies_differ_only_on_null_items(shared_data: Path) -> None:
    runs = [r for r in _llmbar_runs(shared_data) if None in _llmbar_orders(r)[1] + _llmbar_orders(r)[2]]
    assert runs, "some recorded runs have unparsed verdicts"
    gold, first, second = _llmbar_orders(runs[0])
    n_failed = sum(1 for f, s in zip(first, second, strict=True) if f is None or s is None)
    tie = swap_accuracy(first, gold, second=second, unparsed="tie", a_label="1", b_label="2")
    excl = swap_accuracy(first, gold, second=second, unparsed="exclude", a_label="1", b_label="2")
    wrong = swap_accuracy(first, gold, second=second, unparsed="wrong", a_label="1", b_label="2")
    assert tie.first_order.counts.unparsed == n_failed == excl.first_order.counts.excluded
    assert excl.first_order.counts.used == len(gold) - n_failed
    # Gold has no ties, so a failed order is incorrect under both "tie" and "wrong".
    assert tie.first_order.value == wrong.first_order.value
    # Two failed orders agree under "tie" but not under "wrong".
    both_null = sum(1 for f, s in zip(first, second, strict=True) if f is None and s is None)
    assert tie.position.n_consistent - wrong.position.n_consistent == both_null


def test_llmbar_kappa_computed_correctly(shared_data: Path) -> None:
    """The statistics files' kappa fields are not reproduced: LLMBar coded the verdict "2" as 0
    while keeping the gold label 2, so verdict and gold never share that category. Our kappa
    codes both sides the same way; on the mis-coded inputs the same function gives the files'
    numbers, which confirms the cause."""
    for run in _llmbar_runs(shared_data):
        stats = _load(run / "statistics.json")
        gold, first, second = _llmbar_orders(run)
        gold_int = [int(g) for g in gold]
        miscoded_first = [1 if w == "1" else 0 for w in first]
        miscoded_second = [1 if w == "1" else 0 for w in second]
        where = str(run.relative_to(shared_data))
        assert cohen_kappa(miscoded_first, gold_int).value == pytest.approx(stats["kappa_False"]), where
        assert cohen_kappa(miscoded_first, miscoded_second).value == pytest.approx(stats["kappa_agreement"]), where

        right = cohen_kappa(first, gold, unparsed="wrong")
        assert right.value is not None
        # Kappa is chance-corrected agreement: with two balanced-ish classes it must sit well
        # below raw accuracy but above zero for any judge that beats chance.
        acc = _percent(stats["correct_False"]) / 100
        if acc > 0.75:
            assert 0 < right.value < acc, where
        assert right.value != pytest.approx(stats["kappa_False"]), where


def test_llmbar_position_bias_from_orders(shared_data: Path) -> None:
    run = next(r for r in _llmbar_runs(shared_data) if r.parts[-2:] == ("ChatGPT", "CoT"))
    _, first, second = _llmbar_orders(run)
    pos = position_consistency(first, second, unparsed="tie", a_label="1", b_label="2")
    prefer_first = sum(1 for f, s in zip(first, second, strict=True) if (f, s) == ("1", "2"))
    prefer_second = sum(1 for f, s in zip(first, second, strict=True) if (f, s) == ("2", "1"))
    assert (pos.n_prefer_first_position, pos.n_prefer_second_position) == (prefer_first, prefer_second)
    assert pos.position_bias == pytest.approx((prefer_first - prefer_second) / len(first))


# ------------------------------------------------------------------ UniEval

# UniEval reproduce/README.md, sample-level (pooled) correlations, as printed (6 decimals).
UNIEVAL_PUBLISHED: dict[str, dict[str, tuple[float, float, float]]] = {
    "dialogue/topical_chat": {
        "naturalness": (0.443666, 0.513986, 0.373973),
        "coherence": (0.595143, 0.612942, 0.465915),
        "engagingness": (0.55651, 0.604739, 0.455941),
        "groundedness": (0.536209, 0.574954, 0.451533),
        "understandability": (0.380038, 0.467807, 0.360741),
        "overall": (0.632796, 0.662583, 0.487272),
    },
    "data2text/sfres": {
        "naturalness": (0.367252, 0.333399, 0.247094),
        "informativeness": (0.282079, 0.224918, 0.169297),
        "overall": (0.370815, 0.291593, 0.214708),
    },
    "data2text/sfhot": {
        "naturalness": (0.397428, 0.319813, 0.237635),
        "informativeness": (0.357353, 0.249329, 0.191217),
        "overall": (0.406425, 0.320721, 0.236024),
    },
    "fact/qags_xsum": {"consistency": (0.461376, 0.48792, 0.399218)},
    "fact/qags_cnndm": {"consistency": (0.681681, 0.662255, 0.531636)},
}


@pytest.mark.parametrize("dataset", sorted(UNIEVAL_PUBLISHED))
def test_unieval_sample_level_correlations(shared_data: Path, dataset: str) -> None:
    rows = _load(shared_data / "unieval" / "unieval_predict" / f"{dataset}_result.json")
    for dim, published in UNIEVAL_PUBLISHED[dataset].items():
        predicted = [r["predict_scores"][dim] for r in rows]
        human = [r["scores"][dim] for r in rows]
        c = correlations(predicted, human, level="sample")
        got = (c.pearson.value, c.spearman.value, c.kendall.value)
        assert all(v is not None for v in got)
        # README prints 6 decimals with trailing zeros dropped: round ours the same way.
        assert tuple(round(v, 6) for v in got if v is not None) == published, f"{dataset} {dim}"
        assert c.pearson.n == len(rows) and c.pearson.counts.unparsed == 0
