"""``python -m judgegraph.finetune``: the same commands as ``judgegraph finetune``,
for ``accelerate launch -m`` and ``torchrun -m``."""

from .cli import app

app()
