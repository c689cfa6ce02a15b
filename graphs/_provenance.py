"""One provenance for a verdict assembled from several branches."""

from __future__ import annotations

from collections.abc import Sequence

from judgegraph.types import Provenance, Status, Usage

__all__ = ["merge_provenance"]


def merge_provenance(parts: Sequence[Provenance | None], *, status: Status) -> Provenance | None:
    """Sum usage, attempts and cost over the branches. Branches run side by
    side, so the latency is the slowest branch, not the sum."""
    known = [p for p in parts if p is not None]
    if not known:
        return None
    usage = Usage()
    for p in known:
        usage = usage + p.usage
    costs = [p.cost_usd for p in known]
    return known[0].model_copy(
        update={
            "usage": usage,
            "attempts": sum(p.attempts for p in known),
            "latency_s": max(p.latency_s for p in known),
            "cost_usd": None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
            "status": status,
        }
    )
