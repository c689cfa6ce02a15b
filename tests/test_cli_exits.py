"""The command line tells the truth in its exit code and its one-line errors (issue 15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judgegraph import __version__
from judgegraph.quickstart._data import load_bundled_pandalm, split_pandalm_by_prompt
from judgegraph.testing import LoopbackRequest, LoopbackServer, Reply

ENV = {**os.environ, "JG_KEY": "x", "RAY_USAGE_STATS_ENABLED": "0"}


def _run(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m judgegraph ARGS``; ``code`` runs first in the same process (to hide a package)."""
    cmd = [sys.executable, "-m", "judgegraph", *args]
    if code is not None:
        cmd = [
            sys.executable,
            "-c",
            f"import sys; {code}; sys.argv = ['judgegraph', *{list(args)!r}]; from judgegraph.cli import main; main()",
        ]
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True)  # a hang is pytest-timeout's to catch


def _eval(src: Path, store: Path, url: str, *extra: str) -> list[str]:
    return [
        "eval",
        str(src),
        "--kind",
        "pointwise",
        "--model",
        "judge",
        "--base-url",
        url + "/v1",
        "--api-key-env",
        "JG_KEY",
        "--no-structured",
        "--max-attempts",
        "1",
        "--store",
        str(store),
        "--no-progress",
        *extra,
    ]


def _responder(req: LoopbackRequest) -> Reply:
    return Reply("no verdict here" if "bad" in req.prompt else "Fine. [RESULT] 4")


def test_eval_exits_non_zero_when_any_row_failed_unless_allowed(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"instruction": "Q?", "response": "fine"}) + "\n", encoding="utf-8")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        json.dumps({"instruction": "Q?", "response": "fine"})
        + "\n"
        + json.dumps({"instruction": "Q?", "response": "bad"})
        + "\n{not json\n",
        encoding="utf-8",
    )
    with LoopbackServer(_responder) as server:
        ok = _run(*_eval(good, tmp_path / "a.db", server.url))
        failed = _run(*_eval(mixed, tmp_path / "b.db", server.url))
        allowed = _run(*_eval(mixed, tmp_path / "b.db", server.url, "--allow-failures"))
        as_json = _run(*_eval(mixed, tmp_path / "b.db", server.url, "--json"))
    assert ok.returncode == 0, ok.stderr
    assert failed.returncode == 1, failed.stderr
    assert "2 of 3 rows failed or were invalid" in failed.stderr
    assert allowed.returncode == 0, allowed.stderr
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["invalid"] == 1


def test_a_missing_extra_is_one_line_that_keeps_its_brackets(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"instruction": "Q?", "response": "a"}) + "\n", encoding="utf-8")
    # ray not installed: an import of it fails as it would on a machine without the extra.
    got = _run(
        *_eval(src, tmp_path / "s.db", "http://127.0.0.1:9", "--engine", "ray"), code="sys.modules['ray'] = None"
    )
    assert got.returncode == 2, got.stderr
    assert "pip install 'judgegraph[ray]'" in got.stderr, got.stderr
    assert "Traceback" not in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr


@pytest.mark.parametrize("text", ["{not json", '{"source": {"path": "x"}, "judge": {"kind": "nope"}}', "[1, 2]"])
def test_a_bad_config_is_one_line(tmp_path: Path, text: str) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(text, encoding="utf-8")
    got = _run("eval", "--spec", str(spec), "--store", str(tmp_path / "s.db"), "--no-progress")
    assert got.returncode == 2, got.stderr
    assert "Traceback" not in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr


def test_version_and_python_dash_m() -> None:
    for cmd in (
        [sys.executable, "-m", "judgegraph", "--version"],
        [str(Path(sys.executable).parent / "judgegraph"), "--version"],
    ):
        got = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
        assert got.returncode == 0 and got.stdout.strip() == f"judgegraph {__version__}", got.stderr
    helped = subprocess.run([sys.executable, "-m", "judgegraph", "--help"], env=ENV, capture_output=True, text=True)
    assert helped.returncode == 0 and "eval" in helped.stdout and "quickstart" in helped.stdout


@pytest.mark.parametrize("limit", [10, 11, 12, 13, 20])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quickstart_reduced_runs_from_the_documented_minimum_split_three_ways(limit: int, seed: int) -> None:
    # What run_quickstart does: split by prompt, then split the train side again (fit / calibration).
    outer = split_pandalm_by_prompt(load_bundled_pandalm(), seed=seed, limit=limit, dedupe=True, min_prompts=3)
    inner = split_pandalm_by_prompt(outer.train, heldout_fraction=0.25, seed=seed + 1)
    assert outer.heldout and inner.train and inner.heldout
    assert len(outer.train) + len(outer.heldout) >= limit
