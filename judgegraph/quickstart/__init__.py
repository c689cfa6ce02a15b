"""``judgegraph quickstart``: the whole loop on bundled data.

Collected traces (PandaLM's test set, shipped in the package) are split by
prompt; a local judge is trained on the train split; the pairwise graph judges
the held-out split with that judge as tier 1 and a teacher as tier 2; the
result is measured against the human majority.

The data helpers import only pydantic and the datasets module; the run
itself (``run_quickstart``) loads torch and transformers when it trains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._data import (
    PANDALM_ITEMS,
    QuickstartSplit,
    bundled_pandalm,
    load_bundled_pandalm,
    split_pandalm_by_prompt,
)

if TYPE_CHECKING:
    from ._models import BudgetChoice, QuickstartOptions, QuickstartResult, TableRow
    from ._render import print_result, result_markdown, result_table
    from ._run import arun_quickstart, run_quickstart
    from ._stored import table_row

__all__ = [
    "PANDALM_ITEMS",
    "BudgetChoice",
    "QuickstartOptions",
    "QuickstartResult",
    "QuickstartSplit",
    "TableRow",
    "arun_quickstart",
    "bundled_pandalm",
    "load_bundled_pandalm",
    "print_result",
    "result_markdown",
    "result_table",
    "run_quickstart",
    "split_pandalm_by_prompt",
    "table_row",
]

_LAZY = {
    "BudgetChoice": "._models",
    "QuickstartOptions": "._models",
    "QuickstartResult": "._models",
    "TableRow": "._models",
    "arun_quickstart": "._run",
    "run_quickstart": "._run",
    "table_row": "._stored",
    "print_result": "._render",
    "result_markdown": "._render",
    "result_table": "._render",
}


def __getattr__(name: str) -> Any:
    # The run pulls in the graphs and jobs modules; the data helpers (used by
    # the flywheel) should not pay for them.
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
