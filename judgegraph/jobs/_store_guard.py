"""What keeps a store honest: its errors, and the one-writer-per-run lock.

A run is written by one process at a time. Two ``judgegraph eval`` processes
on the same store and run would each claim every item the other has not
committed yet and send it again; the second one is refused instead, with a
message that says who holds the run. The lock is an OS file lock
(``flock``), so a writer killed with ``kill -9`` releases it with its last
file descriptor and a resumed run is never blocked by a dead one.

The lock belongs to the store file, not to the path it was reached by: it
sits beside the file's real path, so a symlink to the store (or to its
folder), a relative path or ``..`` all find the same lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import time
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


# How long a refused process waits for the holder's note: the holder
# writes it right after taking the lock, so only that gap is waited out.
_NOTE_WAIT_S = 2.0


def _lock_path(store: Path, run_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:40]
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    real = Path(os.path.realpath(store))  # however the store was reached: one lock
    return real.with_name(f".{real.name}.locks") / f"{safe}-{digest}.lock"


def _holder(fp: IO[str]) -> str:
    """The holder's note, once complete (it ends with a newline). The holder
    writes it just after taking the lock; a process refused in that gap
    reads again until it is there, or until the holder is gone quiet."""
    deadline = time.monotonic() + _NOTE_WAIT_S
    while True:
        fp.seek(0)
        note = fp.read()
        if note.endswith("\n") or time.monotonic() > deadline:
            return note.strip() or "another process"
        time.sleep(0.005)


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
            holder = _holder(fp)
            fp.close()
            raise RunLockedError(
                f"run {self.run_id!r} in {self.store} is being written by {holder}; "
                "wait for it to finish, or give another run id"
            ) from None
        # Who holds the lock, for the message another process shows. The
        # flock is the lock; a note that cannot be written (a full disk) is
        # not a reason to refuse the run: its commits say what is wrong.
        # One write of the whole note, its newline last: a reader sees it
        # complete or not at all (release() left the file empty).
        with contextlib.suppress(OSError):
            note = f"pid {os.getpid()} on {socket.gethostname()}\n".encode()
            os.truncate(fp.fileno(), 0)
            os.pwrite(fp.fileno(), note, 0)
        self._fp = fp

    def release(self) -> None:
        if self._fp is not None:
            with contextlib.suppress(OSError):
                self._fp.truncate(0)
            self._fp.close()  # closing the descriptor drops the flock
            self._fp = None
