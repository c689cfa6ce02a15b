"""JSON read from a model, strictly: a key given twice in one object is an error.

Python's ``json`` keeps the last of two equal keys, so ``{"score": 5,
"score": 1}`` would read as 1, silently. A verdict (or a tool call's
arguments) that says two things is ambiguous, and the reader refuses it,
at any depth, as the text parser refuses two verdict markers.

This module imports nothing from judgegraph: the message reader and the
verdict parser, at different layers, both use it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DuplicateKeyError", "loads_unique"]


class DuplicateKeyError(ValueError):
    """A JSON object gives ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def loads_unique(text: str | bytes) -> Any:
    """``json.loads``, raising :class:`DuplicateKeyError` (a ValueError) when
    any object, at any depth, gives a key twice (compared after escapes are decoded)."""
    return json.loads(text, object_pairs_hook=_unique)
