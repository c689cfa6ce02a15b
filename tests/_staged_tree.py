"""The package as it installs, for tools that read source trees.

graphs/ and finetune/ live at the repo root but install as judgegraph.graphs
and judgegraph.finetune (pyproject's package-dir). mypy and import-linter
read folders, not that mapping, so they check a staged copy where the two
folders sit inside judgegraph/, exactly as in a wheel.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "data")


def stage_package(dest: Path) -> Path:
    """Copy the installable package into ``dest``; returns ``dest``."""
    pkg = dest / "judgegraph"
    shutil.copytree(ROOT / "judgegraph", pkg, ignore=_IGNORE)
    shutil.copytree(ROOT / "graphs", pkg / "graphs", ignore=_IGNORE)
    shutil.copytree(ROOT / "finetune", pkg / "finetune", ignore=_IGNORE)
    return dest


def repo_path(staged: str) -> str:
    """A path in a tool's output, as the file's place in the repo."""
    for wing in ("graphs", "finetune"):
        staged = staged.replace(f"judgegraph/{wing}/", f"{wing}/")
    return staged
