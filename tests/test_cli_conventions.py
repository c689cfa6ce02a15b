"""The command line keeps the conventions users' fingers know: -h and -V,
help (not an error) for a bare command, and ids printed whole."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judgegraph import __version__
from judgegraph._templates import list_templates


def _cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "judgegraph", *args], capture_output=True, text=True, env=env)


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
