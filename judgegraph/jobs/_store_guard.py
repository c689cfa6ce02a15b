"""What keeps a store honest: its errors, and the one-writer-per-run lock.

A run is written by one process at a time. Two ``judgegraph eval`` processes
on the same store and run would each claim every item the other has not
committed yet and send it again; the second one is refused instead, with a
message that says who holds the run. The lock is an OS file lock
(``flock``), so a writer killed with ``kill -9`` releases it with its last
file descriptor and a resumed run is never blocked by a dead one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
from pathlib import Path
from typing import IO

__all__ = ["RunLock", "RunLockedError", "StoreCommitError", "StoreError"]


class StoreError(RuntimeError):
    """The store cannot be opened, read or written. The message names the file."""


class StoreCommitError(StoreError):
    """Results could not be committed. They stay in the store's buffer (and
    are retried); when the job ends with this error, ``pending`` of them
    were not saved and a rerun judges them again."""

    def __init__(self, message: str, *, pending: int, reason: str = "") -> None:
        super().__init__(message)
        self.pending = pending
        self.reason = reason  # SQLite's own words: "database is locked", "database or disk is full"


class RunLockedError(StoreError):
    """Another process is writing the same run of the same store."""


def _lock_path(store: Path, run_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:40]
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return store.with_name(f".{store.name}.locks") / f"{safe}-{digest}.lock"


class RunLock:
    """An exclusive, non-blocking lock on one run of one store file."""

    def __init__(self, store: Path, run_id: str) -> None:
        self.path = _lock_path(store, run_id)
        self.run_id = run_id
        self.store = store
        self._fp: IO[str] | None = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # not POSIX: no OS lock to take
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fp = open(self.path, "a+", encoding="utf-8")  # held open for the lock's lifetime
        try:
            fcntl.flock(fp.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fp.seek(0)
            holder = fp.read().strip() or "another process"
            fp.close()
            raise RunLockedError(
                f"run {self.run_id!r} in {self.store} is being written by {holder}; "
                "wait for it to finish, or give another run id"
            ) from None
        # Who holds the lock, for the message another process shows. The
        # flock is the lock; a note that cannot be written (a full disk) is
        # not a reason to refuse the run: its commits say what is wrong.
        with contextlib.suppress(OSError):
            fp.seek(0)
            fp.truncate()
            fp.write(f"pid {os.getpid()} on {socket.gethostname()}")
            fp.flush()
        self._fp = fp

    def release(self) -> None:
        if self._fp is not None:
            with contextlib.suppress(OSError):
                self._fp.truncate(0)
            self._fp.close()  # closing the descriptor drops the flock
            self._fp = None
