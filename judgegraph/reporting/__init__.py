"""The report kit shared by eval-job and flywheel reports: SVG charts and
the page style. Self-contained: no plotting library, no network."""

from __future__ import annotations

from ._html import RENDER_CHECK_JS, REPORT_CSS
from ._plots import bar_chart, heatmap, line_chart

__all__ = ["RENDER_CHECK_JS", "REPORT_CSS", "bar_chart", "heatmap", "line_chart"]
