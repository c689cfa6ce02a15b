"""Waiting in tests: for an event, never for a length of time.

A test that needs something to have happened (a commit, a poll, a server
ready) polls for that condition and nothing else. There is no deadline here:
on a busy machine any deadline is a guess, and a guess that fails costs a
whole CI run. A real hang is caught by pytest-timeout (``timeout`` in
pyproject.toml), which fails the test by name with its stack.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

# How often to look again. Short enough not to slow a test down, long enough
# that the polling itself does not compete for the CPU with the code under test.
POLL_S = 0.01


def _tail(proc: subprocess.Popen[Any]) -> str:
    for stream in (proc.stderr, proc.stdout):
        if stream is not None:
            try:
                out = stream.read()
            except (OSError, ValueError):
                continue
            text = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
            return text[-3000:]
    return ""


def wait_until(
    cond: Callable[[], bool],
    what: str,
    *,
    proc: subprocess.Popen[Any] | None = None,
    poll_s: float = POLL_S,
) -> None:
    """Return once ``cond()`` is true. If ``proc`` is given and exits first,
    fail with its exit code and the tail of its output: the event can no
    longer happen."""
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}: {_tail(proc)}")
        time.sleep(poll_s)


async def await_until(cond: Callable[[], bool], what: str, *, poll_s: float = POLL_S) -> None:
    """``wait_until`` for a coroutine: yields to the event loop between looks."""
    import asyncio

    del what  # named for the reader, and for pytest-timeout's stack dump
    while not cond():
        await asyncio.sleep(poll_s)
