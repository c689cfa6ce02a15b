"""The names the README used before async functions took the ``a`` prefix:
they still work, with a DeprecationWarning."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from ._runner import arun_job, arun_spec

__all__ = ["run_job", "run_spec"]


def _deprecated(new: Callable[..., Any], old: str) -> Callable[..., Any]:
    @functools.wraps(new)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"{old} is now {new.__name__}; the old name will go", DeprecationWarning, stacklevel=2)
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    return alias


run_job = _deprecated(arun_job, "run_job")
run_spec = _deprecated(arun_spec, "run_spec")
