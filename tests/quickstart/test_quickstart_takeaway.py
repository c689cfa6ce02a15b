"""The quickstart's first line says what the held-out run showed about the cascade against the
teacher, and no more than the paired interval supports."""

from __future__ import annotations

import random
import re

import pytest

from judgegraph.metrics import paired_difference
from judgegraph.quickstart._render import difference_sentence

LABELS = ["A", "B", "tie"]


def _judges(n: int, keep_a: float, keep_b: float, seed: int) -> tuple[list[str], list[str], list[str]]:
    rng = random.Random(seed)
    gold = [rng.choice(LABELS) for _ in range(n)]
    a = [g if rng.random() < keep_a else rng.choice([x for x in LABELS if x != g]) for g in gold]
    b = [g if rng.random() < keep_b else rng.choice([x for x in LABELS if x != g]) for g in gold]
    return a, b, gold


@pytest.mark.parametrize(
    ("keep_a", "keep_b", "n", "verdict"),
    [
        (0.72, 0.71, 262, "cannot tell"),  # the case: +1 point on 262 items is noise
        (0.85, 0.60, 800, "more often"),
        (0.55, 0.80, 800, "less often"),
    ],
)
def test_the_sentence_follows_the_interval(keep_a: float, keep_b: float, n: int, verdict: str) -> None:
    a, b, gold = _judges(n, keep_a, keep_b, seed=n)
    d = paired_difference(a, b, gold, unparsed="wrong")
    assert d.difference is not None and d.interval is not None
    text = difference_sentence(d)
    assert verdict in text
    # The claim matches the numbers: more/less only when the interval excludes 0.
    excludes_zero = d.interval.low > 0 or d.interval.high < 0
    assert ("cannot tell" not in text) == excludes_zero
    if verdict == "more often":
        assert d.interval.low > 0
    if verdict == "less often":
        assert d.interval.high < 0
    # And it prints those numbers: the difference and both bounds, in points.
    shown = [float(x) for x in re.findall(r"[+-]\d+\.\d", text)]
    expected = [100 * d.difference, 100 * d.interval.low, 100 * d.interval.high]
    assert shown == pytest.approx(expected, abs=0.05 + 1e-9)  # one decimal printed: rounding only
    assert f"{d.counts.used} items" in text and "95% paired bootstrap" in text


def test_no_difference_says_so() -> None:
    assert "no paired difference" in difference_sentence(None)
