"""Turning judge outputs into label arrays under an explicit unparsed policy.

Every metric accepts plain values (labels or numbers) or our result objects.
Failed items are never dropped silently: the caller chooses what they mean
(``unparsed=``) and every result reports how many there were.

Failures: a result whose status is ``unparsed`` or ``error``; in plain value
lists, ``None`` or NaN (unparsed) and the ``Status`` members themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from pydantic import Field

from judgegraph.types import FrozenModel

from ..types import PairwiseVerdict, PointwiseScore, RubricResult, Status

__all__ = [
    "UNPARSED_POLICIES",
    "Failure",
    "Interval",
    "ItemCounts",
    "MetricResult",
    "Resolved",
    "ResolvedColumns",
    "UnparsedPolicy",
    "check_policy",
    "encode",
    "extract",
    "label_order",
    "resolve",
    "resolve_columns",
]

UnparsedPolicy = Literal["exclude", "wrong", "tie"]
UNPARSED_POLICIES: tuple[UnparsedPolicy, ...] = ("exclude", "wrong", "tie")

ScoreField = Literal["score", "expected_score"]


class Failure(Enum):
    """Marks an item that has no usable value."""

    UNPARSED = "unparsed"
    ERROR = "error"


class ItemCounts(FrozenModel):
    """What went into a metric. An item is failed when either side of it failed.

    ``policy`` says what failed items became: ``exclude`` (dropped),
    ``wrong`` (kept, never agreeing with anything) or ``tie`` (kept, replaced
    by the tie label or fill value).
    """

    policy: UnparsedPolicy
    total: int = Field(description="items given")
    used: int = Field(description="items the value was computed on")
    unparsed: int = Field(default=0, description="items with an unparsed output (no error)")
    error: int = Field(default=0, description="items with an errored output")
    excluded: int = Field(default=0, description="items dropped, for any reason")
    dropped_ties: int = Field(default=0, description="of those, items dropped because a side was a tie")


class Interval(FrozenModel):
    """A two-sided confidence interval, with the level and the method that produced it."""

    low: float
    high: float
    level: float = Field(description="confidence level, e.g. 0.95")
    method: str = Field(description="e.g. 'wilson', 'exact', 'bootstrap-bca', 'normal', 'ppi-clt'")

    def describe(self) -> str:
        """``'95% Wilson'``-style label, for a table's caption."""
        names = {
            "wilson": "Wilson",
            "exact": "Clopper–Pearson",
            "bootstrap-bca": "bootstrap (BCa)",
            "bootstrap-percentile": "bootstrap (percentile)",
            "paired-bootstrap-bca": "paired bootstrap (BCa)",
            "paired-bootstrap-percentile": "paired bootstrap (percentile)",
            "stratified-bootstrap-bca": "stratified bootstrap (BCa)",
            "stratified-bootstrap-percentile": "stratified bootstrap (percentile)",
            "rogan-gladen-bootstrap": "Rogan–Gladen, bootstrap over both samples",
            "normal": "normal (CLT)",
            "ppi-clt": "prediction-powered (CLT)",
        }
        return f"{100 * self.level:g}% {names.get(self.method, self.method)}"

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


class MetricResult(FrozenModel):
    """One number and the counts behind it. ``value`` is None when it is undefined.

    ``interval``: its confidence interval, where the metric computes one (level and method inside).
    """

    name: str
    value: float | None
    counts: ItemCounts
    interval: Interval | None = None

    def __float__(self) -> float:
        return math.nan if self.value is None else self.value


def check_policy(policy: str, *, allowed: Sequence[str] = UNPARSED_POLICIES, why: str = "") -> UnparsedPolicy:
    if policy not in allowed:
        extra = f" ({why})" if why else ""
        raise ValueError(f"unparsed= must be one of {tuple(allowed)}{extra}, got {policy!r}")
    return policy  # type: ignore[return-value]


def extract(value: Any, *, score_field: ScoreField = "score") -> Any:
    """The label or number carried by one item, or a ``Failure``."""
    if isinstance(value, Failure):
        return value
    if isinstance(value, Status):
        if value is Status.OK:
            raise ValueError("Status.OK carries no label; pass the label itself")
        return Failure.ERROR if value is Status.ERROR else Failure.UNPARSED
    if isinstance(value, PairwiseVerdict | PointwiseScore | RubricResult):
        if value.status is Status.ERROR:
            return Failure.ERROR
        if value.status is not Status.OK:
            return Failure.UNPARSED
        if isinstance(value, PairwiseVerdict):
            return value.winner
        if isinstance(value, RubricResult):
            return Failure.UNPARSED if value.weighted_score is None else value.weighted_score
        got = value.expected_score if score_field == "expected_score" else value.score
        return Failure.UNPARSED if got is None else got
    if value is None:
        return Failure.UNPARSED
    if isinstance(value, float) and math.isnan(value):
        return Failure.UNPARSED
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        return extract(value.item())  # numpy scalars
    return value


@dataclass(frozen=True)
class Resolved:
    """Aligned values after the policy. ``wrong[i]`` marks an item kept as a forced disagreement;
    its entries in ``left``/``right`` are the Failure markers."""

    left: list[Any]
    right: list[Any]
    wrong: list[bool]
    counts: ItemCounts


@dataclass(frozen=True)
class ResolvedColumns:
    """Rows kept under the policy, column by column, with their original positions
    (``index``) so that values outside the columns, such as confidences, stay aligned."""

    columns: list[list[Any]]
    index: list[int]
    wrong: list[bool]
    counts: ItemCounts


def resolve_columns(
    columns: Sequence[Sequence[Any]],
    *,
    unparsed: UnparsedPolicy,
    tie_label: Any = "tie",
    score_field: ScoreField = "score",
    drop_ties: bool = False,
    allowed: Sequence[str] = UNPARSED_POLICIES,
    why: str = "",
) -> ResolvedColumns:
    """Apply ``unparsed`` to aligned columns: an item failed when any of its values failed,
    and the policy then acts on the whole item (see ``ItemCounts``)."""
    policy = check_policy(unparsed, allowed=allowed, why=why)
    if len({len(c) for c in columns}) > 1:
        raise ValueError(f"columns differ in length: {[len(c) for c in columns]}")
    out: list[list[Any]] = [[] for _ in columns]
    index: list[int] = []
    wrong: list[bool] = []
    n_unparsed = n_error = n_excluded = n_ties = 0
    for i, raw in enumerate(zip(*columns, strict=True)):
        values = [extract(v, score_field=score_field) for v in raw]
        failed = any(isinstance(v, Failure) for v in values)
        if failed:
            if any(v is Failure.ERROR for v in values):
                n_error += 1
            else:
                n_unparsed += 1
            if policy == "exclude":
                n_excluded += 1
                continue
            if policy == "tie":
                values = [tie_label if isinstance(v, Failure) else v for v in values]
                failed = False
        if drop_ties and any(not isinstance(v, Failure) and v == tie_label for v in values):
            n_excluded += 1
            n_ties += 1
            continue
        for column, v in zip(out, values, strict=True):
            column.append(v)
        index.append(i)
        wrong.append(failed)
    counts = ItemCounts(
        policy=policy,
        total=len(columns[0]) if columns else 0,
        used=len(index),
        unparsed=n_unparsed,
        error=n_error,
        excluded=n_excluded,
        dropped_ties=n_ties,
    )
    return ResolvedColumns(out, index, wrong, counts)


def resolve(
    left: Sequence[Any],
    right: Sequence[Any],
    *,
    unparsed: UnparsedPolicy,
    tie_label: Any = "tie",
    score_field: ScoreField = "score",
    drop_ties: bool = False,
    allowed: Sequence[str] = UNPARSED_POLICIES,
    why: str = "",
) -> Resolved:
    """Align two equally long sequences under ``unparsed`` (see ``ItemCounts``)."""
    check_policy(unparsed, allowed=allowed, why=why)
    if len(left) != len(right):
        raise ValueError(f"length mismatch: {len(left)} predictions but {len(right)} references")
    res = resolve_columns(
        [left, right],
        unparsed=unparsed,
        tie_label=tie_label,
        score_field=score_field,
        drop_ties=drop_ties,
        allowed=allowed,
        why=why,
    )
    return Resolved(res.columns[0], res.columns[1], res.wrong, res.counts)


PRED_WRONG = -1
REF_WRONG = -2


def label_order(values: Sequence[Any], labels: Sequence[Any] | None) -> list[Any]:
    """The explicit ``labels`` (checked to cover ``values``) or the observed labels, sorted when sortable."""
    seen = list(dict.fromkeys(v for v in values if not isinstance(v, Failure)))
    if labels is not None:
        order = list(labels)
        if len(set(order)) != len(order):
            raise ValueError(f"labels has duplicates: {order}")
        unknown = [v for v in seen if v not in order]
        if unknown:
            raise ValueError(f"values {unknown!r} are not in labels={order!r}")
        return order
    try:
        return sorted(seen)
    except TypeError:
        return seen


def encode(res: Resolved, labels: Sequence[Any] | None = None) -> tuple[list[int], list[int], list[Any]]:
    """Integer codes for both sides; forced-wrong entries get codes no label has."""
    order = label_order([*res.left, *res.right], labels)
    index = {label: i for i, label in enumerate(order)}
    left = [PRED_WRONG if isinstance(v, Failure) else index[v] for v in res.left]
    right = [REF_WRONG if isinstance(v, Failure) else index[v] for v in res.right]
    return left, right, order
