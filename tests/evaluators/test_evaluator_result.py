"""The evaluator shape: openevals' own keys and types, normalised scores,
failures that say so and score None."""

from __future__ import annotations

import typing

import pytest

from judgegraph import PairwiseJudge, PointwiseJudge, RubricJudge, ScriptedBackend, SwapPolicy
from judgegraph.types import Criterion, EvaluatorResult, Rubric, Status

openevals_types = pytest.importorskip("openevals.types")

ITEM = {"instruction": "What is 2+2?", "response": "4"}


def _same_shape(ours: EvaluatorResult, theirs: dict[str, typing.Any]) -> None:
    assert set(ours) == set(theirs)
    assert set(ours) <= set(typing.get_type_hints(openevals_types.EvaluatorResult))
    for k in ("key", "comment"):
        assert type(ours[k]) is type(theirs[k])


def test_keys_are_exactly_openevals_keys() -> None:
    ours = set(typing.get_type_hints(EvaluatorResult))
    assert ours == set(typing.get_type_hints(openevals_types.EvaluatorResult))


async def test_pointwise_score_is_normalised_and_raw_score_kept() -> None:
    v = await PointwiseJudge(ScriptedBackend(["Right. [RESULT] 4"])).ajudge(ITEM)
    out = v.to_evaluator_result("correct")
    assert out["score"] == pytest.approx(0.75)  # 4 on 1-5
    assert out["metadata"] is not None
    assert out["metadata"]["raw_score"] == 4 and out["metadata"]["scale"] == [1, 5]
    assert out["metadata"]["status"] == "ok" and out["metadata"]["reason"] is None
    prov = out["metadata"]["provenance"]
    assert prov["template_id"] == "pointwise-rubric" and prov["model"] == "scripted"
    bottom = await PointwiseJudge(ScriptedBackend(["Wrong. [RESULT] 1"])).ajudge(ITEM)
    assert bottom.to_evaluator_result()["score"] == 0.0


async def test_failed_verdict_scores_none_and_says_why() -> None:
    v = await PointwiseJudge(ScriptedBackend(["no idea", "still no idea"])).ajudge(ITEM)
    assert v.status is Status.UNPARSED
    out = v.to_evaluator_result()
    assert out["score"] is None
    assert out["metadata"] is not None and out["metadata"]["status"] == "unparsed"
    assert "[RESULT]" in out["metadata"]["reason"]
    assert out["comment"] is not None and out["comment"].startswith("[unparsed]")


async def test_pairwise_and_rubric_shapes() -> None:
    pair = {"instruction": "q", "response_a": "a", "response_b": "b"}
    v = await PairwiseJudge(ScriptedBackend(["[SCORES] 2 8"]), swap=SwapPolicy(mode="single")).ajudge(pair)
    out = v.to_evaluator_result()
    assert out["score"] == 0.0 and out["metadata"] is not None and out["metadata"]["winner"] == "B"
    rubric = Rubric(criterion="accuracy", levels={1: "bad", 2: "ok", 3: "good"})
    judge = RubricJudge(
        ScriptedBackend(lambda req: "Fine. [RESULT] 3"), criteria=[Criterion(name="acc", rubric=rubric)]
    )
    r = await judge.ajudge(ITEM)
    rout = r.to_evaluator_result()
    assert rout["score"] == pytest.approx(1.0)
    assert rout["metadata"] is not None and rout["metadata"]["criteria"]["acc"]["raw_score"] == 3


async def test_matches_openevals_own_result_for_the_same_verdict(loopback: type) -> None:
    """openevals' LLM-as-judge, served by the same loopback model, returns the
    same keys and types as our judge's evaluator result."""
    openai = pytest.importorskip("openai")
    from openevals.llm import create_llm_as_judge

    from judgegraph import OpenAIBackend
    from judgegraph.testing import Reply

    def responder(req: typing.Any) -> Reply:
        if req.body.get("response_format"):  # openevals asks for JSON
            return Reply('{"reasoning": "Correct sum.", "score": true}')
        return Reply("Correct sum. [RESULT] 5")

    with loopback(responder) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        theirs = create_llm_as_judge(prompt="Is {outputs} right for {inputs}?", judge=client, model="m")(
            inputs="2+2", outputs="4"
        )
        backend = OpenAIBackend("m", base_url=server.url + "/v1", api_key="x", structured_output=False)
        ours = (await PointwiseJudge(backend).ajudge(ITEM)).to_evaluator_result("score")
    assert theirs["score"] is True and ours["score"] == 1.0
    assert theirs["comment"] == ours["comment"] == "Correct sum."
    _same_shape(ours, dict(theirs))
