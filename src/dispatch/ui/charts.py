"""The overview's charts, rendered on the server as SVG by pygal (no script in them: the page
shows them as images). One colour per outcome, the same on every chart and in the CSS."""

from __future__ import annotations

import re

import pygal
from pygal.style import Style

from dispatch.model import Cause
from dispatch.ui.overview import SUCCEEDED, EndsOverTime

#: one colour per outcome (ui.css uses the same for the table's badges)
COLOURS = {
    SUCCEEDED: "#2e7d32",
    Cause.PREEMPTED.value: "#f9a825",
    Cause.NODE_LOST.value: "#6d4c41",
    Cause.OUT_OF_MEMORY.value: "#8e24aa",
    Cause.TIMEOUT.value: "#ef6c00",
    Cause.NO_CAPACITY.value: "#546e7a",
    Cause.START_FAILURE.value: "#00838f",
    Cause.APP_ERROR.value: "#c62828",
    Cause.CANCELLED.value: "#757575",
    Cause.UNPLANNED_RECOVERY.value: "#ad1457",
    Cause.UNKNOWN.value: "#37474f",
}


def _style(names: list[str]) -> Style:
    return Style(
        background="white",
        plot_background="white",
        font_family="DejaVu Sans, sans-serif",
        colors=tuple(COLOURS.get(n, "#999999") for n in names),
        label_font_size=11,
        major_label_font_size=11,
        legend_font_size=12,
    )


#: pygal writes its configuration as an inline script even with ``js=()``; the page shows
#: the chart as an image, where no script runs, and the answer carries none at all
_SCRIPT = re.compile(rb"<script[^>]*>.*?</script>", re.DOTALL)


def _svg(chart: pygal.graph.graph.Graph) -> bytes:
    return _SCRIPT.sub(b"", bytes(chart.render(is_unicode=False)))


def ends_chart(ends: EndsOverTime) -> bytes:
    """Jobs ended per time bucket, stacked by outcome."""
    names = list(ends.series)
    chart = pygal.StackedBar(
        style=_style(names), width=900, height=360, js=(), x_label_rotation=30,
        legend_at_bottom=True, legend_at_bottom_columns=6, print_values=False,
        no_data_text="no job has ended yet", show_minor_x_labels=True,
    )  # fmt: skip
    chart.title = "Jobs ended, by cause"
    chart.x_labels = list(ends.labels)
    for name in names:
        chart.add(name, ends.series[name])
    return _svg(chart)


def lost_chart(lost: dict[str, float]) -> bytes:
    """Hours of attempts that ended other than succeeded, per cause."""
    names = list(lost)
    chart = pygal.HorizontalBar(
        style=_style(names), width=900, height=300, js=(), legend_at_bottom=True,
        legend_at_bottom_columns=6, no_data_text="no attempt has failed",
    )  # fmt: skip
    chart.title = "Hours lost to each cause (attempts that did not succeed)"
    for name in names:
        chart.add(name, round(lost[name] / 3600, 2))
    return _svg(chart)
