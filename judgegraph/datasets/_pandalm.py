"""PandaLM's human-annotated test set (999 pairs) with its two recorded judges.

Files, from WeOpenML/PandaLM ``data/``: ``testset-v1.json`` (three annotators
per pair; 0 = tie, 1 = first response, 2 = second response),
``gpt-3.5-turbo-testset-v1.json`` (``gpt_result``: "1", "2", "Tie" or the
unparseable marker "garbage") and ``pandalm-7b-testset-v1.json``
(``pandalm_result``: 0, 1 or 2).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator

from ..types import PairwiseInput, PairwiseVerdict, Status, Winner
from ._common import Record, read_json, require_dir

__all__ = ["PANDALM_JUDGES", "PANDALM_LABELS", "PandaLMItem", "load_pandalm"]

PandaLMJudge = Literal["gpt-3.5-turbo", "pandalm-7b"]

#: The recorded judges, in the names ``PandaLMItem.recorded_verdict`` takes.
PANDALM_JUDGES: tuple[PandaLMJudge, ...] = ("gpt-3.5-turbo", "pandalm-7b")

#: PandaLM's label codes as our pairwise winners.
PANDALM_LABELS: dict[int, Winner] = {0: "tie", 1: "A", 2: "B"}

_GPT_CODES: dict[str, int] = {"1": 1, "2": 2, "Tie": 0}


def _as_text(value: Any) -> str:
    # A handful of responses were stored as JSON booleans (the model said "True").
    if isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) else str(value)


class PandaLMItem(Record):
    """One test pair, its three human labels and both recorded judge outputs."""

    idx: int
    category: str  # PandaLM's ``motivation_app``
    cmp_key: str  # "<model of response1>_<model of response2>"
    instruction: str
    input: str
    response1: str
    response2: str
    annotators: tuple[int, int, int]
    gpt35_result: str  # raw: "1", "2", "Tie" or "garbage"
    gpt35_reason: str | None = None
    pandalm7b_result: int
    pandalm7b_reason: str | None = None

    @field_validator("annotators")
    @classmethod
    def _codes(cls, v: tuple[int, int, int]) -> tuple[int, int, int]:
        if any(a not in PANDALM_LABELS for a in v):
            raise ValueError(f"annotator labels must be 0, 1 or 2, got {v}")
        return v

    @property
    def majority(self) -> int | None:
        """The label at least two annotators gave, or None when all three differ."""
        label, count = Counter(self.annotators).most_common(1)[0]
        return label if count >= 2 else None

    @property
    def gold_winner(self) -> Winner | None:
        m = self.majority
        return None if m is None else PANDALM_LABELS[m]

    @property
    def has_empty_response(self) -> bool:
        return not self.response1.strip() or not self.response2.strip()

    @property
    def prompt(self) -> str:
        """The instruction with its input appended, as one judge prompt field."""
        parts = [p for p in (self.instruction.strip(), self.input.strip()) if p]
        return "\n\n".join(parts)

    def to_pairwise_input(self) -> PairwiseInput:
        """A judge input; raises pydantic's ValidationError for the pairs with an empty response."""
        return PairwiseInput(instruction=self.prompt, response_a=self.response1, response_b=self.response2)

    def recorded_code(self, judge: PandaLMJudge) -> int | None:
        """The judge's label code (0/1/2), or None when its output was unparseable."""
        if judge == "pandalm-7b":
            return self.pandalm7b_result
        if judge == "gpt-3.5-turbo":
            return _GPT_CODES.get(self.gpt35_result)
        raise ValueError(f"unknown PandaLM judge {judge!r}; expected one of {PANDALM_JUDGES}")

    def recorded_verdict(self, judge: PandaLMJudge) -> PairwiseVerdict:
        """The recorded output as our result type; "garbage" becomes an unparsed verdict."""
        code = self.recorded_code(judge)
        raw = self.gpt35_result if judge == "gpt-3.5-turbo" else str(self.pandalm7b_result)
        reason = self.gpt35_reason if judge == "gpt-3.5-turbo" else self.pandalm7b_reason
        if code is None:
            return PairwiseVerdict(status=Status.UNPARSED, raw_text=raw, reason=f"unparseable {judge} output {raw!r}")
        return PairwiseVerdict(status=Status.OK, winner=PANDALM_LABELS[code], raw_text=raw, rationale=reason)


def load_pandalm(path: str | Path) -> list[PandaLMItem]:
    """Load the 999 test pairs, joined by ``idx`` with both recorded judges.

    ``path`` is the folder holding ``testset-v1.json`` and the two result files.
    """
    root = require_dir(path, what="PandaLM", marker="testset-v1.json")
    items = read_json(root / "testset-v1.json")
    gpt = {r["idx"]: r for r in read_json(root / "gpt-3.5-turbo-testset-v1.json")}
    panda = {r["idx"]: r for r in read_json(root / "pandalm-7b-testset-v1.json")}
    out: list[PandaLMItem] = []
    for row in items:
        idx = row["idx"]
        if idx not in gpt or idx not in panda:
            raise ValueError(f"PandaLM item {idx} has no recorded judge output")
        out.append(
            PandaLMItem(
                idx=idx,
                category=row["motivation_app"],
                cmp_key=row["cmp_key"],
                instruction=_as_text(row["instruction"]),
                input=_as_text(row["input"]),
                response1=_as_text(row["response1"]),
                response2=_as_text(row["response2"]),
                annotators=(row["annotator1"], row["annotator2"], row["annotator3"]),
                gpt35_result=str(gpt[idx]["gpt_result"]),
                gpt35_reason=gpt[idx].get("gpt_reason"),
                pandalm7b_result=int(panda[idx]["pandalm_result"]),
                pandalm7b_reason=panda[idx].get("pandalm_reason"),
            )
        )
    return out
