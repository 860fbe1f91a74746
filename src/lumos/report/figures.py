"""The report's figures, as data first (:class:`Figure`), then SVG (always) or PNG (matplotlib).

:func:`build_figures` turns a validated replay result (see :mod:`lumos.report.html`) into
:class:`Figure` specs; :func:`to_svg` draws one with :mod:`lumos.report.svg`; :func:`write_figures`
writes ``<name>.svg`` (and ``<name>.png`` when asked, which needs the ``plot`` extra) for papers
and slides. One spec feeds both renderers, so the PNG shows the same numbers as the HTML.

====================  =========  =========================================================
figure                kind       what it shows
====================  =========  =========================================================
``step_time``         bars       measured vs predicted time of each step (ms)
``breakdown``         stacked    exposed compute / overlapped / exposed comm / other (ms)
``sm_util``           lines      share of each bin with a GPU stream busy (%), both runs
``critical_path``     stacked    share of the critical path by task kind (%)
====================  =========  =========================================================

The unit in brackets is the figure's ``unit``: hovering a mark of its SVG shows the value with
it (``measured · ProfilerStep#3: 365.256 ms``).

A long run's SM utilization (more than :data:`MAX_SM_POINTS` bins) is drawn with wider bins, each
the mean of ``k`` recorded ones, so that the curve stays readable; the title says the bin width.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lumos._io import atomic_write
from lumos.errors import ConfigError, MissingDependencyError
from lumos.report import svg
from lumos.report.labels import BREAKDOWN_LABELS, kind_label

__all__ = [
    "BREAKDOWN_PARTS",
    "MAX_SM_POINTS",
    "Figure",
    "build_figures",
    "coarsen",
    "to_svg",
    "write_figures",
]

BREAKDOWN_PARTS = tuple(BREAKDOWN_LABELS)
#: Most points the SM utilization curve is drawn with; longer runs get wider bins.
MAX_SM_POINTS = 240


@dataclass(frozen=True, kw_only=True)
class Figure:
    """A chart as data. ``series`` are (name, values); for ``stacked``, rows are series.
    ``unit`` is the unit of the values (shown with each hovered value, formatted by ``fmt``)."""

    name: str
    kind: Literal["bars", "lines", "stacked"]
    title: str
    unit: str
    series: tuple[tuple[str, tuple[float, ...]], ...]
    categories: tuple[str, ...] = ()
    x_label: str = ""
    y_label: str = ""
    x_step: float = 1.0
    x_unit: str = ""
    y_max: float | None = None
    fmt: str = "{:,.3f}"


def _ms(ns: Any) -> float:
    return float(ns) / 1e6


def coarsen(values: tuple[float, ...], k: int) -> tuple[float, ...]:
    """Means of ``k`` consecutive values (the last group may be shorter).

    >>> coarsen((1.0, 3.0, 5.0, 7.0, 9.0), 2)
    (2.0, 6.0, 9.0)
    """
    return tuple(sum(values[i : i + k]) / len(values[i : i + k]) for i in range(0, len(values), k))


def _bin_label(ms: float) -> str:
    return f"{ms:g} ms"


def build_figures(result: dict[str, Any]) -> list[Figure]:
    """The figures a replay result supports, in report order (missing sections are skipped)."""
    figs: list[Figure] = []
    steps = result.get("steps") or []
    if steps:
        figs.append(
            Figure(
                name="step_time",
                kind="bars",
                title="Step time: measured vs predicted",
                categories=tuple(str(s["name"]) for s in steps),
                series=(
                    ("measured", tuple(_ms(s["measured_ns"]) for s in steps)),
                    ("predicted", tuple(_ms(s["predicted_ns"]) for s in steps)),
                ),
                y_label="ms",
                unit="ms",
            )
        )
    bd = result.get("breakdown")
    if bd:
        rows = tuple(
            (side, tuple(_ms(bd[side].get(k, 0)) for k in BREAKDOWN_PARTS))
            for side in ("measured", "predicted")
            if side in bd
        )
        figs.append(
            Figure(
                name="breakdown",
                kind="stacked",
                title="Where the time goes",
                categories=tuple(BREAKDOWN_LABELS.values()),
                series=rows,
                x_label="ms (summed over recorded steps)",
                unit="ms",
            )
        )
    sm = result.get("sm_util") or {}
    sm_series = tuple(
        (side, tuple(100.0 * float(v) for v in sm[side]))
        for side in ("measured", "predicted")
        if sm.get(side)
    )
    if sm_series and int(sm.get("device", 0)) >= 0:  # device -1: a CPU-only run, no curve
        bin_ms = _ms(sm.get("bin_ns", 1_000_000))
        n = max(len(v) for _, v in sm_series)
        k = -(-n // MAX_SM_POINTS)
        if k > 1:
            sm_series = tuple((side, coarsen(v, k)) for side, v in sm_series)
            bin_ms *= k
        figs.append(
            Figure(
                name="sm_util",
                kind="lines",
                title=f"SM utilization (share of each {_bin_label(bin_ms)} bin with a GPU "
                "stream busy)",
                series=sm_series,
                x_label="time (ms)",
                y_label="%",
                unit="%",
                fmt="{:.1f}",
                x_step=bin_ms,
                x_unit="ms",
                y_max=100.0,
            )
        )
    mem = (result.get("memory") or {}).get("timeline") or {}
    mem_series = tuple(
        (side, tuple(float(v) / (1 << 20) for v in mem[side]))
        for side in ("measured", "predicted")
        if mem.get(side)
    )
    if mem_series:
        bin_ms = _ms(mem.get("bin_ns", 1_000_000))
        n = max(len(v) for _, v in mem_series)
        k = -(-n // MAX_SM_POINTS)
        if k > 1:  # the largest of each k bins: a peak never disappears in a wider bin
            mem_series = tuple(
                (side, tuple(max(v[i : i + k]) for i in range(0, len(v), k)))
                for side, v in mem_series
            )
            bin_ms *= k
        figs.append(
            Figure(
                name="memory",
                kind="lines",
                title=f"Allocated memory (largest in each {_bin_label(bin_ms)} bin)",
                series=mem_series,
                x_label="time (ms)",
                y_label="MiB",
                unit="MiB",
                fmt="{:,.1f}",
                x_step=bin_ms,
                x_unit="ms",
            )
        )
    cp = result.get("critical_path")
    if cp:
        kinds = tuple(k for k in cp if float(cp[k]) > 0)  # kinds absent from the path: no slot
        figs.append(
            Figure(
                name="critical_path",
                kind="stacked",
                title="Critical path by task kind",
                categories=tuple(kind_label(k) for k in kinds),
                series=(("critical path", tuple(100.0 * float(cp[k]) for k in kinds)),),
                x_label="% of the critical path",
                unit="%",
                fmt="{:.1f}",
            )
        )
    return figs


def to_svg(fig: Figure) -> str:
    """The figure as one standalone ``<svg>`` element."""
    if fig.kind == "bars":
        return svg.bar_chart(fig.categories, fig.series, unit=fig.unit, fmt=fig.fmt,
                             title=fig.title, y_label=fig.y_label)  # fmt: skip
    if fig.kind == "lines":
        return svg.line_chart(
            fig.series,
            unit=fig.unit,
            fmt=fig.fmt,
            x_unit=fig.x_unit,
            x_step=fig.x_step,
            title=fig.title,
            x_label=fig.x_label,
            y_label=fig.y_label,
            y_max=fig.y_max,
        )
    return svg.stacked_hbar(fig.series, fig.categories, unit=fig.unit, fmt=fig.fmt,
                            title=fig.title, x_label=fig.x_label)  # fmt: skip


def _png(fig: Figure, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib", "plot", "PNG figures") from None
    colors = svg.PALETTE
    f, ax = plt.subplots(
        figsize=(7.2, 2.8 if fig.kind != "stacked" else 1.2 + 0.5 * len(fig.series))
    )
    if fig.kind == "bars":
        n = max(1, len(fig.series))
        width = 0.8 / n
        for g, (name, values) in enumerate(fig.series):
            xs = [i + g * width - 0.4 + width / 2 for i in range(len(values))]
            ax.bar(xs, values, width=width * 0.92, label=name, color=colors[g % len(colors)])
        ax.set_xticks(range(len(fig.categories)), fig.categories)
    elif fig.kind == "lines":
        for k, (name, values) in enumerate(fig.series):
            ax.plot([i * fig.x_step for i in range(len(values))], values, label=name,
                    color=colors[k % len(colors)])  # fmt: skip
        if fig.y_max is not None:
            ax.set_ylim(0, fig.y_max)
    else:
        for r, (_, values) in enumerate(fig.series):
            left = 0.0
            for p, v in enumerate(values):
                ax.barh(r, v, left=left, color=colors[p % len(colors)],
                        label=fig.categories[p] if r == 0 else None)  # fmt: skip
                left += v
        ax.set_yticks(range(len(fig.series)), [name for name, _ in fig.series])
        ax.invert_yaxis()
    ax.set_title(fig.title, loc="left", fontsize=11)
    ax.set_xlabel(fig.x_label)
    ax.set_ylabel(fig.y_label)
    ax.legend(fontsize=8, frameon=False)
    f.tight_layout()
    with atomic_write(path, "wb") as out:
        f.savefig(out, format="png", dpi=150, metadata={"Software": None})
    plt.close(f)


def write_figures(
    result: dict[str, Any],
    out_dir: str | os.PathLike[str],
    formats: tuple[str, ...] = ("svg",),
) -> list[Path]:
    """Write every figure of ``result`` as ``out_dir/<name>.<fmt>``; returns the paths written.

    ``formats`` holds ``"svg"`` and/or ``"png"``; PNG needs matplotlib (``lumos[plot]``).
    """
    bad = [f for f in formats if f not in ("svg", "png")]
    if bad:
        raise ConfigError(f"unknown figure format(s) {bad}; use svg and/or png")
    out = Path(out_dir)
    written: list[Path] = []
    for fig in build_figures(result):
        if "svg" in formats:
            path = out / f"{fig.name}.svg"
            with atomic_write(path) as f:
                f.write(to_svg(fig) + "\n")
            written.append(path)
        if "png" in formats:
            path = out / f"{fig.name}.png"
            _png(fig, path)
            written.append(path)
    return written
