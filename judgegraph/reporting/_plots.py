"""Small inline-SVG charts, so a report is one self-contained HTML file
with no plotting dependency and nothing fetched when it is opened."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["bar_chart", "heatmap", "line_chart"]

_W, _H = 420, 280
_M = {"l": 56, "r": 16, "t": 44, "b": 48}
_COLORS = ("#3b6fb6", "#d9822b", "#2e9d5b", "#b6443b", "#7a5cb8", "#6b6b6b")


def _svg(title: str, body: str, *, kind: str, w: int = _W, h: int = _H) -> str:
    return (
        f'<svg class="plot" data-plot="{escape(kind)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {w} {h}" width="100%" style="max-width:{int(w * 1.5)}px" role="img" '
        f'aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f'<text x="{w / 2:.0f}" y="16" text-anchor="middle" class="ptitle">{escape(title)}</text>'
        f"{body}</svg>"
    )


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


def _axes(x_label: str, y_label: str, y_max: float, *, y_min: float = 0.0, w: int = _W, h: int = _H) -> str:
    x0, x1 = _M["l"], w - _M["r"]
    y0, y1 = h - _M["b"], _M["t"]
    out = [
        f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" class="axis"/>',
        f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" class="axis"/>',
    ]
    for k in range(5):
        v = y_min + (y_max - y_min) * k / 4
        y = y0 - (y0 - y1) * k / 4
        out.append(f'<line x1="{x0 - 3}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_fmt(v)}</text>')
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{h - 8}" text-anchor="middle" class="label">{escape(x_label)}</text>')
    out.append(
        f'<text x="14" y="{(y0 + y1) / 2:.0f}" text-anchor="middle" class="label" '
        f'transform="rotate(-90 14 {(y0 + y1) / 2:.0f})">{escape(y_label)}</text>'
    )
    return "".join(out)


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    x_label: str = "",
    y_label: str = "count",
    kind: str = "bars",
) -> str:
    """Grouped bars: one group per category, one bar per series."""
    w, h = _W, _H
    top = max([v for vals in series.values() for v in vals] + [1e-9])
    x0, x1, y0, y1 = _M["l"], w - _M["r"], h - _M["b"], _M["t"]
    n = max(1, len(categories))
    group = (x1 - x0) / n
    k = max(1, len(series))
    bar = group * 0.8 / k
    parts = [_axes(x_label, y_label, top)]
    for i, cat in enumerate(categories):
        gx = x0 + i * group + group * 0.1
        for j, (name, vals) in enumerate(series.items()):
            v = vals[i]
            bh = (y0 - y1) * v / top
            parts.append(
                f'<rect x="{gx + j * bar:.1f}" y="{y0 - bh:.1f}" width="{max(bar - 1, 1):.1f}" height="{bh:.1f}" '
                f'fill="{_COLORS[j % len(_COLORS)]}"><title>{escape(name)} {escape(cat)}: {_fmt(v)}</title></rect>'
            )
        parts.append(
            f'<text x="{x0 + (i + 0.5) * group:.1f}" y="{y0 + 14}" text-anchor="middle" class="tick">'
            f"{escape(cat[:14])}</text>"
        )
    if len(series) > 1:
        parts.append(_legend(list(series)))
    return _svg(title, "".join(parts), kind=kind)


def _legend(names: Sequence[str]) -> str:
    out = []
    for j, name in enumerate(names):
        x = _M["l"] + 8 + j * 100
        out.append(f'<rect x="{x}" y="24" width="10" height="10" fill="{_COLORS[j % len(_COLORS)]}"/>')
        out.append(f'<text x="{x + 14}" y="33" class="tick">{escape(name[:14])}</text>')
    return "".join(out)


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
    """A count matrix with the counts written in the cells."""
    w, h = _W, _H + 20
    x0, y0 = 90, 40
    cw = (w - x0 - 16) / max(1, len(cols))
    ch = (h - y0 - 40) / max(1, len(rows))
    top = max([c for r in counts for c in r] + [1])
    parts = []
    for i, r in enumerate(rows):
        parts.append(
            f'<text x="{x0 - 6}" y="{y0 + (i + 0.5) * ch + 4:.1f}" text-anchor="end" class="tick">'
            f"{escape(r[:12])}</text>"
        )
        for j, _ in enumerate(cols):
            c = counts[i][j]
            shade = 0.08 + 0.85 * c / top
            fg = "#fff" if shade > 0.55 else "#222"
            parts.append(
                f'<rect x="{x0 + j * cw:.1f}" y="{y0 + i * ch:.1f}" width="{cw - 2:.1f}" height="{ch - 2:.1f}" '
                f'fill="rgba(59,111,182,{shade:.2f})"><title>{escape(r)} → {escape(cols[j])}: {c}</title></rect>'
                f'<text x="{x0 + (j + 0.5) * cw:.1f}" y="{y0 + (i + 0.5) * ch + 4:.1f}" text-anchor="middle" '
                f'fill="{fg}" class="cell">{c}</text>'
            )
    for j, name in enumerate(cols):
        parts.append(
            f'<text x="{x0 + (j + 0.5) * cw:.1f}" y="{y0 - 6}" text-anchor="middle" class="tick">'
            f"{escape(name[:12])}</text>"
        )
    parts.append(
        f'<text x="{x0 + (w - x0) / 2:.0f}" y="{h - 12}" text-anchor="middle" class="label">{escape(col_label)}</text>'
    )
    parts.append(
        f'<text x="12" y="{y0 + (h - y0) / 2:.0f}" text-anchor="middle" class="label" '
        f'transform="rotate(-90 12 {y0 + (h - y0) / 2:.0f})">{escape(row_label)}</text>'
    )
    return _svg(title, "".join(parts), kind=kind, h=h)


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
) -> str:
    """Lines with point markers; ``diagonal`` draws y = x (perfect calibration)."""
    w, h = _W, _H
    pts = [p for s in series.values() for p in s]
    xs = [p[0] for p in pts] or [0.0, 1.0]
    ys = [p[1] for p in pts] or [0.0, 1.0]
    xa, xb = x_range or (min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1)
    ya, yb = y_range or (min(0.0, min(ys)), max(ys) if max(ys) > 0 else 1.0)
    x0, x1, y0, y1 = _M["l"], w - _M["r"], h - _M["b"], _M["t"]

    def px(x: float) -> float:
        return x0 + (x1 - x0) * (x - xa) / ((xb - xa) or 1)

    def py(y: float) -> float:
        return y0 - (y0 - y1) * (y - ya) / ((yb - ya) or 1)

    parts = [_axes(x_label, y_label, yb, y_min=ya)]
    for k in range(5):
        v = xa + (xb - xa) * k / 4
        parts.append(f'<text x="{px(v):.1f}" y="{y0 + 14}" text-anchor="middle" class="tick">{_fmt(v)}</text>')
    if diagonal:
        parts.append(f'<line x1="{px(xa):.1f}" y1="{py(xa):.1f}" x2="{px(xb):.1f}" y2="{py(xb):.1f}" class="diag"/>')
    for j, (name, s) in enumerate(series.items()):
        color = _COLORS[j % len(_COLORS)]
        if len(s) > 1:
            d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s)
            parts.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in s:
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(name)}: ({_fmt(x)}, {_fmt(y)})</title></circle>"
            )
    if len(series) > 1:
        parts.append(_legend(list(series)))
    return _svg(title, "".join(parts), kind=kind)
