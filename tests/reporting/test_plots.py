"""The report charts: matplotlib SVG that inlines into one offline page, whole-number
count axes, dollar money axes, and category labels that never overlap."""

from __future__ import annotations

import html
import re
import sys
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("matplotlib")

from judgegraph.reporting import (
    axis_labels,
    bar_chart,
    bar_figure,
    heatmap,
    line_chart,
    money,
    tick_label_overlaps,
)

SVG_NS = "{http://www.w3.org/2000/svg}"


def ticks(svg: str, axis: str) -> list[str]:
    """The tick labels matplotlib wrote on one axis, read back from the SVG text."""
    out = []
    for m in re.finditer(rf'id="[^"]*-{axis}tick_\d+"', svg):
        text = re.search(r"<text[^>]*>([^<]*)</text>", svg[m.end() :])
        assert text is not None
        out.append(html.unescape(text.group(1)))
    return out


def test_count_ticks_are_whole_numbers() -> None:
    # The hand-drawn axis split the top count in quarters: 17 gave 4.25, 8.5, 12.75.
    svg = bar_chart("Scores", ["1", "2", "3"], {"judge": [17, 3, 9]}, kind="scores")
    labels = ticks(svg, "y")
    assert labels and all(re.fullmatch(r"\d[\d,]*", t) for t in labels), labels


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=8),
    st.booleans(),
)
def test_count_ticks_are_whole_numbers_for_any_counts(counts: list[int], stacked: bool) -> None:
    cats = [f"c{i}" for i in range(len(counts))]
    svg = bar_chart("Counts", cats, {"a": counts, "b": counts[::-1]}, stacked=stacked, kind="counts")
    labels = ticks(svg, "y")
    assert len(labels) >= 2
    values = [int(t.replace(",", "")) for t in labels]  # fails on "4.25" or "1e4"
    assert values == sorted(values) and len(set(values)) == len(values)


def test_money_axis_is_dollars_not_scientific() -> None:
    # The hand-drawn axis wrote 6.2e-05 and the tight box clipped its last label to "6.2e-0".
    svg = line_chart(
        "Cost",
        {"cascade": [(0.0, 0.8), (0.0031, 0.9), (0.0062, 0.95)]},
        x_label="USD",
        y_label="agreement",
        x_axis="money",
        y_axis="share",
        mark=(0.0062, 0.95),
        mark_label="this run",
        kind="cost",
    )
    labels = ticks(svg, "x")
    assert labels and all(t.startswith("$") and "e" not in t for t in labels), labels
    assert "$0.006" in labels and labels[0] == "$0"
    assert all(t.endswith("%") for t in ticks(svg, "y"))
    assert money(0.0062) == "$0.0062" and money(1234.5) == "$1,234.50" and money(0) == "$0"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1e-9, max_value=1e4), min_size=1, max_size=6))
def test_money_labels_never_scientific(costs: list[float]) -> None:
    for c in costs:
        text = money(c)
        assert text.startswith("$") and "e" not in text.lower()
        # Two significant figures at least: the label is within 5% of the cost.
        assert float(text[1:].replace(",", "")) == pytest.approx(c, rel=0.05)
    pts = [(c, 0.5 + 0.4 * i / max(1, len(costs))) for i, c in enumerate(sorted(costs))]
    svg = line_chart("Cost", {"s": pts}, x_label="USD", y_label="share", x_axis="money", kind="cost")
    labels = ticks(svg, "x")
    assert len(labels) >= 2
    assert all(re.fullmatch(r"-?\$[\d,]+(\.\d+)?", t) for t in labels), labels
    assert len(set(labels)) == len(labels), labels  # decimals enough to tell ticks apart


def test_thirty_two_categories_are_legible() -> None:
    cats = [f"category number {i:02d}" for i in range(32)]
    fig = bar_figure("Position", cats, {"consistent": [5] * 32, "inconsistent": [1] * 32}, stacked=True)
    assert tick_label_overlaps(fig) == []
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == cats  # horizontal bars, every label shown


@settings(max_examples=30, deadline=None)
@given(
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=1, max_value=45),
    st.integers(min_value=1, max_value=3),
    st.booleans(),
)
def test_category_labels_never_overlap(n: int, length: int, k: int, stacked: bool) -> None:
    cats = [(f"{i}-" + "wide label " * 5)[:length] + f"{i}" for i in range(n)]
    series = {f"s{j}": [float((i * 7 + j) % 11) for i in range(n)] for j in range(k)}
    fig = bar_figure("Many", cats, series, stacked=stacked)
    assert tick_label_overlaps(fig) == []


def test_heatmap_with_many_columns_has_no_overlap_and_counts() -> None:
    cols = [f"{k / 10:.1f}" for k in range(11)] + ["failed"]
    rows = cols[:-1]
    counts = [[(i + j) % 4 for j in range(len(cols))] for i in range(len(rows))]
    svg = heatmap("Confusion", rows, cols, counts, row_label="human", col_label="judge", kind="confusion")
    assert ticks(svg, "x") == cols
    assert "data:" not in svg and "<image" not in svg  # vector cells, no embedded bitmap


def test_svg_inlines_into_one_offline_page() -> None:
    a = bar_chart("A", ["x", "y"], {"s": [1, 2], "t": [2, 1]}, kind="one")
    b = bar_chart("B", ["x", "y"], {"s": [1, 2], "t": [2, 1]}, kind="two")
    for svg in (a, b):
        assert svg.startswith('<svg class="plot" data-plot=')
        assert "<?xml" not in svg and "<!DOCTYPE" not in svg and "<metadata" not in svg and "<style" not in svg
        assert "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
        root = ET.fromstring(svg)  # well-formed without an xlink declaration
        assert root.tag == f"{SVG_NS}svg"
        refs = re.findall(r'(?:href="|url\()([^")]*)', svg)
        assert refs and all(r.startswith("#") for r in refs)  # only to itself
    ids_a = set(re.findall(r'\bid="([^"]+)"', a))
    ids_b = set(re.findall(r'\bid="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b  # two plots on one page share no id


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=2, max_size=8, unique=True))
def test_axis_label_kinds(values: list[float]) -> None:
    values = sorted(values)
    for kind in ("count", "money", "share", "plain"):
        for label in axis_labels(kind, values):
            assert "e+" not in label and "e-" not in label


def test_missing_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import judgegraph.reporting
    from judgegraph.types import MissingExtraError

    # As if matplotlib were not installed: its import fails, and the drawing module is not yet loaded.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.delitem(sys.modules, "judgegraph.reporting._mpl")
    monkeypatch.delattr(judgegraph.reporting, "_mpl")
    with pytest.raises(MissingExtraError, match=r"judgegraph\[report\]"):
        bar_chart("x", ["a"], {"s": [1]})


def test_mismatched_series_is_named() -> None:
    with pytest.raises(ValueError, match="series 'b' has 1 values for 2 categories"):
        bar_chart("x", ["a", "b"], {"a": [1, 2], "b": [1]})


def test_title_stays_when_a_legend_sits_under_it() -> None:
    # Lifting the title over the legend once wrote an empty title in its place.
    svg = bar_chart("Score distribution", ["1", "2"], {"judge": [3, 4], "human": [4, 3]}, kind="scores")
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert "Score distribution" in texts and "judge" in texts and "human" in texts


def test_marked_bar_and_value_labels() -> None:
    svg = bar_chart(
        "Cost per 1,000 items",
        ["local", "teacher", "cascade"],
        {"USD": [0.0, 0.1928, 0.0952]},
        value_axis="money",
        mark="cascade",
        label_values=True,
        kind="cost",
    )
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert {"$0", "$0.19", "$0.095"} <= set(texts), texts  # a zero cost still says so
    assert svg.count("fill: #b6443b") == 1  # the marked bar alone
