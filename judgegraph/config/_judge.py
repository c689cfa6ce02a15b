"""A judge described as data (for job specs, flywheel configs and the CLI), and built from it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from judgegraph.backends import Backend
from judgegraph.judges import CONTEXT_BACKEND, FromContext, ModelJudge
from judgegraph.types import Criterion, FrozenModel, SwapPolicy

__all__ = ["JudgeConfig", "JudgeKind", "build_judge"]

JudgeKind = Literal["pairwise", "pointwise", "multiturn", "rubric"]


class JudgeConfig(FrozenModel):
    kind: JudgeKind
    name: str | None = None
    template: str | None = None
    scale: tuple[int, int] | None = None
    swap: SwapPolicy | None = None
    mode: Literal["conversation", "turn"] = "conversation"
    criteria: list[Criterion] | None = None
    structured: bool | None = None
    max_tokens: int = Field(default=512, ge=1)
    top_logprobs: int = Field(default=10, ge=0)
    repair: bool = True

    @model_validator(mode="after")
    def _kind_options(self) -> JudgeConfig:
        if self.kind == "rubric" and not self.criteria:
            raise ValueError("a rubric job needs criteria")
        if self.kind != "rubric" and self.criteria:
            raise ValueError(f"criteria only apply to rubric jobs, not {self.kind}")
        if self.kind != "pairwise" and self.swap is not None:
            raise ValueError(f"swap only applies to pairwise jobs, not {self.kind}")
        return self


def build_judge(cfg: JudgeConfig, *, backend: Backend | str | FromContext = CONTEXT_BACKEND) -> ModelJudge[Any, Any]:
    """The model judge ``cfg`` describes, calling ``backend`` (a backend, a model id, or ``from_context(key)``)."""
    from judgegraph.judges import MultiTurnJudge, PairwiseJudge, PointwiseJudge, RubricJudge

    common: dict[str, Any] = {
        "name": cfg.name,
        "template": cfg.template,
        "scale": cfg.scale,
        "structured": cfg.structured,
        "max_tokens": cfg.max_tokens,
        "top_logprobs": cfg.top_logprobs,
        "repair": cfg.repair,
    }
    if cfg.kind == "pairwise":
        return PairwiseJudge(backend, swap=cfg.swap, **common)
    if cfg.kind == "pointwise":
        return PointwiseJudge(backend, **common)
    if cfg.kind == "multiturn":
        return MultiTurnJudge(backend, mode=cfg.mode, **common)
    assert cfg.criteria is not None
    return RubricJudge(backend, criteria=cfg.criteria, **common)
