"""matplotlib drawing for the report charts: figures on the Agg canvas, saved as
inline SVG. Imported only when a chart is drawn, so ``import judgegraph`` stays light."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from html import escape
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import Formatter, MaxNLocator

from ._format import AxisKind, axis_labels

__all__ = [
    "COLORS",
    "MARK_COLOR",
    "MAX_VERTICAL_CATEGORIES",
    "axis_style",
    "draw_style",
    "legend_inside",
    "legend_outside",
    "new_figure",
    "short_label",
    "tick_label_overlaps",
    "to_inline_svg",
]

COLORS = ("#3b6fb6", "#d9822b", "#2e9d5b", "#b6443b", "#7a5cb8", "#6b6b6b")
MARK_COLOR = "#b6443b"  # the operating point, wherever a plot has one
MAX_VERTICAL_CATEGORIES = 12
_MAX_LABEL = 32
# About a report grid cell (440-700 px) at 1:1, so 9 pt text shows near 12 px.
WIDTH_IN = 5.0
HEIGHT_IN = 3.2

# Text stays <text> (selectable, searchable) in a generic sans-serif stack, so the
# page needs no font file; ids get a fixed salt, so the same data gives the same SVG.
_RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial"],
    "font.size": 9.0,
    "axes.titlesize": 11.0,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.labelsize": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#444444",
    "axes.grid": True,
    "grid.color": "#e3e6ea",
    "axes.axisbelow": True,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "axes.formatter.useoffset": False,
}


@contextmanager
def draw_style() -> Iterator[None]:
    """The report's matplotlib settings, for building and saving one figure (the caller's rcParams are left alone)."""
    rc: Any = _RC  # a plain dict; matplotlib's stubs want its literal key type
    with matplotlib.rc_context(rc):
        yield


def new_figure(*, width: float = WIDTH_IN, height: float = HEIGHT_IN) -> tuple[Figure, Axes]:
    """A figure on its own Agg canvas: pyplot's global state is never touched."""
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def short_label(text: str) -> str:
    """A category label cut to a length a tick can show."""
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 1] + "…"


class _Labels(Formatter):
    """Tick labels from :func:`axis_labels`, all ticks at once so they share their decimals."""

    def __init__(self, kind: AxisKind) -> None:
        self.kind: AxisKind = kind

    def __call__(self, x: float, pos: int | None = None) -> str:
        return axis_labels(self.kind, [x])[0]

    def format_ticks(self, values: Any) -> list[str]:
        return axis_labels(self.kind, [float(v) for v in values])


def axis_style(axis: Axis, kind: AxisKind) -> None:
    """Ticks and labels for what the axis measures: whole counts, dollars, percentages."""
    if kind == "count":
        axis.set_major_locator(MaxNLocator(nbins="auto", integer=True, min_n_ticks=2))
    else:
        axis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10], min_n_ticks=2))
    axis.set_major_formatter(_Labels(kind))


def _label_texts(ax: Axes) -> list[Text]:
    texts = [*ax.get_xticklabels(), *ax.get_yticklabels()]
    return [t for t in texts if t.get_visible() and t.get_text()]


def tick_label_overlaps(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of tick labels (on the same axis) whose drawn boxes intersect, from the Agg renderer's text extents."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    out: list[tuple[str, str]] = []
    for ax in fig.axes:
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            shown = [t for t in labels if t.get_visible() and t.get_text()]
            boxes = [t.get_window_extent(renderer) for t in shown]
            for i in range(len(shown)):
                for j in range(i + 1, len(shown)):
                    if boxes[i].overlaps(boxes[j]):
                        out.append((shown[i].get_text(), shown[j].get_text()))
    return out


_ROOT = re.compile(r"<svg\b[^>]*>", re.S)
_VIEWBOX = re.compile(r'viewBox="([^"]+)"')
_IDS = re.compile(r'\bid="([^"]+)"')


def to_inline_svg(fig: Figure, *, kind: str, title: str) -> str:
    """The figure as an ``<svg class="plot">`` element to paste into HTML: no XML prolog, no metadata,
    no external reference, ids prefixed so several plots share a page, and scaled to its container."""
    salt = hashlib.sha256(f"{kind}\0{title}".encode()).hexdigest()[:10]
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt}):
        # A tight box: nothing clipped, however long a tick label or legend is.
        fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.06, facecolor="white")
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    # matplotlib's own <style> says "*{...}", which inline would reach the whole page; REPORT_CSS scopes it.
    svg = re.sub(r"<style\b[^>]*>.*?</style>\s*", "", svg, flags=re.S)
    root = _ROOT.match(svg)
    if root is None:  # pragma: no cover - matplotlib always writes a root element
        raise RuntimeError("matplotlib wrote no <svg> element")
    vb = _VIEWBOX.search(root.group(0))
    view = vb.group(1) if vb else "0 0 432 260"
    width_pt = float(view.split()[2])
    body = svg[root.end() :]
    body = body.replace("xlink:href=", "href=")  # SVG 2 reads plain href; no xlink namespace to declare
    prefix = f"{re.sub(r'[^A-Za-z0-9_-]', '-', kind)}-{salt[:6]}-"
    for name in set(_IDS.findall(body)):
        body = body.replace(f'id="{name}"', f'id="{prefix}{name}"')
        body = body.replace(f'href="#{name}"', f'href="#{prefix}{name}"')
        body = body.replace(f"url(#{name})", f"url(#{prefix}{name})")
    natural_px = width_pt * 4 / 3
    head = (
        f'<svg class="plot" data-plot="{escape(kind)}" xmlns="http://www.w3.org/2000/svg" viewBox="{view}" '
        f'width="100%" style="max-width:{natural_px * 1.3:.0f}px;height:auto" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
    )
    return head + body.strip()


def legend_outside(ax: Axes, names: Sequence[str]) -> None:
    """A one-row legend between the title and the axes, where it covers no data and takes no width."""
    if len(names) > 1:
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(names), borderaxespad=0.2)
        ax.set_title(ax.get_title(loc="left"), loc="left", pad=22)


def legend_inside(ax: Axes, names: Sequence[str]) -> None:
    """A legend in the axes' emptiest corner (matplotlib's "best"), for lines that leave room."""
    if len(names) > 1:
        ax.legend(loc="best", frameon=True, framealpha=0.9, edgecolor="#dde1e7")
