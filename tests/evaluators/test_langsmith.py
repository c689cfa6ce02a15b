"""Judges inside langsmith.evaluate / aevaluate, offline: a loopback model
judges, a loopback LangSmith endpoint must receive nothing."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _langsmith_sink import data_sent

from judgegraph import OpenAIBackend, PairwiseJudge, PointwiseJudge
from judgegraph.evaluators import as_async_evaluator, as_comparative_evaluator, as_evaluator, offline_client
from judgegraph.testing import LoopbackRequest, Reply

langsmith = pytest.importorskip("langsmith")
from langsmith.evaluation.evaluator import ComparisonEvaluationResult, comparison_evaluator  # noqa: E402
from langsmith.schemas import Example, Run  # noqa: E402

CAPITALS = {"France": "Paris", "Italy": "Rome", "Spain": "Madrid"}
# The system under test gets Italy wrong and gives an unreadable answer for Spain.
ANSWERS = {"France": "Paris", "Italy": "Milan", "Spain": "Madrid"}
MAPPING = {"instruction": "inputs.question", "response": "outputs.answer", "reference": "reference_outputs.answer"}


def _examples() -> list[Example]:
    now = dt.datetime.now(dt.UTC)
    ds = uuid.uuid4()
    return [
        Example(
            id=uuid.uuid4(),
            dataset_id=ds,
            created_at=now,
            inputs={"question": f"What is the capital of {country}?", "country": country},
            outputs={"answer": capital},
        )
        for country, capital in CAPITALS.items()
    ]


def _grader(req: LoopbackRequest) -> Reply:
    """A model that grades by the reference block: right capital 5, wrong 2;
    for Spain it rambles without a verdict."""
    p = req.prompt
    if "Madrid" in p:
        return Reply("Hard to say, really.")
    answer = p.split("⟦begin response⟧")[-1].split("⟦end response⟧")[0].strip()
    reference = p.split("⟦begin reference answer⟧")[-1].split("⟦end reference answer⟧")[0].strip()
    return Reply("Matches. [RESULT] 5" if answer == reference else "Wrong city. [RESULT] 2")


def _target(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"answer": ANSWERS[inputs["country"]]}


async def _atarget(inputs: dict[str, Any]) -> dict[str, Any]:
    return _target(inputs)


def _by_country(rows: list[Any]) -> dict[str, Any]:
    return {row["example"].inputs["country"]: row["evaluation_results"]["results"][0] for row in rows}


def _check(results: dict[str, Any]) -> None:
    assert results["France"].score == 1.0
    assert results["Italy"].score == 0.25  # 2 on 1-5
    assert results["Italy"].metadata["raw_score"] == 2
    # Spain: unreadable twice (answer, then repair) -> no score, status in metadata.
    assert results["Spain"].score is None
    assert results["Spain"].metadata["status"] == "unparsed"
    assert results["France"].key == "capital"


def test_the_sink_does_see_a_plain_client(langsmith_sink: list[Any]) -> None:
    """So its staying empty below means something: a plain Client asks /info."""
    assert langsmith.Client().info is not None
    assert ("GET", "/info") in langsmith_sink


def test_evaluate_offline_sends_nothing(langsmith_sink: list[Any], loopback: type) -> None:
    with loopback(_grader) as server:
        backend = OpenAIBackend("grader", base_url=server.url + "/v1", api_key="x", structured_output=False)
        ev = as_evaluator(PointwiseJudge(backend), inputs=MAPPING, key="capital")
        results = langsmith.evaluate(
            _target, data=_examples(), evaluators=[ev], upload_runs=False, client=offline_client()
        )
        rows = list(results)
        calls = sum(server.calls.values())
    _wait_for_uploads()
    _check(_by_country(rows))
    assert calls == 4  # France, Italy, Spain + Spain's repair request
    assert data_sent(langsmith_sink) == []


async def test_aevaluate_offline_sends_nothing(langsmith_sink: list[Any], loopback: type) -> None:
    with loopback(_grader) as server:
        backend = OpenAIBackend("grader", base_url=server.url + "/v1", api_key="x", structured_output=False)
        ev = as_async_evaluator(PointwiseJudge(backend), inputs=MAPPING, key="capital")
        results = await langsmith.aevaluate(
            _atarget, data=_examples(), evaluators=[ev], upload_runs=False, client=offline_client()
        )
        rows = [row async for row in results]
    _wait_for_uploads()
    _check(_by_country(rows))
    assert data_sent(langsmith_sink) == []


async def test_a_bad_mapping_names_the_field() -> None:
    from judgegraph import JudgeInputError, ScriptedBackend

    ev = as_async_evaluator(PointwiseJudge(ScriptedBackend(["[RESULT] 3"])), inputs={"response": "outputs.text"})
    with pytest.raises(JudgeInputError, match=r"response: 'outputs.text' not found"):
        await ev(inputs={"q": "x"}, outputs={"answer": "y"})
    with pytest.raises(ValueError, match="not fields of PointwiseInput"):
        as_evaluator(PointwiseJudge(ScriptedBackend([])), inputs={"answer": "outputs"})
    # The default mapping: one-key dicts stand for their value.
    out = await as_async_evaluator(PointwiseJudge(ScriptedBackend(["Fine. [RESULT] 3"])))(
        inputs={"q": "x"}, outputs={"answer": "y"}
    )
    assert out["score"] == 0.5


def _run(answer: str) -> Run:
    return Run(
        id=uuid.uuid4(),
        name="target",
        start_time=dt.datetime.now(dt.UTC),
        run_type="chain",
        inputs={},
        outputs={"answer": answer},
        trace_id=uuid.uuid4(),
    )


def _pairwise_model(biased: bool) -> Any:
    def respond(req: LoopbackRequest) -> Reply:
        if biased:  # always prefers the first answer shown
            return Reply("The first one reads better. [RESULT] A")
        a = req.prompt.split("⟦begin response a⟧")[-1].split("⟦end response a⟧")[0]
        return Reply("A names the capital. [RESULT] A" if "Paris" in a else "B names the capital. [RESULT] B")

    return respond


@pytest.mark.parametrize("biased", [False, True])
def test_comparative_evaluator_is_swap_debiased(loopback: type, biased: bool) -> None:
    example = _examples()[0]
    good, bad = _run("Paris"), _run("Lyon")
    with loopback(_pairwise_model(biased)) as server:
        backend = OpenAIBackend("grader", base_url=server.url + "/v1", api_key="x", structured_output=False)
        judge = PairwiseJudge(backend, template="pairwise-choice")
        fn = as_comparative_evaluator(judge, inputs={"instruction": "inputs.question", "response": "outputs.answer"})
        # Through langsmith's own comparison-evaluator wrapper, both run orders.
        first = comparison_evaluator(fn).compare_runs([bad, good], example)
        second = comparison_evaluator(fn).compare_runs([good, bad], example)
        calls = sum(server.calls.values())
    assert calls == 4  # two answer orders per comparison
    for res in (first, second):
        assert isinstance(res, ComparisonEvaluationResult)
        ComparisonEvaluationResult.model_validate(res.model_dump())
        assert res.key == "preference" and {str(k) for k in res.scores} == {str(bad.id), str(good.id)}
    s1 = {str(k): v for k, v in first.scores.items()}
    if biased:
        # A model that always picks the first slot wins nothing for either run.
        assert s1 == {str(bad.id): 0.5, str(good.id): 0.5}
        assert "disagreed" in str(first.comment)
    else:
        assert s1 == {str(bad.id): 0.0, str(good.id): 1.0}
        s2 = {str(k): v for k, v in second.scores.items()}
        assert s2 == s1


def test_comparative_failure_scores_none(loopback: type) -> None:
    with loopback(lambda req: Reply("I cannot tell.")) as server:
        backend = OpenAIBackend("grader", base_url=server.url + "/v1", api_key="x", structured_output=False)
        fn = as_comparative_evaluator(
            PairwiseJudge(backend, template="pairwise-choice"),
            inputs={"instruction": "inputs.question", "response": "outputs.answer"},
        )
        a, b = _run("Paris"), _run("Lyon")
        out = ComparisonEvaluationResult(**fn([a, b], _examples()[0]))
    assert set(out.scores.values()) == {None}
    assert str(out.comment).startswith("[unparsed]")


# With tracing switched on in the environment (a LangSmith user's usual set-up),
# upload_runs=False must still mean nothing leaves the process.


@pytest.fixture
def tracing_on(langsmith_sink: list[Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    from langsmith.utils import get_env_var

    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    get_env_var.cache_clear()  # LangSmith caches what it read of the environment
    try:
        yield langsmith_sink
    finally:
        monkeypatch.setenv("LANGSMITH_TRACING", "false")
        get_env_var.cache_clear()


def _wait_for_uploads() -> None:
    """Tracers upload from a background thread (through LangSmith's cached
    client): let them finish before looking at the sink."""
    from langchain_core.tracers.langchain import wait_for_all_tracers
    from langsmith.run_trees import get_cached_client

    wait_for_all_tracers()
    get_cached_client().flush()


def test_evaluate_offline_with_tracing_on_sends_nothing(tracing_on: list[Any], loopback: type) -> None:
    # The judge's own runs (its chain run and the model call under it) are
    # what judgegraph controls. (A LangChain Runnable *target* is traced by
    # langchain-core in LangSmith's "local" mode and uploaded regardless; the
    # README says so.)
    with loopback(_grader) as server:
        backend = OpenAIBackend("grader", base_url=server.url + "/v1", api_key="x", structured_output=False)
        ev = as_evaluator(PointwiseJudge(backend), inputs=MAPPING, key="capital")
        results = langsmith.evaluate(
            _target, data=_examples(), evaluators=[ev], upload_runs=False, client=offline_client()
        )
        rows = list(results)
    _wait_for_uploads()
    _check(_by_country(rows))
    assert data_sent(tracing_on) == []


def test_the_sink_sees_a_traced_judge_call_with_tracing_on(tracing_on: list[Any], loopback: type) -> None:
    """So the emptiness above means something: outside evaluate, tracing on uploads the judge's runs."""
    with loopback(_grader) as server:
        backend = OpenAIBackend("grader", base_url=server.url + "/v1", api_key="x", structured_output=False)
        verdict = PointwiseJudge(backend).invoke(
            {"instruction": "What is the capital of France?", "response": "Paris", "reference": "Paris"}
        )
    _wait_for_uploads()
    assert verdict.score == 5
    assert any(path.startswith("/runs") for _, path in tracing_on)


async def test_aevaluate_offline_with_tracing_on_sends_nothing(tracing_on: list[Any], loopback: type) -> None:
    with loopback(_grader) as server:
        backend = OpenAIBackend("grader", base_url=server.url + "/v1", api_key="x", structured_output=False)
        ev = as_async_evaluator(PointwiseJudge(backend), inputs=MAPPING, key="capital")
        results = await langsmith.aevaluate(
            _atarget, data=_examples(), evaluators=[ev], upload_runs=False, client=offline_client()
        )
        rows = [row async for row in results]
    _wait_for_uploads()
    _check(_by_country(rows))
    assert data_sent(tracing_on) == []


# A chat-model judge (ChatOpenAI) makes its model call as LangChain's own run,
# which LangSmith's "local" mode would trace and post all the same (issue 26).


@pytest.mark.parametrize("tracing", ["unset", "on"])
def test_evaluate_offline_with_a_chat_model_judge_sends_nothing(
    langsmith_sink: list[Any], loopback: type, tracing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    from langsmith.utils import get_env_var

    from judgegraph.backends import ChatModelBackend

    if tracing == "on":
        monkeypatch.setenv("LANGSMITH_TRACING", "true")
    get_env_var.cache_clear()
    try:
        with loopback(_grader) as server:
            chat = langchain_openai.ChatOpenAI(model="grader", api_key="x", base_url=server.url + "/v1")
            judge = PointwiseJudge(ChatModelBackend(chat, structured_output=False))
            ev = as_evaluator(judge, inputs=MAPPING, key="capital")
            results = langsmith.evaluate(
                _target, data=_examples(), evaluators=[ev], upload_runs=False, client=offline_client()
            )
            rows = list(results)
        _wait_for_uploads()
    finally:
        monkeypatch.delenv("LANGSMITH_TRACING", raising=False)
        get_env_var.cache_clear()
    _check(_by_country(rows))
    assert data_sent(langsmith_sink) == []
