"""The report charts, drawn with matplotlib and inlined as SVG, so a report stays one
offline HTML file. matplotlib (the ``report`` extra) is imported when a chart is drawn."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._format import AxisKind, axis_labels, money

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "bar_chart",
    "bar_figure",
    "heatmap",
    "interval_chart",
    "line_chart",
    "line_figure",
    "tick_label_overlaps",
]


def _mpl() -> Any:
    try:
        from . import _mpl as m
    except ImportError:
        from judgegraph.types import MissingExtraError

        raise MissingExtraError("drawing report plots (matplotlib)", "report") from None
    return m


def tick_label_overlaps(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of tick labels on one axis whose drawn boxes intersect (matplotlib's text extents)."""
    return list(_mpl().tick_label_overlaps(fig))


def _check_series(categories: Sequence[str], series: dict[str, Sequence[float]]) -> None:
    for name, vals in series.items():
        if len(vals) != len(categories):
            raise ValueError(f"series {name!r} has {len(vals)} values for {len(categories)} categories")
        bad = [v for v in vals if not math.isfinite(float(v))]
        if bad:
            raise ValueError(f"series {name!r} has a value that is not a finite number: {bad[0]!r}")


def _bar_figure(
    title: str,
    categories: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    x_label: str,
    y_label: str,
    value_axis: AxisKind,
    stacked: bool,
    horizontal: bool,
    rotate: bool = False,
    mark: str | None = None,
    label_values: bool = False,
) -> Figure:
    m = _mpl()
    fig: Figure
    n, k = len(categories), max(1, len(series))
    labels = [m.short_label(c) for c in categories]
    if horizontal:
        # One row per category, tall enough for its label: 60 categories stay legible.
        fig, ax = m.new_figure(height=max(m.HEIGHT_IN, 1.1 + 0.24 * n * (1 if stacked else max(1, k * 0.6))))
    else:
        fig, ax = m.new_figure()
    pos = list(range(n))
    width = 0.8 if stacked else 0.8 / k
    base = [0.0] * n
    for j, (name, vals) in enumerate(series.items()):
        offs = [p + (0.0 if stacked else (j - (k - 1) / 2) * width) for p in pos]
        vs = [float(v) for v in vals]
        color = m.COLORS[j % len(m.COLORS)]
        if horizontal:
            bars = ax.barh(offs, vs, height=width, left=base if stacked else None, color=color, label=name)
        else:
            bars = ax.bar(offs, vs, width=width, bottom=base if stacked else None, color=color, label=name)
        if mark is not None and len(series) == 1:
            for bar, cat in zip(bars, categories, strict=True):
                if cat == mark:
                    bar.set_color(m.MARK_COLOR)
        if label_values:
            # One value alone: money at two significant figures, not to the decimals a tick step needs.
            texts = [money(v) if value_axis == "money" else axis_labels(value_axis, [v])[0] for v in vs]
            ax.bar_label(bars, labels=texts, padding=3, fontsize=8)
        if stacked:
            base = [b + v for b, v in zip(base, vs, strict=True)]
    top = max([*base, *(float(v) for vals in series.values() for v in vals), 0.0])
    value_ax, cat_ax = (ax.xaxis, ax.yaxis) if horizontal else (ax.yaxis, ax.xaxis)
    m.axis_style(value_ax, value_axis)
    cat_ax.set_ticks(pos, labels=labels)
    cat_ax.grid(False)
    for t, cat in zip(cat_ax.get_ticklabels(), categories, strict=True):
        if cat == mark:
            t.set_fontweight("bold")
    if horizontal:
        ax.set_xlim(0, top * (1.2 if label_values else 1.05) if top > 0 else 1)
        ax.set_ylim(n - 0.5, -0.5)  # first category on top, as it reads
        ax.set_xlabel(y_label)
        ax.set_ylabel(x_label)
    else:
        ax.set_ylim(0, top * (1.15 if label_values else 1.08) if top > 0 else 1)
        ax.set_xlim(-0.6, n - 0.4)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        if rotate:
            for t in ax.get_xticklabels():
                t.set_rotation(40)
                t.set_horizontalalignment("right")
                t.set_rotation_mode("anchor")
    ax.set_title(title)
    m.legend_outside(ax, list(series))  # after the title: it lifts the title over the legend
    return fig


def bar_figure(
    title: str,
    categories: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    x_label: str = "",
    y_label: str = "count",
    value_axis: AxisKind = "count",
    stacked: bool = False,
    mark: str | None = None,
    label_values: bool = False,
) -> Figure:
    """The bar chart's figure, laid out so its category labels do not overlap: upright
    bars for a few short labels, labels turned when they crowd, and horizontal bars
    (one labelled row per category) past a dozen categories or when turning is not enough."""
    m = _mpl()
    _check_series(categories, series)
    opts: dict[str, Any] = {
        "x_label": x_label,
        "y_label": y_label,
        "value_axis": value_axis,
        "stacked": stacked,
        "mark": mark,
        "label_values": label_values,
    }
    if len(categories) <= m.MAX_VERTICAL_CATEGORIES:
        for rotate in (False, True):
            fig = _bar_figure(title, categories, series, horizontal=False, rotate=rotate, **opts)
            if not m.tick_label_overlaps(fig):
                return fig
    return _bar_figure(title, categories, series, horizontal=True, **opts)


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    x_label: str = "",
    y_label: str = "count",
    kind: str = "bars",
    value_axis: AxisKind = "count",
    stacked: bool = False,
    mark: str | None = None,
    label_values: bool = False,
) -> str:
    """Bars, one group (or one stack, ``stacked``) per category, one colour per series, as inline SVG.

    ``value_axis`` says what the bars measure: ``count`` gets whole-number ticks, ``money`` dollar
    labels, ``share`` percentages. Past a dozen categories the bars lie horizontally. ``mark`` names
    a category to highlight (the operating point); ``label_values`` writes each bar's value at its end.
    """
    m = _mpl()
    with m.draw_style():
        fig = bar_figure(
            title,
            categories,
            series,
            x_label=x_label,
            y_label=y_label,
            value_axis=value_axis,
            stacked=stacked,
            mark=mark,
            label_values=label_values,
        )
        return str(m.to_inline_svg(fig, kind=kind, title=title))


def heatmap(
    title: str,
    rows: Sequence[str],
    cols: Sequence[str],
    counts: Sequence[Sequence[int]],
    *,
    row_label: str,
    col_label: str,
    kind: str = "heatmap",
) -> str:
    """A count matrix with the counts written in the cells, as inline SVG."""
    m = _mpl()
    if len(counts) != len(rows) or any(len(r) != len(cols) for r in counts):
        raise ValueError(f"counts must be {len(rows)} rows of {len(cols)} columns")
    with m.draw_style():
        for rotate in (False, True):
            fig, ax = m.new_figure(height=max(m.HEIGHT_IN, 1.4 + 0.3 * len(rows)))
            top = max([c for r in counts for c in r] + [1])
            # Cells as vector paths (imshow would embed a PNG), first row on top.
            edges_x = [j - 0.5 for j in range(len(cols) + 1)]
            edges_y = [i - 0.5 for i in range(len(rows) + 1)]
            grid = [[float(c) for c in r] for r in counts]
            ax.pcolormesh(edges_x, edges_y, grid, cmap="Blues", vmin=0, vmax=top, edgecolors="white", linewidth=1)
            ax.set_ylim(len(rows) - 0.5, -0.5)
            ax.grid(False)
            for i, r in enumerate(counts):
                for j, c in enumerate(r):
                    ax.text(j, i, f"{c:,}", ha="center", va="center", color="white" if c > 0.55 * top else "#222222")
            ax.set_xticks(range(len(cols)), labels=[m.short_label(c) for c in cols])
            ax.set_yticks(range(len(rows)), labels=[m.short_label(r) for r in rows])
            ax.tick_params(length=0)
            for side in ("left", "bottom"):
                ax.spines[side].set_visible(False)
            ax.set_xlabel(col_label)
            ax.set_ylabel(row_label)
            ax.set_title(title)
            if rotate:
                for t in ax.get_xticklabels():
                    t.set_rotation(40)
                    t.set_horizontalalignment("right")
                    t.set_rotation_mode("anchor")
            if not m.tick_label_overlaps(fig):
                break
        return str(m.to_inline_svg(fig, kind=kind, title=title))


def line_figure(
    title: str,
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    x_label: str,
    y_label: str,
    x_range: tuple[float, float] | None = None,
    y_range: tuple[float, float] | None = None,
    diagonal: bool = False,
    x_axis: AxisKind = "plain",
    y_axis: AxisKind = "plain",
    mark: tuple[float, float] | None = None,
    mark_label: str = "",
) -> Figure:
    """The line chart's figure (see :func:`line_chart`)."""
    m = _mpl()
    fig: Figure
    fig, ax = m.new_figure()
    for j, (name, pts) in enumerate(series.items()):
        # Not clipped: a point on the frame (accuracy 100%) shows whole.
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            ms=4,
            lw=1.8,
            color=m.COLORS[j % len(m.COLORS)],
            label=name,
            clip_on=False,
        )
    if diagonal:
        lo, hi = x_range or (0.0, 1.0)
        ax.plot([lo, hi], [lo, hi], ls="--", lw=1, color="#999999", label="_perfect")
    if mark is not None:
        # The operating point: a ring on the curve and a dashed guide down to its x.
        ax.axvline(mark[0], ls=":", lw=1.2, color=m.MARK_COLOR)
        # Named in the legend, not written on the plot, where it would cross the curve.
        ax.plot(
            [mark[0]],
            [mark[1]],
            marker="o",
            ms=11,
            mfc="none",
            mec=m.MARK_COLOR,
            mew=2,
            ls="none",
            clip_on=False,
            label=mark_label or "operating point",
        )
    m.axis_style(ax.xaxis, x_axis)
    m.axis_style(ax.yaxis, y_axis)
    if x_range is not None:
        ax.set_xlim(*x_range)
    if y_range is not None:
        ax.set_ylim(*y_range)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    m.legend_inside(ax, [*series, *(["mark"] if mark is not None else [])])
    return fig


def line_chart(
    title: str,
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    x_label: str,
    y_label: str,
    x_range: tuple[float, float] | None = None,
    y_range: tuple[float, float] | None = None,
    diagonal: bool = False,
    kind: str = "lines",
    x_axis: AxisKind = "plain",
    y_axis: AxisKind = "plain",
    mark: tuple[float, float] | None = None,
    mark_label: str = "",
) -> str:
    """Lines with point markers, as inline SVG. ``diagonal`` draws y = x (perfect calibration);
    ``mark`` rings an operating point (e.g. a run's own threshold) and labels it ``mark_label``;
    ``x_axis``/``y_axis`` say what each axis measures (see :func:`bar_chart`)."""
    m = _mpl()
    with m.draw_style():
        fig = line_figure(
            title,
            series,
            x_label=x_label,
            y_label=y_label,
            x_range=x_range,
            y_range=y_range,
            diagonal=diagonal,
            x_axis=x_axis,
            y_axis=y_axis,
            mark=mark,
            mark_label=mark_label,
        )
        return str(m.to_inline_svg(fig, kind=kind, title=title))


def interval_chart(
    title: str,
    rows: Sequence[tuple[str, float, float | None, float | None]],
    *,
    x_label: str,
    kind: str = "intervals",
    value_axis: AxisKind = "share",
    x_range: tuple[float, float] | None = (0.0, 1.0),
    mark: str | None = None,
) -> str:
    """One row per ``(name, value, low, high)``: a dot at the value and a bar over its interval
    (none when ``low``/``high`` are None), as inline SVG. ``mark`` names the row to highlight."""
    m = _mpl()
    with m.draw_style():
        fig, ax = m.new_figure(height=max(2.2, 1.1 + 0.45 * len(rows)))
        for i, (name, value, low, high) in enumerate(rows):
            color = m.MARK_COLOR if name == mark else m.COLORS[0]
            if low is not None and high is not None:
                ax.errorbar([value], [i], xerr=[[value - low], [high - value]], fmt="none", ecolor=color, capsize=4)
            ax.plot([value], [i], marker="D" if name == mark else "o", ms=7, color=color, ls="none")
        ax.set_yticks(range(len(rows)), labels=[m.short_label(r[0]) for r in rows])
        for t, r in zip(ax.get_yticklabels(), rows, strict=True):
            if r[0] == mark:
                t.set_fontweight("bold")
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.yaxis.grid(False)
        m.axis_style(ax.xaxis, value_axis)
        if x_range is not None:
            ax.set_xlim(*x_range)
        ax.set_xlabel(x_label)
        ax.set_title(title)
        return str(m.to_inline_svg(fig, kind=kind, title=title))
