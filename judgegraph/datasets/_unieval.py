"""UniEval's meta-evaluation sets: human scores per dimension and UniEval's predictions.

Layout (maszhongming/UniEval ``reproduce/``): ``data/<task>/<dataset>.json``
holds the items with human ``scores``; ``unieval_predict/<task>/<dataset>_result.json``
holds the same items, in the same order, with UniEval's ``predict_scores``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from ._common import Record, read_json, require_dir

__all__ = ["UNIEVAL_DATASETS", "UniEvalItem", "load_unieval"]

UniEvalTask = Literal["dialogue", "fact", "data2text", "summarization"]

#: Dataset name -> task folder.
UNIEVAL_DATASETS: dict[str, UniEvalTask] = {
    "topical_chat": "dialogue",
    "qags_xsum": "fact",
    "qags_cnndm": "fact",
    "sfres": "data2text",
    "sfhot": "data2text",
    "summeval": "summarization",
}


class UniEvalItem(Record):
    task: UniEvalTask
    dataset: str
    index: int
    doc_id: int | None = None
    system_id: str | None = None
    source: str
    context: str | None = None
    reference: str | None = None
    system_output: str
    human: dict[str, float]  # the dataset's ``scores``
    predicted: dict[str, float] | None = None  # UniEval's ``predict_scores``


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def load_unieval(path: str | Path, *, dataset: str, predictions: bool = True) -> list[UniEvalItem]:
    """Load one dataset; ``path`` is the UniEval root (holding ``data/`` and ``unieval_predict/``).

    With ``predictions=True`` (the default) UniEval's predicted scores are joined
    item by item; the two files must list the same outputs in the same order.
    """
    if dataset not in UNIEVAL_DATASETS:
        raise ValueError(f"unknown UniEval dataset {dataset!r}; expected one of {sorted(UNIEVAL_DATASETS)}")
    task = UNIEVAL_DATASETS[dataset]
    root = require_dir(path, what="UniEval", marker="data")
    rows = read_json(root / "data" / task / f"{dataset}.json")
    preds: list[dict[str, Any]] | None = None
    if predictions:
        preds = read_json(root / "unieval_predict" / task / f"{dataset}_result.json")
        if len(preds) != len(rows):
            raise ValueError(f"UniEval {dataset}: {len(rows)} items but {len(preds)} predictions")
    out: list[UniEvalItem] = []
    for i, row in enumerate(rows):
        predicted: dict[str, float] | None = None
        if preds is not None:
            p = preds[i]
            if p["system_output"] != row["system_output"] or p.get("source") != row.get("source"):
                raise ValueError(f"UniEval {dataset}: prediction {i} is for a different item")
            predicted = {k: float(v) for k, v in p["predict_scores"].items()}
        out.append(
            UniEvalItem(
                task=task,
                dataset=dataset,
                index=i,
                doc_id=row.get("doc_id"),
                system_id=_str_or_none(row.get("system_id")),
                source=row["source"],
                context=row.get("context"),
                reference=row.get("reference"),
                system_output=row["system_output"],
                human={k: float(v) for k, v in row["scores"].items()},
                predicted=predicted,
            )
        )
    return out
