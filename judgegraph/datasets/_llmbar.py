"""LLMBar: gold-labelled instruction-following pairs and recorded LLM evaluators.

Layout (princeton-nlp/LLMBar ``Dataset/``): ``LLMBar/Natural``,
``LLMBar/Adversarial/{GPTInst,GPTOut,Manual,Neighbor}`` and
``Processed/{FairEval,LLMEval^2,MT-Bench}``, each with ``dataset.json``
(``input``, ``output_1``, ``output_2``, ``label`` 1 or 2) and
``evaluators/<evaluator>/<strategy>/{result.json,statistics.json}``. In a
result, ``results[-1]["swap = False"|"swap = True"]["winner"]`` is the verdict
of each answer order, already in the original order ("1", "2", or null when
the evaluator's output could not be parsed).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

from ..types import PairwiseInput, PairwiseVerdict, Status, Winner
from ._common import DatasetNotFoundError, Record, read_json, require_dir

__all__ = [
    "LLMBAR_SUBSETS",
    "LLMBarItem",
    "LLMBarJudgement",
    "LLMBarRun",
    "list_llmbar_runs",
    "load_llmbar",
    "load_llmbar_run",
]

#: Subset name -> folder under the LLMBar root.
LLMBAR_SUBSETS: dict[str, str] = {
    "Natural": "LLMBar/Natural",
    "GPTInst": "LLMBar/Adversarial/GPTInst",
    "GPTOut": "LLMBar/Adversarial/GPTOut",
    "Manual": "LLMBar/Adversarial/Manual",
    "Neighbor": "LLMBar/Adversarial/Neighbor",
    "FairEval": "Processed/FairEval",
    "LLMEval^2": "Processed/LLMEval^2",
    "MT-Bench": "Processed/MT-Bench",
}

_WINNERS: dict[str, Winner] = {"1": "A", "2": "B"}


class LLMBarItem(Record):
    subset: str
    index: int
    input: str
    output_1: str
    output_2: str
    label: Literal[1, 2]

    @property
    def gold_winner(self) -> Winner:
        return "A" if self.label == 1 else "B"

    def to_pairwise_input(self) -> PairwiseInput:
        return PairwiseInput(instruction=self.input, response_a=self.output_1, response_b=self.output_2)


class LLMBarJudgement(Record):
    """One evaluator's recorded verdicts on one item, in both answer orders."""

    item: LLMBarItem
    first: Winner | None  # order (output_1, output_2); None = unparsed
    second: Winner | None  # order (output_2, output_1), mapped back to the original order
    score_1: float | None = None  # Rating strategies only
    score_2: float | None = None

    def order_verdicts(self) -> tuple[PairwiseVerdict, PairwiseVerdict]:
        """Both orders as our result type (the second already in the original order)."""
        return (_verdict(self.first), _verdict(self.second))


class LLMBarRun(Record):
    subset: str
    evaluator: str
    strategy: str
    judgements: list[LLMBarJudgement]
    statistics: dict[str, Any]  # the run's statistics.json, verbatim


def _verdict(w: Winner | None) -> PairwiseVerdict:
    if w is None:
        return PairwiseVerdict(status=Status.UNPARSED, reason="evaluator output had no parseable winner")
    return PairwiseVerdict(status=Status.OK, winner=w)


def _subset_dir(root: Path, subset: str) -> Path:
    if subset not in LLMBAR_SUBSETS:
        raise ValueError(f"unknown LLMBar subset {subset!r}; expected one of {sorted(LLMBAR_SUBSETS)}")
    d = root / LLMBAR_SUBSETS[subset]
    if not d.is_dir():
        raise DatasetNotFoundError(f"LLMBar subset {subset!r} not found at {str(d)!r}")
    return d


def _root(path: str | Path) -> Path:
    return require_dir(path, what="LLMBar", marker="LLMBar")


def _winner(raw: Any) -> Winner | None:
    return None if raw is None else _WINNERS.get(str(raw))


def _score(raw: Any) -> float | None:
    value = raw[0] if isinstance(raw, list) and raw else raw
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _item(subset: str, index: int, row: dict[str, Any]) -> LLMBarItem:
    return LLMBarItem(
        subset=subset,
        index=index,
        input=row["input"],
        output_1=row["output_1"],
        output_2=row["output_2"],
        label=row["label"],
    )


def load_llmbar(path: str | Path, *, subset: str = "Natural") -> list[LLMBarItem]:
    """The gold-labelled pairs of one subset; ``path`` is the LLMBar data root."""
    d = _subset_dir(_root(path), subset)
    return [_item(subset, i, row) for i, row in enumerate(read_json(d / "dataset.json"))]


def list_llmbar_runs(path: str | Path) -> list[tuple[str, str, str]]:
    """Every recorded (subset, evaluator, strategy) that has a result.json and statistics.json.

    A root holding none of the subset folders raises :class:`DatasetNotFoundError`;
    subsets without recorded evaluators give a warning and an empty list."""
    root = _root(path)
    present = [s for s, rel in LLMBAR_SUBSETS.items() if (root / rel).is_dir()]
    if not present:
        raise DatasetNotFoundError(
            f"LLMBar: none of the subset folders ({', '.join(LLMBAR_SUBSETS.values())}) is under {str(root)!r}"
        )
    runs: list[tuple[str, str, str]] = []
    for subset in present:
        evaluators = root / LLMBAR_SUBSETS[subset] / "evaluators"
        if not evaluators.is_dir():
            continue
        for result in sorted(evaluators.glob("*/*/result.json")):
            if (result.parent / "statistics.json").is_file():
                runs.append((subset, result.parent.parent.name, result.parent.name))
    if not runs:
        warnings.warn(
            f"LLMBar: subsets {present} under {str(root)!r} have no recorded evaluator runs "
            "(evaluators/<evaluator>/<strategy>/result.json and statistics.json)",
            stacklevel=2,
        )
    return runs


def load_llmbar_run(path: str | Path, *, subset: str, evaluator: str, strategy: str) -> LLMBarRun:
    """One evaluator/strategy's recorded verdicts, joined with the gold labels."""
    d = _subset_dir(_root(path), subset) / "evaluators" / evaluator / strategy
    rows = read_json(d / "result.json")
    judgements: list[LLMBarJudgement] = []
    for i, row in enumerate(rows):
        last = row["results"][-1]
        judgements.append(
            LLMBarJudgement(
                item=_item(subset, i, row),
                first=_winner(last["swap = False"].get("winner")),
                second=_winner(last["swap = True"].get("winner")),
                score_1=_score(last.get("score_1")),
                score_2=_score(last.get("score_2")),
            )
        )
    return LLMBarRun(
        subset=subset,
        evaluator=evaluator,
        strategy=strategy,
        judgements=judgements,
        statistics=read_json(d / "statistics.json"),
    )
