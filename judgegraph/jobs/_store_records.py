"""The store's schema, the records it reads and writes, and how a stored row
is read back: every stored value is checked for the type and shape its
readers rely on, and one that fails (a torn write, a hand edit, a bad disk)
marks its row unreadable, with the store file, the run and the row named."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._store_guard import StoreError

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "ItemRecord",
    "ResultRecord",
    "RunInfo",
    "RunMismatchError",
    "StoreReadError",
    "StoredRow",
    "read_row",
    "read_run",
]

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


class StoreReadError(StoreError, ValueError):
    """A stored value that cannot be read back. The message names the store file and the run."""


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
    unreadable: str | None = None
    """Why this row could not be read back (naming the store, run, row and item), or None.
    An unreadable row has no status, result, label or input: it is in no figure."""


# ------------------------------------------------------------ reading rows back

UNREADABLE = "stored row unreadable; not in any figure"
_Pair = Literal["A", "B", "tie"]
_STATUSES = ("ok", "unparsed", "error")


class _Shape(BaseModel):
    # Strict and finite: a stored value has the type its writer gave it, or it is corrupt.
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class _StoredTier(_Shape):
    status: str | None = None
    decided: bool = False
    verdict: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    cost_usd: float | None = Field(default=None, ge=0)


class _StoredOrder(_Shape):
    status: str | None = None
    winner: _Pair | None = None


class _StoredCriterion(_Shape):
    status: str | None = None
    score: float | None = None


class _StoredResult(_Shape):
    """The parts of a stored verdict that a reader of the store (the report, a
    trace export) looks into; anything else a verdict carries passes as is."""

    status: str
    reason: str | None = None
    score: float | None = None
    weighted_score: float | None = None
    winner: _Pair | None = None
    label: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    criteria: dict[str, _StoredCriterion] | None = None
    orders: list[_StoredOrder] = []
    tiers: list[_StoredTier] = []


class _Unreadable(Exception):
    """One stored value that fails its check: the column and why."""


def _json(column: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        raise _Unreadable(f"{column} is stored as {type(raw).__name__}, not JSON text")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _Unreadable(f"{column} is not JSON ({exc.msg} at char {exc.pos})") from None


def _text(column: str, raw: Any) -> str | None:
    if raw is not None and not isinstance(raw, str):
        raise _Unreadable(f"{column} is stored as {type(raw).__name__}, not text")
    return raw


def _number(column: str, raw: Any, *, whole: bool = False) -> Any:
    ok = isinstance(raw, int) if whole else isinstance(raw, int | float) and math.isfinite(raw)
    if raw is not None and (isinstance(raw, bool) or not ok):
        raise _Unreadable(f"{column} is {raw!r}, not a {'whole' if whole else 'finite'} number")
    return raw


def _label(kind: str, raw: Any) -> Any:
    if raw is None:
        return None
    value = _json("label", raw)
    # The job stores A/B/tie for pairwise runs and a finite number for the others.
    fits = (
        value in ("A", "B", "tie")
        if kind == "pairwise"
        else isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    )
    if not fits:
        raise _Unreadable(f"label {value!r} is not a {kind} label")
    return value


def _result(kind: str, status: str, raw: Any) -> dict[str, Any]:
    value = _json("result", raw)
    if not isinstance(value, dict):
        raise _Unreadable(f"result is a JSON {type(value).__name__}, not an object")
    try:
        shape = _StoredResult.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise _Unreadable(f"result.{where}: {first['msg']} (got {first['input']!r:.40})") from None
    verdict = {"pairwise": shape.winner, "rubric": shape.weighted_score}.get(
        kind, shape.score if shape.score is not None else shape.label
    )
    if status == "ok" and verdict is None:
        raise _Unreadable(f"result has status ok but no {kind} verdict")
    return value


def read_row(r: tuple[Any, ...], *, store: Path, run_id: str, kind: str) -> StoredRow:
    """One row of :meth:`StoreReads.rows`'s query as a :class:`StoredRow`; a row any of whose
    stored values fails its check comes back with ``unreadable`` set and nothing else read."""
    file, row, item_hash, item_id = r[0], r[1], r[2], r[3]
    try:
        status = _text("status", r[7])
        if status is not None and status not in _STATUSES:
            raise _Unreadable(f"status {status!r} is not one of {list(_STATUSES)}")
        inp = _json("input", r[13]) if r[13] is not None else None
        if inp is not None and not isinstance(inp, dict):
            raise _Unreadable(f"input is a JSON {type(inp).__name__}, not an object")
        return StoredRow(
            file=file,
            row=row,
            item_hash=_text("item_hash", item_hash),
            item_id=_text("item_id", item_id),
            label=_label(kind, r[4]),
            category=_text("category", r[5]),
            problem=_text("problem", r[6]),
            status=status,
            reason=_text("reason", r[8]),
            result=_result(kind, status or "", r[9]) if r[9] is not None else None,
            cost_usd=_number("cost_usd", r[10]),
            prompt_tokens=_number("prompt_tokens", r[11], whole=True) or 0,
            completion_tokens=_number("completion_tokens", r[12], whole=True) or 0,
            input=inp,
        )
    except _Unreadable as exc:
        # A fixed opening, so a report that groups problems by their first words groups these together.
        why = f"{UNREADABLE}: {exc} (store {store}, run {run_id!r}, file {file} row {row}, item {item_id!r})"
        return StoredRow(
            file=file,
            row=row,
            item_hash=item_hash if isinstance(item_hash, str) else None,
            item_id=item_id if isinstance(item_id, str) else None,
            label=None,
            category=None,
            problem=why,
            status=None,
            reason=None,
            result=None,
            cost_usd=None,
            prompt_tokens=0,
            completion_tokens=0,
            input=None,
            unreadable=why,
        )


def read_run(row: tuple[Any, ...], *, store: Path) -> RunInfo:
    """A ``runs`` row as :class:`RunInfo`; a corrupt one is a :class:`StoreReadError` naming the store and run."""
    try:
        spec = _json("spec", row[3])
        if not isinstance(spec, dict):
            raise _Unreadable(f"spec is a JSON {type(spec).__name__}, not an object")
        return RunInfo(
            run_id=row[0],
            config_hash=row[1],
            kind=row[2],
            spec=spec,
            created_at=row[4],
            updated_at=row[5],
            state=row[6],
        )
    except _Unreadable as exc:
        raise StoreReadError(f"{store}: run {row[0]!r} cannot be read back: {exc}") from None
    except ValidationError as exc:
        raise StoreReadError(
            f"{store}: run {row[0]!r} cannot be read back: {exc.error_count()} stored values of the wrong type"
        ) from None
