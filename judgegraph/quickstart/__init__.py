"""``judgegraph quickstart``: the whole loop on bundled data.

Collected traces (PandaLM's test set, shipped in the package) are split by
prompt; a local judge is trained on the train split; the pairwise graph judges
the held-out split with that judge as tier 1 and a teacher as tier 2; the
result is measured against the human majority.
"""

from __future__ import annotations

from ._data import (
    PANDALM_ITEMS,
    QuickstartSplit,
    bundled_pandalm,
    load_bundled_pandalm,
    split_by_instruction,
)

__all__ = [
    "PANDALM_ITEMS",
    "QuickstartSplit",
    "bundled_pandalm",
    "load_bundled_pandalm",
    "split_by_instruction",
]
