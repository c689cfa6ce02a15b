"""Bad arguments and settings of judged assertions: a clear error naming them,
and the test still in the verdict table, as an error row.

``judged.assert_score(q, a, rubric="Be terse.")`` used to raise a raw pydantic
ValidationError and leave no row; ``judge_threshold = 0.75`` on a 1-5 judge
passed every verdict. The class: any bad argument (instruction, response,
baseline, reference, rubric, threshold, repeats, aggregate) or threshold
setting off the judge's scale raises JudgeUsageError naming it, reports one
error row, and judges nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _plugin_judge import JudgeResponder, _ini, _run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgegraph import PairwiseJudge, PointwiseJudge, ScriptedBackend
from judgegraph.backends import GenerateRequest
from judgegraph.pytest_plugin import (
    CassetteFile,
    CassetteJudge,
    JudgeAssertions,
    JudgeSettings,
    JudgeUsageError,
    Row,
    create_judge,
)
from judgegraph.testing import LoopbackServer

pytest_plugins = ["pytester"]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(JudgeResponder()) as s:
        yield s


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


@pytest.mark.timing  # a loopback judge server
def test_a_bad_rubric_and_an_off_scale_threshold_are_named_and_stay_in_the_table(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    _ini(pytester, server.url, judge_structured_output="false", judge_threshold="0.75")
    pytester.makepyfile(
        test_app="""
import pytest

def test_rubric_as_a_string(judged):
    judged.assert_score("Capital of France?", "Paris.", rubric="Be terse.", threshold=4)

def test_ini_threshold(judged):
    judged.assert_score("Capital of France?", "Paris.")

@pytest.mark.judge(threshold=0)
def test_marker_threshold(judged):
    judged.assert_score("Capital of France?", "Paris.")

def test_good(judged):
    judged.assert_score("Capital of France?", "Paris.", threshold=4)
"""
    )
    result = _run(pytester, "--judge-cassette-mode=live")
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    assert "ValidationError" not in out
    assert "JudgeUsageError: judged.assert_score: rubric='Be terse.': Input should be a valid dictionary" in out
    assert "judge_threshold (ini) = 0.75 is outside the score scale 1 to 5" in out
    assert "@pytest.mark.judge(threshold=...) = 0 is outside the score scale 1 to 5" in out
    table = out[out.index("judgegraph verdicts") :].splitlines()
    rows = {line.split()[0]: line.split() for line in table if line.startswith("test_app.py::")}
    assert len(rows) == 4, table
    for name in ("test_rubric_as_a_string", "test_ini_threshold", "test_marker_threshold"):
        assert rows[f"test_app.py::{name}"][2:6] == ["-", "-", "error", "-"], rows  # score, threshold, result, cost
    assert rows["test_app.py::test_good"][5] == "pass"
    assert "4 judged assertion(s): 1 pass, 3 error; cost this session unpriced;" in out
    assert server.calls["/v1/chat/completions"] == 1  # only the good assertion was judged


# ---------------------------------------------------------------- the class


def _reply(req: GenerateRequest) -> str:
    prompt = req.messages[-1].content
    return "Equal. [SCORES] 5 5" if "response a" in prompt else "Fine. [RESULT] 5"


def _assertions(tmp: Path, backend: ScriptedBackend) -> tuple[JudgeAssertions, list[Row]]:
    """The ``judged`` object over real judges and a real (live-mode) cassette."""
    rows: list[Row] = []
    cassette = CassetteFile(tmp / "cassette.json")
    built = {
        "pointwise": PointwiseJudge(backend, structured=False),
        "pairwise": PairwiseJudge(backend, structured=False),
    }

    def judge_for(kind: str) -> CassetteJudge:
        inner = create_judge(kind, backend, marker_judge=built[kind])  # type: ignore[arg-type]
        return CassetteJudge(inner, cassette=cassette, mode="live", test="t::case")

    settings_ = JudgeSettings(threshold=4, cassette_mode="live")
    return JudgeAssertions(test="t::case", settings=settings_, judge_for=judge_for, report=rows.append), rows  # type: ignore[arg-type]


_NOT_TEXT = st.one_of(st.integers(), st.lists(st.text(max_size=3), max_size=2), st.just({"a": 1}), st.floats())
_BLANK = st.sampled_from(["", "  ", "\n\t"])
_BAD_RUBRIC = st.one_of(
    st.text(min_size=1, max_size=20),
    st.integers(),
    st.just({"criterion": "Terse?"}),
    st.just({"criterion": "Terse?", "levels": {1: "long", 3: "short"}}),
    st.just({"criterion": "", "levels": {1: "long", 2: "short"}}),
)
_OFF_SCALE = st.one_of(
    st.floats(max_value=1.0, allow_nan=False),
    st.floats(min_value=5.0, exclude_min=True, allow_nan=False),
    st.sampled_from([math.nan, math.inf, -math.inf, True, False]),
    st.text(max_size=3),
)
_BAD_REPEATS = st.one_of(st.integers(max_value=0), st.sampled_from([True, 1.5, "2"]))
_BAD_AGGREGATE = st.text(max_size=8).filter(lambda a: a not in ("mean", "majority"))

# (assertion, argument, bad values): every argument of both assertions.
_CASES = st.one_of(
    st.tuples(st.just("score"), st.just("instruction"), st.one_of(_NOT_TEXT, _BLANK)),
    st.tuples(st.just("score"), st.just("response"), st.one_of(_NOT_TEXT, _BLANK, st.none())),
    st.tuples(st.just("score"), st.just("reference"), _NOT_TEXT),
    st.tuples(st.just("score"), st.just("rubric"), _BAD_RUBRIC),
    st.tuples(st.just("score"), st.just("threshold"), _OFF_SCALE),
    st.tuples(st.sampled_from(["score", "not_worse"]), st.just("repeats"), _BAD_REPEATS),
    st.tuples(st.sampled_from(["score", "not_worse"]), st.just("aggregate"), _BAD_AGGREGATE),
    st.tuples(st.just("not_worse"), st.sampled_from(["instruction", "response", "baseline"]), _NOT_TEXT | _BLANK),
    st.tuples(st.just("not_worse"), st.just("reference"), _NOT_TEXT),
)


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_CASES)
async def test_any_bad_argument_is_named_and_reported_as_an_error_row(
    tmp_path: Path, case: tuple[str, str, Any]
) -> None:
    kind, argument, bad = case
    backend = ScriptedBackend(_reply)
    judged, rows = _assertions(tmp_path, backend)
    args: dict[str, Any] = {"instruction": "Capital of France?", "response": "Paris.", argument: bad}
    call = "assert_score" if kind == "score" else "assert_not_worse"
    if kind == "not_worse":
        args.setdefault("baseline", "Lyon.")
    with pytest.raises(JudgeUsageError) as info:
        await getattr(judged, "a" + call)(**args)
    message = str(info.value)
    assert message.startswith(f"judged.{call}: {argument}"), message
    assert len(rows) == 1 and rows[0].outcome == "error" and rows[0].test == "t::case"
    assert rows[0].kind == kind
    assert backend.calls == []  # nothing was judged
    # The same assertion with good arguments is judged and passes.
    args[argument] = {"threshold": 4, "repeats": 1, "aggregate": "mean", "rubric": None, "reference": None}.get(
        argument, "Paris." if argument != "baseline" else "Lyon."
    )
    if argument == "instruction":
        args[argument] = "Capital of France?"
    check = await getattr(judged, "a" + call)(**args)
    assert check.passed and rows[-1].outcome == "pass"
