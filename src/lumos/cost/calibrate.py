"""Fit the alpha-beta model to measured collectives: ``time = latency + size / bandwidth``.

:func:`fit_alpha_beta` is an ordinary least-squares line through ``(size_bytes, time_ns)``;
:func:`calibrate_from_graph` collects the communication tasks of a graph or workload and fits
one line per (collective kind, group size); :func:`calibrate_samples` fits measured collectives
given as samples (what ``lumos bench --comms-only`` writes). The time of a task is its *transfer*,
``dur_ns - Comms.wait_ns`` (the build already split the waiting for peers off), so the fitted
bandwidth is the algorithm bandwidth ``size / time`` in PyTorch's size convention (see
:mod:`lumos.cost.collectives`), not a link or bus bandwidth.

>>> fit = fit_alpha_beta([1000, 2000, 4000], [1010, 1020, 1040])
>>> round(fit.latency_ns), round(fit.bw_bytes_per_s / 1e9), fit.r2
(1000, 100, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lumos.errors import ConfigError
from lumos.graph.kinds import COMM_TASK_KINDS, CommType
from lumos.graph.model import ExecGraph, Workload

__all__ = [
    "AlphaBetaFit",
    "CalibrationRow",
    "Sample",
    "calibrate_from_graph",
    "calibrate_samples",
    "fit_alpha_beta",
    "graph_samples",
]


@dataclass(frozen=True)
class AlphaBetaFit:
    """A fitted line: ``latency_ns`` (intercept), ``bw_bytes_per_s`` (1 / slope; ``inf`` when
    time does not grow with size), ``r2`` (coefficient of determination; 1.0 when the times
    do not vary: the flat line through them) and ``rel_rms`` (root-mean-square error / mean time)."""

    latency_ns: float
    bw_bytes_per_s: float
    r2: float
    rel_rms: float
    n: int

    def predict_ns(self, size_bytes: float) -> float:
        return self.latency_ns + size_bytes / self.bw_bytes_per_s * 1e9


def fit_alpha_beta(sizes_bytes: Sequence[float], times_ns: Sequence[float]) -> AlphaBetaFit:
    """Least squares of ``times_ns = latency_ns + sizes_bytes * 1e9 / bw_bytes_per_s``.

    Needs at least two distinct sizes (:class:`ConfigError` otherwise). A negative fitted
    latency is kept as is (it says the line is a poor model at small sizes).
    """
    x = np.asarray(sizes_bytes, dtype=np.float64)
    y = np.asarray(times_ns, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ConfigError("sizes and times must be two sequences of the same length")
    if len(np.unique(x)) < 2:
        raise ConfigError("fitting latency and bandwidth needs at least two distinct sizes")
    if np.all(y == y[0]):
        # times that do not vary: the flat line through them, exactly (polyfit's rounding
        # would leave a residual, a slope of 1e-20 and r2 <= 0 for, say, 0.1 ns or 1e15 ns)
        slope, intercept = 0.0, float(y[0])
    else:
        slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    ss_res = float(resid @ resid)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    mean = float(np.abs(y).mean())
    rel_rms = float(np.sqrt(ss_res / len(y)) / mean) if mean > 0 else 0.0
    bw = 1e9 / slope if slope > 0 else float("inf")
    return AlphaBetaFit(float(intercept), float(bw), float(r2), rel_rms, len(y))


@dataclass(frozen=True)
class CalibrationRow:
    """One (kind, group size): how many samples, their distinct sizes, and the fit (None with
    a ``note`` when it cannot be fitted; a fit with no finite bandwidth has a ``note`` saying
    why). As a dict, a bandwidth that is not finite is ``None`` (JSON has no infinity)."""

    kind: str
    group_size: int
    samples: int
    distinct_sizes: int
    fit: AlphaBetaFit | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        f = self.fit
        return {
            "kind": self.kind, "group_size": self.group_size, "samples": self.samples,
            "distinct_sizes": self.distinct_sizes,
            "latency_ns": None if f is None else f.latency_ns,
            "bw_bytes_per_s": None if f is None or not math.isfinite(f.bw_bytes_per_s)
            else f.bw_bytes_per_s,
            "r2": None if f is None else f.r2, "rel_rms": None if f is None else f.rel_rms,
            "note": self.note,
        }  # fmt: skip


def group_size_of(graph: ExecGraph, pg_idx: int) -> int:
    """Ranks in process group ``pg_idx`` of ``graph``; the world size when unknown."""
    if 0 <= pg_idx < len(graph.process_groups) and graph.process_groups[pg_idx].ranks:
        return len(graph.process_groups[pg_idx].ranks)
    return graph.world_size


#: One measured collective: ``(kind, group_size, size_bytes, time_ns)``.
Sample = tuple[str, int, int, int]


def graph_samples(graph_or_workload: ExecGraph | Workload) -> list[Sample]:
    """The communication tasks of a graph or workload (NCCL kernels, gloo spans) with a known
    kind and a positive size, each as a :data:`Sample` of its transfer time."""
    out: list[Sample] = []
    for g in Workload.of(graph_or_workload).graphs:
        t, c = g.tasks, g.comms
        sel = np.flatnonzero(
            np.isin(t.kind, np.array(COMM_TASK_KINDS, np.int8)) & (t.comm_idx >= 0)
        )
        for task, row in zip(sel.tolist(), t.comm_idx[sel].tolist(), strict=True):
            kind, size = int(c.kind[row]), int(c.size_bytes[row])
            if kind == CommType.UNKNOWN or size <= 0:
                continue
            out.append((CommType(kind).name.lower(), group_size_of(g, int(c.pg_idx[row])), size,
                        max(int(t.dur_ns[task]) - int(c.wait_ns[row]), 0)))  # fmt: skip
    return out


def calibrate_from_graph(graph_or_workload: ExecGraph | Workload) -> list[CalibrationRow]:
    """Fit each (collective kind, group size) of the graph's communication tasks (NCCL
    kernels, gloo spans) with a known kind and a positive size; rows sorted by kind then group
    size."""
    return calibrate_samples(graph_samples(graph_or_workload))


def calibrate_samples(samples: Sequence[Sample]) -> list[CalibrationRow]:
    """Fit each (collective kind, group size) of ``samples`` (measured collectives: a trace's,
    or those ``lumos bench --comms-only`` timed); rows sorted by kind then group size."""
    groups: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for kind, group, size, time_ns in samples:
        xs, ys = groups.setdefault((kind, group), ([], []))
        xs.append(size)
        ys.append(time_ns)
    rows: list[CalibrationRow] = []
    for (name, p), (xs, ys) in sorted(groups.items()):
        distinct = len(set(xs))
        if distinct < 2:
            rows.append(
                CalibrationRow(
                    name,
                    p,
                    len(xs),
                    distinct,
                    None,
                    "one size only: latency and bandwidth not separable",
                )
            )
            continue
        fit = fit_alpha_beta(xs, ys)
        rows.append(CalibrationRow(name, p, len(xs), distinct, fit, _no_bandwidth(fit, ys)))
    return rows


#: The note of a row whose times fall as sizes grow (the line's slope is negative).
FALLING = "time falls as size grows: no bandwidth in these samples (timed on a busy machine?)"
#: The note of a row whose times are all equal.
FLAT = "the same time at every size: latency only, no bandwidth"


def _no_bandwidth(fit: AlphaBetaFit, times_ns: Sequence[int]) -> str:
    """Why ``fit`` has no finite bandwidth (:data:`FALLING`, :data:`FLAT`), or ``""``."""
    if math.isfinite(fit.bw_bytes_per_s):
        return ""
    return FLAT if len(set(times_ns)) == 1 else FALLING
