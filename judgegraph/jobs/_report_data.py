"""The report's data (:class:`ReportData`) and the streaming statistics over a run's rows it is built from."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..types import Status
from ._store import StoredRow

if TYPE_CHECKING:
    from judgegraph.metrics import CorrectedEstimate

__all__ = [
    "CascadePoint",
    "ComparisonRow",
    "ReportComparison",
    "ReportData",
    "corrected_estimates",
    "corrected_rates",
    "judged_verdict",
    "shown_as_share",
]


class _M(BaseModel):
    model_config = ConfigDict(frozen=True)


class CascadePoint(_M):
    escalated_share: float
    cost_per_item: float | None
    accuracy: float | None
    actual: bool = Field(default=False, description="the run's own operating point")


class ComparisonRow(_M):
    """One judge of a side-by-side comparison on the same items (e.g. the quickstart's table)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    agreement: float | None = Field(ge=0, le=1, description="share of items agreeing with the human labels")
    low: float | None = Field(default=None, ge=0, le=1, description="agreement interval, low end")
    high: float | None = Field(default=None, ge=0, le=1, description="agreement interval, high end")
    cost_per_1k: float | None = Field(default=None, ge=0, description="USD per 1,000 items; None: unpriced")
    cells: list[str] = Field(description="the row as the terminal table writes it, one cell per column")


class ReportComparison(_M):
    """Judges compared on the same items, shown above the run's own figures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str
    columns: list[str]
    rows: list[ComparisonRow] = Field(min_length=1)
    mark: str | None = Field(default=None, description="the row that is this report's run")
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _cells_fit(self) -> ReportComparison:
        for r in self.rows:
            if len(r.cells) != len(self.columns):
                raise ValueError(f"row {r.name!r} has {len(r.cells)} cells for {len(self.columns)} columns")
        if self.mark is not None and self.mark not in {r.name for r in self.rows}:
            raise ValueError(f"mark {self.mark!r} names no row")
        return self


class ReportData(_M):
    """Everything the report shows, JSON-ready (this is ``summary.json``)."""

    schema_version: int = 1
    run_id: str
    kind: str
    config_hash: str
    state: str
    judge: dict[str, Any]
    created_at: float
    generated_at: float
    counts: dict[str, int]
    cost_usd: float | None
    tokens: dict[str, int]
    n_labeled: int
    labels: list[str] = Field(description="row/column order of the confusion matrix")
    confusion: list[list[int]] = Field(description="rows: human label, columns: judge verdict")
    score_distribution: dict[str, dict[str, int]] = Field(description="series -> value -> count")
    metrics: dict[str, Any] | None = Field(description="judgegraph.metrics.summarize over labeled rows")
    calibration: dict[str, Any] | None
    position: dict[str, Any] | None
    position_by_category: dict[str, dict[str, int]]
    by_category: dict[str, dict[str, Any]]
    cascade: dict[str, Any] | None
    problems: list[dict[str, Any]]
    problem_kinds: dict[str, int]
    corrected: list[dict[str, Any]] = Field(
        default_factory=list,
        description="judgegraph.metrics.ppi_mean: the judge's rates over every judged row, corrected by the "
        "human labels on the labelled ones, beside the naive and human-only figures",
    )
    comparison: ReportComparison | None = Field(
        default=None, description="other judges on the same items, when the caller compared some (the quickstart)"
    )


_PAIR_LABELS = ["A", "B", "tie"]
_MAX_PROBLEMS = 50


def _fail_marker(status: str | None) -> Status:
    return Status.ERROR if status == "error" else Status.UNPARSED


def _prediction(kind: str, r: StoredRow) -> Any:
    """The verdict as a plain value, or the Status of a failure."""
    res = r.result or {}
    if r.status != "ok":
        return _fail_marker(r.status)
    if kind == "pairwise":
        return res.get("winner")
    if kind == "rubric":
        return res.get("weighted_score")
    return res.get("score")


def judged_verdict(kind: str, r: StoredRow) -> tuple[str | None, Any, Any] | None:
    """``(item id, verdict or the Status of its failure, stored label)`` for a row that was judged;
    None for a row with no verdict (invalid input, not judged yet, or unreadable in the store)."""
    if r.item_hash is None or r.status is None:
        return None
    return (r.item_id, _prediction(kind, r), r.label)


def _problem_kind(reason: str | None) -> str:
    if not reason:
        return "unknown"
    text = reason.split(": ", 1)[1] if reason.startswith("order ") else reason
    for needle, name in _KINDS:
        if needle in text:
            return name
    return text[:40]


_KINDS = (
    ("HTTP 429", "rate limited (HTTP 429)"),
    ("HTTP 5", "server error (HTTP 5xx)"),
    ("HTTP 4", "request refused (HTTP 4xx)"),
    ("timed out", "timeout"),
    ("connection", "connection failed"),
    ("malformed", "malformed response"),
    ("missing", "missing field"),
    ("not valid JSON", "unreadable record"),
    ("label", "label not readable"),
    ("no [", "no verdict marker"),
    ("cut off", "cut off at max_tokens"),
)


class _Acc:
    """Streaming accumulator over a run's rows."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.preds: list[Any] = []
        self.refs: list[Any] = []
        self.cats: list[str | None] = []
        self.conf: list[float | None] = []
        self.len_a: list[int] = []
        self.len_b: list[int] = []
        self.first: list[Any] = []
        self.second: list[Any] = []
        self.first_cat: list[str | None] = []
        # Labelled rows with both orders: (first order's verdict, second order's, human label), for swap accuracy.
        self.swapped: list[tuple[Any, Any, Any]] = []
        self.dist: dict[str, Counter[str]] = {"judge": Counter(), "human": Counter()}
        self.crit_dist: dict[str, Counter[str]] = {}
        self.by_cat: dict[str, Counter[str]] = {}
        self.cost = 0.0
        self.priced = True
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.problems: list[dict[str, Any]] = []
        self.problem_kinds: Counter[str] = Counter()
        self.casc: list[tuple[Any, float | None, float | None, bool, Any, float | None, Any]] = []
        self.judged: list[tuple[str | None, Any, Any]] = []  # (item id, verdict or failure, stored label)

    def add(self, r: StoredRow) -> None:
        where = f"row {r.row}" if r.file == 0 else f"file {r.file} row {r.row}"
        if r.problem:
            self._problem(where, "invalid" if r.item_hash is None else "warning", r.problem)
        if r.unreadable is not None:
            self.priced = False  # its cost cannot be read: the total is unknown, not understated
        if r.item_hash is None or r.status is None:
            return
        cat = r.category or "(none)"
        c = self.by_cat.setdefault(cat, Counter())
        c["rows"] += 1
        c[r.status] += 1
        res = r.result or {}
        if r.cost_usd is None:
            self.priced = False
        self.cost += r.cost_usd or 0.0
        self.prompt_tokens += r.prompt_tokens
        self.completion_tokens += r.completion_tokens
        if r.status != "ok":
            self._problem(where, r.status, r.reason or "")
        judged = judged_verdict(self.kind, r)
        assert judged is not None  # the row has a hash and a status
        self.judged.append(judged)
        pred = judged[1]
        if r.status == "ok":
            self.dist["judge"][self._bucket(pred)] += 1
            for name, s in (res.get("criteria") or {}).items():
                if s.get("status") == "ok":
                    self.crit_dist.setdefault(name, Counter())[str(s.get("score"))] += 1
        if r.label is not None:
            self.dist["human"][self._bucket(r.label)] += 1
            self.preds.append(pred)
            self.refs.append(r.label)
            self.cats.append(r.category)
            self.conf.append(res.get("confidence") if r.status == "ok" else None)
            if r.status == "ok":
                c["labeled_ok"] += 1
                c["correct"] += pred == r.label
            c["labeled"] += 1
            inp = r.input or {}
            if self.kind == "pairwise":
                self.len_a.append(len(str(inp.get("response_a", ""))))
                self.len_b.append(len(str(inp.get("response_b", ""))))
            else:
                self.len_a.append(len(str(inp.get("response", ""))))
        orders: list[dict[str, Any]] = list(res.get("orders") or ())
        if self.kind == "pairwise" and len(orders) == 2:
            first, second = (
                o.get("winner") if o.get("status") == "ok" else _fail_marker(o.get("status")) for o in orders
            )
            self.first.append(first)
            self.second.append(second)
            self.first_cat.append(r.category)
            if r.label is not None:
                self.swapped.append((first, second, r.label))
        tiers = res.get("tiers") or ()
        if tiers:
            t0 = tiers[0]
            total = sum(t.get("cost_usd") or 0.0 for t in tiers)
            unpriced = any(t.get("cost_usd") is None for t in tiers)
            v0: Any = t0.get("verdict") if t0.get("status") == "ok" else None
            if v0 is not None and self.kind != "pairwise":
                try:
                    v0 = float(v0)
                except ValueError:
                    v0 = None
            self.casc.append(
                (
                    v0,
                    t0.get("confidence"),
                    None if unpriced else t0.get("cost_usd"),
                    not t0.get("decided", False),
                    pred if r.status == "ok" else None,
                    None if unpriced else total,
                    r.label,
                )
            )

    def _bucket(self, v: Any) -> str:
        if isinstance(v, float) and self.kind == "rubric":
            return f"{math.floor(v * 10) / 10:.1f}"
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)

    def _problem(self, where: str, kind: str, text: str) -> None:
        self.problem_kinds[f"{kind}: {_problem_kind(text)}"] += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append({"where": where, "kind": kind, "reason": text})


def _confusion(kind: str, preds: list[Any], refs: list[Any]) -> tuple[list[str], list[list[int]]]:
    if kind == "pairwise":
        labels = list(_PAIR_LABELS)
    else:
        vals = {str(round(float(v))) for v in [*refs, *preds] if isinstance(v, int | float)}
        labels = sorted(vals, key=float)
        if kind == "rubric":  # weighted scores in 0-1: deciles
            labels = [f"{k / 10:.1f}" for k in range(11)]
    cols = [*labels, "failed"]
    index = {k: i for i, k in enumerate(cols)}
    matrix = [[0] * len(cols) for _ in labels]

    def key(v: Any) -> str:
        if isinstance(v, Status):
            return "failed"
        if kind == "pairwise":
            return str(v)
        x = float(v)
        return f"{round(x * 10) / 10:.1f}" if kind == "rubric" else str(round(x))

    for p, r in zip(preds, refs, strict=True):
        rk = key(r)
        if rk in index and rk != "failed":
            matrix[labels.index(rk)][index[key(p)]] += 1
    return cols, matrix


def _cascade_curve(acc: _Acc) -> dict[str, Any] | None:
    if not acc.casc:
        return None
    items = acc.casc
    n = len(items)
    labeled = [it for it in items if it[6] is not None]
    priced = all(it[2] is not None and it[5] is not None for it in items)
    escalated = [i for i, it in enumerate(items) if it[3]]

    def point(demote: set[int], actual: bool) -> CascadePoint:
        cost = 0.0
        correct = used = 0
        for i, (v0, _, c0, esc, final, total, label) in enumerate(items):
            low = i in demote or not esc
            verdict = v0 if low and esc else final
            if priced:
                cost += (c0 or 0.0) if (low and esc) else (total or 0.0)
            if label is not None:
                used += 1
                correct += verdict is not None and verdict == label
        share = (len(escalated) - len(demote)) / n
        return CascadePoint(
            escalated_share=share,
            cost_per_item=cost / n if priced else None,
            accuracy=correct / used if used else None,
            actual=actual,
        )

    # Demote the escalated items one confidence level at a time, most confident first.
    def conf(i: int) -> float:
        c = items[i][1]
        return -1.0 if c is None else float(c)

    order = sorted(escalated, key=lambda i: -conf(i))
    points = [point(set(), True)]
    demoted: set[int] = set()
    steps = max(1, len(order) // 20)
    for k in range(0, len(order), steps):
        demoted.update(order[k : k + steps])
        points.append(point(set(demoted), False))
    points.reverse()
    tiers: Counter[str] = Counter()
    for it in items:
        tiers["escalated" if it[3] else "decided at tier 0"] += 1
    return {
        "points": [p.model_dump() for p in points],
        "x": "cost_per_item" if priced else "escalated_share",
        "n_items": n,
        "n_labeled": len(labeled),
        "tier_use": dict(tiers),
        "note": "Points left of the run's own operating point are what escalating fewer items "
        "(the least confident first) would have given; further right needs a run that sends every item up.",
    }


def _as_float(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def shown_as_share(name: str) -> bool:
    """Whether a corrected figure (by its name from :func:`corrected_rates`) is a share, shown as a percentage."""
    return name.startswith("share ")


def corrected_rates(
    kind: str, judged: list[tuple[str | None, Any, Any]], labels: Mapping[str, Any] | None = None
) -> list[CorrectedEstimate]:
    """Judge-corrected rates (prediction-powered) over the rows with a usable verdict.

    ``judged``: ``(item id, verdict or failure Status, stored label)`` per judged row (see
    :func:`judged_verdict`). Pairwise: the share of rows where A wins and where B wins; pointwise
    and rubric: the mean score. A row's human value is its entry in ``labels`` (by item id) or else
    its stored label. Needs at least two labelled rows; rows whose verdict failed (or, for scores,
    is not a number) are left out of every figure, so ``n_items`` counts the rows that are in.
    """
    from .. import metrics

    rows = [(item_id, pred, label) for item_id, pred, label in judged if not isinstance(pred, Status)]
    humans = [labels.get(i, lab) if labels is not None and i is not None else lab for i, _, lab in rows]
    if sum(h is not None for h in humans) < 2:
        return []
    if kind == "pairwise":
        out: list[CorrectedEstimate] = []
        for side in ("A", "B"):
            judge = [pred == side for _, pred, _ in rows]
            human = [None if h is None else str(h) == side for h in humans]
            out.append(metrics.ppi_mean(judge, human, name=f"share where {side} wins"))
        return out
    judge_scores = [_as_float(pred) for _, pred, _ in rows]
    keep = [i for i, v in enumerate(judge_scores) if v is not None]
    human_scores = [None if humans[i] is None else _as_float(humans[i]) for i in keep]
    if sum(h is not None for h in human_scores) < 2:
        return []
    return [metrics.ppi_mean([judge_scores[i] for i in keep], human_scores, name="mean score")]


def corrected_estimates(
    kind: str, judged: list[tuple[str | None, Any, Any]], labels: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """:func:`corrected_rates` as JSON, for the report's ``summary.json``."""
    return [est.model_dump(mode="json") for est in corrected_rates(kind, judged, labels)]
