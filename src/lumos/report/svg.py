"""Tiny, dependency-free SVG charts: lines, grouped bars (vertical or horizontal), stacked
horizontal bars.

Each function returns one standalone ``<svg>`` element as a string (usable inline in HTML and
as a ``.svg`` file for slides). Text is escaped; numbers are formatted deterministically, so the
same data gives byte-identical SVG. Hovering a mark shows its value and unit (an SVG
``<title>``: ``measured · step 3: 41.2 ms``; a line shows its mean and peak), so every chart takes
the ``unit`` of its values.

Axis ticks are plain decimals with thousands separators and as many decimals as the tick step
needs (``2,000``, ``0.05``; never ``2e+03``), and the margins grow with the longest tick label so
that none is clipped. Each chart marks its plotting area with ``<rect class="plot-area">`` (no
paint), which the report's browser test uses to find the marks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from html import escape

__all__ = [
    "PALETTE",
    "bar_chart",
    "grouped_hbar",
    "line_chart",
    "nice_ticks",
    "stacked_hbar",
    "tick_labels",
]

# Colour-blind-safe (Okabe-Ito), measured first, predicted second.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")
_FONT = 'font-family="system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif"'
_M_LEFT, _M_RIGHT, _M_TOP, _M_BOTTOM = 64, 16, 50, 46
_CHAR_PX = 7  # a conservative width of one 12 px character, for margins
_WIDTH = 880  # about a report card's width, so the charts are drawn near 1:1 there


def _f(x: float) -> str:
    """A coordinate with at most 2 decimals, no trailing zeros."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Labels of evenly spaced ticks: decimals as the step needs, thousands separated.

    >>> tick_labels([0.0, 5000.0, 10000.0])
    ['0', '5,000', '10,000']
    >>> tick_labels([0.0, 0.05, 0.1])
    ['0.00', '0.05', '0.10']
    """
    steps = [b - a for a, b in itertools.pairwise(ticks) if b > a]
    step = min(steps) if steps else 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return [f"{t if t else 0.0:,.{decimals}f}" for t in ticks]  # -0.0 prints as 0


def _left_margin(labels: Sequence[str]) -> int:
    """Room for right-aligned tick labels plus the rotated axis title left of them."""
    return max(_M_LEFT, 30 + _CHAR_PX * max((len(s) for s in labels), default=1))


def _right_margin(labels: Sequence[str]) -> int:
    """Room for half of the last x tick label, centred on the axis end."""
    return max(_M_RIGHT, 4 + (_CHAR_PX * len(labels[-1]) + 1) // 2 if labels else _M_RIGHT)


def _plot_area(x0: float, y0: float, x1: float, y1: float) -> str:
    return (f'<rect class="plot-area" x="{_f(x0)}" y="{_f(y0)}" width="{_f(x1 - x0)}" '
            f'height="{_f(y1 - y0)}" fill="none" stroke="none"/>')  # fmt: skip


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering ``[lo, hi]`` (steps of 1, 2 or 5 x 10^k).

    The first tick is at or below ``lo`` and the last at or above ``hi``:

    >>> nice_ticks(0, 121.5)
    [0.0, 50.0, 100.0, 150.0]
    >>> nice_ticks(0, 1)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = [float(round(start, 12))]
    while ticks[-1] < hi - step * 1e-9:
        ticks.append(float(round(start + step * len(ticks), 12)))
    return ticks


def _frame(width: int, height: int, title: str, body: list[str], legend: Sequence[str]) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" {_FONT} font-size="12">'
    )
    parts = [head, f'<rect width="{width}" height="{height}" fill="#fff"/>']
    parts.append(
        f'<text x="{_M_LEFT}" y="20" font-size="14" font-weight="600">{escape(title)}</text>'
    )
    # Legend on its own row under the title, left to right (never over the title).
    x = _M_LEFT
    for i, name in enumerate(legend):
        color = PALETTE[i % len(PALETTE)]
        parts.append(f'<rect x="{x}" y="28" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{x + 14}" y="37">{escape(name)}</text>')
        x += 14 + 7 * len(name) + 16
    parts.extend(body)
    parts.append("</svg>")
    return "".join(parts)


def _y_axis(ticks: list[float], y_of, x0: float, x1: float, label: str, height: int) -> list[str]:
    out = []
    for t, text in zip(ticks, tick_labels(ticks), strict=True):
        y = _f(y_of(t))
        out.append(f'<line x1="{_f(x0)}" x2="{_f(x1)}" y1="{y}" y2="{y}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{_f(x0 - 6)}" y="{y}" dy="4" text-anchor="end">{text}</text>')
    mid = (_M_TOP + height - _M_BOTTOM) / 2
    out.append(
        f'<text transform="translate(14,{_f(mid)}) rotate(-90)" text-anchor="middle" '
        f'fill="#555">{escape(label)}</text>'
    )
    return out


def line_chart(
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    unit: str,
    x_step: float = 1.0,
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    y_max: float | None = None,
    width: int = _WIDTH,
    height: int = 280,
    fmt: str = "{:.3g}",
    x_unit: str = "",
) -> str:
    """Lines sharing an x axis: point ``i`` of every series is at ``x = i * x_step`` (in
    ``x_unit``). Hovering a line shows its mean and peak in ``unit``; hovering the plot shows
    every series' value at the nearest point."""
    n = max((len(v) for _, v in series), default=0)
    top = max((max(v) for _, v in series if len(v)), default=1.0)
    ticks = nice_ticks(0.0, y_max if y_max is not None else max(top, 1e-12))
    y_hi = ticks[-1]
    span_x = (n - 1) * x_step if n > 1 else 1.0
    x_ticks = [t for t in nice_ticks(0.0, span_x, 6) if t <= span_x * (1 + 1e-9)]
    x_labels = tick_labels(x_ticks)
    x0, x1 = _left_margin(tick_labels(ticks)), width - _right_margin(x_labels)
    yb, yt = height - _M_BOTTOM, _M_TOP

    def x_of(i: int) -> float:
        return x0 + (x1 - x0) * (i * x_step) / span_x

    def y_of(v: float) -> float:
        return yb - (yb - yt) * (v / y_hi if y_hi else 0.0)

    body = [_plot_area(x0, yt, x1, yb), *_y_axis(ticks, y_of, x0, x1, y_label, height)]
    for t, text in zip(x_ticks, x_labels, strict=True):
        x = _f(x0 + (x1 - x0) * t / span_x)
        body.append(f'<text x="{x}" y="{yb + 16}" text-anchor="middle">{text}</text>')
    body.append(
        f'<text x="{_f((x0 + x1) / 2)}" y="{height - 8}" text-anchor="middle" '
        f'fill="#555">{escape(x_label)}</text>'
    )
    for k, (name, values) in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        pts = " ".join(f"{_f(x_of(i))},{_f(y_of(v))}" for i, v in enumerate(values))
        hover = name
        if len(values):
            mean, peak = sum(values) / len(values), max(values)
            hover += f": mean {_value(fmt, mean, unit)}, peak {_value(fmt, peak, unit)}"
        body.append(
            f'<polyline class="series" fill="none" stroke="{color}" stroke-width="1.8" '
            f'points="{pts}"><title>{escape(hover)}</title></polyline>'
        )
    body.extend(
        _hover_columns(series, x_of, (yt, yb), x_step, x_unit, lambda v: _value(fmt, v, unit))
    )
    return _frame(width, height, title, body, [name for name, _ in series])


def _hover_columns(
    series: Sequence[tuple[str, Sequence[float]]],
    x_of: Callable[[int], float],
    y_span: tuple[float, float],
    x_step: float,
    x_unit: str,
    show: Callable[[float], str],
) -> list[str]:
    """One unpainted column per point index, over the whole plot height, whose ``<title>`` gives
    every series' value there (``12 ms: measured 45.1 %, predicted 44 %``): a line's points are
    too thin to hover one by one."""
    n = max((len(v) for _, v in series), default=0)
    if n < 2:
        return []
    half = (x_of(1) - x_of(0)) / 2
    yt, yb = y_span
    out = []
    lo, hi = x_of(0), x_of(n - 1)
    decimals = len(f"{x_step:.6f}".rstrip("0").partition(".")[2])  # as many as the step has
    for i in range(n):
        x_text = f"{i * x_step:,.{decimals}f}"
        xa, xb = max(lo, x_of(i) - half), min(hi, x_of(i) + half)
        at = ", ".join(f"{name} {show(v[i])}" for name, v in series if i < len(v))
        out.append(
            f'<rect class="hover" x="{_f(xa)}" y="{_f(yt)}" width="{_f(xb - xa)}" '
            f'height="{_f(yb - yt)}" fill="none" pointer-events="all">'
            f"<title>{escape(f'{x_text} {x_unit}'.rstrip())}: {escape(at)}</title></rect>"
        )
    return out


def bar_chart(
    categories: Sequence[str],
    groups: Sequence[tuple[str, Sequence[float]]],
    *,
    unit: str,
    title: str = "",
    y_label: str = "",
    width: int = _WIDTH,
    height: int = 280,
    fmt: str = "{:.3g}",
) -> str:
    """Grouped vertical bars: one cluster per category, one bar per group in each cluster."""
    top = max((max(v) for _, v in groups if len(v)), default=1.0)
    ticks = nice_ticks(0.0, max(top, 1e-12))
    y_hi = ticks[-1]
    x0, x1 = _left_margin(tick_labels(ticks)), width - _M_RIGHT
    yb, yt = height - _M_BOTTOM, _M_TOP

    def y_of(v: float) -> float:
        return yb - (yb - yt) * (v / y_hi if y_hi else 0.0)

    body = [_plot_area(x0, yt, x1, yb), *_y_axis(ticks, y_of, x0, x1, y_label, height)]
    slot = (x1 - x0) / max(1, len(categories))
    bar_w = slot * 0.8 / max(1, len(groups))
    for c, cat in enumerate(categories):
        cx = x0 + slot * c
        body.append(
            f'<text x="{_f(cx + slot / 2)}" y="{yb + 16}" text-anchor="middle">'
            f"{escape(_clip(cat, max(4, int(slot / 7))))}<title>{escape(cat)}</title></text>"
        )
        for g, (name, values) in enumerate(groups):
            v = values[c] if c < len(values) else 0.0
            x = cx + slot * 0.1 + bar_w * g
            y = y_of(max(0.0, v))
            body.append(
                f'<rect class="bar" x="{_f(x)}" y="{_f(y)}" width="{_f(bar_w * 0.92)}" '
                f'height="{_f(yb - y)}" fill="{PALETTE[g % len(PALETTE)]}">'
                f"<title>{escape(name)} · {escape(cat)}: {escape(_value(fmt, v, unit))}"
                "</title></rect>"
            )
    return _frame(width, height, title, body, [name for name, _ in groups])


def _x_axis(
    ticks: Sequence[float],
    labels: Sequence[str],
    x_of: Callable[[float], float],
    box: tuple[float, float, float, int],
    x_label: str,
) -> list[str]:
    """Vertical grid lines and tick labels along a horizontal value axis, and its title;
    ``box`` is ``(x0, x1, bottom, height)``."""
    x0, x1, yb, height = box
    out = []
    for t, text in zip(ticks, labels, strict=True):
        x = _f(x_of(t))
        out.append(f'<line x1="{x}" x2="{x}" y1="{_M_TOP}" y2="{yb}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{x}" y="{yb + 16}" text-anchor="middle">{text}</text>')
    out.append(f'<text x="{_f((x0 + x1) / 2)}" y="{height - 8}" text-anchor="middle" '
               f'fill="#555">{escape(x_label)}</text>')  # fmt: skip
    return out


def grouped_hbar(
    categories: Sequence[str],
    groups: Sequence[tuple[str, Sequence[float]]],
    *,
    unit: str,
    title: str = "",
    x_label: str = "",
    width: int = 720,
    label_width: int = 150,
    fmt: str = "{:.3g}",
) -> str:
    """Grouped horizontal bars: one row per category (its label, unclipped up to about
    ``label_width / 7`` characters, on the left), one bar per group in each row. For long
    category names, where :func:`bar_chart` would clip them."""
    bar_h = 10
    row_h = bar_h * max(1, len(groups)) + 8
    height = _M_TOP + 10 + row_h * len(categories) + _M_BOTTOM
    top = max((max(v) for _, v in groups if len(v)), default=1.0)
    ticks = nice_ticks(0.0, max(top, 1e-12))
    x_hi = ticks[-1]
    x0, x1 = label_width, width - _M_RIGHT
    yb = height - _M_BOTTOM

    def x_of(v: float) -> float:
        return x0 + (x1 - x0) * (v / x_hi if x_hi else 0.0)

    body = [_plot_area(x0, _M_TOP, x1, yb),
            *_x_axis(ticks, tick_labels(ticks), x_of, (x0, x1, yb, height), x_label)]  # fmt: skip
    for c, cat in enumerate(categories):
        y = _M_TOP + 10 + row_h * c
        body.append(
            f'<text x="{label_width - 8}" y="{_f(y + row_h / 2 - 4)}" dy="4" text-anchor="end">'
            f"{escape(_clip(cat, max(4, label_width // 7)))}<title>{escape(cat)}</title></text>"
        )
        for g, (name, values) in enumerate(groups):
            v = values[c] if c < len(values) else 0.0
            body.append(
                f'<rect class="bar" x="{_f(x0)}" y="{y + bar_h * g}" '
                f'width="{_f(x_of(max(0.0, v)) - x0)}" height="{bar_h - 1}" '
                f'fill="{PALETTE[g % len(PALETTE)]}">'
                f"<title>{escape(name)} · {escape(cat)}: {escape(_value(fmt, v, unit))}"
                "</title></rect>"
            )
    return _frame(width, height, title, body, [name for name, _ in groups])


def stacked_hbar(
    rows: Sequence[tuple[str, Sequence[float]]],
    parts: Sequence[str],
    *,
    unit: str,
    title: str = "",
    x_label: str = "",
    width: int = _WIDTH,
    row_height: int = 34,
    fmt: str = "{:.3g}",
) -> str:
    """One horizontal bar per row, split into ``parts`` (same order in every row)."""
    height = _M_TOP + 10 + row_height * len(rows) + _M_BOTTOM
    left = 110
    total = max((sum(v) for _, v in rows), default=1.0)
    ticks = nice_ticks(0.0, max(total, 1e-12))
    x_hi = ticks[-1]
    labels = tick_labels(ticks)
    x0, x1 = left, width - _right_margin(labels)
    yb = height - _M_BOTTOM

    def x_of(v: float) -> float:
        return x0 + (x1 - x0) * (v / x_hi if x_hi else 0.0)

    body = [_plot_area(x0, _M_TOP, x1, yb),
            *_x_axis(ticks, labels, x_of, (x0, x1, yb, height), x_label)]  # fmt: skip
    for r, (name, values) in enumerate(rows):
        y = _M_TOP + 10 + row_height * r
        body.append(
            f'<text x="{left - 8}" y="{_f(y + row_height * 0.45)}" dy="4" '
            f'text-anchor="end">{escape(_clip(name, 14))}<title>{escape(name)}</title></text>'
        )
        acc = 0.0
        for p, v in enumerate(values):
            xa, xb = x_of(acc), x_of(acc + max(0.0, v))
            acc += max(0.0, v)
            body.append(
                f'<rect class="bar" x="{_f(xa)}" y="{y}" width="{_f(xb - xa)}" '
                f'height="{_f(row_height * 0.9)}" fill="{PALETTE[p % len(PALETTE)]}">'
                f"<title>{escape(name)} · {escape(parts[p])}: {escape(_value(fmt, v, unit))}"
                f"</title></rect>"
            )
    return _frame(width, height, title, body, list(parts))


def _value(fmt: str, v: float, unit: str) -> str:
    """A hovered value with its unit: ``41.2 ms``, ``35 %``."""
    return f"{fmt.format(v)} {unit}".rstrip()


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: max(1, n - 1)] + "…"
