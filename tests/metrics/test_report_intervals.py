"""The summary's Markdown shows the interval of every position and swap figure and of the
confidence's AUROC, and the printed interval is the metrics API's for the same inputs."""

from __future__ import annotations

import random

import pytest
from _metrics_verdicts import two_orders
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgegraph.metrics import auroc, calibration, position_consistency, split_orders, summarize, swap_accuracy
from judgegraph.metrics._inputs import Interval
from judgegraph.types import PairwiseVerdict

pytest.importorskip("scipy")

# The Markdown prints shares as percentages with two decimals and other figures with four:
# a printed bound is the API's bound rounded, so it is within half a unit of the last digit.
PCT_TOL = 0.005 / 100 + 1e-12
NUM_TOL = 0.00005 + 1e-12

SWAP_ROWS = (
    "accuracy, first order",
    "accuracy, second order",
    "accuracy, mean of the two orders",
    "accuracy in both orders",
)
POSITION_ROWS = ("position consistency", "position bias (first-shown − second-shown)")
AUROC_ROW = "AUROC of confidence (correct vs wrong)"


def _number(cell: str) -> float:
    cell = cell.strip()
    return float(cell[:-1]) / 100 if cell.endswith("%") else float(cell)


def _table(md: str) -> dict[str, tuple[float | None, tuple[float, float] | None]]:
    """The figures table: label -> (value, (low, high) or None), as printed."""
    out: dict[str, tuple[float | None, tuple[float, float] | None]] = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("metric", "---"):
            continue
        label, value, band, _ = cells
        parsed: tuple[float, float] | None = None
        if band:
            low, high = band.split(" – ")
            parsed = (_number(low), _number(high))
        out[label] = (None if value == "n/a" else _number(value), parsed)
    return out


def _verdicts(seed: int, n: int = 80) -> tuple[list[PairwiseVerdict], list[str], list[float]]:
    """Two-order verdicts from a judge that is right about 75% of the time and leans to the first slot."""
    rng = random.Random(seed)
    verdicts: list[PairwiseVerdict] = []
    gold: list[str] = []
    conf: list[float] = []
    for _ in range(n):
        g = rng.choice(["A", "B"])
        first = g if rng.random() < 0.75 else rng.choice(["A", "B", "tie"])
        second = first if rng.random() < 0.7 else "A"
        c = rng.uniform(0.5, 1.0)
        verdicts.append(two_orders(first, second).model_copy(update={"confidence": c}))
        gold.append(g)
        conf.append(c)
    return verdicts, gold, conf


def _close(printed: tuple[float, float] | None, api: Interval | None, tol: float) -> None:
    assert printed is not None and api is not None
    assert printed == pytest.approx((api.low, api.high), abs=tol)


def test_markdown_prints_the_api_intervals_of_position_swap_and_auroc() -> None:
    verdicts, gold, conf = _verdicts(3)
    table = _table(summarize(verdicts, gold).to_markdown())

    # The same inputs through the API, each figure on its own.
    first, second = split_orders(verdicts)
    pos = position_consistency(first, second)
    sw = swap_accuracy(first, gold, second=second)
    correct = [v.winner == g for v, g in zip(verdicts, gold, strict=True)]
    auc = auroc(conf, correct)

    for label, value, ci in (
        ("accuracy, first order", sw.first_order.value, sw.first_order.interval),
        ("accuracy, second order", sw.second_order.value, sw.second_order.interval),
        ("accuracy, mean of the two orders", sw.average, sw.average_interval),
        ("accuracy in both orders", sw.both.value, sw.both.interval),
        ("position consistency", pos.consistency, pos.consistency_interval),
        ("position bias (first-shown − second-shown)", pos.position_bias, pos.position_bias_interval),
    ):
        shown, band = table[label]
        assert shown == pytest.approx(value, abs=PCT_TOL), label
        _close(band, ci, PCT_TOL)
    shown, band = table[AUROC_ROW]
    assert shown == pytest.approx(auc.value, abs=NUM_TOL)
    _close(band, auc.interval, NUM_TOL)


def test_markdown_names_each_interval_method_once() -> None:
    verdicts, gold, _ = _verdicts(5)
    md = summarize(verdicts, gold).to_markdown()
    [caption] = [line for line in md.splitlines() if line.startswith("Intervals: ")]
    for method in ("95% Wilson", "95% paired bootstrap (BCa)", "95% stratified bootstrap (BCa)"):
        assert caption.count(method + ";") + caption.count(method + ".") == 1, caption
    # Consistency is shown once, in the table with its interval; the sentence keeps the counts.
    assert md.count("osition consistency") == 1


def test_calibration_auroc_is_the_auroc_of_the_same_items() -> None:
    verdicts, gold, conf = _verdicts(7)
    cal = calibration(verdicts, gold)
    correct = [v.winner == g for v, g in zip(verdicts, gold, strict=True)]
    assert cal.auroc is not None
    assert cal.auroc.value == auroc(conf, correct).value
    assert cal.auroc.interval == auroc(conf, correct).interval
    assert cal.auroc.counts == cal.counts
    # Every verdict right: AUROC is undefined, and the table shows it without an interval.
    right = [v.winner for v in verdicts]
    rep = summarize(verdicts, right)
    assert rep.calibration is not None and rep.calibration.auroc is not None
    assert rep.calibration.auroc.value is None
    assert _table(rep.to_markdown())[AUROC_ROW] == (None, None)


_side = st.sampled_from(["A", "B", "tie", None])  # None: that order failed to parse


@st.composite
def _two_order_runs(draw: st.DrawFn) -> tuple[list[PairwiseVerdict], list[str]]:
    n = draw(st.integers(min_value=2, max_value=30))
    verdicts: list[PairwiseVerdict] = []
    for _ in range(n):
        v = two_orders(draw(_side), draw(_side))
        if v.ok:
            v = v.model_copy(update={"confidence": draw(st.floats(min_value=0.0, max_value=1.0))})
        verdicts.append(v)
    gold = draw(st.lists(st.sampled_from(["A", "B", "tie"]), min_size=n, max_size=n))
    return verdicts, gold


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=_two_order_runs(), policy=st.sampled_from(["exclude", "wrong", "tie"]))
def test_any_two_order_run_prints_intervals_that_hold_the_printed_value(
    run: tuple[list[PairwiseVerdict], list[str]], policy: str
) -> None:
    verdicts, gold = run
    table = _table(summarize(verdicts, gold, unparsed=policy).to_markdown())  # type: ignore[arg-type]
    for label in (*SWAP_ROWS, *POSITION_ROWS, AUROC_ROW):
        if label not in table:
            continue
        value, band = table[label]
        if band is None:
            continue
        assert value is not None, label
        # Bounds and value are rounded alike (rounding keeps order), so the printed ones hold too.
        assert band[0] <= value <= band[1], (label, value, band)
    for label in (*SWAP_ROWS, *POSITION_ROWS):
        assert label in table  # both orders were given: every position and swap figure is shown
