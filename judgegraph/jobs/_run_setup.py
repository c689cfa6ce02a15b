"""What every engine does before it judges: name the run, open the store,
and claim each source row that still needs a verdict."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._recorder import _Recorder
from ._spec import PreparedRow, RowPreparer, SourceConfig
from ._store import Store

__all__ = ["claim_row", "default_run_id", "open_store"]


def default_run_id(source: SourceConfig, config_hash: str) -> str:
    first = source.path if isinstance(source.path, str) else (source.path[0] if source.path else "run")
    stem = Path(first).stem.replace("*", "") or "run"
    return f"{stem}-{config_hash[:8]}"


def open_store(store: Store | str | os.PathLike[str]) -> tuple[Store, bool]:
    if isinstance(store, Store):
        return store, False
    return Store(store), True


def claim_row(
    preparer: RowPreparer, srow: Any, rec: _Recorder, claimed: set[str], rerun_failed: bool
) -> PreparedRow | None:
    """Prepare and record one source row; return it when it still needs judging.

    An invalid row, a repeat of an input already claimed in this run (judged
    once, recorded for both rows), or an item the store already holds is
    recorded and skipped.
    """
    prep = preparer(srow)
    rec.row(prep)
    if prep.item is None:
        return None
    assert prep.item_hash is not None
    if prep.item_hash in claimed:
        rec.cached()
        return None
    if not rec.needs_judging(prep, rerun_failed):
        return None
    claimed.add(prep.item_hash)
    return prep
