"""What the flywheel writes down: settings, per-item decisions, per-round records, state.

Every file the flywheel keeps is one of these models as JSON (or JSONL), so
a round can be read back, compared and resumed without the code that wrote it
having kept anything in memory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from judgegraph.cascade import ThresholdCalibration
from judgegraph.judges import item_key
from judgegraph.types import FrozenModel

from ..types import PairwiseInput, PairwiseVerdict, Status, Winner

__all__ = [
    "BatchSummary",
    "FlywheelEvent",
    "FlywheelItem",
    "FlywheelSettings",
    "FlywheelState",
    "HeldoutEval",
    "ItemDecision",
    "PromotionDecision",
    "RoundRecord",
    "Stage",
    "TrainingSummary",
    "read_items",
]

#: Stages of a round, in order; a round's record says the last one finished.
Stage = Literal["started", "judged", "trained", "evaluated", "done"]
STAGES: tuple[Stage, ...] = ("started", "judged", "trained", "evaluated", "done")


class FlywheelSettings(FrozenModel):
    """The knobs of a round. They are written into every round's record, so a
    change between rounds (say, a lower audit rate) is on file."""

    alpha: float = Field(
        gt=0,
        lt=1,
        description="tolerated disagreement on the items the local judge keeps, with the labels it is "
        "calibrated on (see calibrate_on)",
    )
    calibrate_on: Literal["heldout", "traces"] = Field(
        default="heldout",
        description="heldout: thresholds are calibrated on the labelled held-out set (a guarantee against its "
        "labels); traces: on the round's training traces, each judged by a head fitted on the other folds of "
        "prompts, so the calibration set grows every round, at the price of a guarantee against the traces' "
        "labels (mostly the teacher's), not the held-out set's",
    )
    folds: int = Field(default=4, ge=2, le=10, description="cross-fitting folds (by prompt) when calibrate_on='traces'")
    delta: float = Field(default=0.1, gt=0, lt=1, description="chance that the calibrated threshold misses alpha")
    min_kept: int | None = Field(default=None, ge=1, description="thresholds keeping fewer held-out items are skipped")
    audit_rate: float = Field(ge=0, le=1, description="share of confidently decided items also sent to the teacher")
    promote_tolerance: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="the challenger may lose at most this much held-out agreement and still be promoted",
    )
    promote_on: Literal["agreement", "escalation"] = Field(
        default="agreement",
        description="agreement: the challenger's held-out agreement alone must not fall below the champion's "
        "(minus promote_tolerance); escalation: its calibrated held-out escalation share must not be above the "
        "champion's while its cascade agreement does not fall below the champion's (minus promote_tolerance), "
        "which is what the flywheel is for: fewer teacher calls at equal agreement",
    )
    on_teacher_failure: Literal["error", "fallback"] = Field(
        default="error",
        description="an escalated item the teacher fails on: failed ('error') or the local verdict ('fallback')",
    )
    chunk_size: int = Field(default=64, ge=1, description="items judged between two writes to disk")
    seed: int = Field(default=0, description="seeds the audit sample")


class FlywheelItem(FrozenModel):
    """One item of the stream the cascade judges. ``human_label`` is a
    person's verdict when one exists; it becomes a training trace."""

    input: PairwiseInput
    id: str | None = None
    human_label: Winner | None = None

    @property
    def key(self) -> str:
        return item_key(self.input)


class _ItemRow(BaseModel):
    """A line of an items file: a pairwise input's fields, flat."""

    model_config = ConfigDict(extra="forbid")

    instruction: str
    response_a: str
    response_b: str
    reference: str | None = None
    id: str | None = None
    human_label: Winner | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) else v


def read_items(path: str | Path) -> list[FlywheelItem]:
    """Read a JSONL file of items (``instruction``, ``response_a``,
    ``response_b``, optional ``reference``, ``id``, ``human_label``). A bad
    line raises ValueError naming the file, the line and the field."""
    p = Path(path)
    out: list[FlywheelItem] = []
    with p.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = _ItemRow.model_validate_json(line)
                out.append(
                    FlywheelItem(
                        input=PairwiseInput(
                            instruction=row.instruction,
                            response_a=row.response_a,
                            response_b=row.response_b,
                            reference=row.reference,
                        ),
                        id=row.id,
                        human_label=row.human_label,
                    )
                )
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(x) for x in first["loc"]) or "(line)"
                raise ValueError(f"{p}:{n}: not an item ({loc}: {first['msg']})") from None
    return out


class ItemDecision(FrozenModel):
    """What the round's cascade did with one item, and what the teacher said."""

    key: str
    id: str | None = None
    status: Status
    decided_by: Literal["local", "teacher", "none"]
    verdict: Winner | None = None
    escalated: bool
    reason: str
    local_verdict: Winner | None = None
    local_confidence: float | None = None
    audited: bool = False
    teacher: PairwiseVerdict | None = Field(default=None, description="the teacher's result, when it was asked")
    teacher_calls: int = Field(default=0, ge=0)
    teacher_cost_usd: float | None = Field(default=None, description="None when the teacher is not priced")


class BatchSummary(FrozenModel):
    """The round's judging of its batch."""

    champion: int | None = Field(description="the round whose local judge served; None: no local judge yet")
    threshold: float | None = Field(description="the local judge's confidence threshold; None: it escalated everything")
    items: int
    local_decided: int
    escalated: int
    failed: int
    audited: int
    audit_agreement: float | None = Field(description="local verdict == teacher verdict on audited items")
    audit_reference: float | None = Field(
        description="the same agreement on the held-out items the champion keeps, measured when it was calibrated"
    )
    drift: bool | None = Field(description="audit agreement is significantly below the reference (one-sided p < 0.05)")
    drift_p_value: float | None = None
    teacher_calls: int
    teacher_failures: int
    cost_usd: float | None = Field(description="teacher calls priced; None when the teacher is unpriced")
    collected: dict[str, int] = Field(description="traces collected, by why: escalated, audit, human")

    @property
    def escalation_share(self) -> float:
        return self.escalated / self.items if self.items else 0.0


class TrainingSummary(FrozenModel):
    traces: int = Field(description="traces the challenger trained on")
    by_source: dict[str, int]
    rounds: list[int] = Field(description="rounds whose collected traces were used (0: the seed traces)")
    excluded_heldout: int = Field(description="traces dropped because their instruction is in the held-out set")
    duplicates: int
    conflicting: int = Field(description="duplicates whose label disagreed with the kept one")
    sha256: str = Field(description="of the training traces file")
    trainer: dict[str, Any]
    metrics: dict[str, float] = Field(default_factory=dict)
    skipped: str | None = Field(default=None, description="why no challenger was trained")


class HeldoutEval(FrozenModel):
    """A local judge on the held-out set, at a threshold calibrated there (or on cross-fitted traces)."""

    round: int = Field(description="the round that trained this local judge")
    n: int
    local_agreement: float = Field(description="the local judge alone: verdict == label")
    calibration: ThresholdCalibration
    calibrated_on: Literal["heldout", "traces"] = Field(
        default="heldout", description="where the threshold was calibrated: this held-out set, or cross-fitted traces"
    )
    escalation_share: float = Field(description="held-out items below the calibrated threshold")
    cascade_agreement: float = Field(description="local verdict on kept items, the teacher's on the rest")
    teacher_agreement_on_kept: float | None = Field(description="local verdict == teacher verdict on the kept items")
    equal_agreement_escalation: float = Field(
        description="in-sample, no guarantee: the least escalation share (cutting at a confidence) whose cascade "
        "agreement on the held-out set is at least the teacher's alone"
    )

    @property
    def threshold(self) -> float | None:
        return self.calibration.threshold


class PromotionDecision(FrozenModel):
    promoted: bool
    reason: str
    champion_before: int | None
    champion_after: int | None
    tolerance: float


class RoundRecord(FrozenModel):
    """One round: what it judged, trained, measured and decided."""

    round: int = Field(ge=0)
    stage: Stage
    settings: FlywheelSettings
    batch_size: int
    batch_sha256: str
    started_at: float
    finished_at: float | None = None
    batch: BatchSummary | None = None
    training: TrainingSummary | None = None
    teacher_heldout_agreement: float | None = Field(default=None, description="the teacher alone on the held-out set")
    challenger: HeldoutEval | None = None
    champion: HeldoutEval | None = Field(default=None, description="the champion this round started with, recalibrated")
    decision: PromotionDecision | None = None

    def in_service(self) -> HeldoutEval | None:
        """The evaluation of the local judge that serves after this round."""
        if self.decision is None:
            return None
        return self.challenger if self.decision.promoted else self.champion


class FlywheelEvent(FrozenModel):
    round: int | None = Field(description="the round that caused it; None for a rollback")
    action: Literal["promoted", "kept", "rollback"]
    champion: int | None
    at: float
    note: str = ""


class FlywheelState(FrozenModel):
    version: Literal[1] = 1
    champion: int | None = None
    excluded_rounds: tuple[int, ...] = Field(default=(), description="rounds whose traces no longer train (rollback)")
    events: tuple[FlywheelEvent, ...] = ()


def write_json(path: Path, model: BaseModel) -> None:
    """Write atomically: a reader (or a crash) never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(model.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_jsonl_tolerant(path: Path) -> list[dict[str, Any]]:
    """JSONL rows; a cut-off last line (a crash mid-write) is ignored, a bad
    line anywhere else raises."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines):  # the last line, with no newline after it
                break
            raise ValueError(f"{path}:{n}: not valid JSON") from None
    return out
