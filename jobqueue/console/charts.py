"""Charts as server-side SVG for the admin's dashboard: stacked bars and lines, with axes,
a legend and a text alternative (``<title>``, ``<desc>``, ``aria-labelledby``). No
JavaScript and no build step; the page adds a data table under each chart.

Every drawn value is an element that says what it is: a bar is a ``rect.jq-bar`` and a
line's point a ``circle.jq-point``, each with ``data-series``, ``data-index`` and
``data-value`` and a ``<title>`` a pointer shows. A zero bar and a missing point (``None``,
a bucket with nothing measured) are not drawn.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.safestring import SafeString, mark_safe

# The standard library's: Django's escape() is lazy-aware and several times slower, which
# counts at a few thousand elements a page.
escape = html.escape

WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 28, 30
X_LABELS = 6


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    color: str


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times 10^k that is >= ``value`` (1 for nothing to show)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value * (1 - 1e-9):
            return step * power
    return 10 * power  # pragma: no cover - the loop ends at 10


def number(value: float) -> str:
    """A tick or a value, short: 1500 -> 1.5k, 0.25 -> 0.25."""
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:.3g}"


def _frame(title: str, desc: str, ident: str, top: float, unit: str) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="jq-chart" id="{escape(ident)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'aria-labelledby="{escape(ident)}-title {escape(ident)}-desc" '
        f'data-max="{top:g}">',
        f'<title id="{escape(ident)}-title">{escape(title)}</title>',
        f'<desc id="{escape(ident)}-desc">{escape(desc)}</desc>',
        '<rect x="0" y="0" width="100%" height="100%" fill="#fff"/>',
    ]
    for i in range(5):
        value = top * i / 4
        y = TOP + plot_h - plot_h * i / 4
        parts.append(
            f'<line class="jq-grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#ddd" stroke-width="1"/>'
            f'<text class="jq-tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'font-size="11" fill="#333">{escape(number(value))}</text>'
        )
    parts.append(
        f'<text x="{LEFT - 6}" y="{TOP - 12}" text-anchor="end" font-size="11" '
        f'fill="#333">{escape(unit)}</text>'
    )
    return parts


def _x_labels(labels: Sequence[str], slot: float) -> list[str]:
    if not labels:
        return []
    every = max(1, math.ceil(len(labels) / X_LABELS))
    y = HEIGHT - BOTTOM + 16
    return [
        f'<text class="jq-xlabel" x="{LEFT + slot * (i + 0.5):.1f}" y="{y}" '
        f'text-anchor="middle" font-size="11" fill="#333">{escape(label)}</text>'
        for i, label in enumerate(labels)
        if i % every == 0
    ]


def _legend(series: Sequence[Series]) -> list[str]:
    parts, x = [], LEFT
    for s in series:
        parts.append(
            f'<g class="jq-legend" data-series="{escape(s.name)}">'
            f'<rect x="{x}" y="6" width="10" height="10" fill="{escape(s.color)}"/>'
            f'<text x="{x + 14}" y="15" font-size="11" fill="#333">{escape(s.name)}</text></g>'
        )
        x += 24 + 7 * len(s.name)
    return parts


def stacked_bars(
    *, ident: str, title: str, desc: str, labels: Sequence[str], series: Sequence[Series], unit: str
) -> SafeString:
    """One bar per label, its series stacked in order from the bottom."""
    count = len(labels)
    totals = [sum((s.values[i] or 0) for s in series) for i in range(count)]
    top = nice_ceiling(max(totals, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / count if count else plot_w
    width = max(1.0, slot * 0.8)
    parts = _frame(title, desc, ident, top, unit)
    for i in range(count):
        base = 0.0
        for s in series:
            value = s.values[i] or 0
            if value <= 0:
                continue
            h = plot_h * value / top
            y = TOP + plot_h - plot_h * (base + value) / top
            parts.append(
                f'<rect class="jq-bar" data-series="{escape(s.name)}" data-index="{i}" '
                f'data-value="{value:g}" x="{LEFT + slot * i + (slot - width) / 2:.2f}" '
                f'y="{y:.2f}" width="{width:.2f}" height="{h:.2f}" fill="{escape(s.color)}">'
                f"<title>{escape(labels[i])} {escape(s.name)}: {value:g}</title></rect>"
            )
            base += value
    parts += _x_labels(labels, slot) + _legend(series) + ["</svg>"]
    return mark_safe("".join(parts))


def lines(
    *, ident: str, title: str, desc: str, labels: Sequence[str], series: Sequence[Series], unit: str
) -> SafeString:
    """One line per series over the labels; a None value breaks the line."""
    count = len(labels)
    values = [v for s in series for v in s.values if v is not None]
    top = nice_ceiling(max(values, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / count if count else plot_w
    parts = _frame(title, desc, ident, top, unit)
    for s in series:
        path, points, pen_down = [], [], False
        for i, value in enumerate(s.values):
            if value is None:
                pen_down = False
                continue
            x, y = LEFT + slot * (i + 0.5), TOP + plot_h - plot_h * value / top
            path.append(f"{'L' if pen_down else 'M'}{x:.1f} {y:.1f}")
            pen_down = True
            points.append(
                f'<circle class="jq-point" data-series="{escape(s.name)}" data-index="{i}" '
                f'data-value="{value:g}" cx="{x:.1f}" cy="{y:.1f}" r="2" '
                f'fill="{escape(s.color)}"><title>{escape(labels[i])} {escape(s.name)}: '
                f"{escape(number(value))}</title></circle>"
            )
        if path:
            parts.append(
                f'<path class="jq-line" data-series="{escape(s.name)}" d="{" ".join(path)}" '
                f'fill="none" stroke="{escape(s.color)}" stroke-width="2"/>'
            )
        parts += points
    parts += _x_labels(labels, slot) + _legend(series) + ["</svg>"]
    return mark_safe("".join(parts))


def data_table(labels: Sequence[str], series: Sequence[Series], heading: str) -> SafeString:
    """The chart's figures as an HTML table, one row per label with a value (the text
    alternative under each chart); built here rather than in a template, where a week's
    168 rows of cells cost more than the chart."""
    head = "".join(f'<th scope="col" class="num">{escape(s.name)}</th>' for s in series)
    rows = []
    for i, label in enumerate(labels):
        cells = [s.values[i] for s in series]
        if any(cells):
            tds = "".join(
                f'<td class="num">{"-" if v is None else escape(number(v))}</td>' for v in cells
            )
            rows.append(f'<tr><th scope="row">{escape(label)}</th>{tds}</tr>')
    if not rows:
        rows.append(f'<tr><td colspan="{len(series) + 1}">{escape(EMPTY)}</td></tr>')
    return mark_safe(
        f'<table class="jq-data"><thead><tr><th scope="col">{escape(heading)}</th>{head}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


EMPTY = "Nothing recorded in this range."
