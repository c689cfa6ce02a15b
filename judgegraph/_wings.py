"""graphs/ and finetune/ in a source checkout.

They live at the repo root and install as ``judgegraph.graphs`` and
``judgegraph.finetune``. A wheel puts them inside this package and an
editable install maps them; but Python run from the repo root imports the
checkout's own ``judgegraph/`` first, where neither is. This finder covers
that case, and only when the folder beside this package is really there.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["mount_root_wings"]

_WINGS = ("graphs", "finetune")


class _RootWingFinder(importlib.abc.MetaPathFinder):
    def __init__(self, wings: dict[str, Path]) -> None:
        self.wings = wings

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        folder = self.wings.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def mount_root_wings() -> None:
    here = Path(__file__).resolve().parent
    missing = {
        f"judgegraph.{w}": here.parent / w
        for w in _WINGS
        if not (here / w).is_dir() and (here.parent / w / "__init__.py").is_file()
    }
    if missing and not any(isinstance(f, _RootWingFinder) for f in sys.meta_path):
        # Appended: an install's own finder, when there is one, answers first.
        sys.meta_path.append(_RootWingFinder(missing))
