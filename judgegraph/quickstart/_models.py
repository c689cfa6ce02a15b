"""The quickstart's options and results: QuickstartOptions, TableRow, BudgetChoice, QuickstartResult."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from judgegraph.metrics import PairedDifference

__all__ = ["BudgetChoice", "FoldPlan", "QuickstartOptions", "QuickstartResult", "TableRow"]


class QuickstartOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    workdir: Path = Path(".judgegraph/quickstart")
    judge: str | None = Field(
        default=None, description="tier 1: None trains the local judge; or openai:MODEL[@URL], vllm:MODEL@URL, tgi:URL"
    )
    escalate: str | None = Field(
        default=None,
        description="tier 2: replay (recorded gpt-3.5-turbo), or an endpoint; None: replay. An API key in the "
        "environment is never used unless an endpoint is named here",
    )
    limit: int | None = Field(default=None, ge=10, description="use about this many items (whole prompts)")
    budget: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="the most the cascade may send to the teacher, as a share of items: for each fold the planner "
        "picks a threshold escalating at most this share of the other folds' items, and the fold's own items, "
        "judged as one batch, never escalate more than floor(budget x items) (the least confident first)",
    )
    pick: Literal["most-agreeing", "cheapest"] = Field(
        default="most-agreeing",
        description="most-agreeing: the budget with the best calibration agreement within --budget; cheapest: the "
        "cheapest budget reaching --target",
    )
    target: float | None = Field(
        default=None, ge=0, le=1, description="with pick=cheapest, agreement to reach; default: the teacher's own"
    )
    folds: int = Field(
        default=5,
        ge=2,
        le=10,
        description="folds by prompt: each item is judged by a head fitted on the other folds, with a budget "
        "picked on the other folds' items",
    )
    merge: bool = Field(
        default=True, description="an escalated item's verdict merges the teacher's with the local probabilities"
    )
    seed: int = 0
    train_labels: Literal["human", "teacher"] = Field(
        default="teacher",
        description="what the local judge learns from: the teacher's recorded verdicts (distillation; humans "
        "only measure) or the human majority",
    )
    progress: bool = True


class TableRow(BaseModel):
    """One line of the result table, computed from the stored per-item results."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    judge: str
    run_id: str
    items: int
    agreement: float | None = Field(description="share of items whose verdict equals the human majority")
    correct: int
    failed: int = Field(description="items without a usable verdict (counted as wrong)")
    escalated_share: float = Field(description="share of items sent to the teacher")
    cost_usd: float | None = Field(description="total; None when a judge is unpriced")

    @property
    def cost_per_1k(self) -> float | None:
        return None if self.cost_usd is None else 1000 * self.cost_usd / self.items


class BudgetChoice(BaseModel):
    """The planner's pick, made on the calibration split only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calibration_items: int
    fraction: float = Field(description="share of calibration items the chosen policy sends to the teacher")
    threshold: float | None = Field(description="local-judge confidence below which an item escalates")
    policy: str
    recommendation: str
    calibration_agreement: float
    calibration_local: float
    calibration_teacher: float


class FoldPlan(BaseModel):
    """The escalation rule one fold's items were judged with: the planner's
    pick on the other folds' items, capped on this fold's batch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fold: int = Field(description="1-based")
    items: int
    budget: BudgetChoice = Field(description="picked on the other folds' items only")
    threshold: float | None = Field(
        description="the rule applied to this fold's batch: the planner's threshold, lowered where it would "
        "escalate more than cap_items; None: every item escalates"
    )
    cap_items: int = Field(description="the most of this fold's items the budget lets escalate")


class QuickstartResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    split: str
    items: int = Field(description="items judged and measured: every judgeable item, each out of fold")
    train_traces: int | None = Field(
        description="traces the saved local judge learned from (every item's); None for an endpoint judge"
    )
    local_judge: str
    teacher: str
    reused_judge: bool
    folds: list[FoldPlan]
    rows: list[TableRow]
    cascade_minus_teacher: PairedDifference | None = Field(
        default=None,
        description="agreement of the cascade minus the teacher's, same items, paired bootstrap interval",
    )
    store: Path
    report: Path
    summary: Path
    seconds: dict[str, float]
    notes: list[str]
