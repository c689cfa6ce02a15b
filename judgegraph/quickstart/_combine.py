"""What an escalated item's verdict is: the teacher's, weighed against the
local judge's class probabilities.

The teacher is not always right (gpt-3.5-turbo agrees with PandaLM's human
majority on about 70% of items), and its mistakes are not uniform: it says
"tie" where humans pick a side, and the other way round. So when an item
goes up, the verdict is the class with the highest
``P_local(c) * P(teacher says t | humans say c)``: a naive-Bayes merge of the
two judges, with the teacher's confusion counted on the calibration items
(the only items whose human labels the run looks at). When both agree, or
the local judge is unsure, that is the teacher's verdict; it overrides the
teacher only when the local judge is confident of a class the teacher is
known to confuse with the one it said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from judgegraph.judges import CompositeJudge
from judgegraph.types import PairwiseInput, PairwiseVerdict, Status

__all__ = ["CLASSES", "CombinedTeacher", "TeacherConfusion", "combine_verdicts"]

CLASSES = ("A", "B", "tie")
_FAILED = "failed"


class TeacherConfusion(BaseModel):
    """P(teacher says t | humans say c), counted on calibration items with add-``smoothing``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    counts: dict[str, dict[str, int]] = Field(description="human class -> teacher verdict (or 'failed') -> items")
    smoothing: float = Field(default=0.5, gt=0)

    @classmethod
    def count(
        cls, teacher: Mapping[str, PairwiseVerdict], labels: Mapping[str, str], *, smoothing: float = 0.5
    ) -> TeacherConfusion:
        counts = {c: dict.fromkeys((*CLASSES, _FAILED), 0) for c in CLASSES}
        for key, human in labels.items():
            v = teacher.get(key)
            if human not in counts:
                raise ValueError(f"calibration item {key}: label {human!r} is not one of {CLASSES}")
            said = v.winner if v is not None and v.ok and v.winner is not None else _FAILED
            counts[human][said] += 1
        return cls(counts=counts, smoothing=smoothing)

    def likelihood(self, human: str, said: str) -> float:
        row = self.counts[human]
        return (row[said] + self.smoothing) / (sum(row.values()) + self.smoothing * len(row))


def combine_verdicts(local: PairwiseVerdict, teacher: PairwiseVerdict, confusion: TeacherConfusion) -> PairwiseVerdict:
    """The merged verdict for an escalated item. A failed teacher verdict is
    returned as it is (the cascade's fallback then decides); so is the
    teacher's verdict when the local one has no class probabilities."""
    if not teacher.ok or teacher.winner is None:
        return teacher
    dist = local.distribution if local.ok else None
    if not dist:
        return teacher
    post = {c: max(dist.get(c, 0.0), 1e-6) * confusion.likelihood(c, teacher.winner) for c in CLASSES}
    total = sum(post.values())
    winner = max(CLASSES, key=lambda c: post[c])
    note = (
        f"teacher said {teacher.winner}; merged with the local judge's probabilities "
        f"({', '.join(f'{c} {dist.get(c, 0.0):.2f}' for c in CLASSES)}): {winner}"
    )
    return teacher.model_copy(
        update={
            "winner": winner,
            "confidence": post[winner] / total,
            "distribution": {c: p / total for c, p in post.items()},
            "rationale": f"{note}. Teacher: {teacher.rationale}" if teacher.rationale else note,
        }
    )


class CombinedTeacher(CompositeJudge):
    """The cascade's last tier: calls the teacher and the local judge on an
    item and returns :func:`combine_verdicts` of the two. The local judge
    costs nothing, so the cost is the teacher's."""

    def __init__(self, teacher: Any, local: Any, confusion: TeacherConfusion, *, name: str = "teacher+local") -> None:
        super().__init__([teacher, local], name=name, what="judges")
        self.confusion = confusion

    @property
    def teacher(self) -> Any:
        return self.parts[0]

    @property
    def local(self) -> Any:
        return self.parts[1]

    async def _run(self, items: list[PairwiseInput], *, context: Any, max_concurrency: int) -> list[PairwiseVerdict]:
        said = await self.teacher.ajudge_many(items, context=context, max_concurrency=max_concurrency)
        mine = await self.local.ajudge_many(items, context=context, max_concurrency=max_concurrency)
        out: list[PairwiseVerdict] = []
        for t, loc in zip(said, mine, strict=True):
            if not isinstance(t, PairwiseVerdict):
                out.append(PairwiseVerdict(status=Status.ERROR, reason=f"teacher: {t}"))
            elif not isinstance(loc, PairwiseVerdict):
                out.append(t)
            else:
                out.append(combine_verdicts(loc, t, self.confusion))
        return out


def merged_table(
    local: Mapping[str, PairwiseVerdict],
    teacher: Mapping[str, PairwiseVerdict],
    confusion: TeacherConfusion,
    keys: Sequence[str],
) -> dict[str, PairwiseVerdict]:
    """The merged verdict per calibration item, for the planner's simulation."""
    return {k: combine_verdicts(local[k], teacher[k], confusion) for k in keys}
