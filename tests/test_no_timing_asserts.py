"""The rule that keeps CI from failing by chance, checked over every test file.

A test never asserts a duration, a percentile or a count that depends on how
fast the machine ran: CI shares two busy cores, and such an assertion fails
there at random. Timing belongs in bench/, as ratios. Tests wait for events
(tests/_waiting.py), and Hypothesis runs without deadlines (tests/conftest.py).

An assertion that reads a clock, or a value named like a duration, fails this
check. A line that truly must (it checks a configured value, say, not a
measured one) says why on the line: ``# timing-lint: <reason>``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

TESTS = Path(__file__).resolve().parent
# Calls that read a clock: time.monotonic(), loop.time(), perf_counter(), datetime.now() ...
_CLOCKS = frozenset({"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time", "time", "now"})
# Names of measured durations and their summaries.
_DURATION = re.compile(r"(^|_)(elapsed|duration|latency|latencies|wall|took|percentile|p50|p90|p95|p99)(_|$)", re.I)
_OPT_OUT = "# timing-lint:"


def _reads_clock(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in _CLOCKS:
                return True
        if isinstance(sub, ast.Name | ast.Attribute):
            name = sub.id if isinstance(sub, ast.Name) else sub.attr
            if _DURATION.search(name):
                return True
    return False


def _deadline_settings(node: ast.AST) -> bool:
    """``settings(deadline=<a number>)``: Hypothesis would fail a slow example."""
    if not isinstance(node, ast.Call):
        return False
    return any(
        kw.arg == "deadline" and not (isinstance(kw.value, ast.Constant) and kw.value.value is None)
        for kw in node.keywords
    )


def violations(source: str, filename: str = "<test>") -> list[str]:
    """Each offending line as ``file:line: why``."""
    lines = source.splitlines()
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        line = lines[node.lineno - 1] if hasattr(node, "lineno") else ""
        if _OPT_OUT in line:
            continue
        if isinstance(node, ast.Assert) and _reads_clock(node.test):
            found.append(f"{filename}:{node.lineno}: an assertion on a clock or a duration")
        elif _deadline_settings(node):
            found.append(f"{filename}:{node.lineno}: a Hypothesis deadline")
    return found


def test_no_test_asserts_a_duration() -> None:
    found = [
        v for path in sorted(TESTS.rglob("*.py")) for v in violations(path.read_text(), str(path.relative_to(TESTS)))
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "code",
    [
        "assert time.monotonic() < deadline",
        "assert loop.time() - t0 < 0.2",
        "assert elapsed < 1.5",
        "assert run.elapsed_s <= 3",
        "assert stats.p99 < 0.002",
        "assert max(latencies) < 0.15",
        "assert perf_counter() - start < 1",
        "x = settings(max_examples=5, deadline=200)",
        "x = settings(deadline=timedelta(seconds=1))",
    ],
)
def test_the_check_catches_timing_assertions(code: str) -> None:
    assert violations(code), code


@pytest.mark.parametrize(
    "code",
    [
        "assert decision.timed_out",
        "assert summary.ok == 40",
        "assert policy.timeout_s == 5",
        "x = settings(max_examples=5, deadline=None)",
        "assert elapsed < 1.5  # timing-lint: the configured budget, not a measurement",
        "wait_until(lambda: api.polls >= 3, 'three polls')",
    ],
)
def test_the_check_passes_event_assertions(code: str) -> None:
    assert not violations(code), code


@given(
    name=st.sampled_from(["elapsed", "duration", "latency", "wall", "took", "p99", "percentile"]),
    prefix=st.sampled_from(["", "run_", "total_", "judge_"]),
    suffix=st.sampled_from(["", "_s", "_ms", "_seconds"]),
    op=st.sampled_from(["<", "<=", ">", "=="]),
    bound=st.floats(min_value=0, max_value=1e4, allow_nan=False),
)
def test_any_name_of_a_measured_duration_is_caught(name: str, prefix: str, suffix: str, op: str, bound: float) -> None:
    assert violations(f"assert {prefix}{name}{suffix} {op} {bound!r}")
    assert violations(f"assert obj.{prefix}{name}{suffix} {op} {bound!r}")
