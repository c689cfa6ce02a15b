"""The command line keeps the conventions users' fingers know: -h and -V,
help (not an error) for a bare command, and ids printed whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import __version__
from judgegraph._templates import list_templates


def _cli(*args: str, columns: int = 80, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    full = {**os.environ, "COLUMNS": str(columns), "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
    return subprocess.run([sys.executable, "-m", "judgegraph", *args], capture_output=True, text=True, env=full)


@pytest.mark.parametrize("args", [(), ("-h",), ("--help",)])
def test_bare_command_and_help_exit_zero_with_help_on_stdout(args: tuple[str, ...]) -> None:
    out = _cli(*args)
    assert out.returncode == 0, out.stderr
    assert "Usage" in out.stdout and "quickstart" in out.stdout


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags(flag: str) -> None:
    out = _cli(flag)
    assert out.returncode == 0 and out.stdout.strip() == f"judgegraph {__version__}"


@pytest.mark.parametrize("sub", [("eval",), ("report",), ("quickstart",), ("cascade", "plan"), ("finetune",)])
def test_short_help_works_on_sub_commands(sub: tuple[str, ...]) -> None:
    out = _cli(*sub, "-h")
    assert out.returncode == 0, out.stderr
    assert "Usage" in out.stdout


@settings(max_examples=6)
@given(columns=st.integers(min_value=40, max_value=200))
def test_template_ids_are_never_cut_short(columns: int) -> None:
    out = _cli("templates", columns=columns)
    assert out.returncode == 0, out.stderr
    for t in list_templates():
        assert t.id in out.stdout, (columns, t.id)


@pytest.mark.timing  # a loopback server and two subprocesses
def test_eval_and_report_print_results_on_stdout_and_diagnostics_on_stderr(tmp_path: Path) -> None:
    """A pipe gets the result (``judgegraph eval ... | tee``): the run's
    counts and where its report is, then the report's paths; the rows that
    failed are diagnostics, on stderr, beside the progress."""
    import json

    from judgegraph.testing import Fault, LoopbackRequest, LoopbackServer, Reply

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "instruction": f"q{i}", "response": "a"}) + "\n" for i in range(4)))
    store = tmp_path / "s.db"

    def answer(req: LoopbackRequest) -> Reply | Fault:
        # One row fails with a reason that must reach stderr only.
        return Fault("status", 400, message="bad row q3") if "q3" in json.dumps(req.body) else Reply("[RESULT] 4")

    with LoopbackServer(answer) as server:
        ev = _cli(
            "eval", str(src), "--kind", "pointwise", "--model", "judge", "--base-url", server.url + "/v1",
            "--api-key-env", "JG_TEST_KEY", "--no-structured", "--store", str(store), "--run-id", "r",
            "--no-progress", env={"JG_TEST_KEY": "x"},
        )  # fmt: skip
    assert ev.returncode == 1, ev.stderr[-1500:]
    assert "ok 3, unparsed 0, error 1" in ev.stdout and "report: judgegraph report r" in ev.stdout, ev.stdout
    assert "ok 3" not in ev.stderr and "bad row q3" in ev.stderr and "bad row q3" not in ev.stdout
    rep = _cli("report", "r", "--store", str(store), "--out", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr[-1500:]
    printed = dict(line.split(": ", 1) for line in rep.stdout.strip().splitlines())
    assert set(printed) == {"html", "json", "markdown"} and all(Path(p).is_file() for p in printed.values())
