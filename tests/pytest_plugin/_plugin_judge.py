"""A stand-in judge model on a loopback server, and the helpers the plugin's
pytester tests share."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path

import pytest

import judgegraph.pytest_plugin._asserts
import judgegraph.pytest_plugin._build  # noqa: F401
from judgegraph.backends import OpenAIBackend
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

# Imported here, before any inner run: pytester drops the modules an in-process
# run imports, and re-importing the judge stack for every run costs seconds.
assert OpenAIBackend is not None

# The one example project users are pointed to (docs/guides/pytest.md); CI replays its cassette.
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytest_judged"
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
    # The inner run keeps its own order and no parallel workers, whatever plugins the outer run has.
    return pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:randomly", "-p", "no:xdist", "-q", *args
    )  # fmt: skip


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
