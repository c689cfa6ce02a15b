"""The package list in pyproject names every package in the tree, so a built
wheel ships all of them (an editable install would hide a missing one)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    dirs = {"judgegraph": ROOT / "judgegraph", **{k: ROOT / v for k, v in cfg["package-dir"].items()}}
    found = set()
    for name, path in dirs.items():
        for init in path.rglob("__init__.py"):
            rel = init.parent.relative_to(path).parts
            found.add(".".join((name, *rel)))
    assert found == listed
