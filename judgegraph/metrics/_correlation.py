"""Correlation of judge scores with human scores (scipy.stats).

Three aggregation levels, as in the summarization meta-evaluation literature:

* ``sample``: one correlation over all items pooled (UniEval's "sample"/"turn" level for
  dialogue, data-to-text and factual consistency);
* ``group``: one correlation per group (e.g. per source document), averaged over the
  groups where it is defined ("summary level");
* ``system``: average each group's (e.g. each system's) scores first, then correlate the
  averages ("system level").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from judgegraph.types import FrozenModel

from ._inputs import Failure, ItemCounts, ScoreField, UnparsedPolicy, extract, resolve

__all__ = [
    "CorrelationResult",
    "Correlations",
    "correlation",
    "correlations",
    "kendall",
    "pearson",
    "spearman",
]

Method = Literal["pearson", "spearman", "kendall"]
Level = Literal["sample", "group", "system"]


class CorrelationResult(FrozenModel):
    method: Method
    level: Level
    value: float | None = Field(description="None when undefined (constant input, too few items)")
    p_value: float | None = Field(default=None, description="sample and system level only")
    n: int = Field(description="pairs correlated: items, or systems at system level")
    n_groups: int | None = Field(default=None, description="groups averaged (group level) or systems (system level)")
    counts: ItemCounts

    def __float__(self) -> float:
        return math.nan if self.value is None else self.value


class Correlations(FrozenModel):
    pearson: CorrelationResult
    spearman: CorrelationResult
    kendall: CorrelationResult


def _corr(
    method: Method, x: Sequence[float], y: Sequence[float], kendall_variant: str
) -> tuple[float | None, float | None]:
    from scipy import stats

    if len(x) < 2 or np.ptp(np.asarray(x, dtype=float)) == 0 or np.ptp(np.asarray(y, dtype=float)) == 0:
        return None, None
    if method == "pearson":
        r = stats.pearsonr(x, y)
    elif method == "spearman":
        r = stats.spearmanr(x, y)
    else:
        r = stats.kendalltau(x, y, variant=kendall_variant)
    value, p = float(r.statistic), float(r.pvalue)
    return (None if math.isnan(value) else value), (None if math.isnan(p) else p)


def _numbers(values: list[Any], side: str) -> list[float]:
    out: list[float] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"correlation needs numeric {side}, got {v!r}")
        out.append(float(v))
    return out


def correlation(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    method: Method = "pearson",
    level: Level = "sample",
    groups: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    fill: float | None = None,
    score_field: ScoreField = "score",
    kendall_variant: Literal["b", "c"] = "b",
) -> CorrelationResult:
    """Pearson, Spearman or Kendall (tau-b by default) between predicted and reference scores.

    ``unparsed="exclude"`` drops failed items; ``unparsed="tie"`` replaces them with ``fill``
    (a neutral score you choose). ``"wrong"`` has no meaning for a correlation and is refused.
    ``score_field="expected_score"`` correlates the probability-weighted score of
    ``PointwiseScore`` results instead of the parsed one. ``groups`` is required for the
    ``group`` and ``system`` levels.
    """
    if unparsed == "tie" and fill is None:
        raise ValueError('unparsed="tie" needs fill=<score that stands in for a failed item>')
    tag = object()
    n_items = len(predictions)
    group_list: list[Any] = list(groups) if groups is not None else [None] * n_items
    if len(group_list) != n_items:
        raise ValueError(f"groups has {len(group_list)} entries for {n_items} items")
    if level != "sample" and groups is None:
        raise ValueError(f"level={level!r} needs groups=")
    res = resolve(
        list(predictions),
        list(references),
        unparsed=unparsed,
        tie_label=fill if fill is not None else tag,
        score_field=score_field,
        allowed=("exclude", "tie"),
        why="a correlation has no notion of a wrong item; use exclude, or tie with fill=",
    )
    kept = _kept_groups(predictions, references, group_list, unparsed, score_field)
    x = _numbers(res.left, "predictions")
    y = _numbers(res.right, "references")
    counts = res.counts
    if level == "sample":
        value, p = _corr(method, x, y, kendall_variant)
        return CorrelationResult(method=method, level=level, value=value, p_value=p, n=len(x), counts=counts)
    by_group: dict[Any, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for g, a, b in zip(kept, x, y, strict=True):
        by_group[g][0].append(a)
        by_group[g][1].append(b)
    if level == "system":
        xs = [float(np.mean(v[0])) for v in by_group.values()]
        ys = [float(np.mean(v[1])) for v in by_group.values()]
        value, p = _corr(method, xs, ys, kendall_variant)
        return CorrelationResult(
            method=method, level=level, value=value, p_value=p, n=len(xs), n_groups=len(xs), counts=counts
        )
    per_group = [_corr(method, v[0], v[1], kendall_variant)[0] for v in by_group.values()]
    defined = [v for v in per_group if v is not None]
    value = float(np.mean(defined)) if defined else None
    return CorrelationResult(method=method, level=level, value=value, n=len(x), n_groups=len(defined), counts=counts)


def _kept_groups(
    predictions: Sequence[Any],
    references: Sequence[Any],
    groups: list[Any],
    unparsed: UnparsedPolicy,
    score_field: ScoreField,
) -> list[Any]:
    """The groups of the items ``resolve`` keeps, in order (only ``exclude`` drops items)."""
    if unparsed != "exclude":
        return groups
    return [
        g
        for p, r, g in zip(predictions, references, groups, strict=True)
        if not isinstance(extract(p, score_field=score_field), Failure)
        and not isinstance(extract(r, score_field=score_field), Failure)
    ]


def pearson(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    level: Level = "sample",
    groups: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    fill: float | None = None,
    score_field: ScoreField = "score",
    kendall_variant: Literal["b", "c"] = "b",
) -> CorrelationResult:
    """``correlation(..., method="pearson")``; options as for :func:`correlation`."""
    return correlation(
        predictions,
        references,
        method="pearson",
        level=level,
        groups=groups,
        unparsed=unparsed,
        fill=fill,
        score_field=score_field,
        kendall_variant=kendall_variant,
    )


def spearman(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    level: Level = "sample",
    groups: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    fill: float | None = None,
    score_field: ScoreField = "score",
    kendall_variant: Literal["b", "c"] = "b",
) -> CorrelationResult:
    """``correlation(..., method="spearman")``; options as for :func:`correlation`."""
    return correlation(
        predictions,
        references,
        method="spearman",
        level=level,
        groups=groups,
        unparsed=unparsed,
        fill=fill,
        score_field=score_field,
        kendall_variant=kendall_variant,
    )


def kendall(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    level: Level = "sample",
    groups: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    fill: float | None = None,
    score_field: ScoreField = "score",
    kendall_variant: Literal["b", "c"] = "b",
) -> CorrelationResult:
    """``correlation(..., method="kendall")``; options as for :func:`correlation`."""
    return correlation(
        predictions,
        references,
        method="kendall",
        level=level,
        groups=groups,
        unparsed=unparsed,
        fill=fill,
        score_field=score_field,
        kendall_variant=kendall_variant,
    )


def correlations(
    predictions: Sequence[Any],
    references: Sequence[Any],
    *,
    level: Level = "sample",
    groups: Sequence[Any] | None = None,
    unparsed: UnparsedPolicy = "exclude",
    fill: float | None = None,
    score_field: ScoreField = "score",
    kendall_variant: Literal["b", "c"] = "b",
) -> Correlations:
    """All three coefficients at once; options as for :func:`correlation`."""
    return Correlations(
        pearson=pearson(
            predictions,
            references,
            level=level,
            groups=groups,
            unparsed=unparsed,
            fill=fill,
            score_field=score_field,
            kendall_variant=kendall_variant,
        ),
        spearman=spearman(
            predictions,
            references,
            level=level,
            groups=groups,
            unparsed=unparsed,
            fill=fill,
            score_field=score_field,
            kendall_variant=kendall_variant,
        ),
        kendall=kendall(
            predictions,
            references,
            level=level,
            groups=groups,
            unparsed=unparsed,
            fill=fill,
            score_field=score_field,
            kendall_variant=kendall_variant,
        ),
    )
