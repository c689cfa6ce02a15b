"""``judgegraph quickstart``: the whole loop on bundled data.

Collected traces (PandaLM's test set, shipped in the package) are dealt into
folds by prompt; the pairwise graph judges every item with a local judge that
never saw its prompt as tier 1 and a teacher as tier 2, escalating by a budget
picked on the other folds; the result is measured against the human majority.
The local judge saved for later use learns from every item.

The data helpers import only pydantic and the datasets module; the run
itself (``run_quickstart``) loads torch and transformers when it trains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._data import (
    PANDALM_ITEMS,
    PandaLMFolds,
    QuickstartSplit,
    bundled_pandalm,
    fold_pandalm_by_prompt,
    load_bundled_pandalm,
    split_pandalm_by_prompt,
)

if TYPE_CHECKING:
    from ._models import BudgetChoice, FoldPlan, QuickstartOptions, QuickstartResult, TableRow
    from ._render import print_result, result_markdown, result_table
    from ._run import arun_quickstart, run_quickstart
    from ._stored import table_row

__all__ = [
    "PANDALM_ITEMS",
    "BudgetChoice",
    "FoldPlan",
    "PandaLMFolds",
    "QuickstartOptions",
    "QuickstartResult",
    "QuickstartSplit",
    "TableRow",
    "arun_quickstart",
    "bundled_pandalm",
    "fold_pandalm_by_prompt",
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
    "FoldPlan": "._models",
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
