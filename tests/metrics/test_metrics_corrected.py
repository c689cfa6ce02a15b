"""Judge-corrected rates: prediction-powered inference (means, differences) and Rogan–Gladen,
checked against their closed forms, ppi-python's recorded output, and properties."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from judgegraph.metrics import ppi_difference, ppi_mean, rogan_gladen

Z95 = float(stats.norm.ppf(0.975))


def _world(
    n_items: int, n_labelled: int, *, p: float, sens: float, spec: float, seed: int
) -> tuple[list[bool], list[bool | None], np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.random(n_items) < p
    f = np.where(y, rng.random(n_items) < sens, rng.random(n_items) >= spec)
    labelled = np.zeros(n_items, dtype=bool)
    labelled[rng.choice(n_items, n_labelled, replace=False)] = True
    human = [bool(v) if m else None for v, m in zip(y, labelled, strict=True)]
    return [bool(v) for v in f], human, y


# A labelled/unlabelled split: judge values in [0, 1] on every item, a human value on some.
worlds = st.integers(4, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n).filter(lambda m: sum(m) >= 2),
    )
)


@given(worlds)
def test_a_judge_that_matches_every_label_gives_the_naive_figure(
    world: tuple[list[float], list[float], list[bool]],
) -> None:
    judge, _, labelled = world
    human = [f if m else None for f, m in zip(judge, labelled, strict=True)]
    r = ppi_mean(judge, human)
    # mean_all(f) + mean_L(Y − f) with Y = f on L: exactly the judge's mean, up to float rounding.
    assert r.estimate == pytest.approx(float(r.naive), abs=1e-12)


@given(worlds)
def test_the_interval_holds_the_estimate_and_relabelling_mirrors_it(
    world: tuple[list[float], list[float], list[bool]],
) -> None:
    judge, truth, labelled = world
    human = [y if m else None for y, m in zip(truth, labelled, strict=True)]
    r = ppi_mean(judge, human)
    assert r.interval.low <= r.estimate <= r.interval.high
    assert 0.0 <= r.interval.low and r.interval.high <= 1.0
    # Pass ↔ fail: the estimate of the fail rate is 1 − the pass rate (before any clipping).
    flipped = ppi_mean([1 - f for f in judge], [None if y is None else 1 - y for y in human])
    if 0.0 < r.estimate < 1.0:
        assert flipped.estimate == pytest.approx(1 - r.estimate, abs=1e-12)
    # Shuffling the items changes nothing but summation order.
    order = np.random.default_rng(0).permutation(len(judge))
    shuffled = ppi_mean([judge[i] for i in order], [human[i] for i in order])
    assert shuffled.estimate == pytest.approx(r.estimate, abs=1e-12)
    assert shuffled.interval.high - shuffled.interval.low == pytest.approx(r.interval.high - r.interval.low, abs=1e-12)


def test_ppi_closed_form() -> None:
    judge, human, _ = _world(1000, 150, p=0.3, sens=0.9, spec=0.8, seed=1)
    f = np.asarray(judge, dtype=float)
    lab = np.asarray([h is not None for h in human])
    y = np.asarray([float(h) if h is not None else math.nan for h in human])
    lam = (1000 - 150) / 1000
    theta = f.mean() + (y[lab] - f[lab]).mean()
    se = math.sqrt(lam**2 * f[~lab].var(ddof=1) / 850 + (y[lab] - lam * f[lab]).var(ddof=1) / 150)
    r = ppi_mean(judge, human)
    assert r.method == "ppi" and r.n_items == 1000 and r.n_labelled == 150
    assert r.estimate == pytest.approx(theta, abs=1e-12)
    assert (r.interval.low, r.interval.high) == pytest.approx((theta - Z95 * se, theta + Z95 * se), abs=1e-12)
    assert r.interval.describe() == "95% prediction-powered (CLT)"
    # The judge over-passes (spec 0.8 on a 30% rate): the naive figure sits well above the corrected one.
    assert float(r.naive) > r.interval.high
    assert r.human_only.counts.used == 150


# ppi-python 0.2.3 (https://github.com/aangelopoulos/ppi_py), run once on the world below:
#   ppi_py.ppi_mean_ci(Y, Yhat, Yhat_unlabeled, alpha=0.05, lam=(N - n) / N)
# Y / Yhat: the labelled items' human and judge values, Yhat_unlabeled: the judge on the others.
PPI_PY_RECORDED = (0.27394833901537974, 0.4053849943179534)


def test_ppi_matches_ppi_python() -> None:
    judge, human, _ = _world(1000, 150, p=0.3, sens=0.9, spec=0.8, seed=1)
    r = ppi_mean(judge, human)
    low, high = PPI_PY_RECORDED
    assert r.estimate == pytest.approx((low + high) / 2, abs=1e-12)
    # ppi-python's standard deviations use ddof=0, ours ddof=1; the half-widths differ by at most
    # sqrt(n/(n−1)) − 1 ≈ 0.34% at n = 150: a relative tolerance of 0.5%.
    assert r.interval.high - r.estimate == pytest.approx((high - low) / 2, rel=5e-3)


# ppi-python 0.2.3 with its power tuning (lam=None, PPI++), on the same world and on a weak judge
# (agrees with the humans on 55% of 2,000 items, 200 labelled; see _weak_world).
PPI_PY_TUNED = (0.23945720391374392, 0.3553744383542278)
PPI_PY_TUNED_WEAK = (0.3590902864793053, 0.4947964263751672)


def _weak_world() -> tuple[list[float], list[float | None]]:
    rng = np.random.default_rng(5)
    y = (rng.random(2000) < 0.4).astype(float)
    f = np.where(rng.random(2000) < 0.55, y, 1 - y)
    lab = np.zeros(2000, dtype=bool)
    lab[rng.choice(2000, 200, replace=False)] = True
    return [float(v) for v in f], [float(v) if m else None for v, m in zip(y, lab, strict=True)]


def test_power_tuning_matches_ppi_python() -> None:
    judge, human, _ = _world(1000, 150, p=0.3, sens=0.9, spec=0.8, seed=1)
    worlds: list[tuple[tuple[Sequence[Any], Sequence[Any]], tuple[float, float], int]] = [
        ((judge, human), PPI_PY_TUNED, 150),
        (_weak_world(), PPI_PY_TUNED_WEAK, 200),
    ]
    for (j, h), (low, high), n in worlds:
        r = ppi_mean(j, h, power_tuning=True)
        assert r.method == "ppi++" and r.judge_weight is not None and 0 <= r.judge_weight <= 1
        # Same λ rule and estimator: the point agrees to float rounding; the half-width to the
        # ddof difference, at most sqrt(n/(n−1)) − 1 (0.34% at n = 150).
        assert r.estimate == pytest.approx((low + high) / 2, abs=1e-12)
        assert r.interval.high - r.estimate == pytest.approx((high - low) / 2, rel=1 / (n - 1))
    weak = ppi_mean(*_weak_world(), power_tuning=True)
    plain = ppi_mean(*_weak_world())
    # A weak judge gets little weight, and tuning narrows the interval toward the labels' own.
    assert weak.judge_weight is not None and weak.judge_weight < 0.3
    assert weak.interval.high - weak.interval.low < plain.interval.high - plain.interval.low


@given(worlds)
def test_power_tuning_interval_holds_its_estimate(world: tuple[list[float], list[float], list[bool]]) -> None:
    judge, truth, labelled = world
    human = [y if m else None for y, m in zip(truth, labelled, strict=True)]
    r = ppi_mean(judge, human, power_tuning=True)
    assert r.interval.low <= r.estimate <= r.interval.high
    if all(labelled):  # nothing unlabelled: the judge has no say
        assert r.judge_weight == 0.0


def test_ppi_against_ppi_python_live() -> None:
    ppi_py = pytest.importorskip("ppi_py")
    judge, human, _ = _world(1000, 150, p=0.3, sens=0.9, spec=0.8, seed=1)
    lab = np.asarray([h is not None for h in human])
    f = np.asarray(judge, dtype=float)
    y = np.asarray([float(h) for h in human if h is not None])
    lam = (1000 - 150) / 1000
    low, high = ppi_py.ppi_mean_ci(y, f[lab], f[~lab], alpha=0.05, lam=lam)
    r = ppi_mean(judge, human)
    assert r.estimate == pytest.approx((float(low[0]) + float(high[0])) / 2, abs=1e-12)
    assert r.interval.high - r.estimate == pytest.approx((float(high[0]) - float(low[0])) / 2, rel=5e-3)


def test_all_items_labelled_is_the_human_mean() -> None:
    judge, human, y = _world(200, 200, p=0.4, sens=0.7, spec=0.7, seed=2)
    r = ppi_mean(judge, human)
    assert r.estimate == pytest.approx(y.mean(), abs=1e-12)
    se = y.astype(float).std(ddof=1) / math.sqrt(200)
    assert r.interval.high - r.interval.low == pytest.approx(2 * Z95 * se, abs=1e-12)


def test_paired_difference_is_the_mean_of_differences() -> None:
    ja, ha, _ = _world(800, 100, p=0.6, sens=0.85, spec=0.85, seed=3)
    rng = np.random.default_rng(9)
    jb = [bool(x) for x in rng.random(800) < 0.5]
    hb = [None if h is None else bool(rng.random() < 0.4) for h in ha]
    d = ppi_difference(ja, ha, jb, hb)
    diff_judge = [float(a) - float(b) for a, b in zip(ja, jb, strict=True)]
    diff_human = [None if a is None else float(a) - float(b) for a, b in zip(ha, hb, strict=True)]  # type: ignore[arg-type]
    direct = ppi_mean(diff_judge, diff_human)
    assert d.estimate == pytest.approx(direct.estimate, abs=1e-12)
    assert (d.interval.low, d.interval.high) == pytest.approx((direct.interval.low, direct.interval.high), abs=1e-12)
    assert float(d.naive) == pytest.approx(np.mean(diff_judge), abs=1e-12)
    # Unpaired: two independent PPI estimates; the variances add.
    a, b = ppi_mean(ja, ha), ppi_mean(jb, hb)
    u = ppi_difference(ja, ha, jb, hb, paired=False)
    assert u.estimate == pytest.approx(a.estimate - b.estimate, abs=1e-12)
    half = math.hypot(a.interval.high - a.estimate, b.interval.high - b.estimate)
    assert u.interval.high - u.estimate == pytest.approx(half, abs=1e-12)
    with pytest.raises(ValueError, match="same items"):
        ppi_difference(ja, ha, jb, [None, *hb[1:]] if ha[0] is not None else [True, *hb[1:]])


def test_rogan_gladen_closed_form_and_bootstrap() -> None:
    judge, human, _ = _world(3000, 400, p=0.25, sens=0.85, spec=0.9, seed=4)
    f = np.asarray(judge)
    pairs = [(bool(j), h) for j, h in zip(judge, human, strict=True) if h is not None]
    tp = sum(j and h for j, h in pairs)
    pos = sum(bool(h) for _, h in pairs)
    tn = sum((not j) and (not h) for j, h in pairs)
    sens, spec = tp / pos, tn / (len(pairs) - pos)
    expected = (f.mean() + spec - 1) / (sens + spec - 1)
    r = rogan_gladen(judge, human, seed=7)
    assert r.method == "rogan_gladen"
    assert r.sensitivity == pytest.approx(sens, abs=1e-12) and r.specificity == pytest.approx(spec, abs=1e-12)
    assert r.estimate == pytest.approx(expected, abs=1e-12)
    assert r.interval.low < r.estimate < r.interval.high
    assert r == rogan_gladen(judge, human, seed=7)
    # Delta-method check of the bootstrap's width: Var(p) ≈ [Var(q) + p²Var(sens) + (1−p)²Var(spec)] / J²
    # (q and the labelled rates treated as independent). Percentile bounds from 2,000 resamples and the
    # normal approximation agree to within a quarter of the width here, not to decimals.
    p, j = r.estimate, sens + spec - 1
    var = (f.mean() * (1 - f.mean()) / 3000 + p**2 * sens * (1 - sens) / pos) / j**2
    var += (1 - p) ** 2 * spec * (1 - spec) / (len(pairs) - pos) / j**2
    width = r.interval.high - r.interval.low
    assert width == pytest.approx(2 * Z95 * math.sqrt(var), rel=0.25)


def test_rogan_gladen_of_a_perfect_judge_is_the_judged_rate_and_mirrors() -> None:
    judge, _, _ = _world(500, 100, p=0.3, sens=0.8, spec=0.8, seed=5)
    human = [j if i % 5 == 0 else None for i, j in enumerate(judge)]
    r = rogan_gladen(judge, human)
    assert r.sensitivity == 1.0 and r.specificity == 1.0
    assert r.estimate == pytest.approx(float(r.naive), abs=1e-12)
    j2, h2, _ = _world(2000, 300, p=0.35, sens=0.8, spec=0.9, seed=6)
    a = rogan_gladen(j2, h2)
    b = rogan_gladen([not x for x in j2], [None if h is None else not h for h in h2])
    assert b.estimate == pytest.approx(1 - a.estimate, abs=1e-12)
    assert (b.sensitivity, b.specificity) == pytest.approx((a.specificity, a.sensitivity), abs=1e-12)


def test_rogan_gladen_refuses_what_it_cannot_estimate() -> None:
    with pytest.raises(ValueError, match="both human passes and human fails"):
        rogan_gladen([True, False, True], [True, True, None])
    with pytest.raises(ValueError, match="no better than chance"):
        rogan_gladen([False, True, True, False], [True, False, None, None])
    with pytest.raises(ValueError, match="binary"):
        rogan_gladen([0.5, 1.0, 0.0], [1.0, 0.0, None])
    with pytest.raises(ValueError, match="at least two"):
        ppi_mean([1.0, 0.0], [1.0, None])
    with pytest.raises(ValueError, match="failed"):
        ppi_mean([None, 1.0, 0.0], [1.0, 0.0, None])
    with pytest.raises(ValueError, match="length"):
        ppi_mean([1.0], [1.0, 0.0])


def test_a_biased_judge_misleads_the_naive_figure_but_not_the_corrected_one() -> None:
    # 40 worlds with a judge that over-passes (its pass rate is 0.2·0.75 + 0.8·0.15 = 0.27 on a true 0.2).
    # The seeds are fixed, so this is deterministic; the bounds below sit 5+ standard errors from what
    # the estimators are built to give (mean estimate 0.2 with sd ≈ 0.003 over 40 worlds; 38 of 40 covered).
    ppi, rg, naive = [], [], []
    for seed in range(40):
        judge, human, _ = _world(5000, 500, p=0.2, sens=0.75, spec=0.85, seed=100 + seed)
        ppi.append(ppi_mean(judge, human))
        rg.append(rogan_gladen(judge, human, seed=seed))
        naive.append(float(ppi[-1].naive))
    assert np.mean(naive) > 0.25
    for results in (ppi, rg):
        assert abs(np.mean([r.estimate for r in results]) - 0.2) < 0.015
        assert sum(r.interval.contains(0.2) for r in results) >= 32
    assert sum(r.naive.interval.contains(0.2) for r in ppi) == 0  # type: ignore[union-attr]
