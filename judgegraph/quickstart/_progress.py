"""A progress bar for the quickstart's judging runs (the finetune module's rich bar)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from judgegraph.finetune import make_progress
from judgegraph.jobs import JobProgress

__all__ = ["job_bar"]


@contextmanager
def job_bar(description: str, *, enabled: bool = True) -> Iterator[Callable[[JobProgress], None]]:
    """``with job_bar("judging") as update: arun_job(..., progress=update)``."""
    with make_progress(enabled=enabled) as progress:
        task = progress.add_task(description, total=None, info="")

        def update(p: JobProgress) -> None:
            failed = p.failed + p.invalid
            info = f"{p.cached} from the store" if p.cached else ""
            if failed:
                info = f"{info}, {failed} failed".lstrip(", ")
            progress.update(task, total=p.total, completed=p.done, info=info)

        yield update
