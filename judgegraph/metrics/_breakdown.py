"""Any metric, per category (task type, source dataset, model pair, ...)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field

from judgegraph.types import FrozenModel

from ._agreement import ClassificationResult, accuracy
from ._correlation import CorrelationResult
from ._inputs import MetricResult

__all__ = ["Breakdown", "breakdown"]

BreakdownValue = MetricResult | ClassificationResult | CorrelationResult


class Breakdown(FrozenModel):
    metric: str
    overall: BreakdownValue
    by_category: dict[str, BreakdownValue]
    too_small: dict[str, int] = Field(default_factory=dict, description="category -> items, under min_items")


def breakdown(
    predictions: Sequence[Any],
    references: Sequence[Any],
    categories: Sequence[Any],
    *,
    metric: Callable[[Sequence[Any], Sequence[Any]], BreakdownValue] = accuracy,
    min_items: int = 1,
) -> Breakdown:
    """``metric(predictions, references)`` overall and for each category.

    ``metric`` is any function here that takes (predictions, references), e.g.
    ``accuracy``, ``agreement``, ``cohen_kappa``, ``classification_scores`` or
    ``correlation``; give options with ``functools.partial`` (e.g.
    ``partial(accuracy, unparsed="wrong")``). Categories with fewer than ``min_items`` items are listed in
    ``too_small`` rather than scored. Category keys are ``str(category)``.
    """
    if not len(predictions) == len(references) == len(categories):
        raise ValueError("predictions, references and categories must be equally long")
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(categories):
        groups.setdefault(str(c), []).append(i)
    by: dict[str, BreakdownValue] = {}
    small: dict[str, int] = {}
    for key in sorted(groups):
        idx = groups[key]
        if len(idx) < min_items:
            small[key] = len(idx)
            continue
        by[key] = metric([predictions[i] for i in idx], [references[i] for i in idx])
    inner = getattr(metric, "func", metric)  # a functools.partial names its function
    name = str(getattr(inner, "__name__", "metric"))
    return Breakdown(metric=name, overall=metric(predictions, references), by_category=by, too_small=small)
