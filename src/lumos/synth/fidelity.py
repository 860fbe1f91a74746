"""Fidelity of a synthetic or obfuscated workload against its source: rows with bounds.

:func:`compare` replays both workloads, measures each per rank-step
(:func:`lumos.synth.measure.measure`) and returns a :class:`Fidelity`: one :class:`Row` per
metric, with the source's and the candidate's value, their difference and, where one applies,
the bound it must stay within. The workloads may differ in steps and ranks: every value is a
mean per rank-step or a share.

=================================  ==========  ==========================================
rows                               delta       default bound (:class:`Bounds`)
=================================  ==========  ==========================================
``step_time_ns``                   relative    5 %
``breakdown.<part>.share``         points      5 points (0.05)
``class.<class>.per_step``         relative    5 %, for classes holding at least 1 % of the
                                               source's tasks in steps (``marker``, the
                                               graph's own anchors, never); others are info
``comm.bytes_per_step``            relative    2 %
everything else                    relative    none (info rows), shares in points
=================================  ==========  ==========================================

A relative delta is ``(candidate - source) / source`` (0 when both are 0, None when only the
source is 0); a share's delta is ``candidate - source``. A row is ``ok`` when it has no bound
or ``|delta| <= bound``; a bounded row whose delta is None misses its bound.

>>> from lumos.graph.synthetic import GraphBuilder
>>> b = GraphBuilder(); st = b.stream(7); k = b.task(st, "sgemm", 100)
>>> b.annotate("ProfilerStep#1", st, k, k, dur_ns=100)
>>> w = Workload((b.build(),))
>>> fid = compare(w, w)
>>> fid.ok, fid.row("step_time_ns")[1:4]
(True, (100.0, 100.0, 0.0))
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from lumos.errors import ConfigError
from lumos.graph.model import ExecGraph, Workload
from lumos.synth.measure import Measures, measure

__all__ = ["Bounds", "Fidelity", "Row", "compare", "is_share"]


class Row(NamedTuple):
    """One metric of a fidelity report. ``bound`` None: an info row (``ok`` is then True)."""

    metric: str
    source: float | None
    candidate: float | None
    delta: float | None
    bound: float | None
    ok: bool


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """The bounds a candidate must meet (the defaults are issue 19's acceptance)."""

    step_time_rel: float = 0.05
    breakdown_points: float = 0.05
    class_count_rel: float = 0.05
    #: Classes below this share of the source's tasks are info rows.
    class_min_share: float = 0.01
    comm_bytes_rel: float = 0.02

    def __post_init__(self) -> None:
        for name, v in asdict(self).items():
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ConfigError(f"bound {name} must be a finite number >= 0, got {v!r}")


def is_share(metric: str) -> bool:
    """Whether a metric is a share (its delta is in points, not relative)."""
    return metric.endswith(".share")


@dataclass(frozen=True, eq=False)
class Fidelity:
    """The rows of :func:`compare` and what was compared (``source`` / ``candidate``: ranks,
    rank-steps and tasks of each)."""

    rows: tuple[Row, ...]
    bounds: Bounds = field(default_factory=Bounds)
    source: dict[str, int] = field(default_factory=dict)
    candidate: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every bounded row within its bound."""
        return all(r.ok for r in self.rows)

    def failures(self) -> list[Row]:
        """The rows that miss their bound, in row order."""
        return [r for r in self.rows if not r.ok]

    def row(self, metric: str) -> Row:
        """The row of ``metric``; KeyError when there is none."""
        for r in self.rows:
            if r.metric == metric:
                return r
        raise KeyError(metric)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: ``ok``, ``bounds``, ``source``/``candidate`` sizes, ``failures`` (metric
        names) and ``rows`` (each row's fields plus ``delta_kind``: ``relative`` or ``points``)."""
        return {
            "ok": self.ok,
            "bounds": asdict(self.bounds),
            "source": dict(self.source),
            "candidate": dict(self.candidate),
            "failures": [r.metric for r in self.failures()],
            "rows": [
                {**r._asdict(), "delta_kind": "points" if is_share(r.metric) else "relative"}
                for r in self.rows
            ],
        }


#: Slack on a bound for floating-point rounding (a delta of exactly the bound passes).
_EPS = 1e-12


def _delta(metric: str, src: float | None, cand: float | None) -> float | None:
    if src is None or cand is None:
        return None
    if is_share(metric):
        return cand - src
    if src == 0:
        return 0.0 if cand == 0 else None
    return (cand - src) / src


def _bound(metric: str, src: Measures, bounds: Bounds) -> float | None:
    """The bound of ``metric`` given the source's measures (None: info row)."""
    if metric == "step_time_ns":
        return bounds.step_time_rel
    if metric.startswith("breakdown."):
        return bounds.breakdown_points
    if metric == "comm.bytes_per_step":
        return bounds.comm_bytes_rel
    if metric.startswith("class.") and metric != "class.marker.per_step":
        tasks = sum(v or 0.0 for k, v in src.items()
                    if k.startswith("class.") and k != "class.marker.per_step")  # fmt: skip
        share = (src.get(metric) or 0.0) / tasks if tasks else 0.0
        return bounds.class_count_rel if share >= bounds.class_min_share else None
    return None


def _zero_when_absent(metric: str) -> bool:
    """Counts, bytes and shares are 0 where the class or type never occurs; quantiles of no
    message are undefined."""
    return not metric.endswith(("_p50_bytes", "_p90_bytes", "_max_bytes"))


def _row(metric: str, src: Measures, cand: Measures, bounds: Bounds) -> Row:
    default = 0.0 if _zero_when_absent(metric) else None
    s, c = (None if v is None else float(v) for v in (src.get(metric, default),
                                                        cand.get(metric, default)))  # fmt: skip
    delta = _delta(metric, s, c)
    bound = _bound(metric, src, bounds)
    ok = bound is None or (delta is not None and abs(delta) <= bound + _EPS)
    return Row(metric, s, c, delta, bound, ok)


def _metrics(src: Measures, cand: Measures) -> list[str]:
    """Every metric of either side, in the measuring order: the source's, then the
    candidate's extra ones slotted after the last metric of their group."""
    order = list(src)
    for k in cand:
        if k in src:
            continue
        group = k.split(".")[0]
        at = max((i for i, m in enumerate(order) if m.split(".")[0] == group), default=None)
        order.insert(len(order) if at is None else at + 1, k)
    return order


def _size(w: Workload, m: Measures) -> dict[str, int]:
    return {"ranks": len(w.graphs), "rank_steps": int(m["steps"] or 0), "tasks": w.num_tasks}


def compare(
    source: Workload | ExecGraph, candidate: Workload | ExecGraph, *, bounds: Bounds | None = None
) -> Fidelity:
    """Replay ``source`` and ``candidate`` and compare them metric by metric (see the module
    docstring); ``bounds`` defaults to :class:`Bounds`'s."""
    b = Bounds() if bounds is None else bounds
    src_w, cand_w = Workload.of(source), Workload.of(candidate)
    src, cand = measure(src_w), measure(cand_w)
    rows = tuple(_row(k, src, cand, b) for k in _metrics(src, cand))
    return Fidelity(rows, b, _size(src_w, src), _size(cand_w, cand))
