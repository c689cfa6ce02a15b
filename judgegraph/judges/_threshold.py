"""Pass thresholds checked against the scale of the judge they apply to.

A threshold compares a verdict's score (``weighted_score`` for rubric judges)
with ``>=``. At or below the bottom of the scale it passes every verdict; above
the top it passes none. Either is a configuration mistake (``0.75`` meant as
a fraction on a 1-5 scale), so it is refused when the threshold is given,
naming the option and the scale, rather than left to pass or fail everything.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real

from pydantic import ValidationError

from judgegraph.types import PointwiseInput, Rubric

from ._composite import CompositeJudge
from ._rubric import RubricJudge

__all__ = ["check_threshold", "score_scale"]


def _rubric(value: object) -> Rubric | None:
    if value is None or isinstance(value, Rubric):
        return value
    if isinstance(value, Mapping):
        try:
            return Rubric.model_validate(value)
        except ValidationError:
            return None  # the input's own validation names what is wrong with it
    return None


def score_scale(judge: object, *, rubric: Rubric | Mapping[str, object] | None = None) -> tuple[float, float] | None:
    """The range of the score a threshold is compared with, for ``judge``
    grading with ``rubric``; None when the judge does not declare one.

    Rubric judges score 0-1 (a weighted mean of normalised criteria); a
    pointwise judge given a rubric scores on the rubric's levels; wrappers
    (an ``inner`` judge) and composites (every part on one scale) take their
    parts' scale; otherwise the judge's own ``scale``."""
    if isinstance(judge, RubricJudge):
        return (0.0, 1.0)
    inner = getattr(judge, "inner", None)
    if inner is not None and inner is not judge:  # a wrapper: a judge's, or a user's object under the contract
        return score_scale(inner, rubric=rubric)
    if isinstance(judge, CompositeJudge):
        scales = {score_scale(p, rubric=rubric) for p in judge.parts}
        return scales.pop() if len(scales) == 1 else None
    given = _rubric(rubric)
    if given is not None and getattr(judge, "input_model", None) is PointwiseInput:
        return (float(given.scale[0]), float(given.scale[1]))
    scale = getattr(judge, "scale", None)
    if isinstance(scale, tuple) and len(scale) == 2 and all(isinstance(x, Real) for x in scale):
        bottom, top = float(scale[0]), float(scale[1])
        return (bottom, top) if bottom < top else None
    return None


def check_threshold(
    threshold: object, *, judge: object, option: str, rubric: Rubric | Mapping[str, object] | None = None
) -> float:
    """``threshold`` as a float, or ValueError naming ``option`` when it is not
    a number or lies outside ``(low, high]`` of the judge's score scale (see
    :func:`score_scale`; a judge with no declared scale only needs a number)."""
    if isinstance(threshold, bool) or not isinstance(threshold, Real) or not math.isfinite(float(threshold)):
        raise ValueError(f"{option} must be a finite number, got {threshold!r}")
    value = float(threshold)
    scale = score_scale(judge, rubric=rubric)
    if scale is None:
        return value
    lo, hi = scale
    if not lo < value <= hi:
        effect = "passes every verdict" if value <= lo else "passes no verdict"
        name = getattr(judge, "name", type(judge).__name__)
        raise ValueError(
            f"{option} = {value:g} is outside the score scale {lo:g} to {hi:g} of judge {name!r}: "
            f"it {effect}. Give a threshold in ({lo:g}, {hi:g}] (a score >= threshold passes)"
        )
    return value
