"""A Trainer callback that keeps the training loss of every logging step, for
the tests and benchmarks that check a loss falls."""

from __future__ import annotations

from typing import Any


def loss_recorder() -> tuple[Any, list[float]]:
    """(callback, losses): pass the callback to ``train_sft`` or
    ``train_classifier``; each logged training loss is appended to ``losses``."""
    from transformers import TrainerCallback

    losses: list[float] = []

    class _Losses(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    return _Losses(), losses
