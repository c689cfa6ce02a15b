"""Batch evaluation jobs: sources, a resumable SQLite store, rate limits,
local and Ray engines, and reports."""

from __future__ import annotations

from ._ratelimit import RateLimitedBackend, RateLimiter, TokenBucket
from ._runner import JobProgress, JobSummary, ProgressCallback, run_job, run_spec
from ._sources import Shard, SourceRow, detect_format, expand_paths, iter_rows, langsmith_row, otel_rows
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
    judge_fingerprint,
)
from ._store import ItemRecord, ResultRecord, RunInfo, RunMismatchError, Store, StoredRow

__all__ = [
    "BackendConfig",
    "ItemRecord",
    "JobProgress",
    "JobSpec",
    "JobSummary",
    "JudgeConfig",
    "JudgeKind",
    "Limits",
    "PreparedRow",
    "ProgressCallback",
    "RateLimitedBackend",
    "RateLimiter",
    "ResultRecord",
    "RowPreparer",
    "RunInfo",
    "RunMismatchError",
    "Shard",
    "SourceConfig",
    "SourceRow",
    "Store",
    "StoredRow",
    "TokenBucket",
    "build_backend",
    "build_judge",
    "config_hash",
    "detect_format",
    "expand_paths",
    "iter_rows",
    "judge_fingerprint",
    "langsmith_row",
    "otel_rows",
    "run_job",
    "run_spec",
]
