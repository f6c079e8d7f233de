"""The dashboard's SVG charts: one element per value drawn, on a scale that fits them, and a
text alternative."""

import re
import xml.etree.ElementTree as ET

import pytest

from jobqueue.console import charts
from jobqueue.console.charts import Series

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (0.3, 0.5), (1, 1), (7, 10), (12, 20), (2100, 2500)]
)
def test_the_scale_ends_at_a_round_number(value, ceiling):
    assert charts.nice_ceiling(value) == pytest.approx(ceiling)


def test_stacked_bars_draw_one_rect_per_nonzero_value_stacked_in_order():
    svg = parse(
        charts.stacked_bars(
            ident="c",
            title="Jobs <finished>",
            desc="d",
            labels=["a", "b", "c"],
            series=[Series("ok", [2, 0, 6], "#0f0"), Series("failed", [2, 1, 0], "#f00")],
            unit="jobs",
        )
    )
    bars = svg.findall(f"{SVG}rect[@class='jq-bar']")
    assert [(b.get("data-series"), b.get("data-index"), b.get("data-value")) for b in bars] == [
        ("ok", "0", "2"),
        ("failed", "0", "2"),
        ("failed", "1", "1"),
        ("ok", "2", "6"),
    ]
    assert svg.get("data-max") == "10"  # totals 4, 1, 6: the axis ends at 10
    ok, failed = bars[0], bars[1]
    # Stacked: the failed part sits right on top of the ok part, as tall (2 of 2).
    assert float(failed.get("y")) + float(failed.get("height")) == pytest.approx(float(ok.get("y")))
    assert float(failed.get("height")) == pytest.approx(float(ok.get("height")))
    assert float(bars[3].get("height")) == pytest.approx(3 * float(ok.get("height")))
    # The text alternative, escaped.
    assert svg.get("role") == "img"
    assert svg.find(f"{SVG}title").text == "Jobs <finished>"
    assert svg.get("aria-labelledby") == "c-title c-desc"


def test_lines_skip_missing_points_and_break_the_line():
    svg = parse(
        charts.lines(
            ident="w",
            title="t",
            desc="d",
            labels=["1", "2", "3", "4"],
            series=[Series("p50", [1, None, 3, 4], "#00f")],
            unit="s",
        )
    )
    points = svg.findall(f"{SVG}circle[@class='jq-point']")
    assert [p.get("data-value") for p in points] == ["1", "3", "4"]
    path = svg.find(f"{SVG}path[@class='jq-line']").get("d")
    assert re.findall("[ML]", path) == ["M", "M", "L"]
    # Higher values sit higher (smaller y).
    assert float(points[2].get("cy")) < float(points[1].get("cy")) < float(points[0].get("cy"))
    assert svg.get("data-max") == "5"


def test_empty_data_draws_axes_and_no_values():
    svg = parse(
        charts.lines(
            ident="e", title="t", desc="d", labels=[], series=[Series("x", [], "#000")], unit=""
        )
    )
    assert svg.findall(f"{SVG}circle") == [] and svg.find(f"{SVG}path") is None
    assert len(svg.findall(f"{SVG}text[@class='jq-tick']")) == 5
    svg = parse(
        charts.stacked_bars(
            ident="e", title="t", desc="d", labels=["a"], series=[Series("x", [0], "#000")], unit=""
        )
    )
    assert svg.findall(f"{SVG}rect[@class='jq-bar']") == []
