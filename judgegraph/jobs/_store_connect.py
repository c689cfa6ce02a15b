"""Opening a store file (for writing, or read-only), and what a run record may keep."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from judgegraph.backends import strip_userinfo

from ._store_guard import StoreError
from ._store_records import SCHEMA, SCHEMA_VERSION

__all__ = ["connect_store", "is_busy", "retry_busy", "without_credentials"]


def connect_store(path: Path, *, busy_timeout_s: float, read_only: bool) -> sqlite3.Connection:
    """A connection to the store at ``path``: created and migrated for writing, or read-only."""
    if read_only:
        if not path.is_file():
            raise StoreError(f"{path}: no result store here")
        uri = path.resolve().as_uri()
        try:
            db = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
            db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            got = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.OperationalError:
            # A WAL store in a folder we may not write: SQLite cannot make its
            # shared-memory file. With no write-ahead log left over (the last
            # writer closed cleanly), the file alone is the whole store.
            wal = path.with_name(path.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise StoreError(
                    f"{path}: cannot read it without write access to its folder while {wal.name} "
                    "holds uncommitted pages (is a job still running?)"
                ) from None
            db = sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)
            got = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if got is None or int(got[0]) != SCHEMA_VERSION:
            raise StoreError(f"{path}: not a judgegraph store of schema {SCHEMA_VERSION}")
        return db
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    # Processes opening a fresh store at once: SQLite answers some of the
    # set-up (the switch to WAL, a log being initialised) "database is
    # locked" at once, without its busy handler. Wait here instead, as long
    # as a commit would.
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            _set_up(db, path)
            return db
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                db.close()
                raise
            time.sleep(0.01)


def _set_up(db: sqlite3.Connection, path: Path) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode survives a killed process (only power loss can
    # drop the last transactions), at a fraction of FULL's fsync cost.
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(SCHEMA)
    got = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    if got is None:
        db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
    elif int(got[0]) != SCHEMA_VERSION:
        raise StoreError(f"{path}: store schema {got[0]} is not the supported {SCHEMA_VERSION}")
    columns = {r[1] for r in db.execute("PRAGMA table_info(items)")}
    if "read_pass" not in columns:  # a store written before rows carried their read pass
        db.execute("ALTER TABLE items ADD COLUMN read_pass INTEGER NOT NULL DEFAULT 0")


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """SQLite's "database is locked" or "busy": another connection is writing."""
    return "locked" in str(exc) or "busy" in str(exc)


def without_credentials(value: Any) -> Any:
    """A run record as stored: URLs lose their user info (``http://user:KEY@host``)."""
    if isinstance(value, str):
        return strip_userinfo(value)
    if isinstance(value, dict):
        return {k: without_credentials(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_credentials(v) for v in value]
    return value


def retry_busy(fn: Any, *args: Any, attempts: int) -> Any:
    """``fn(*args)``, tried again while SQLite says the database is locked
    or busy past its timeout (up to ``attempts`` tries), as the flusher does."""
    for attempt in range(1, attempts + 1):
        try:
            return fn(*args)
        except sqlite3.OperationalError as exc:
            if attempt == attempts or not is_busy(exc):
                raise
    raise AssertionError("unreachable")
