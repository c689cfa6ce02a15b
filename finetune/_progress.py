"""A rich progress bar for training runs and long loops."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["make_progress", "rich_trainer_callback", "task_bar"]


def make_progress(console: Console | None = None, *, enabled: bool = True) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        disable=not enabled,
        transient=False,
    )


@contextmanager
def task_bar(description: str, total: int, *, enabled: bool = True) -> Iterator[Any]:
    """``with task_bar("embedding", n) as advance: advance(k)``."""
    with make_progress(enabled=enabled) as progress:
        task = progress.add_task(description, total=total, info="")
        yield lambda k=1: progress.advance(task, k)


def rich_trainer_callback(description: str = "training", *, enabled: bool = True) -> Any:
    """A ``transformers.TrainerCallback`` that draws one rich bar on the main
    process, with the latest loss beside it. Built lazily: transformers is an
    optional dependency."""
    from transformers import TrainerCallback

    class RichProgressCallback(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.progress: Progress | None = None
            self.task: TaskID | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero and enabled:
                self.progress = make_progress()
                self.progress.start()
                self.task = self.progress.add_task(description, total=state.max_steps, info="")
                self.progress.update(self.task, completed=state.global_step)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.progress is not None and self.task is not None:
                self.progress.update(self.task, completed=state.global_step)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if self.progress is None or self.task is None or not logs:
                return
            shown = {k: v for k, v in logs.items() if k in ("loss", "eval_loss", "learning_rate")}
            info = "  ".join(f"{k} {v:.3g}" for k, v in shown.items() if isinstance(v, int | float))
            if info:
                self.progress.update(self.task, info=info)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.progress is not None:
                self.progress.stop()
                self.progress = None

    return RichProgressCallback()
