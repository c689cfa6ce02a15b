"""Typed loaders for the public judge-evaluation benchmarks (PandaLM, LLMBar, UniEval).

Each loader takes the folder that holds one benchmark's files, as published
by its authors, and returns frozen pydantic records. No data ships with the
package.
"""

from __future__ import annotations

from ._common import DatasetNotFoundError, Record
from ._llmbar import (
    LLMBAR_SUBSETS,
    LLMBarItem,
    LLMBarJudgement,
    LLMBarRun,
    list_llmbar_runs,
    load_llmbar,
    load_llmbar_run,
)
from ._pandalm import PANDALM_JUDGES, PANDALM_LABELS, PandaLMItem, load_pandalm
from ._unieval import UNIEVAL_DATASETS, UniEvalItem, load_unieval

__all__ = [
    "LLMBAR_SUBSETS",
    "PANDALM_JUDGES",
    "PANDALM_LABELS",
    "UNIEVAL_DATASETS",
    "DatasetNotFoundError",
    "LLMBarItem",
    "LLMBarJudgement",
    "LLMBarRun",
    "PandaLMItem",
    "Record",
    "UniEvalItem",
    "list_llmbar_runs",
    "load_llmbar",
    "load_llmbar_run",
    "load_pandalm",
    "load_unieval",
]
