"""`judgegraph report`: position consistency, position bias, swap accuracy and the AUROC of the
judge's confidence are shown with their intervals in the HTML and the Markdown, and each printed
interval is the metrics API's for the same verdicts."""

from __future__ import annotations

import html as html_lib
import json
import random
import re
import time
from pathlib import Path

import pytest

from judgegraph.jobs import Store
from judgegraph.jobs._report import build_report
from judgegraph.jobs._report_render import render_html, render_markdown
from judgegraph.jobs._store_records import ItemRecord, ResultRecord
from judgegraph.metrics import Interval, auroc, position_consistency, swap_accuracy
from judgegraph.types import PairwiseVerdict, Status

pytest.importorskip("scipy")
RUN = "swapped"
N = 60
# The HTML prints shares as percentages with one decimal and other figures with three: a printed
# bound is the API's rounded, so within half a unit of its last digit. The Markdown's metrics
# table prints two and four decimals.
HTML_PCT = 0.0005 + 1e-12
HTML_NUM = 0.0005 + 1e-12
MD_PCT = 0.00005 + 1e-12


def _order(winner: str) -> PairwiseVerdict:
    return PairwiseVerdict(status=Status.OK, winner=winner)  # type: ignore[arg-type]


def _swapped_run(tmp_path: Path) -> tuple[Path, list[str], list[str], list[str], list[float]]:
    """A pairwise run whose rows each carry both orders, written straight into a store as a job
    writes them (labels as JSON): the first order's and the second order's winner per item, the human label, the
    verdict's confidence."""
    rng = random.Random(11)
    db = tmp_path / "runs.db"
    firsts: list[str] = []
    seconds: list[str] = []
    labels: list[str] = []
    confs: list[float] = []
    with Store(db) as store:
        store.open_run(RUN, config_hash="cfg", kind="pairwise", spec={"judge": {"name": "scripted"}})
        for i in range(N):
            label = rng.choice(["A", "B"])
            first = label if rng.random() < 0.8 else rng.choice(["A", "B", "tie"])
            second = first if rng.random() < 0.7 else "A"  # a lean to A, shown second in that order
            conf = rng.uniform(0.5, 1.0)
            winner = first if first == second else "tie"
            verdict = PairwiseVerdict(
                status=Status.OK,
                winner=winner,  # type: ignore[arg-type]
                confidence=conf,
                orders=(_order(first), _order(second)),
            )
            store.add_item(
                ItemRecord(RUN, 0, i, f"h{i}", f"q{i}", json.dumps(label), "math" if i % 2 else "chat", None),
                input_json='{"response_a": "x", "response_b": "yy"}',
            )
            store.add_result(
                ResultRecord("cfg", f"h{i}", "ok", None, verdict.model_dump_json(), None, 0, 0, 1, time.time())
            )
            firsts.append(first)
            seconds.append(second)
            labels.append(label)
            confs.append(conf)
        store.set_state(RUN, "finished")
    return db, firsts, seconds, labels, confs


def _pct(s: str) -> float:
    return float(s.rstrip("%")) / 100


def _band(text: str, prefix: str, *, pct: bool) -> tuple[float, float, float]:
    """(value, low, high) printed as ``prefix`` value [low – high]."""
    num = r"-?[\d.]+%" if pct else r"-?[\d.]+"
    m = re.search(re.escape(prefix) + rf"\s*({num}) \[({num}) – ({num})\]", text)
    assert m is not None, prefix
    conv = _pct if pct else float
    return conv(m.group(1)), conv(m.group(2)), conv(m.group(3))


def _same(printed: tuple[float, float, float], value: float | None, ci: Interval | None, tol: float) -> None:
    assert value is not None and ci is not None
    assert printed == pytest.approx((value, ci.low, ci.high), abs=tol)


def test_report_prints_the_api_intervals(tmp_path: Path) -> None:
    db, firsts, seconds, labels, confs = _swapped_run(tmp_path)
    with Store(db, read_only=True) as st:
        d = build_report(st, RUN)
    page = html_lib.unescape(render_html(d))
    md = render_markdown(d)

    # The same verdicts through the metrics API.
    pos = position_consistency(firsts, seconds)
    sw = swap_accuracy(firsts, labels, second=seconds)
    winners = [f if f == s else "tie" for f, s in zip(firsts, seconds, strict=True)]
    auc = auroc(confs, [w == g for w, g in zip(winners, labels, strict=True)])
    assert pos.consistency_interval is not None and pos.position_bias_interval is not None
    assert auc.value is not None and auc.interval is not None

    # The position figure's caption: consistency and bias, each with its interval, methods said once.
    _same(_band(page, "Same winner in both orders:", pct=True), pos.consistency, pos.consistency_interval, HTML_PCT)
    _same(_band(page, "of the items:", pct=True), pos.position_bias, pos.position_bias_interval, HTML_PCT)
    assert "Intervals: 95% Wilson; 95% bootstrap (BCa)." in page
    # The headline tile beside accuracy's and kappa's, in their style.
    ci = pos.consistency_interval
    tile = f"{100 * ci.low:.1f}% – {100 * ci.high:.1f}%"
    assert f"<b>{tile}</b><span>position consistency: 95% interval (wilson)</span>" in render_html(d)
    assert f"| position consistency: 95% interval (wilson) | {tile} |" in md

    # The calibration figure's caption: the AUROC of the confidence with its interval.
    _same(
        _band(page, "AUROC of the confidence, correct vs wrong verdicts:", pct=False), auc.value, auc.interval, HTML_NUM
    )
    assert "95% stratified bootstrap (BCa)." in page

    # The agreement table: each order's accuracy, their mean and both-orders accuracy.
    for label, value, interval in (
        ("accuracy, first order", sw.first_order.value, sw.first_order.interval),
        ("accuracy, second order", sw.second_order.value, sw.second_order.interval),
        ("accuracy, mean of the two orders", sw.average, sw.average_interval),
        ("accuracy in both orders", sw.both.value, sw.both.interval),
    ):
        _same(_band(page, f"<td>{label}</td><td>", pct=True), value, interval, HTML_PCT)
        # summary.md carries the metrics table: value | low – high, two decimals.
        m = re.search(rf"^\| {re.escape(label)} \| ([\d.]+%) \| ([\d.]+%) – ([\d.]+%) \|", md, flags=re.M)
        assert m is not None, label
        _same((_pct(m.group(1)), _pct(m.group(2)), _pct(m.group(3))), value, interval, MD_PCT)
    assert "paired bootstrap (BCa)" in page  # the mean of the two orders' method, in the table's note


def test_a_report_without_both_orders_shows_no_position_interval(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with Store(db) as store:
        store.open_run(RUN, config_hash="cfg", kind="pairwise", spec={})
        for i in range(6):
            verdict = PairwiseVerdict(status=Status.OK, winner="A")
            store.add_item(ItemRecord(RUN, 0, i, f"h{i}", f"q{i}", json.dumps("A" if i % 3 else "B"), None, None))
            store.add_result(
                ResultRecord("cfg", f"h{i}", "ok", None, verdict.model_dump_json(), None, 0, 0, 1, time.time())
            )
    with Store(db, read_only=True) as st:
        d = build_report(st, RUN)
    page = render_html(d)
    assert d.position is None and "position consistency: 95%" not in page
    assert "No position consistency" in page
    assert "accuracy, first order" not in page
