"""The tree stays ruff-clean: CI runs the same checks a reviewer would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_check_and_format() -> None:
    pytest.importorskip("ruff")
    check = _run("ruff", "check", ".")
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = _run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


# Strict mypy runs in tests/test_architecture.py, over the package as it installs.
