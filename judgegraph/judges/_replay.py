"""Replay: serve recorded verdicts, keyed by item, instead of calling a model.

Record a judge once (:func:`arecord_verdicts`, or any results store that can
produce :class:`VerdictRecord` rows), then evaluate cascades and ensembles
over the recordings offline with :class:`ReplayJudge`. LLMBar's recorded
GPT-4 / ChatGPT / LLaMA2 / PaLM2 verdicts (both answer orders) convert with
:func:`llmbar_replay`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, Field, ValidationError

from judgegraph.datasets import LLMBarJudgement, LLMBarRun
from judgegraph.types import (
    FrozenModel,
    PairwiseInput,
    PairwiseVerdict,
    PointwiseInput,
    PointwiseScore,
    Provenance,
    Status,
    Winner,
)

from ._base import Judge, coerce_input
from ._composite import Result
from ._contract import Context

__all__ = [
    "LLMBarReplay",
    "ReplayJudge",
    "VerdictRecord",
    "arecord_verdicts",
    "create_replay_judge",
    "item_key",
    "llmbar_replay",
    "read_verdicts",
    "write_verdicts",
]


class VerdictRecord(FrozenModel):
    """One judge's recorded result on one item (one JSONL line)."""

    key: str = Field(min_length=1)
    judge: str = Field(min_length=1)
    result: PairwiseVerdict | PointwiseScore
    label: Winner | int | None = Field(default=None, description="the human label, when known")


def item_key(item: BaseModel | Mapping[str, object]) -> str:
    """A stable key for a judge input: a hash of its fields, so the same item
    gets the same key whatever its position in a dataset."""
    data = item.model_dump(mode="json", exclude_none=True) if isinstance(item, BaseModel) else dict(item)
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def read_verdicts(path: str | Path) -> list[VerdictRecord]:
    """Read a JSONL file of :class:`VerdictRecord` rows; a bad line raises,
    naming the file and line."""
    out: list[VerdictRecord] = []
    p = Path(path)
    with p.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(VerdictRecord.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(x) for x in first["loc"]) or "(line)"
                raise ValueError(f"{p}:{n}: not a verdict record ({loc}: {first['msg']})") from None
    return out


def write_verdicts(path: str | Path, records: Iterable[VerdictRecord]) -> int:
    """Write records as JSONL (overwriting); returns how many were written."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(r.model_dump_json(exclude_none=True) + "\n")
            n += 1
    return n


async def arecord_verdicts(
    judge: Judge[Any, Any],
    items: Sequence[BaseModel | Mapping[str, object]],
    *,
    labels: Sequence[Winner | int | None] | None = None,
    context: Context = None,
    max_concurrency: int = 16,
    key: Callable[[Any], str] = item_key,
) -> list[VerdictRecord]:
    """Run ``judge`` over ``items`` and return one record per judged item.
    A malformed item raises :class:`JudgeInputError` naming it, before any call.

    Any: it takes judges of every input and result type, and ``Judge`` is
    invariant in both, so only ``Judge[Any, Any]`` accepts them all; ``key``
    is a function of that judge's own input model, so it is typed alike."""
    if labels is not None and len(labels) != len(items):
        raise ValueError(f"labels has {len(labels)} entries for {len(items)} items")
    checked = [coerce_input(judge.input_model, v, where=f"item {i}: ") for i, v in enumerate(items)]
    results = await judge.ajudge_many(checked, max_concurrency=max_concurrency, context=context)
    name = judge.name or type(judge).__name__
    out: list[VerdictRecord] = []
    for i, (it, r) in enumerate(zip(checked, results, strict=True)):
        if not isinstance(r, PairwiseVerdict | PointwiseScore):
            raise TypeError(f"item {i}: {name} returned a {type(r).__name__}, which cannot be recorded")
        out.append(VerdictRecord(key=key(it), judge=name, result=r, label=labels[i] if labels is not None else None))
    return out


class ReplayJudge(Judge[Any, Any]):
    """A judge that answers from recordings.

    ``records`` is a mapping from item key to result, or :class:`VerdictRecord`
    rows (e.g. from :func:`read_verdicts`); with rows from several judges,
    ``judge`` picks one. An item without a recording comes back with status
    ``error`` and says so. ``cost_usd`` / ``latency_s``, when given, replace
    the recorded per-item cost and latency (to price a cascade offline).
    """

    def __init__(
        self,
        records: Mapping[str, Result] | Iterable[VerdictRecord],
        *,
        judge: str | None = None,
        name: str | None = None,
        key: Callable[[Any], str] = item_key,
        input_model: type[BaseModel] | None = None,
        cost_usd: float | None = None,
        latency_s: float | None = None,
    ) -> None:
        """Any: ``key`` is a function of the recorded judge's own input model
        (any model), so a key typed for that model must be accepted."""
        table: dict[str, Result] = {}
        seen: set[str] = set()
        if isinstance(records, Mapping):
            table = dict(records)
        else:
            rows = [r for r in records if judge is None or r.judge == judge]
            seen = {r.judge for r in rows}
            if judge is None and len(seen) > 1:
                raise ValueError(f"records come from several judges {sorted(seen)}: pick one with judge=")
            for r in rows:
                old = table.get(r.key)
                if old is not None and old != r.result:
                    raise ValueError(f"two different recordings for item {r.key} (judge {r.judge})")
                table[r.key] = r.result
        if not table:
            raise ValueError(f"no recorded verdicts{f' for judge {judge!r}' if judge else ''}")
        kinds = {type(r) for r in table.values()}
        if len(kinds) != 1:
            raise ValueError("recordings mix pairwise verdicts and pointwise scores")
        self.kind: Literal["pairwise", "pointwise"] = "pairwise" if kinds == {PairwiseVerdict} else "pointwise"
        self.input_model = input_model or (PairwiseInput if self.kind == "pairwise" else PointwiseInput)
        self.name = name or judge or (seen.pop() if seen else "replay")
        first = next(iter(table.values()))
        self.scale = first.scale if isinstance(first, PointwiseScore) else (1, 10)
        self.records = table
        self.key = key
        self.cost_usd = cost_usd
        self.latency_s = latency_s
        if cost_usd is not None and cost_usd < 0:
            raise ValueError(f"cost_usd must be >= 0, got {cost_usd}")

    async def _ajudge_item(self, item: Any, context: Context) -> Result:
        k = self.key(item)
        found = self.records.get(k)
        if found is None:
            reason = f"no recorded verdict for this item (key {k})"
            prov = self._prov(None, Status.ERROR)
            if self.kind == "pairwise":
                return PairwiseVerdict(status=Status.ERROR, reason=reason, provenance=prov)
            return PointwiseScore(status=Status.ERROR, scale=self.scale, reason=reason, provenance=prov)
        return found.model_copy(update={"provenance": self._prov(found.provenance, found.status)})

    def _prov(self, recorded: Provenance | None, status: Status) -> Provenance:
        base = recorded or Provenance(
            judge=str(self.name),
            backend="replay",
            model=str(self.name),
            template_id="replay",
            template_version=1,
            latency_s=0.0,
            status=status,
        )
        update: dict[str, Any] = {}
        if self.cost_usd is not None:
            update["cost_usd"] = self.cost_usd
        if self.latency_s is not None:
            update["latency_s"] = self.latency_s
        return base.model_copy(update=update) if update else base


def create_replay_judge(
    records: Mapping[str, Result] | Iterable[VerdictRecord] | str | Path,
    *,
    judge: str | None = None,
    name: str | None = None,
    cost_usd: float | None = None,
    latency_s: float | None = None,
    input_model: type[BaseModel] | None = None,
) -> ReplayJudge:
    """A replay judge from records, or from a JSONL file path."""
    if isinstance(records, str | Path):
        records = read_verdicts(records)
    return ReplayJudge(records, judge=judge, name=name, cost_usd=cost_usd, latency_s=latency_s, input_model=input_model)


# ---------------------------------------------------------------- LLMBar


class LLMBarReplay(FrozenModel):
    """One recorded LLMBar run as replay records, aligned with its items.

    Items that cannot be judged (an empty response) are left out and listed
    in ``skipped`` with the reason.
    """

    subset: str
    evaluator: str
    strategy: str
    items: tuple[PairwiseInput, ...]
    records: tuple[VerdictRecord, ...]
    skipped: tuple[str, ...] = ()

    @property
    def keys(self) -> list[str]:
        return [r.key for r in self.records]

    @property
    def labels(self) -> list[Winner]:
        return [cast(Winner, r.label) for r in self.records]  # always set from the gold label


def llmbar_replay(run: LLMBarRun, *, on_inconsistent: Literal["tie", "flag"] = "tie") -> LLMBarReplay:
    """Turn a run from :func:`judgegraph.datasets.load_llmbar_run` into replay records.

    Both answer orders become ``orders`` (the second already mapped back to
    the original labels, as LLMBar stores it). Orders that disagree give a
    tie (or, with ``"flag"``, the score winner, else the first order's)
    with ``inconsistent`` set and confidence 0.5; agreeing orders give
    confidence 1.0, as :class:`PairwiseJudge` reports swap agreement. An
    order without a verdict makes the result unparsed (a cascade escalates
    it), with both orders kept: scored with :func:`agreement_credit`, it
    earns half the readable order's credit, as LLMBar's published average
    accuracy counts it (``missing_order="zero"`` there scores it 0).
    """
    prov = Provenance(
        judge=run.evaluator,
        backend="replay",
        model=run.evaluator,
        template_id=f"llmbar-{run.strategy}",
        template_version=1,
        latency_s=0.0,
    )
    items: list[PairwiseInput] = []
    records: list[VerdictRecord] = []
    skipped: list[str] = []
    for j in run.judgements:
        try:
            item = j.item.to_pairwise_input()
        except ValidationError as exc:
            skipped.append(f"item {j.item.index}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")
            continue
        verdict = _llmbar_verdict(j, on_inconsistent).model_copy(update={"provenance": prov})
        items.append(item)
        records.append(VerdictRecord(key=item_key(item), judge=run.evaluator, result=verdict, label=j.item.gold_winner))
    return LLMBarReplay(
        subset=run.subset,
        evaluator=run.evaluator,
        strategy=run.strategy,
        items=tuple(items),
        records=tuple(records),
        skipped=tuple(skipped),
    )


def _llmbar_verdict(j: LLMBarJudgement, on_inconsistent: str) -> PairwiseVerdict:
    ab, ba = j.order_verdicts()
    if not ab.ok or not ba.ok:
        label = "A/B" if not ab.ok else "B/A"
        reason = f"order {label}: no verdict recorded (the other order counts for half, as in LLMBar)"
        return PairwiseVerdict(status=Status.UNPARSED, reason=reason, orders=(ab, ba))
    consistent = ab.winner == ba.winner
    winner: Winner | None
    if consistent:
        winner = ab.winner
    elif on_inconsistent == "tie":
        winner = "tie"
    elif j.score_1 is not None and j.score_2 is not None:
        winner = "A" if j.score_1 > j.score_2 else "B" if j.score_2 > j.score_1 else "tie"
    else:
        winner = ab.winner
    return PairwiseVerdict(
        status=Status.OK,
        winner=winner,
        score_a=j.score_1,
        score_b=j.score_2,
        confidence=1.0 if consistent else 0.5,
        inconsistent=not consistent,
        orders=(ab, ba),
    )
