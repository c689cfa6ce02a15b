"""Traces from an eval job's store: a judged run becomes training data.

``judgegraph eval`` keeps every row, its input and its verdict in SQLite.
This reads one run back as traces, labelled either by the judge's verdicts
(teacher distillation) or by the human labels the source carried. A row
without a usable label is skipped and counted, never given a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judgegraph.types import PairwiseVerdict, PointwiseScore

from ._traces import PairwiseTrace, PointwiseTrace, _problems, trace_from_result

if TYPE_CHECKING:
    # judgegraph.jobs is imported when a store is read, not with judgegraph.finetune.
    from judgegraph.jobs import Store, StoredRow

__all__ = ["StoreExport", "traces_from_store"]

LabelSource = Literal["judge", "human"]
_MAX_PROBLEMS = 20


class StoreExport(BaseModel):
    """The traces of one run, and what happened to every row."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    kind: str
    labels: LabelSource
    traces: list[PointwiseTrace | PairwiseTrace]
    counts: dict[str, int] = Field(description="rows, exported, and each reason a row was skipped")
    problems: list[str] = Field(description=f"the first {_MAX_PROBLEMS} skipped rows that had bad data, by row")


def _pick_run(store: Store, run_id: str | None) -> str:
    if run_id is not None:
        return run_id
    ids = [r.run_id for r in store.runs()]
    if len(ids) != 1:
        raise ValueError(f"the store holds {len(ids)} runs; name one with run_id: {ids}")
    return ids[0]


def _run_scale(spec: dict[str, Any]) -> tuple[int, int] | None:
    """The scale the run's judge used: from the job spec (``judgegraph eval``) or
    from the judge's fingerprint (``arun_job``)."""
    from judgegraph.jobs import JobSpec, build_judge

    try:
        return build_judge(JobSpec.model_validate(spec).judge).scale
    except ValidationError:
        pass
    fp = spec.get("judge")
    got = fp.get("scale") if isinstance(fp, dict) else None
    if isinstance(got, list | tuple) and len(got) == 2 and all(isinstance(v, int) for v in got):
        return (got[0], got[1])
    return None


def _human_trace(kind: str, row: StoredRow, scale: tuple[int, int] | None, common: dict[str, Any]) -> Any:
    item = dict(row.input or {})
    if kind == "pairwise":
        return PairwiseTrace(**item, winner=row.label, **common)
    label = row.label
    if isinstance(label, float) and label.is_integer():
        label = int(label)
    if scale is None and row.result is not None and row.result.get("scale"):
        lo, hi = row.result["scale"]
        scale = (lo, hi)
    if scale is None:
        raise ValueError("the run does not record its judge's scale, so a human score cannot be placed on one")
    # The scale the run's judge used: a label off it is a bad row, not clipped.
    return PointwiseTrace(**item, score=label, scale=scale, **common)


def traces_from_store(
    path: str | Path,
    *,
    run_id: str | None = None,
    labels: LabelSource = "judge",
) -> StoreExport:
    """Read run ``run_id`` (the only run when None) of the store at ``path`` as traces.

    ``labels="judge"``: each row the judge answered with status ok becomes a trace
    labelled by its verdict (source ``eval-store``); unparsed and failed rows are
    skipped and counted. ``labels="human"``: each row whose source carried a label
    becomes a trace with that label (source ``human``), whatever the judge said.
    Only pairwise and pointwise runs have a trace format.
    """
    from judgegraph.jobs import Store

    if labels not in ("judge", "human"):
        raise ValueError(f"labels must be 'judge' or 'human', got {labels!r}")
    if not Path(path).is_file():
        raise FileNotFoundError(f"no eval store at {path}")
    counts = {"rows": 0, "exported": 0}
    problems: list[str] = []
    traces: list[PointwiseTrace | PairwiseTrace] = []

    def skip(reason: str, where: str | None = None, detail: str | None = None) -> None:
        counts[reason] = counts.get(reason, 0) + 1
        if detail is not None and len(problems) < _MAX_PROBLEMS:
            problems.append(f"{where}: {detail}")

    with Store(path) as store:
        rid = _pick_run(store, run_id)
        info = store.run(rid)
        if info.kind not in ("pairwise", "pointwise"):
            raise ValueError(f"run {rid!r} is a {info.kind} run; only pairwise and pointwise runs export as traces")
        scale = _run_scale(info.spec)
        result_model = PairwiseVerdict if info.kind == "pairwise" else PointwiseScore
        for row in store.rows(rid, with_input=True):
            counts["rows"] += 1
            where = f"file {row.file} row {row.row}" + (f" (id {row.item_id})" if row.item_id else "")
            if row.unreadable is not None:  # a torn or corrupt stored row: counted and named, never exported
                skip("unreadable", where, row.unreadable)
                continue
            if row.input is None:
                skip("invalid_input")
                continue
            meta: dict[str, Any] = {"run_id": rid, "file": row.file, "row": row.row}
            if row.category is not None:
                meta["category"] = row.category
            try:
                if labels == "human":
                    if row.label is None:
                        skip("no_label")
                        continue
                    common = {"id": row.item_id, "source": "human", "metadata": meta}
                    trace = _human_trace(info.kind, row, scale, common)
                else:
                    if row.status != "ok" or row.result is None:
                        skip(row.status or "pending")
                        continue
                    result = result_model.model_validate(row.result)
                    trace = trace_from_result(row.input, result, source="eval-store", id=row.item_id, metadata=meta)
            except ValidationError as exc:
                skip("bad_row", where, _problems(exc))
                continue
            except ValueError as exc:
                skip("bad_row", where, str(exc))
                continue
            traces.append(trace)
            counts["exported"] += 1
    return StoreExport(run_id=rid, kind=info.kind, labels=labels, traces=traces, counts=counts, problems=problems)
