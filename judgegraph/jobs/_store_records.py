"""The store's schema and the records it reads and writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["SCHEMA", "SCHEMA_VERSION", "ItemRecord", "ResultRecord", "RunInfo", "RunMismatchError", "StoredRow"]

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    config_hash TEXT NOT NULL,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'running'
);
CREATE TABLE IF NOT EXISTS results (
    config_hash TEXT NOT NULL,
    item_hash TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    result TEXT NOT NULL,
    cost_usd REAL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    finished_at REAL NOT NULL,
    PRIMARY KEY (config_hash, item_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS inputs (
    item_hash TEXT PRIMARY KEY,
    input TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS items (
    run_id TEXT NOT NULL,
    file INTEGER NOT NULL,
    row INTEGER NOT NULL,
    item_hash TEXT,
    item_id TEXT,
    label TEXT,
    category TEXT,
    problem TEXT,
    read_pass INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, file, row)
) WITHOUT ROWID;
"""


class RunMismatchError(ValueError):
    """A run id that exists with a different judge configuration."""


class RunInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    config_hash: str
    kind: str
    spec: dict[str, Any]
    created_at: float
    updated_at: float
    state: str


@dataclass(frozen=True, slots=True)
class ResultRecord:
    config_hash: str
    item_hash: str
    status: str
    reason: str | None
    result: str  # the verdict as JSON
    cost_usd: float | None
    prompt_tokens: int
    completion_tokens: int
    attempts: int
    finished_at: float


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """One source row of a run. The store stamps it with the run's current
    read pass, so rows a shorter input no longer has can be told apart."""

    run_id: str
    file: int
    row: int
    item_hash: str | None
    item_id: str | None
    label: str | None
    category: str | None
    problem: str | None


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A run's row joined with its result (if any) and input."""

    file: int
    row: int
    item_hash: str | None
    item_id: str | None
    label: Any
    category: str | None
    problem: str | None
    status: str | None
    reason: str | None
    result: dict[str, Any] | None
    cost_usd: float | None
    prompt_tokens: int
    completion_tokens: int
    input: dict[str, Any] | None
