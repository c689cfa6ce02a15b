"""The report kit shared by eval-job, flywheel and quickstart reports: charts drawn with
matplotlib (the ``report`` extra, imported only when a chart is drawn) and inlined as SVG,
and the page style. A report is one HTML file that fetches nothing."""

from __future__ import annotations

from ._format import AxisKind, axis_labels, money
from ._html import RENDER_CHECK_JS, REPORT_CSS
from ._plots import bar_chart, bar_figure, heatmap, interval_chart, line_chart, line_figure, tick_label_overlaps

__all__ = [
    "RENDER_CHECK_JS",
    "REPORT_CSS",
    "AxisKind",
    "axis_labels",
    "bar_chart",
    "bar_figure",
    "heatmap",
    "interval_chart",
    "line_chart",
    "line_figure",
    "money",
    "tick_label_overlaps",
]
