"""One long-lived event loop for every sync call into async code.

A new loop per sync call (``asyncio.run``) strands what lives on that loop:
each call built an HTTP client, and its sockets stayed open after the loop
closed. An anyio blocking portal runs one loop in a daemon thread instead, so
sync callers share clients and connection pools the way async callers do.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

__all__ = ["in_sync_call", "portal_thread", "run_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_portal: BlockingPortal | None = None
_cm: AbstractContextManager[BlockingPortal] | None = None
_thread: threading.Thread | None = None
# Set inside each run_sync call's own task (and so in every task it starts), never in its caller.
_sync_call: ContextVar[bool] = ContextVar("judgegraph_sync_call", default=False)


def _get_portal() -> BlockingPortal:
    global _portal, _cm, _thread
    with _lock:
        if _portal is not None and (_thread is None or not _thread.is_alive()):
            # A BaseException (KeyboardInterrupt, a simulated kill) that went
            # through the portal ended its loop: start a fresh one.
            _portal = _cm = None
        if _portal is None:
            _cm = start_blocking_portal("asyncio")
            _portal = _cm.__enter__()
            _thread = _portal.call(threading.current_thread)
            atexit.register(_stop)
        return _portal


def _stop() -> None:
    global _portal, _cm
    with _lock:
        cm, _cm, _portal = _cm, None, None
    if cm is not None:
        cm.__exit__(None, None, None)


def _forget_thread() -> None:
    global _thread
    with _lock:
        _thread = None


def portal_thread() -> threading.Thread | None:
    """The thread the shared loop runs in, once started."""
    return _thread


def in_sync_call() -> bool:
    """Whether the running async code was started by a sync caller through
    :func:`run_sync`, i.e. runs on a loop of ours rather than the app's.

    Something bound to the running loop (an SDK's async HTTP client) must not
    be created here if the app's own loop uses it too: it would be bound to ours.
    """
    return _sync_call.get()


async def _await(aw: Awaitable[T]) -> T:
    _sync_call.set(True)
    return await aw


def run_sync(aw: Awaitable[T]) -> T:
    """Run ``aw`` on the shared loop and wait for it, from any thread.

    From inside that loop's own thread (a sync call made by async code running
    there) waiting on it would deadlock, so that rare case gets a private loop
    in a helper thread.
    """
    if threading.current_thread() is _thread:
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, _await(aw)).result()
    call: Callable[..., Any] = _get_portal().call
    try:
        return call(_await, aw)  # type: ignore[no-any-return]
    except RuntimeError as exc:
        if "portal is not running" not in str(exc):
            raise
    # The loop ended between the check and the call (see _get_portal): once more on a fresh one.
    _forget_thread()
    call = _get_portal().call
    return call(_await, aw)  # type: ignore[no-any-return]
