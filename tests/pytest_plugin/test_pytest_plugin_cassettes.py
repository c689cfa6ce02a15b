"""The pytest plugin's cassettes, run through pytester against a real loopback
judge server: record, replay with the server stopped (no requests), changed
inputs and judge configurations, refresh, and the README example."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from _plugin_judge import (
    APP,
    EXAMPLE,
    JudgeResponder,
    _calls,
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


def test_record_then_replay_makes_no_requests_even_with_the_server_stopped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = LoopbackServer(JudgeResponder()).start()  # stopped by the test itself
    _ini(pytester, server.url)
    pytester.makepyfile(test_app=APP.replace("test_unreadable", "_skip_unreadable"))
    recorded = _run(pytester, "--judge-cassette-mode=record")
    recorded.assert_outcomes(passed=1, failed=1)
    entries = _cassette(pytester)
    assert len(entries) == 2
    for entry in entries.values():
        assert entry["template"] == "pointwise-rubric@1" and entry["judge"] == "PointwiseJudge"
        assert len(entry["verdicts"]) == 1  # type: ignore[arg-type]
    after_record = _calls(server)
    assert after_record == 2

    monkeypatch.setenv("CI", "true")  # CI defaults to replay
    replayed = _run(pytester)
    replayed.assert_outcomes(passed=1, failed=1)
    assert _calls(server) == after_record  # the running server saw nothing
    assert "cassette mode replay" in replayed.stdout.str()
    assert "judged score 2" in replayed.stdout.str()  # the recorded failure replays as itself

    server.stop()
    again = _run(pytester)
    again.assert_outcomes(passed=1, failed=1)
    assert "replayed" in again.stdout.str()


def test_changed_input_in_replay_fails_naming_test_and_key_and_refresh_rerecords_only_it(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    _ini(pytester, server.url)
    pytester.makepyfile(test_app=APP.replace("test_unreadable", "_skip_unreadable"))
    _run(pytester, "--judge-cassette-mode=record").assert_outcomes(passed=1, failed=1)
    before = _cassette(pytester)
    calls = _calls(server)

    changed = APP.replace("Paris is the capital of France.", "Paris is France's capital.")
    pytester.makepyfile(test_app=changed.replace("test_unreadable", "_skip_unreadable"))
    replay = _run(pytester, "--judge-cassette-mode=replay")
    replay.assert_outcomes(failed=2)  # test_wrong still fails on its own (replayed) verdict
    out = replay.stdout.str()
    assert "CassetteMissError: test_app.py::test_right: cassette" in out
    assert "the input changed since it was recorded" in out and "['response']" in out
    assert re.search(r"key [0-9a-f]{16}-[0-9a-f]{16}", out)
    assert "--judge-cassette-mode=refresh" in out
    assert _calls(server) == calls

    refresh = _run(pytester, "--judge-cassette-mode=refresh")
    refresh.assert_outcomes(passed=1, failed=1)
    assert _calls(server) == calls + 1  # only the changed input was judged again
    after = _cassette(pytester)
    (kept,) = set(before) & set(after)
    assert before[kept] == after[kept]  # test_wrong's recording, untouched
    (new,) = set(after) - set(before)
    assert after[new]["input"]["response"] == "Paris is France's capital."  # type: ignore[index]
    # The stale recording went because the test that owned it passed without
    # it; a second refresh changes nothing and calls nothing.
    assert len(after) == 2
    _run(pytester, "--judge-cassette-mode=refresh").assert_outcomes(passed=1, failed=1)
    assert _calls(server) == calls + 1 and _cassette(pytester) == after


def test_changed_judge_configuration_is_named_in_replay(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    _ini(pytester, server.url)
    pytester.makepyfile(test_app=APP.replace("test_unreadable", "_skip_unreadable"))
    _run(pytester, "--judge-cassette-mode=record")
    result = _run(pytester, "--judge-cassette-mode=replay", "--judge-model=another-model")
    result.assert_outcomes(failed=2)
    assert "the judge configuration changed" in result.stdout.str()


def test_replay_mode_backend_refuses_calls(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    _ini(pytester, server.url)
    pytester.makepyfile(
        test_app="""
from judgegraph import PointwiseJudge

async def test_own_judge_on_the_backend(judge_backend):
    verdict = await PointwiseJudge(judge_backend).ajudge({"instruction": "Q?", "response": "Paris."})
    assert verdict.status.value == "error" and "replay" in verdict.reason
"""
    )
    _run(pytester, "-p", "asyncio", "--judge-cassette-mode=replay", "-o", "asyncio_mode=auto").assert_outcomes(passed=1)
    assert _calls(server) == 0


def _copy_example(pytester: pytest.Pytester) -> None:
    for path in EXAMPLE.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            dest = pytester.path / path.relative_to(EXAMPLE)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())


def test_documented_example_runs_in_replay_mode_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example project the pytest guide shows, file for file, with its committed
    cassette: CI replays it with no server at all."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "pytest.md").read_text()
    assert "examples/pytest_judged" in guide
    assert (EXAMPLE / "test_answers.py").read_text() in guide
    _copy_example(pytester)
    monkeypatch.setenv("CI", "1")
    result = _run(pytester)
    result.assert_outcomes(passed=4)
    assert "cassette mode replay" in result.stdout.str()
    assert result.stdout.str().count("replayed") >= 4


def test_committed_example_cassette_is_what_the_judge_answers(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    """Recording the example afresh gives the committed keys and verdicts (latency aside)."""
    _copy_example(pytester)
    (pytester.path / "cassettes" / "test_answers.json").unlink()
    _run(pytester, "--judge-cassette-mode=record", f"--judge-base-url={server.url}/v1").assert_outcomes(passed=4)
    fresh = _cassette(pytester, "test_answers")
    committed = json.loads((EXAMPLE / "cassettes" / "test_answers.json").read_text())["entries"]

    def plain(entries: dict[str, dict[str, object]]) -> dict[str, object]:
        return {
            k: (e["input"], e["tests"], sorted(json.dumps(_strip(v), sort_keys=True) for v in e["verdicts"]))  # type: ignore[attr-defined]
            for k, e in entries.items()
        }

    assert plain(fresh) == plain(committed)


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "latency_s"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
