"""Every program in examples/ runs against loopback OpenAI servers, the way a
user runs it: as a script, reading OPENAI_BASE_URL and OPENAI_API_KEY."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _waiting import wait_until

from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

# Timing-sensitive (examples run as processes; one is killed): bench/stress_tests.py runs it on a busy core.
pytestmark = pytest.mark.timing

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _field(prompt: str, name: str) -> str:
    """The evaluated text the judge's prompt holds between its markers."""
    return prompt.split(f"⟦begin {name}⟧")[-1].split(f"⟦end {name}⟧")[0]


def _pointwise(good: tuple[str, ...]) -> Callable[[LoopbackRequest], Reply]:
    """A grader: 5 when the answer holds one of ``good``, else 2."""

    def reply(req: LoopbackRequest) -> Reply:
        right = any(g in _field(req.prompt, "response") for g in good)
        feedback, score = ("Right.", 5) if right else ("Wrong; check the facts.", 2)
        if "response_format" in req.body:
            return Reply(json.dumps({"feedback": feedback, "score": score}))
        return Reply(f"{feedback}\n[RESULT] {score}")

    return reply


@contextmanager
def _server(responder: Callable[[LoopbackRequest], Reply | Fault]) -> Iterator[tuple[LoopbackServer, dict[str, str]]]:
    with LoopbackServer(responder) as server:
        yield server, {**os.environ, "OPENAI_API_KEY": "sk-example", "OPENAI_BASE_URL": server.url + "/v1"}


def _run(name: str, env: dict[str, str], cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_messages_app_revises_a_rejected_answer(tmp_path: Path) -> None:
    with _server(_pointwise(("Paris",))) as (server, env):
        out = _run("messages_app.py", env, tmp_path)
        calls = sum(server.calls.values())
    assert "answer: Paris is the capital of France." in out
    assert "revisions: 1" in out
    assert "verdict: ok 5 Right." in out
    assert calls == 2  # the first draft, rejected; the revision, passed


def test_guardrail_passes_revises_and_blocks(tmp_path: Path) -> None:
    with _server(_pointwise(("Paris is the capital", "is 36"))) as (server, env):
        lines = _run("guardrail.py", env, tmp_path).splitlines()
        calls = sum(server.calls.values())
    assert lines[0].startswith("pass  What is the capital of France? -> Paris")
    assert lines[1].startswith("pass  What is 12 times 3? -> 12 times 3 is 36.")  # after one revision
    assert lines[2].startswith("block Which planet is largest? -> Saturn.")
    assert calls == 5  # 1 + 2 + 2 judgements


def _results(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM results").fetchone()[0])
    except sqlite3.OperationalError:  # the job has not created its tables yet
        return 0


def test_offline_job_resumes_after_kill_9(tmp_path: Path) -> None:
    """The 4th request hangs; once the first three verdicts are committed the
    job is killed. The rerun judges exactly the three rows left."""
    hang = threading.Event()
    hang.set()
    grade = _pointwise(("4", "7", "6", "12", "9", "18"))

    seen: list[LoopbackRequest] = []

    def responder(req: LoopbackRequest) -> Reply | Fault:
        seen.append(req)
        if hang.is_set() and len(seen) > 3:  # the 4th request, and any retry of it
            return Fault("hang", delay_s=3600)
        return grade(req)

    with _server(responder) as (server, env):
        proc = subprocess.Popen(
            [sys.executable, str(EXAMPLES / "offline_job.py")],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            wait_until(lambda: _results(tmp_path / "runs.db") >= 3, "three committed verdicts", proc=proc)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        hang.clear()
        before = server.calls["/v1/chat/completions"]
        out = _run("offline_job.py", env, tmp_path)
        resent = server.calls["/v1/chat/completions"] - before
        again = _run("offline_job.py", env, tmp_path)
        calls_after = server.calls["/v1/chat/completions"] - before
    assert "6 rows, 3 judged now, 3 already stored" in out, out
    assert "all rows: ok 6, unparsed 0, errors 0, invalid 0" in out
    assert resent == 3
    assert "6 rows, 0 judged now, 6 already stored" in again
    assert calls_after == 3  # the third run sent nothing


def test_pytest_example_replays_its_cassette(tmp_path: Path) -> None:
    """CI mode replays the committed verdicts: no request reaches any server."""
    with _server(lambda req: Reply("tripwire [RESULT] 1")) as (server, env):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                str(EXAMPLES / "pytest_judged"),
            ],
            capture_output=True,
            text=True,
            env={**env, "CI": "1", "PYTEST_ADDOPTS": ""},
            cwd=EXAMPLES / "pytest_judged",
            timeout=300,
        )
        calls = sum(server.calls.values())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout
    assert "cassette mode replay" in proc.stdout
    assert calls == 0


def _pairwise(req: LoopbackRequest) -> Reply:
    """Both models prefer the right answer; on a pair with none, the small
    model prefers whichever comes first (so its orders disagree) and the
    large one calls a tie."""
    right = ("Paris.", "36.")
    in_a = any(r in _field(req.prompt, "response a") for r in right)
    in_b = any(r in _field(req.prompt, "response b") for r in right)
    if in_a != in_b:
        a, b = (9, 3) if in_a else (3, 9)
    else:
        a, b = (8, 4) if req.body["model"] == "small-judge" else (7, 7)
    if "response_format" in req.body:
        return Reply(json.dumps({"rationale": "Compared.", "score_a": a, "score_b": b}))
    return Reply(f"Compared.\n[SCORES] {a} {b}")


def test_cascade_escalates_only_the_doubtful_pair(tmp_path: Path) -> None:
    models: list[str] = []

    def responder(req: LoopbackRequest) -> Reply:
        models.append(req.body["model"])
        return _pairwise(req)

    with _server(responder) as (_, env):
        env = {**env, "SMALL_JUDGE": "openai:small-judge", "LARGE_JUDGE": "openai:large-judge"}
        lines = _run("cascade.py", env, tmp_path).splitlines()
    assert lines[0].startswith("A   by small What is the capital of France?")
    assert lines[1].startswith("B   by small What is 12 times 3?")
    assert lines[2].startswith("tie by large Name a prime number above 10.")
    assert sorted(models) == ["large-judge"] * 2 + ["small-judge"] * 6  # both orders of each pair


@pytest.mark.parametrize("path", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_has_a_test(path: str) -> None:
    tested = {"messages_app.py", "guardrail.py", "offline_job.py", "cascade.py"}
    assert path in tested, f"examples/{path} has no test in tests/test_examples.py"
