"""Batch evaluation jobs: sources, a resumable SQLite store, rate limits,
engines behind one interface (local, batch API or vLLM batch, Ray), and reports."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judgegraph.backends import RateLimitedBackend, RateLimiter, TokenBucket
from judgegraph.judges import fingerprint_for, judge_fingerprint

from ._batch import BatchEstimate, BatchOptions, aestimate_batch_job, arun_batch_job
from ._engines import BatchEngine, Engine, LocalEngine, RayEngine, engine_for
from ._recorder import JobProgress, JobSummary, ProgressCallback
from ._runner import arun_job, arun_spec
from ._sources import Shard, SourceChangedError, detect_format, expand_paths, iter_rows
from ._sources_files import SourceRow
from ._sources_traces import langsmith_row, otel_rows
from ._spec import (
    BackendConfig,
    JobSpec,
    JudgeConfig,
    JudgeKind,
    Limits,
    PreparedRow,
    RowPreparer,
    SourceConfig,
    build_backend,
    build_judge,
    config_hash,
)
from ._store import ItemRecord, ResultRecord, RunInfo, RunMismatchError, Store, StoredRow
from ._store_guard import RunLockedError, StoreCommitError, StoreError
from ._summary_corrected import CorrectedRate, RateFigure

if TYPE_CHECKING:
    from ._ray import run_spec_ray
    from ._report import build_report, write_report
    from ._report_data import ReportData

__all__ = [
    "BackendConfig",
    "BatchEngine",
    "BatchEstimate",
    "BatchOptions",
    "CorrectedRate",
    "Engine",
    "ItemRecord",
    "JobProgress",
    "JobSpec",
    "JobSummary",
    "JudgeConfig",
    "JudgeKind",
    "Limits",
    "LocalEngine",
    "PreparedRow",
    "ProgressCallback",
    "RateFigure",
    "RateLimitedBackend",
    "RateLimiter",
    "RayEngine",
    "ReportData",
    "ResultRecord",
    "RowPreparer",
    "RunInfo",
    "RunLockedError",
    "RunMismatchError",
    "Shard",
    "SourceChangedError",
    "SourceConfig",
    "SourceRow",
    "Store",
    "StoreCommitError",
    "StoreError",
    "StoredRow",
    "TokenBucket",
    "aestimate_batch_job",
    "arun_batch_job",
    "arun_job",
    "arun_spec",
    "build_backend",
    "build_judge",
    "build_report",
    "config_hash",
    "detect_format",
    "engine_for",
    "expand_paths",
    "fingerprint_for",
    "iter_rows",
    "judge_fingerprint",
    "langsmith_row",
    "otel_rows",
    "run_spec_ray",
    "write_report",
]

# The Ray engine needs the 'ray' extra and reports need 'metrics': load them on first use.
_LAZY = {
    "run_spec_ray": "._ray",
    "ReportData": "._report_data",
    "build_report": "._report",
    "write_report": "._report",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'judgegraph.jobs' has no attribute {name!r}")
