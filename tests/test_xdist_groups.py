"""CI's test command keeps each xdist group on one worker (issue 30).

tests/conftest.py puts every test that needs a serving engine in one group
and every other file in a group of its own, so that heavy fixtures are
built once. pytest 9.2 silently broke that: pytest-xdist 3.8 marks a group
by rewriting a test's node id, which pytest 9.2 no longer reads
(pytest-dev/pytest-xdist#1386), and every test was scheduled on its own,
the SmolLM2 vLLM server started twice. This runs CI's scheduler on a small
project and checks where its groups ran, so a version that breaks it again
fails here rather than costing CI minutes unseen.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# Starts two xdist worker processes.
pytestmark = pytest.mark.timing

_TESTS = """
import json, os
from pathlib import Path

import pytest

LOG = Path(__file__).parent / "ran.jsonl"


@pytest.fixture(scope="module")
def built():
    with LOG.open("a") as f:
        f.write(json.dumps({{"setup": __name__, "worker": os.environ.get("PYTEST_XDIST_WORKER")}}) + "\\n")
    return 1


@pytest.mark.xdist_group("{group}")
@pytest.mark.parametrize("k", range(4))
def test_grouped(built, k):
    with LOG.open("a") as f:
        f.write(json.dumps({{"test": __name__, "worker": os.environ.get("PYTEST_XDIST_WORKER")}}) + "\\n")
"""


def test_a_group_runs_on_one_worker_and_a_module_fixture_is_built_once(pytester: pytest.Pytester) -> None:
    for name in ("alpha", "beta"):
        pytester.makepyfile(**{f"test_engine_{name}": _TESTS.format(group="engines")})
    for n in range(6):  # ungrouped work that keeps the other worker busy
        pytester.makepyfile(**{f"test_other_{n}": "def test_other():\n    pass\n"})
    # CI's own scheduling options (.ci/run), with xdist's own plugin.
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=14)
    ran = [json.loads(line) for line in (Path(pytester.path) / "ran.jsonl").read_text().splitlines()]
    workers = {r["worker"] for r in ran}
    assert len(workers) == 1, ran  # both files' group on one worker
    setups = [r["setup"] for r in ran if "setup" in r]
    assert sorted(setups) == ["test_engine_alpha", "test_engine_beta"], ran  # each module's fixture once
