"""Shared pieces of the benchmark loaders: the record base class and file reading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["DatasetNotFoundError", "Record", "read_json", "require_dir"]


class DatasetNotFoundError(FileNotFoundError):
    """A benchmark folder or file is not where the loader was told to look."""


class Record(BaseModel):
    """Base of every loaded record: immutable, and strict about its fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def require_dir(path: str | Path, *, what: str, marker: str) -> Path:
    """``path`` as a Path, after checking that ``path/marker`` exists."""
    root = Path(path).expanduser()
    if not (root / marker).exists():
        raise DatasetNotFoundError(
            f"{what}: expected {marker!r} under {str(root)!r}; pass the folder that holds the benchmark files"
        )
    return root


def read_json(path: Path) -> Any:
    if not path.is_file():
        raise DatasetNotFoundError(f"missing benchmark file: {str(path)!r}")
    with path.open(encoding="utf-8") as fh:
        return json.load(fh)
