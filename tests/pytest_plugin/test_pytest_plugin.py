"""The pytest plugin's assertions, run through pytester against a real loopback
judge server: passing, failing and unreadable verdicts, settings, the summary
table and JUnit properties, repeats, pairwise and async tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
from _plugin_judge import (
    APP,
    JudgeResponder,
    _cassette,
    _ini,
    _run,
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


def test_pass_fail_and_unreadable_verdicts(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    _ini(pytester, server.url, judge_structured_output="false")
    pytester.makepyfile(test_app=APP)
    result = _run(pytester, "--judge-cassette-mode=live")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    # The failure says the score, the threshold and the judge's rationale.
    assert "judged score 2; the test needs >= 4 (mean)" in out
    assert "rationale: It names the wrong city." in out
    assert "response: London is the capital of France." in out
    # An unreadable verdict fails as unreadable, with status, reason and raw text, and no score.
    unreadable = out[out.index("_ test_unreadable _") :]
    assert "the judge's verdict could not be read" in unreadable and "status unparsed" in unreadable
    assert "raw text: I would rather not say." in unreadable
    assert "judged score" not in unreadable.split("judgegraph verdicts")[0]
    # Live mode writes no cassette; the repair request makes the unreadable case cost two calls.
    assert not (pytester.path / "cassettes").exists()
    assert server.calls["/v1/chat/completions"] == 4


def test_command_line_overrides_ini_and_marker_overrides_both(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    _ini(pytester, server.url, judge_structured_output="false", judge_threshold="6")
    pytester.makepyfile(
        test_app="""
import pytest

def test_cli_threshold(judged, judge_settings):
    assert judge_settings.threshold == 3
    judged.assert_score("Capital of France?", "Somewhere in Europe.")  # scores 3

@pytest.mark.judge(threshold=5)
def test_marker_threshold(judged):
    judged.assert_score("Capital of France?", "Somewhere in Europe.")
"""
    )
    result = _run(pytester, "--judge-cassette-mode=live", "--judge-threshold=3")
    result.assert_outcomes(passed=1, failed=1)
    assert "judged score 3; the test needs >= 5" in result.stdout.str()


def test_summary_table_and_junit_properties(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    _ini(pytester, server.url, judge_price_in="2", judge_price_out="8")
    pytester.makepyfile(test_app=APP)
    result = _run(pytester, "--judge-cassette-mode=refresh", "--junitxml=report.xml")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    table = out[out.index("judgegraph verdicts") :].splitlines()
    assert table[1].split() == ["test", "judge", "score", "threshold", "result", "cost", "source", "spread"]
    rows = {line.split()[0]: line.split() for line in table[3:6]}
    assert rows["test_app.py::test_right"][1:6] == ["PointwiseJudge", "5", ">=", "4", "pass"]
    assert rows["test_app.py::test_wrong"][5] == "fail"
    assert rows["test_app.py::test_unreadable"][2:6] == ["unparsed", ">=", "4", "unreadable"]
    assert "3 judged assertion(s): 1 pass, 1 fail, 1 unreadable" in out and "cassette mode refresh" in out

    cases = {c.get("name"): c for c in ET.parse(pytester.path / "report.xml").getroot().iter("testcase")}
    props = {name: {p.get("name"): p.get("value") for p in c.iter("property")} for name, c in cases.items()}
    right = props["test_right"]
    assert right["judge"] == "PointwiseJudge" and right["judge_score"] == "5" and right["judge_result"] == "pass"
    assert right["judge_threshold"] == ">= 4" and right["judge_source"] == "recorded"
    # The loopback server reports 10 prompt tokens and the reply's tokens: priced at $2/$8 per Mtok.
    assert float(right["judge_cost_usd"] or "nan") > 0
    assert props["test_unreadable"]["judge_result"] == "unreadable"

    # Replayed verdicts cost nothing this session, and say where they came from.
    replay = _run(pytester, "--judge-cassette-mode=replay", "--junitxml=replay.xml")
    replay.assert_outcomes(passed=1, failed=2)
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "replay.xml").getroot().iter("testcase")}
    right = {p.get("name"): p.get("value") for p in cases["test_right"].iter("property")}
    assert right["judge_source"] == "replayed" and float(right["judge_cost_usd"] or "nan") == 0.0


def test_repeats_majority_and_mean_report_the_spread(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    _ini(pytester, server.url, judge_structured_output="false")
    pytester.makepyfile(
        test_app="""
import pytest

@pytest.mark.judge(threshold=5, repeats=3, aggregate="majority")
def test_majority(judged):
    check = judged.assert_score("What is 12 times 3?", "It is 36.")
    assert sorted(v.score for v in check.verdicts) == [4, 5, 5]

@pytest.mark.judge(threshold=5, repeats=3, aggregate="mean")
def test_mean(judged):
    judged.assert_score("What is 12 times 3?", "36, I think.")
"""
    )
    result = _run(pytester, "--judge-cassette-mode=record")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "mean score 4.67 over 3 verdicts [" in out and "the test needs >= 5 (mean)" in out
    assert "2/3 >= 5" in out  # the majority row's score column
    assert out.count("4..5 sd 0.58") == 2  # the spread, on both rows
    assert server.calls["/v1/chat/completions"] == 6
    entries = _cassette(pytester)
    assert sorted(len(e["verdicts"]) for e in entries.values()) == [3, 3]  # type: ignore[arg-type]

    # Asking for more repeats than were recorded: replay says so; refresh judges only the extra ones.
    pytester.makepyfile(
        test_app="""
import pytest

@pytest.mark.judge(threshold=4, repeats=4)
def test_majority(judged):
    judged.assert_score("What is 12 times 3?", "It is 36.")
"""
    )
    miss = _run(pytester, "--judge-cassette-mode=replay")
    miss.assert_outcomes(failed=1)
    assert "has 3 recorded verdict(s), the test asks for 4 repeats" in miss.stdout.str()
    _run(pytester, "--judge-cassette-mode=refresh").assert_outcomes(passed=1)
    assert server.calls["/v1/chat/completions"] == 7
    assert "replayed+recorded" not in miss.stdout.str()


def test_pairwise_not_worse_is_swap_debiased(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    _ini(pytester, server.url)
    pytester.makepyfile(
        test_app="""
def test_better(judged):
    judged.assert_not_worse("Capital of France?", "Paris.", baseline="Lyon.")

def test_worse(judged):
    judged.assert_not_worse("Capital of France?", "Lyon.", baseline="Paris.")

def test_position_bias_is_a_tie(judged):
    check = judged.assert_not_worse("biased: capital of France?", "Lyon.", baseline="Paris.")
    (verdict,) = check.verdicts
    assert verdict.inconsistent and verdict.winner == "tie"
    assert [o.winner for o in verdict.orders] == ["A", "B"]
"""
    )
    result = _run(pytester, "--judge-cassette-mode=record")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "the new answer is worse than the baseline" in out
    assert "orders (A/B, B/A mapped back; A = new): B / B; inconsistent: False" in out
    assert "rationale: Answer" in out and "baseline: Paris." in out
    assert server.calls["/v1/chat/completions"] == 6  # both orders for each of the three cases
    assert "not worse (pref >= 0.5)" in out


def test_async_tests_under_pytest_asyncio_and_sync_tests_without_it(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    _ini(pytester, server.url, asyncio_mode="auto")
    pytester.makepyfile(
        test_app="""
async def test_async(judged, pointwise_judge):
    check = await judged.aassert_score("Capital of France?", "Paris.")
    assert check.passed
    verdict = await pointwise_judge.ajudge({"instruction": "Capital of France?", "response": "Paris."})
    assert verdict.score == 5

async def test_async_pairwise(judged):
    await judged.aassert_not_worse("Capital of France?", "Paris.", baseline="Lyon.")
"""
    )
    _run(pytester, "--judge-cassette-mode=refresh").assert_outcomes(passed=2)
    pytester.makepyfile(
        test_app="""
def test_sync(judged):
    judged.assert_score("Capital of France?", "Paris.")
"""
    )
    # Without pytest-asyncio the sync helpers still work (and replay the recording above).
    result = _run(pytester, "-p", "no:asyncio", "--judge-cassette-mode=replay")
    result.assert_outcomes(passed=1)
