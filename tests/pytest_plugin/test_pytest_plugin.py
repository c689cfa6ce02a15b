"""The pytest plugin, run through pytester against a real loopback judge server.

Each test writes a small app test suite, runs it in-process with pytest's own
``pytester`` and checks outcomes, messages, cassettes, the summary table,
JUnit properties, and the server's own request counts.
"""

from __future__ import annotations

import json
import re
import threading
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import judgegraph.pytest_plugin._asserts
import judgegraph.pytest_plugin._build  # noqa: F401
from judgegraph.backends import OpenAIBackend
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

# Imported here, before any inner run: pytester drops the modules an in-process
# run imports, and re-importing the judge stack for every run costs seconds.
assert OpenAIBackend is not None

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).parent / "example"
_BLOCK = re.compile(r"⟦begin (response(?: a| b)?)⟧\n(.*?)\n⟦end \1⟧", re.S)


class JudgeResponder:
    """A stand-in judge model with fixed opinions: Paris and 36 are right,
    Lyon and London wrong; "gibberish" gets an unreadable verdict. Answers
    named in ``cycles`` get the next score of their cycle on each request."""

    def __init__(self, cycles: dict[str, list[int]] | None = None) -> None:
        self.cycles = cycles or {"36": [5, 4, 5]}
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def quality(self, text: str) -> int | None:
        if "gibberish" in text:
            return None
        for word, cycle in self.cycles.items():
            if word in text:
                with self.lock:
                    self.seen[word] += 1
                    return cycle[(self.seen[word] - 1) % len(cycle)]
        if "Paris" in text:
            return 5
        return 2 if ("Lyon" in text or "London" in text) else 3

    def __call__(self, req: LoopbackRequest) -> Reply:
        prompt = req.prompt
        blocks = {name: body for name, body in _BLOCK.findall(prompt)}
        structured = "response_format" in req.body or "grammar" in (req.body.get("parameters") or {})
        if "response" in blocks:
            q = self.quality(blocks["response"])
            if q is None:
                return Reply("I would rather not say.")
            note = "Correct and clear." if q >= 4 else "It names the wrong city." if q <= 2 else "Partly right."
            return Reply(json.dumps({"feedback": note, "score": q}) if structured else f"{note} [RESULT] {q}")
        if "biased" in prompt:  # a position-biased judge: always prefers the first answer
            a, b = 9, 3
        else:
            qa, qb = self.quality(blocks["response a"]), self.quality(blocks["response b"])
            if qa is None or qb is None:
                return Reply("Both are fine, I suppose.")
            a, b = 2 * qa - 1, 2 * qb - 1
        why = "Answer A is right." if a > b else "Answer B is right." if b > a else "Equal."
        body = {"rationale": why, "score_a": a, "score_b": b}
        return Reply(json.dumps(body) if structured else f"{why} [SCORES] {a} {b}")


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(JudgeResponder()) as s:
        yield s


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


def _ini(pytester: pytest.Pytester, url: str, **extra: str) -> None:
    lines = {
        "judge_model": "loopback-judge",
        "judge_base_url": f"{url}/v1",
        "judge_threshold": "4",
        "asyncio_default_fixture_loop_scope": "function",
        **extra,
    }
    pytester.makeini("[pytest]\n" + "".join(f"{k} = {v}\n" for k, v in lines.items()))


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q", *args)


def _cassette(pytester: pytest.Pytester, name: str = "test_app") -> dict[str, dict[str, object]]:
    data = json.loads((pytester.path / "cassettes" / f"{name}.json").read_text())
    assert data["judgegraph_cassette"] == 1
    return data["entries"]  # type: ignore[no-any-return]


def _calls(server: LoopbackServer) -> int:
    return sum(server.calls.values())


APP = """
def test_right(judged):
    judged.assert_score("What is the capital of France?", "Paris is the capital of France.")

def test_wrong(judged):
    judged.assert_score("What is the capital of France?", "London is the capital of France.")

def test_unreadable(judged):
    judged.assert_score("What is the capital of France?", "gibberish gibberish")
"""


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


def test_readme_example_runs_in_replay_mode_in_ci(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's example file and its committed cassette: CI replays them with no server at all."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert (EXAMPLE / "test_answers.py").read_text() in readme
    assert (EXAMPLE / "pytest.ini").read_text() in readme
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
