"""The flywheel as a config file: where items, held-out labels and the teacher
come from, how the local judge is trained, and the round settings.

Relative paths are read relative to the config file's folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from judgegraph.config import BackendConfig, JudgeConfig
from judgegraph.judges import Judge
from judgegraph.types import FrozenModel

from ._records import FlywheelSettings
from ._trainer import ProbeTrainer

if TYPE_CHECKING:
    from ._flywheel import Flywheel
    from ._records import FlywheelItem

__all__ = ["FlywheelConfig", "LiveTeacher", "ReplayTeacher", "load_config", "next_batch", "open_flywheel"]


class ReplayTeacher(FrozenModel):
    """Recorded verdicts (VerdictRecord JSONL, e.g. from ``arecord_verdicts``)
    served by item content. ``cost_usd_per_call`` prices each served verdict;
    None leaves the teacher unpriced (costs are then reported in calls)."""

    kind: Literal["replay"] = "replay"
    path: str
    judge: str | None = Field(default=None, description="pick one judge when the file holds several")
    cost_usd_per_call: float | None = Field(default=None, ge=0)


class LiveTeacher(FrozenModel):
    """A pairwise judge on an OpenAI-compatible or TGI endpoint, configured as
    for ``judgegraph eval`` (the API key comes from the environment)."""

    kind: Literal["live"] = "live"
    judge: JudgeConfig
    backend: BackendConfig

    @model_validator(mode="after")
    def _pairwise(self) -> LiveTeacher:
        if self.judge.kind != "pairwise":
            raise ValueError(f"the teacher must be a pairwise judge, got {self.judge.kind}")
        return self


class FlywheelConfig(FrozenModel):
    items: str = Field(description="JSONL stream of items to judge; each round takes the next batch_size")
    batch_size: int = Field(ge=1)
    heldout: str = Field(description="labelled traces JSONL (PairwiseTrace): the fixed held-out set")
    seed_traces: str | None = Field(default=None, description="labelled traces JSONL to train on from the first round")
    teacher: Annotated[ReplayTeacher | LiveTeacher, Field(discriminator="kind")]
    local: ProbeTrainer
    settings: FlywheelSettings

    def resolve(self, base: Path) -> FlywheelConfig:
        """Relative paths made absolute against ``base``."""

        def fix(p: str | None) -> str | None:
            if p is None:
                return None
            q = Path(p).expanduser()
            return str(q if q.is_absolute() else (base / q).resolve())

        teacher: Any = self.teacher
        if isinstance(teacher, ReplayTeacher):
            teacher = teacher.model_copy(update={"path": fix(teacher.path)})
        local = self.local.model_copy(update={"encoder": fix(self.local.encoder)})
        return self.model_copy(
            update={
                "items": fix(self.items),
                "heldout": fix(self.heldout),
                "seed_traces": fix(self.seed_traces),
                "teacher": teacher,
                "local": local,
            }
        )

    def build_teacher(self) -> Judge[Any, Any]:
        t = self.teacher
        if isinstance(t, ReplayTeacher):
            from judgegraph.judges import create_replay_judge

            return create_replay_judge(t.path, judge=t.judge, cost_usd=t.cost_usd_per_call)
        from judgegraph.config import build_backend, build_judge

        return build_judge(t.judge, backend=build_backend(t.backend))


def load_config(path: str | Path) -> FlywheelConfig:
    """Read a JSON config; errors name the field. Relative paths resolve against the file's folder."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    try:
        cfg = FlywheelConfig.model_validate(raw)
    except ValidationError as exc:
        parts = [f"{'.'.join(str(x) for x in e['loc']) or '(config)'}: {e['msg']}" for e in exc.errors()]
        raise ValueError(f"{p}: " + "; ".join(parts)) from None
    return cfg.resolve(p.parent.resolve())


def open_flywheel(cfg: FlywheelConfig, workdir: str | Path, *, log: Any = None) -> Flywheel:
    """A :class:`~judgegraph.flywheel.Flywheel` in ``workdir`` set up as ``cfg`` says."""
    from judgegraph.finetune import read_traces

    from ._flywheel import Flywheel

    heldout = read_traces(cfg.heldout)
    seed = read_traces(cfg.seed_traces) if cfg.seed_traces else []
    return Flywheel(
        workdir,
        heldout=heldout,  # type: ignore[arg-type]  # Flywheel checks they are pairwise
        teacher=cfg.build_teacher(),
        trainer=cfg.local,
        settings=cfg.settings,
        seed_traces=seed,  # type: ignore[arg-type]
        log=log,
    )


def next_batch(fw: Flywheel, cfg: FlywheelConfig) -> list[FlywheelItem]:
    """The next ``batch_size`` items of the stream after those earlier rounds took
    (fewer at the end of the stream; empty when it is used up)."""
    from ._records import read_items

    items = read_items(cfg.items)
    used = sum(r.batch_size for r in fw.rounds())
    return items[used : used + cfg.batch_size]
