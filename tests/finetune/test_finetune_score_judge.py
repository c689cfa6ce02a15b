"""The pointwise regression head as a judge, and as the guardrail's judge.

A tiny model gets a regression head trained on synthetic answers whose
closing verdict word sets the score (wrong 1, partly right 3, correct 5).
The guardrail graph with that judge must pass a correct answer and block a
wrong one, with the two scores well apart (a head that says the same for
everything fails).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("datasets")

from judgegraph import JudgeInputError, Rubric, Status, create_judge_node
from judgegraph.finetune import (
    ClassifierOptions,
    PointwiseTrace,
    ScoreRegressorJudge,
    SequenceClassifier,
    create_score_judge,
    synthetic_traces,
    train_classifier,
)
from judgegraph.graphs import create_guardrail_graph

OPTS = ClassifierOptions(
    task="pointwise",
    max_length=64,
    batch_size=16,
    learning_rate=1e-3,
    max_steps=60,
    lr_scheduler_type="constant",
    save_steps=1000,
    logging_steps=10,
)
GOOD = {"instruction": "Tell me one fact about owls (item 3).", "answer": "bright calm quiet owls.\nVerdict: correct."}
BAD = {"instruction": "Tell me one fact about owls (item 3).", "answer": "bright calm quiet owls.\nVerdict: wrong."}


@pytest.fixture(scope="module")
def head(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> SequenceClassifier:
    traces = [
        t for t in synthetic_traces(160, kind="pointwise", instructions=16, seed=5) if isinstance(t, PointwiseTrace)
    ]
    return train_classifier(tiny_model, traces, tmp_path_factory.mktemp("reg") / "run", options=OPTS, progress=False)


async def test_the_guardrail_passes_good_and_blocks_bad_answers_with_a_trained_head(head: SequenceClassifier) -> None:
    judge = create_score_judge(head)
    graph = create_guardrail_graph(threshold=3, fail_policy="closed")
    good = await graph.ainvoke(GOOD, context={"judge": judge})
    bad = await graph.ainvoke(BAD, context={"judge": judge})
    assert good["decision"].action == "pass", good["decision"]
    assert bad["decision"].action == "block", bad["decision"]
    for out in (good, bad):
        d, v = out["decision"], out["verdict"]
        assert d.judge_status is Status.OK and not d.fail_policy_applied
        assert v.scale == (1, 5) and v.expected_score is not None and 1 <= v.expected_score <= 5
        assert v.score == math.floor(v.expected_score + 0.5)
        assert v.provenance is not None and v.provenance.model == head.model
    assert good["verdict"].expected_score > bad["verdict"].expected_score + 1


async def test_the_head_is_loaded_from_its_folder_and_batches_many_items(head: SequenceClassifier) -> None:
    judge = create_score_judge(head.model)  # the saved folder
    assert isinstance(judge, ScoreRegressorJudge)
    items: list[Any] = [
        {"instruction": GOOD["instruction"], "response": GOOD["answer"]},
        {"instruction": "", "response": "x"},  # bad input stays in place, the rest are judged
        {"instruction": BAD["instruction"], "response": BAD["answer"]},
        {"instruction": "q", "response": "r", "rubric": Rubric(criterion="c", levels={1: "bad", 2: "fair", 3: "good"})},
    ]
    out = await judge.ajudge_many(items)
    assert [type(r).__name__ for r in out] == ["PointwiseScore", "JudgeInputError", "PointwiseScore", "JudgeInputError"]
    assert isinstance(out[1], JudgeInputError) and "instruction" in str(out[1])
    assert isinstance(out[3], JudgeInputError) and "training scale (1, 5)" in str(out[3])
    single = await judge.ajudge(items[0])
    # Alone vs. in a padded batch of two: two float32 paths through the encoder, which differ in
    # the last bits (issue 30 saw 2.4e-5 in a probe's probability across batch compositions on
    # AVX-512); 1e-3 on a 1-5 scale leaves 40x that, and a wrong item (another score) is far off.
    assert single.expected_score == pytest.approx(out[0].expected_score, abs=1e-3)  # type: ignore[union-attr]
    # And as a LangGraph node, like any judge.
    node = create_judge_node(judge)
    state = await node({"instruction": BAD["instruction"], "response": BAD["answer"]}, {})
    assert state["verdict"].expected_score == pytest.approx(out[2].expected_score, abs=1e-3)  # type: ignore[union-attr]


async def test_a_failing_head_is_an_error_verdict_and_the_guardrail_policy_decides(head: SequenceClassifier) -> None:
    class Broken:
        name, model, scale = "broken", "broken", (1, 5)

        def predict_scores(self, items: Any) -> list[float]:
            return [float("nan")] * len(items)

    judge = ScoreRegressorJudge(Broken())
    r = await judge.ajudge({"instruction": "q", "response": "r"})
    assert r.status is Status.ERROR and r.score is None and "nan" in (r.reason or "")
    out = await create_guardrail_graph(threshold=3, fail_policy="closed").ainvoke(GOOD, context={"judge": judge})
    assert out["decision"].action == "block" and out["decision"].fail_policy_applied


def test_a_pairwise_head_is_refused() -> None:
    class Pairwise:
        name, model, scale = "pair", "pair", None

        def predict_scores(self, items: Any) -> list[float]:
            raise AssertionError("never called")

    with pytest.raises(ValueError, match="not a pointwise regression head"):
        ScoreRegressorJudge(Pairwise())
    with pytest.raises(TypeError, match="score regressor"):
        ScoreRegressorJudge(object())  # type: ignore[arg-type]
