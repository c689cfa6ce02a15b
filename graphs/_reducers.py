"""State reducers shared by the fan-out graphs."""

from __future__ import annotations

from typing import Any, TypeVar

K = TypeVar("K")

__all__ = ["merge_or_reset"]


def merge_or_reset(left: dict[K, Any] | None, right: dict[K, Any] | None) -> dict[K, Any]:
    """Merge branch results; writing ``None`` clears them.

    Each run's first node writes ``None``, so a second run on the same
    checkpointed thread does not see the previous run's branches.
    """
    if right is None:
        return {}
    return {**(left or {}), **right}
