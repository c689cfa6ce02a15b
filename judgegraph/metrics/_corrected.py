"""Rates corrected for the judge's own errors, from human labels on a subset of the items.

A judge's pass rate (or win rate, or mean score) over all items is biased by its errors. With
human labels ``Y`` on a random subset (the *labelled* items) and the judge's value ``f`` on every
item, two corrections give an unbiased estimate and a valid interval:

- **Prediction-powered inference** (Angelopoulos et al., Science 2023) for any mean:
  ``θ = mean_all(f) + mean_labelled(Y − f)``: the judge's mean, plus its average error where
  humans looked. Rewritten over the disjoint labelled (n) and unlabelled (N − n) items,
  ``θ = λ·mean_unlabelled(f) + mean_labelled(Y − λ·f)`` with ``λ = (N − n)/N``, two independent
  means, so the CLT interval uses ``λ²·var(f)/(N − n) + var(Y − λ·f)/n``. That is ppi-python's
  ``ppi_mean_ci`` with ``lam = λ`` (a test checks it), and it keeps the labelled items' own
  judge verdicts in the judge's mean, so a judge that matches every label returns the naive figure.
  ``power_tuning=True`` (PPI++, Angelopoulos, Duchi & Zrnic 2023) picks the judge's weight λ from
  the data to minimise that variance, ``λ = cov(Y, f) / ((1 + n/(N − n))·var(f))`` clipped to
  [0, 1] (ppi-python's rule), so a weak judge is leaned on less and the interval is never much
  wider than the labels' own.
- **Rogan–Gladen** for a binary pass rate: ``p = (q + spec − 1)/(sens + spec − 1)`` with the
  judge's positive rate ``q`` over all items and its sensitivity / specificity on the labelled
  ones, clipped to [0, 1]; the interval is a percentile bootstrap over both samples.

Each result carries the naive figure (the judge alone, whose interval ignores its errors) and
the human-only figure (the labels alone) beside the corrected one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from judgegraph.types import FrozenModel

from ._inputs import Failure, Interval, ItemCounts, MetricResult, extract
from ._intervals import DEFAULT_LEVEL, DEFAULT_RESAMPLES, mean_interval

__all__ = ["CorrectedEstimate", "ppi_difference", "ppi_mean", "rogan_gladen"]

Method = Literal["ppi", "ppi++", "rogan_gladen"]
FloatArray = NDArray[np.float64]


class CorrectedEstimate(FrozenModel):
    """A judge-corrected rate with its interval, next to the naive and human-only figures."""

    name: str
    method: Method
    estimate: float
    interval: Interval
    naive: MetricResult = Field(description="the judge alone over every item; its interval ignores the judge's errors")
    human_only: MetricResult = Field(description="the human labels alone")
    n_items: int
    n_labelled: int
    judge_weight: float | None = Field(
        default=None, description="PPI: λ, the weight of the judge's verdicts on the unlabelled items"
    )
    sensitivity: float | None = Field(default=None, description="Rogan–Gladen: the judge's TPR on labelled items")
    specificity: float | None = Field(default=None, description="Rogan–Gladen: the judge's TNR on labelled items")


def _z(level: float) -> float:
    from scipy import stats

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    return float(stats.norm.ppf(0.5 + level / 2))


def _number(v: Any, *, what: str, i: int) -> float:
    x = extract(v)
    if isinstance(x, Failure):
        raise ValueError(f"{what}[{i}] failed ({v!r}); map failed verdicts to a value, or drop the item")
    if isinstance(x, bool):
        return float(x)
    if not isinstance(x, int | float):
        raise ValueError(f"{what}[{i}] is {v!r}; expected a number or a boolean")
    return float(x)


def _split(judge: Sequence[Any], human: Sequence[Any]) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
    """Judge values for every item, the human values (NaN where unlabelled), the labelled mask."""
    if len(judge) != len(human):
        raise ValueError(f"length mismatch: {len(judge)} judge values but {len(human)} human values")
    f = np.asarray([_number(v, what="judge", i=i) for i, v in enumerate(judge)], dtype=float)
    y = np.asarray(
        [math.nan if isinstance(extract(v), Failure) else _number(v, what="human", i=i) for i, v in enumerate(human)],
        dtype=float,
    )
    mask = ~np.isnan(y)
    if int(mask.sum()) < 2:
        raise ValueError("need human labels on at least two items")
    return f, y, mask


def _unit(*arrays: FloatArray) -> bool:
    return all(bool(np.all((a >= 0) & (a <= 1))) for a in arrays)


def _var(x: FloatArray) -> float:
    return float(np.var(x, ddof=1)) if x.size > 1 else 0.0


def _ppi(f: FloatArray, y: FloatArray, mask: NDArray[np.bool_], *, tuned: bool = False) -> tuple[float, float, float]:
    """Point estimate, standard error and judge weight λ (see the module docstring):
    ``θ = λ·mean_unlabelled(f) + mean_labelled(Y − λ·f)``."""
    n_all, n = f.size, int(mask.sum())
    n_unlab = n_all - n
    fl, yl = f[mask], y[mask]
    if n_unlab == 0:
        lam = 0.0  # nothing unlabelled: any judge weight would only add bias; θ is the labels' mean
    elif tuned:
        var_f = _var(f)
        cov = float(np.mean((yl - yl.mean()) * (fl - fl.mean())))
        lam = 0.0 if var_f == 0 else min(max(cov / ((1 + n / n_unlab) * var_f), 0.0), 1.0)
    else:
        lam = n_unlab / n_all  # the same as mean_all(f) + mean_labelled(Y − f)
    theta = float((lam * f[~mask].mean() if n_unlab else 0.0) + (yl - lam * fl).mean())
    var = lam**2 * _var(f[~mask]) / n_unlab if n_unlab else 0.0
    var += _var(yl - lam * fl) / n
    return theta, math.sqrt(var), lam


def _figure(name: str, values: FloatArray, total: int, level: float) -> MetricResult:
    counts = ItemCounts(policy="exclude", total=total, used=int(values.size), excluded=total - int(values.size))
    return MetricResult(
        name=name, value=float(values.mean()), counts=counts, interval=mean_interval(values, level=level)
    )


def _clt(theta: float, se: float, z: float, level: float, bounds: tuple[float, float] | None) -> tuple[float, Interval]:
    low, high = theta - z * se, theta + z * se
    if bounds is not None:  # the truth lies in bounds, so clipping there only removes impossible values
        theta, low, high = (min(max(x, bounds[0]), bounds[1]) for x in (theta, low, high))
    return theta, Interval(low=low, high=high, level=level, method="ppi-clt")


def ppi_mean(
    judge: Sequence[Any],
    human: Sequence[Any],
    *,
    name: str = "mean",
    level: float = DEFAULT_LEVEL,
    power_tuning: bool = False,
) -> CorrectedEstimate:
    """Prediction-powered estimate of the human mean (a pass rate, a win share, a mean score).

    ``judge[i]``: the judge's value on item i (number or boolean), for every item.
    ``human[i]``: the human value, or None / NaN where item i is unlabelled. The labelled items
    must be a random sample of all items (that is what makes the estimate unbiased). When every
    value lies in [0, 1] the estimate and its interval are clipped to [0, 1].
    ``power_tuning=True``: PPI++, the judge's weight chosen from the data (see the module docstring);
    narrower, but the weight is estimated from the same labels, and with 100 labels its 95% interval
    covered the truth in 93.5% of simulated draws against the default's 94.6% (``bench/coverage.py``).
    """
    z = _z(level)
    f, y, mask = _split(judge, human)
    theta, se, lam = _ppi(f, y, mask, tuned=power_tuning)
    bounds = (0.0, 1.0) if _unit(f, y[mask]) else None
    estimate, interval = _clt(theta, se, z, level, bounds)
    return CorrectedEstimate(
        name=name,
        method="ppi++" if power_tuning else "ppi",
        judge_weight=lam,
        estimate=estimate,
        interval=interval,
        naive=_figure(f"{name}_judge", f, f.size, level),
        human_only=_figure(f"{name}_human", y[mask], f.size, level),
        n_items=int(f.size),
        n_labelled=int(mask.sum()),
    )


def ppi_difference(
    judge_a: Sequence[Any],
    human_a: Sequence[Any],
    judge_b: Sequence[Any],
    human_b: Sequence[Any],
    *,
    paired: bool = True,
    name: str = "difference",
    level: float = DEFAULT_LEVEL,
) -> CorrectedEstimate:
    """Prediction-powered estimate of ``mean(human_a) − mean(human_b)``.

    ``paired=True``: A and B are two systems on the same items (index i is one item for both,
    labelled on the same items); the estimate is the PPI mean of the per-item differences, whose
    interval keeps their correlation. ``paired=False``: two independent samples; the two PPI
    estimates' variances add.
    """
    z = _z(level)
    if paired:
        fa, ya, ma = _split(judge_a, human_a)
        fb, yb, mb = _split(judge_b, human_b)
        if fa.size != fb.size or not np.array_equal(ma, mb):
            raise ValueError("paired=True needs both sides on the same items, labelled on the same items")
        f, y = fa - fb, ya - yb
        theta, se, _ = _ppi(f, y, ma)
        bounds = (-1.0, 1.0) if _unit(fa, fb, ya[ma], yb[ma]) else None
        estimate, interval = _clt(theta, se, z, level, bounds)
        naive = _figure(f"{name}_judge", f, f.size, level)
        human = _figure(f"{name}_human", y[ma], f.size, level)
        n_items, n_labelled = int(f.size), int(ma.sum())
    else:
        fa, ya, ma = _split(judge_a, human_a)
        fb, yb, mb = _split(judge_b, human_b)
        theta_a, se_a, _ = _ppi(fa, ya, ma)
        theta_b, se_b, _ = _ppi(fb, yb, mb)
        bounds = (-1.0, 1.0) if _unit(fa, fb, ya[ma], yb[mb]) else None
        estimate, interval = _clt(theta_a - theta_b, math.hypot(se_a, se_b), z, level, bounds)
        naive = _difference_figure(f"{name}_judge", fa, fb, z, level)
        human = _difference_figure(f"{name}_human", ya[ma], yb[mb], z, level)
        n_items, n_labelled = int(fa.size + fb.size), int(ma.sum() + mb.sum())
    return CorrectedEstimate(
        name=name,
        method="ppi",
        estimate=estimate,
        interval=interval,
        naive=naive,
        human_only=human,
        n_items=n_items,
        n_labelled=n_labelled,
    )


def _difference_figure(name: str, a: FloatArray, b: FloatArray, z: float, level: float) -> MetricResult:
    """Difference of two independent means with its normal interval."""
    d = float(a.mean() - b.mean())
    se = math.sqrt(_var(a) / a.size + _var(b) / b.size)
    total = a.size + b.size
    counts = ItemCounts(policy="exclude", total=total, used=total)
    interval = Interval(low=d - z * se, high=d + z * se, level=level, method="normal")
    return MetricResult(name=name, value=d, counts=counts, interval=interval)


def _rogan_gladen(q: FloatArray, sens: FloatArray, spec: FloatArray) -> FloatArray:
    """(q + spec − 1)/(sens + spec − 1) clipped to [0, 1]; NaN where the judge is no better than
    chance (sens + spec ≤ 1) or a rate is undefined, since such data say nothing about p."""
    j = sens + spec - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (q + spec - 1) / j
    return np.where(j > 0, np.clip(p, 0.0, 1.0), np.nan)


def rogan_gladen(
    judge: Sequence[Any],
    human: Sequence[Any],
    *,
    name: str = "pass_rate",
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | None = 0,
) -> CorrectedEstimate:
    """Rogan–Gladen estimate of the true pass rate from a binary judge and binary human labels.

    ``judge[i]``: True when the judge passed item i (every item); ``human[i]``: the human
    verdict, or None where unlabelled. The labelled items must include both passes and fails.
    Interval: percentile bootstrap resampling the labelled and unlabelled items separately (for
    binary values that is a multinomial draw of the labelled items' four judge × human cells and a
    binomial draw of the unlabelled passes, which is what resampling the items gives exactly).
    A resample in which the judge looks no better than chance cannot place p, so it counts
    against both bounds (as 0 for the lower, 1 for the upper): the interval widens, never narrows.
    """
    _z(level)
    f, y, mask = _split(judge, human)
    if not (_unit(f, y[mask]) and np.all(np.isin(f, (0, 1))) and np.all(np.isin(y[mask], (0, 1)))):
        raise ValueError("rogan_gladen needs binary judge and human values (booleans or 0/1)")
    fl, yl = f[mask].astype(bool), y[mask].astype(bool)
    cells = np.asarray([np.sum(fl & yl), np.sum(fl & ~yl), np.sum(~fl & yl), np.sum(~fl & ~yl)], dtype=float)
    n, n_all = int(mask.sum()), f.size
    n_unlab, u = n_all - n, float(f[~mask].sum())
    if cells[0] + cells[2] == 0 or cells[1] + cells[3] == 0:
        raise ValueError("the labelled items need both human passes and human fails to estimate sens and spec")

    def estimate(c: FloatArray, passes_u: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        q = (passes_u + c[..., 0] + c[..., 1]) / n_all
        with np.errstate(divide="ignore", invalid="ignore"):
            sens = c[..., 0] / (c[..., 0] + c[..., 2])
            spec = c[..., 3] / (c[..., 1] + c[..., 3])
        return _rogan_gladen(q, sens, spec), sens, spec

    p, sens, spec = estimate(cells, np.asarray(u))
    if not np.isfinite(p):
        raise ValueError(
            f"the judge is no better than chance on the labelled items (sens {float(sens):.3f} + spec "
            f"{float(spec):.3f} <= 1); Rogan–Gladen is undefined"
        )
    rng = np.random.default_rng(seed)
    boot_cells = rng.multinomial(n, cells / n, size=n_resamples).astype(float)
    boot_u = rng.binomial(n_unlab, u / n_unlab, size=n_resamples).astype(float) if n_unlab else np.zeros(n_resamples)
    boot, _, _ = estimate(boot_cells, boot_u)
    alpha = 1 - level
    low = float(np.quantile(np.where(np.isnan(boot), 0.0, boot), alpha / 2))
    high = float(np.quantile(np.where(np.isnan(boot), 1.0, boot), 1 - alpha / 2))
    point = float(p)
    low, high = min(low, point), max(high, point)  # a percentile interval can miss a clipped point
    return CorrectedEstimate(
        name=name,
        method="rogan_gladen",
        estimate=point,
        interval=Interval(low=low, high=high, level=level, method="rogan-gladen-bootstrap"),
        naive=_figure(f"{name}_judge", f, n_all, level),
        human_only=_figure(f"{name}_human", y[mask], n_all, level),
        n_items=n_all,
        n_labelled=n,
        sensitivity=float(sens),
        specificity=float(spec),
    )
