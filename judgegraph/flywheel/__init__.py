"""The judge flywheel: the teacher's verdicts on escalated items (and any human
labels) train the next local judge, which is promoted only if it does not lose
agreement on a fixed held-out set. See :class:`Flywheel`."""

from __future__ import annotations

from ._flywheel import Flywheel
from ._records import (
    BatchSummary,
    FlywheelEvent,
    FlywheelItem,
    FlywheelSettings,
    FlywheelState,
    HeldoutEval,
    ItemDecision,
    PromotionDecision,
    RoundRecord,
    Stage,
    TrainingSummary,
    read_items,
)
from ._report import (
    FlywheelReport,
    RoundRow,
    build_flywheel_report,
    render_flywheel_html,
    render_flywheel_markdown,
    write_flywheel_report,
)
from ._rules import evaluate_on_heldout, promotion_decision
from ._trainer import LocalTrainer, ProbeTrainer, link_identical_files
from ._workdir import FlywheelError

__all__ = [
    "BatchSummary",
    "Flywheel",
    "FlywheelError",
    "FlywheelEvent",
    "FlywheelItem",
    "FlywheelReport",
    "FlywheelSettings",
    "FlywheelState",
    "HeldoutEval",
    "ItemDecision",
    "LocalTrainer",
    "ProbeTrainer",
    "PromotionDecision",
    "RoundRecord",
    "RoundRow",
    "Stage",
    "TrainingSummary",
    "build_flywheel_report",
    "evaluate_on_heldout",
    "link_identical_files",
    "promotion_decision",
    "read_items",
    "render_flywheel_html",
    "render_flywheel_markdown",
    "write_flywheel_report",
]
