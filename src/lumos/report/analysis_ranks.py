"""Cross-rank analysis tables (stragglers), the critical path by op, and :func:`analyze`.

* ``stragglers``: per collective matched across ranks (see
  :meth:`~lumos.graph.model.Workload.collective_groups`), each participant's arrival (the start
  of its communication task) and how late it came after the earliest one; ``last`` marks the
  straggler that everyone else waited for.
* ``rank_lateness``: per rank, how often it was the straggler and how late it came in total.
* ``memory``: per view, rank and step, the training device's peak allocated bytes, what was
  resident when the step began and what the step allocated, and (where frees pair with their
  allocations) the bytes the step allocated and still held at its peak by phase and by op
  (:func:`lumos.report.memory.memory_table`); no rows without ``[memory]`` events.
* ``critical_path_ops``: per rank of a simulated run, the ops whose tasks lie on the critical
  path to that rank's last task: their tasks' time on the path (``task_ns``), the delays and
  waits on the path just before those tasks (``delay_ns``: CPU overhead before the op, launch
  latency, waiting for a GPU task or a peer; see :class:`~lumos.report.metrics.CriticalPath`),
  and their share of the path's length (the shares of all ops sum to 1).
"""

from __future__ import annotations

from typing import Any

from lumos.graph.model import Workload
from lumos.report.analysis import (
    collectives_table,
    kernels_table,
    ops_table,
    ready_times,
    steps_table,
    streams_table,
)
from lumos.report.memory import memory_table
from lumos.report.metrics import critical_path, critical_path_by_op
from lumos.report.table import Table
from lumos.report.timeline import Timeline, measured_timeline, predicted_timeline
from lumos.sim.result import SimResult

__all__ = [
    "TABLES",
    "analyze",
    "critical_path_ops",
    "rank_lateness_table",
    "stragglers_table",
]

#: The tables :func:`analyze` returns, in order.
TABLES = ("steps", "kernels", "ops", "streams", "collectives", "stragglers", "rank_lateness",
          "critical_path_ops", "memory")  # fmt: skip
_MEMORY_COLS = ("view", "rank", "step", "kind", "name", "bytes")

_CP_COLS = ("view", "rank", "op", "tasks", "task_ns", "delay_ns", "share")


def stragglers_table(tl: Timeline) -> Table:
    """Per collective with two or more traced participants and per participant, in collective
    order: ``collective`` (its position among the matched collectives), ``name``, ``pg``,
    ``seq``, ``rank``, ``arrival_ns`` (when the rank was ready to start it, see
    :func:`~lumos.report.analysis.ready_times`; from the earliest window start of the ranks),
    ``late_ns`` (after the earliest arrival), ``last`` (1 for the straggler: the latest
    arrival, the first such rank on a tie; none when all arrive at once)."""
    cols = ("view", "collective", "name", "pg", "seq", "rank", "arrival_ns", "late_ns", "last")
    rows: list[tuple[Any, ...]] = []
    groups = tl.workload.collective_groups()
    origin = min(w[0] for w in tl.windows)
    ready = [ready_times(g, s, e) for g, s, e in zip(tl.graphs, tl.starts, tl.ends, strict=True)]
    n = 0
    for k in range(groups.num_groups):
        lo, hi = int(groups.indptr[k]), int(groups.indptr[k + 1])
        if hi - lo < 2:
            continue
        gis = groups.member_graph[lo:hi].tolist()
        tasks = groups.member_task[lo:hi].tolist()
        arrive = [int(ready[gi][ti]) for gi, ti in zip(gis, tasks, strict=True)]
        first, latest = min(arrive), max(arrive)
        last_at = arrive.index(latest) if latest > first else -1
        g0 = tl.graphs[gis[0]]
        ci = int(g0.tasks.comm_idx[tasks[0]])
        pg = g0.process_group_name(int(g0.comms.pg_idx[ci])) if ci >= 0 else ""
        seq = int(g0.comms.seq_id[ci]) if ci >= 0 else -1
        for j, (gi, ti) in enumerate(zip(gis, tasks, strict=True)):
            g = tl.graphs[gi]
            rows.append((tl.view, n, g.task_name(ti), pg, seq, g.rank, arrive[j] - origin,
                         arrive[j] - first, int(j == last_at)))  # fmt: skip
        n += 1
    return Table("stragglers", cols, rows)


def rank_lateness_table(stragglers: Table, tl: Timeline) -> Table:
    """Per rank (slowest first): ``collectives`` it joined, ``times_last`` (straggler count),
    ``late_ns`` total, ``max_late_ns``, ``mean_late_ns``."""
    cols = ("view", "rank", "collectives", "times_last", "late_ns", "max_late_ns",
            "mean_late_ns")  # fmt: skip
    acc: dict[int, list[int]] = {g.rank: [0, 0, 0, 0] for g in tl.graphs}
    for r, late, last in zip(stragglers.column("rank"), stragglers.column("late_ns"),
                             stragglers.column("last"), strict=True):  # fmt: skip
        a = acc[r]
        a[0] += 1
        a[1] += last
        a[2] += late
        a[3] = max(a[3], late)
    rows = [(tl.view, r, a[0], a[1], a[2], a[3], a[2] / a[0] if a[0] else 0.0)
            for r, a in acc.items()]  # fmt: skip
    rows.sort(key=lambda row: (-row[4], row[1]))
    return Table("rank_lateness", cols, rows)


def critical_path_ops(result: SimResult, top: int | None = None) -> Table:
    """Per rank, the ops on the critical path to its last task, longest first (at most
    ``top`` per rank): ``op``, ``tasks``, ``task_ns``, ``delay_ns``, ``share`` (see
    :func:`~lumos.report.metrics.critical_path_by_op`)."""
    rows: list[tuple[Any, ...]] = []
    graphs = result.graphs
    for gi, g in enumerate(graphs):
        cp = critical_path(result, gi if len(graphs) > 1 else None)
        ops = critical_path_by_op(result, cp, gi)[:top]
        rows.extend(("predicted", g.rank, *(o[c] for c in _CP_COLS[2:])) for o in ops)
    return Table("critical_path_ops", _CP_COLS, rows)


def _concat(name: str, parts: list[Table]) -> Table:
    return Table(name, parts[0].columns, [r for p in parts for r in p.rows])


def analyze(workload: Workload, result: SimResult | None = None) -> dict[str, Table]:
    """Every table of :data:`TABLES`, for the recording (``view`` measured) and, given a
    simulation of (an edited copy of) ``workload``, for it too (``view`` predicted).
    ``critical_path_ops`` needs the simulation (it is empty without one)."""
    views = [measured_timeline(workload)]
    if result is not None:
        views.append(predicted_timeline(result))
    out: dict[str, list[Table]] = {n: [] for n in TABLES}
    for tl in views:
        out["steps"].append(steps_table(tl))
        out["kernels"].append(kernels_table(tl))
        out["ops"].append(ops_table(tl))
        out["streams"].append(streams_table(tl))
        out["collectives"].append(collectives_table(tl))
        st = stragglers_table(tl)
        out["stragglers"].append(st)
        out["rank_lateness"].append(rank_lateness_table(st, tl))
        rows = memory_table(tl.view, tl.graphs, tl.starts, tl.ends)
        out["memory"].append(Table("memory", _MEMORY_COLS, rows))
    if result is not None:
        out["critical_path_ops"].append(critical_path_ops(result))
    else:
        out["critical_path_ops"].append(Table("critical_path_ops", _CP_COLS, []))
    return {n: _concat(n, parts) for n, parts in out.items()}
