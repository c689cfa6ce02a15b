"""One object per running event loop.

An async HTTP client's connection pool belongs to the loop that opened its
sockets: used from another loop (a second ``asyncio.run``, a notebook's loop
after a sync call) it fails with "bound to a different event loop" or "Event
loop is closed". Backends that hold such clients keep one per loop here.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerLoop", "aclose_quietly"]

T = TypeVar("T")


class PerLoop(Generic[T]):
    """``get(make)`` returns the running loop's object, made on first use;
    a loop's object is dropped with the loop."""

    def __init__(self) -> None:
        self._items: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()

    def get(self, make: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        found = self._items.get(loop)
        if found is None:
            found = self._items[loop] = make()
        return found

    def values(self) -> list[T]:
        """Every object held now, one per live loop."""
        return list(self._items.values())

    def drain(self) -> list[T]:
        """Every object held, forgotten here (the caller closes them)."""
        items = list(self._items.values())
        self._items.clear()
        return items


async def aclose_quietly(client: object) -> None:
    """``await client.close()``, where the loop that owns its sockets may be
    gone (and its sockets with it): nothing is left to close then."""
    close = getattr(client, "close", None)
    if close is None:
        return
    try:
        await close()
    except RuntimeError:
        pass
