"""How the flywheel trains and loads its local judge.

Anything with ``describe``, ``train`` and ``load`` (the :class:`LocalTrainer`
protocol) will do. :class:`ProbeTrainer` is the one the quickstart uses: a
frozen sentence encoder and the small swap-consistent head from
``judgegraph.finetune`` (:func:`~judgegraph.finetune._probe.train_probe`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from judgegraph.judges import Judge

__all__ = ["LocalTrainer", "ProbeTrainer", "link_identical_files"]


@runtime_checkable
class LocalTrainer(Protocol):
    """Trains a local pairwise judge on traces into a directory, and loads one back."""

    def describe(self) -> dict[str, Any]:
        """What is trained and how, as JSON-able data (written into each round's record)."""
        ...

    def train(self, traces: Sequence[Any], out_dir: Path) -> dict[str, float]:
        """Fit on ``traces`` (PairwiseTrace), save a loadable judge under ``out_dir``, return training metrics."""
        ...

    def load(self, directory: Path) -> Judge[Any, Any]:
        """The pairwise judge saved in ``directory``; its ``confidence`` is what thresholds apply to."""
        ...


class ProbeTrainer(BaseModel):
    """A frozen encoder (``encoder``: a local model folder) with the swap-equivariant
    linear head of :class:`~judgegraph.finetune._probe.EncoderProbe`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["encoder-probe"] = "encoder-probe"
    encoder: str = Field(description="folder of the sentence encoder (e.g. all-MiniLM-L6-v2)")
    options: dict[str, Any] = Field(
        default_factory=dict, description="ProbeOptions fields; unset ones keep ProbeOptions' values"
    )

    def _options(self) -> Any:
        from judgegraph.finetune import ProbeOptions

        return ProbeOptions.model_validate(self.options)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "encoder": self.encoder, "options": self._options().model_dump()}

    def train(self, traces: Sequence[Any], out_dir: Path) -> dict[str, float]:
        from judgegraph.finetune import train_probe

        probe = train_probe(list(traces), self.encoder, options=self._options(), progress=False)
        probe.save(out_dir)
        return dict(probe.metrics)

    def fold_judges(self, traces: Sequence[Any], fold_of: Sequence[int], *, folds: int) -> list[Judge[Any, Any]]:
        """The cross-fitting judges (``calibrate_on="traces"``): one head per fold on
        one loaded encoder, the same head :meth:`train` would fit on those traces."""
        from judgegraph.finetune import ClassifierJudge, EncoderProbe, fold_heads

        probe = EncoderProbe.untrained(self.encoder, self._options())
        heads = fold_heads(probe, list(traces), fold_of, folds=folds)
        return [ClassifierJudge(h, name=f"fold-{k + 1}") for k, h in enumerate(heads)]

    def load(self, directory: Path) -> Judge[Any, Any]:
        from judgegraph.finetune import ClassifierJudge, load_classifier

        judge: Judge[Any, Any] = ClassifierJudge(load_classifier(directory), name=f"local:{directory.parent.name}")
        return judge


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def link_identical_files(new: Path, previous: Path) -> int:
    """Replace each file under ``new`` that is byte-identical to the file at the
    same relative path under ``previous`` with a hard link to it. A frozen
    encoder is copied into every round's model folder; this keeps one copy on
    disk. Returns the bytes saved (0 where hard links are not supported)."""
    saved = 0
    if not previous.is_dir():
        return 0
    for f in sorted(new.rglob("*")):
        if not f.is_file() or f.is_symlink():
            continue
        old = previous / f.relative_to(new)
        if not old.is_file() or old.stat().st_size != f.stat().st_size or f.stat().st_size < 1 << 16:
            continue
        if _digest(old) != _digest(f):
            continue
        tmp = f.with_name(f.name + ".link")
        try:
            os.link(old, tmp)
        except OSError:
            return saved
        tmp.replace(f)
        saved += f.stat().st_size
    return saved
