"""SVG chart primitives: well-formed, deterministic, axis ticks that cover the data."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lumos.report.svg import (
    bar_chart,
    grouped_hbar,
    line_chart,
    nice_ticks,
    stacked_hbar,
    tick_labels,
)

NS = "{http://www.w3.org/2000/svg}"


@given(
    lo=st.floats(-1e9, 1e9, allow_nan=False),
    span=st.floats(1e-6, 1e9, allow_nan=False),
    n=st.integers(2, 10),
)
def test_ticks_cover_the_range_in_even_steps(lo, span, n):
    assume(span > 1e-6 * abs(lo))  # a chart's range, not float noise around a large offset
    hi = lo + span
    ticks = nice_ticks(lo, hi, n)
    assert ticks[0] <= lo + 1e-9 * max(1.0, abs(lo)) and ticks[-1] >= hi - 1e-9 * max(1.0, abs(hi))
    assert 2 <= len(ticks) <= 3 * n + 2
    steps = [b - a for a, b in itertools.pairwise(ticks)]
    assert all(s > 0 for s in steps)
    scale = max(abs(ticks[0]), abs(ticks[-1]))
    assert max(steps) - min(steps) <= 1e-6 * max(steps) + 1e-12 * scale


def test_degenerate_ranges_still_give_ticks():
    assert nice_ticks(0, 0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(5, 5)[0] <= 5 <= nice_ticks(5, 5)[-1]


def _parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == NS + "svg"
    return root


def test_bar_chart_marks_and_escaping():
    svg = bar_chart(["a<b", "c&d"], [("measured", [1.0, 2.0]), ("predicted", [1.5, 0.0])],
                    title="t <x>", unit="ms")  # fmt: skip
    root = _parse(svg)
    bars = [r for r in root.iter(NS + "rect") if r.get("class") == "bar"]
    assert len(bars) == 4
    heights = [float(b.get("height")) for b in bars]
    assert heights[3] == 0 and heights[2] > heights[1] > heights[0] > 0  # 2 > 1.5 > 1 > 0
    titles = [t.text for t in root.iter(NS + "title")]
    assert "measured · a<b: 1 ms" in titles
    assert svg == bar_chart(["a<b", "c&d"], [("measured", [1.0, 2.0]), ("predicted", [1.5, 0.0])],
                            title="t <x>", unit="ms")  # fmt: skip


def test_line_chart_one_polyline_per_series():
    root = _parse(line_chart([("m", [0.1, 0.5, 0.9]), ("p", [0.2, 0.4])], y_max=1.0, x_step=0.5,
                             unit="%"))  # fmt: skip
    lines = [p for p in root.iter(NS + "polyline")]
    assert [len(p.get("points").split()) for p in lines] == [3, 2]


def test_stacked_hbar_parts_add_up():
    root = _parse(stacked_hbar([("m", [3.0, 1.0]), ("p", [2.0, 2.0])], ["a", "b"], unit="ms"))
    bars = [r for r in root.iter(NS + "rect") if r.get("class") == "bar"]
    widths = [float(b.get("width")) for b in bars]
    assert abs((widths[0] + widths[1]) - (widths[2] + widths[3])) < 0.05
    assert widths[0] > widths[1]


def test_grouped_hbar_bars_in_proportion_and_labels_whole():
    """Values 4 and 2 (source), 1 and 0 (candidate); ticks 0..4, so widths are 4:2:1:0."""
    root = _parse(grouped_hbar(["runtime.launch", "comm.all_reduce"],
                               [("source", [4.0, 2.0]), ("candidate", [1.0, 0.0])],
                               unit="tasks"))  # fmt: skip
    bars = [r for r in root.iter(NS + "rect") if r.get("class") == "bar"]
    widths = [float(b.get("width")) for b in bars]  # row by row, group by group
    assert widths[3] == 0 and widths[1] == widths[0] / 4 and widths[2] == widths[0] / 2
    labels = [t.text for t in root.iter(NS + "text")]
    assert "runtime.launch" in labels and "comm.all_reduce" in labels


def test_every_mark_hovers_with_its_unit():
    """Bars and stacked parts give value and unit; a line its mean and peak; the plot, per
    point, every series' value at that x."""
    bars = _parse(grouped_hbar(["x"], [("s", [2.0])], unit="tasks", fmt="{:,.1f}"))
    titles = [t.text for r in bars.iter(NS + "rect") for t in r.iter(NS + "title")]
    assert titles == ["s · x: 2.0 tasks"]
    stacked = _parse(stacked_hbar([("m", [1.5, 0.25])], ["a", "b"], unit="ms", fmt="{:,.3f}"))
    assert [t.text for r in stacked.iter(NS + "rect") for t in r.iter(NS + "title")] == [
        "m · a: 1.500 ms", "m · b: 0.250 ms"]  # fmt: skip
    lines = _parse(line_chart([("m", [10.0, 50.0, 90.0]), ("p", [20.0, 40.0])], unit="%",
                              fmt="{:.1f}", x_step=1.5, x_unit="ms"))  # fmt: skip
    assert [t.text for p in lines.iter(NS + "polyline") for t in p.iter(NS + "title")] == [
        "m: mean 50.0 %, peak 90.0 %", "p: mean 30.0 %, peak 40.0 %"]  # fmt: skip
    hovers = [r for r in lines.iter(NS + "rect") if r.get("class") == "hover"]
    assert [r.find(NS + "title").text for r in hovers] == [
        "0.0 ms: m 10.0 %, p 20.0 %", "1.5 ms: m 50.0 %, p 40.0 %", "3.0 ms: m 90.0 %"]  # fmt: skip
    area = _plot_area(lines)
    assert float(hovers[0].get("x")) == area[0]  # the columns tile the plot, edge to edge
    right = float(hovers[-1].get("x")) + float(hovers[-1].get("width"))
    assert abs(right - (area[0] + area[2])) < 0.02
    assert all(r.get("fill") == "none" for r in hovers)  # they paint nothing


def test_empty_inputs_do_not_crash():
    _parse(line_chart([], unit="%"))
    _parse(bar_chart([], [], unit="ms"))
    _parse(stacked_hbar([], [], unit="ms"))
    _parse(grouped_hbar([], [], unit="ms"))
    _parse(line_chart([("m", [0.5])], unit="%"))


def test_tick_labels_are_plain_decimals():
    """Axis ticks in ms: thousands separated, decimals as the step needs, never exponents."""
    assert tick_labels(nice_ticks(0, 12_000)) == ["0", "5,000", "10,000", "15,000"]
    assert tick_labels(nice_ticks(0, 0.004)) == ["0.000", "0.001", "0.002", "0.003", "0.004"]
    assert tick_labels(nice_ticks(0, 19.9)) == ["0", "5", "10", "15", "20"]
    assert tick_labels([-0.0, 0.5, 1.0]) == ["0.0", "0.5", "1.0"]


def _texts(root: ET.Element) -> list[ET.Element]:
    return [t for t in root.iter(NS + "text") if t.text and t.text[0].isdigit()]


def _plot_area(root: ET.Element) -> tuple[float, float, float, float]:
    (area,) = [r for r in root.iter(NS + "rect") if r.get("class") == "plot-area"]
    return tuple(float(area.get(k)) for k in ("x", "y", "width", "height"))  # type: ignore[return-value]


@settings(deadline=None)  # a few hundred points per chart: slow on a loaded machine, not a hang
@given(top=st.floats(1e-4, 1e9, allow_nan=False), n=st.integers(2, 400))
def test_no_exponents_and_no_clipped_tick_labels(top, n):
    width = 880
    charts = [
        line_chart(
            [("m", [top * (i % 7) / 6 for i in range(n)])], x_step=top / 10, width=width, unit="ms"
        ),
        bar_chart(["a", "b"], [("m", [top, top / 2])], width=width, unit="ms"),
        stacked_hbar([("m", [top, top / 3])], ["a", "b"], width=width, unit="ms"),
    ]
    for svg in charts:
        root = _parse(svg)
        x0, _, w, _ = _plot_area(root)
        for t in _texts(root):
            assert "e+" not in t.text and "e-" not in t.text, t.text
            x, size = float(t.get("x")), 7 * len(t.text)  # 7 px a character, conservatively
            if t.get("text-anchor") == "end":  # a y tick: right of the rotated axis title
                assert x - size >= 22, (t.text, x)
            elif t.get("text-anchor") == "middle":  # an x tick: inside the drawing
                assert x - size / 2 >= 0 and x + size / 2 <= width, (t.text, x)
        assert x0 + w <= width
