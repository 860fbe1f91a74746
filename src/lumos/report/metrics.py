"""Metrics of a run (recorded or simulated): pure functions on interval arrays.

* :func:`breakdown`: four-way split of a window into exposed compute, overlapped, exposed
  communication and other (idle / CPU-bound) time, by interval algebra over the union of
  compute intervals (non-communication GPU tasks) and of communication intervals (COMM tasks).
* :func:`sm_utilization`: per bin (1 ms by default), the share of the bin during which at least
  one stream of a device is busy.
* :func:`critical_path`: walk back from the last-ending task of a simulated run along whatever
  determined each start, and share the path by task kind (plus delays).

Graph-aware helpers (:func:`gpu_intervals`, :func:`graph_breakdown`, :func:`graph_sm_utilization`)
pick the right tasks from an :class:`~lumos.graph.model.ExecGraph`; they take start/end arrays,
so the same call measures the trace (``ts_ns``, ``ts_ns + dur_ns``) and a replay
(``SimResult.starts(gi)``, ``SimResult.ends(gi)``).

>>> import numpy as np
>>> b = breakdown(np.array([0, 5]), np.array([10, 15]), np.array([False, True]), 0, 20)
>>> (b.exposed_compute_ns, b.overlapped_ns, b.exposed_comm_ns, b.other_ns)
(5, 5, 5, 5)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_tasks import MARK, START
from lumos.graph.model import GPU_TASK_KINDS, DepKind, ExecGraph, ProcessorKind, TaskKind
from lumos.report._kernels import walk_path
from lumos.report.memory import step_memory
from lumos.report.ops import task_ops
from lumos.report.time_classes import step_time_classes
from lumos.report.timeline import measured_window, predicted_window
from lumos.sim import _kernel
from lumos.sim.result import SimResult

__all__ = [
    "GAP_CAUSES",
    "Breakdown",
    "CriticalPath",
    "breakdown",
    "critical_path",
    "critical_path_by_kernel",
    "critical_path_by_op",
    "critical_path_summary",
    "gpu_intervals",
    "graph_breakdown",
    "graph_sm_utilization",
    "interval_union",
    "replay_summary",
    "sm_utilization",
    "union_length",
]

_GPU = np.array(GPU_TASK_KINDS, np.int8)


def interval_union(
    start: NDArray[Any], end: NDArray[Any]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Merge ``[start, end)`` intervals into sorted, disjoint ones (empty intervals dropped).

    >>> s, e = interval_union(np.array([5, 0, 12]), np.array([10, 7, 12]))
    >>> s.tolist(), e.tolist()
    ([0], [10])
    """
    s = np.asarray(start, dtype=np.int64)
    e = np.asarray(end, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    starts = s[new]
    idx = np.flatnonzero(new)
    ends = reach[np.r_[idx[1:] - 1, len(s) - 1]]
    return starts, ends


def union_length(start: NDArray[Any], end: NDArray[Any]) -> int:
    """Total length covered by the union of the intervals."""
    s, e = interval_union(start, end)
    return int((e - s).sum())


def _clip(
    start: NDArray[Any], end: NDArray[Any], t0: int, t1: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    return (
        np.clip(np.asarray(start, dtype=np.int64), t0, t1),
        np.clip(np.asarray(end, dtype=np.int64), t0, t1),
    )


@dataclass(frozen=True)
class Breakdown:
    """Four parts of a window; they sum to ``window_ns``."""

    window_ns: int
    exposed_compute_ns: int
    overlapped_ns: int
    exposed_comm_ns: int
    other_ns: int

    def to_dict(self) -> dict[str, int]:
        return {
            "exposed_compute_ns": self.exposed_compute_ns,
            "overlapped_ns": self.overlapped_ns,
            "exposed_comm_ns": self.exposed_comm_ns,
            "other_ns": self.other_ns,
        }


def breakdown(
    start_ns: NDArray[Any], end_ns: NDArray[Any], is_comm: NDArray[np.bool_], t0: int, t1: int
) -> Breakdown:
    """Split ``[t0, t1)`` by the GPU intervals ``[start_ns, end_ns)``.

    compute = union of intervals with ``is_comm`` False, comm = union of those with True;
    overlapped = |compute ∩ comm|, exposed compute = |compute \\ comm|, exposed comm =
    |comm \\ compute|, other = window - |compute ∪ comm|.
    """
    t0, t1 = int(t0), int(t1)
    window = max(t1 - t0, 0)
    s, e = _clip(start_ns, end_ns, t0, t1)
    m = np.asarray(is_comm, dtype=bool)
    compute = union_length(s[~m], e[~m])
    comm = union_length(s[m], e[m])
    both = union_length(s, e)
    overlapped = compute + comm - both
    return Breakdown(
        window_ns=window,
        exposed_compute_ns=compute - overlapped,
        overlapped_ns=overlapped,
        exposed_comm_ns=comm - overlapped,
        other_ns=window - both,
    )


#: Most SM-utilization bins per series; a longer window gets wider bins (memory stays bounded
#: when a trace spans days).
MAX_SM_BINS = 100_000


def sm_utilization(
    start_ns: NDArray[Any], end_ns: NDArray[Any], t0: int, t1: int, bin_ns: int = 1_000_000
) -> NDArray[np.float64]:
    """Per bin of ``[t0, t1)`` (the last one may be shorter), the share of the bin covered by
    at least one interval. Pass the intervals of one device's streams."""
    if bin_ns <= 0:
        raise ValueError("bin_ns must be positive")
    t0, t1 = int(t0), int(t1)
    if t1 <= t0:
        return np.zeros(0, dtype=np.float64)
    s, e = interval_union(*_clip(start_ns, end_ns, t0, t1))
    edges = np.r_[np.arange(t0, t1, bin_ns, dtype=np.int64), t1]
    cum = np.r_[0, np.cumsum(e - s)]

    def covered(x: NDArray[np.int64]) -> NDArray[np.int64]:
        k = np.searchsorted(s, x, side="right") - 1
        kk = np.maximum(k, 0)
        inside = np.minimum(x, e[kk]) - s[kk] if len(s) else np.zeros_like(x)
        return np.where(k >= 0, cum[kk] + inside, 0)

    busy = np.diff(covered(edges))
    return busy / np.diff(edges)


def gpu_intervals(
    graph: ExecGraph,
    start_ns: NDArray[Any],
    end_ns: NDArray[Any],
    device: int | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """``(start, end, is_comm)`` of the GPU tasks of ``graph`` (optionally of one device)."""
    t = graph.tasks
    sel = np.isin(t.kind, _GPU)
    if device is not None:
        sel &= graph.processors.device[t.processor_idx] == device
    s = np.asarray(start_ns, dtype=np.int64)[sel]
    e = np.asarray(end_ns, dtype=np.int64)[sel]
    return s, e, t.kind[sel] == TaskKind.COMM


def graph_breakdown(
    graph: ExecGraph,
    start_ns: NDArray[Any],
    end_ns: NDArray[Any],
    t0: int,
    t1: int,
    device: int | None = None,
) -> Breakdown:
    """:func:`breakdown` of the GPU tasks of ``graph`` with the given per-task times.

    A CPU-only graph (gloo) has no GPU tasks: its host work stands in, CPU ops as compute and
    host-side collective spans (gloo workers) as communication, so the breakdown still says
    how much communication the host could hide.
    """
    s, e, comm = gpu_intervals(graph, start_ns, end_ns, device)
    if len(s) == 0:
        t = graph.tasks
        sel = np.isin(t.kind, (int(TaskKind.CPU_OP), int(TaskKind.CPU_COMM))) & (t.dur_ns > 0)
        s = np.asarray(start_ns, dtype=np.int64)[sel]
        e = np.asarray(end_ns, dtype=np.int64)[sel]
        comm = t.kind[sel] == TaskKind.CPU_COMM
    return breakdown(s, e, comm, t0, t1)


def graph_sm_utilization(
    graph: ExecGraph,
    start_ns: NDArray[Any],
    end_ns: NDArray[Any],
    t0: int,
    t1: int,
    device: int | None = None,
    bin_ns: int = 1_000_000,
) -> NDArray[np.float64]:
    """:func:`sm_utilization` of the GPU tasks of ``graph`` (one device, or the first device
    that has a stream when ``device`` is None)."""
    if device is None:
        p = graph.processors
        streams = np.flatnonzero(p.kind == ProcessorKind.STREAM)
        device = int(p.device[streams].min()) if len(streams) else -1
    s, e, _ = gpu_intervals(graph, start_ns, end_ns, device)
    return sm_utilization(s, e, t0, t1, bin_ns)


# ---------------------------------------------------------------------------------------------
# Critical path

#: What explains a delay on the critical path, as :attr:`CriticalPath.gap_cause` indexes it:
#: the dependency kinds (edge delays), then ``processor``, ``wait`` and ``start``.
GAP_CAUSES: tuple[str, ...] = (*(d.name.lower() for d in DepKind), "processor", "wait", "start")


@dataclass(frozen=True)
class CriticalPath:
    """The chain of tasks that determined the makespan, latest first.

    ``tasks`` are global task indices of the result (graph ``graph_of[i]``, local index
    ``tasks[i] - result.task_offsets[graph_of[i]]``); ``share`` maps each task kind's lower-case
    name, and ``"delay"`` (edge delays and waiting), to its share of ``length_ns``. ``delay_ns``
    splits the delay by what explains it: a dependency kind's lower-case name (edge delays,
    e.g. ``intra_thread`` = CPU overhead between ops, ``launch`` = launch latency), or
    ``"processor"`` / ``"wait"`` / ``"start"`` (time before the first task). ``task_ns[i]``
    is the part of ``tasks[i]``'s run that is on the path (its start to the next task's start),
    ``gap_ns[i]`` the delay or wait on the path just before it (they all sum to ``length_ns``)
    and ``gap_cause[i]`` what explains that gap, an index into :data:`GAP_CAUSES` (-1: none
    of them, as in ``delay_ns``).
    """

    tasks: NDArray[np.int64]
    graph_of: NDArray[np.int64]
    length_ns: int
    kind_ns: dict[str, int]
    delay_ns: dict[str, int] = field(default_factory=dict)
    task_ns: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gap_ns: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    gap_cause: NDArray[np.int16] = field(default_factory=lambda: np.zeros(0, np.int16))

    @property
    def share(self) -> dict[str, float]:
        total = self.length_ns or 1
        return {k: v / total for k, v in self.kind_ns.items()}


def critical_path(result: SimResult, gi: int | None = None) -> CriticalPath:
    """Critical path of a simulated run (see :class:`CriticalPath`), to the last task of the
    whole run or, with ``gi``, of that rank (it may cross ranks through collectives); its
    parts sum to that task's end."""
    n = len(result.start_ns)
    names = [k.name.lower() for k in TaskKind]
    kind_ns = dict.fromkeys([*names, "delay"], 0)
    labels = [d.name.lower() for d in DepKind]
    delay_ns = dict.fromkeys([*labels, "processor", "wait", "start"], 0)
    if n == 0:
        return CriticalPath(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, kind_ns, delay_ns)
    edge_src, edge_kind, kinds = result.global_tables()
    if gi is None:
        last = int(np.argmax(result.end_ns))
    else:
        lo, hi = int(result.task_offsets[gi]), int(result.task_offsets[gi + 1])
        last = (
            lo + int(np.argmax(result.end_ns[lo:hi])) if hi > lo else int(np.argmax(result.end_ns))
        )
    path, gap, via, via_ref, k = walk_path(
        np.ascontiguousarray(result.start_ns, dtype=np.int64),
        np.ascontiguousarray(result.end_ns, dtype=np.int64),
        np.ascontiguousarray(result.cause_kind, dtype=np.int8),
        np.ascontiguousarray(result.cause_ref, dtype=np.int64),
        np.ascontiguousarray(edge_src, dtype=np.int64),
        last,
    )
    path, gap, via, via_ref = path[:k], gap[:k], via[:k], via_ref[:k]
    dur = result.end_ns[path] - result.start_ns[path]
    # a negative gap (kernel starting inside its launch call): only the part of the source
    # before the successor started is on the path
    overlap = np.maximum(-gap, 0)
    dur[1:] -= overlap[:-1]
    gap = np.maximum(gap, 0)
    is_edge = via == _kernel.CAUSE_EDGE
    per_dep = np.bincount(edge_kind[via_ref[is_edge]], weights=gap[is_edge], minlength=len(labels))
    for i, name in enumerate(labels):
        delay_ns[name] = int(per_dep[i])
    cause = np.full(len(via), -1, dtype=np.int16)
    cause[is_edge] = edge_kind[via_ref[is_edge]]
    for label, code in (("processor", _kernel.CAUSE_PROCESSOR), ("wait", _kernel.CAUSE_WAIT),
                        ("start", _kernel.CAUSE_NONE)):  # fmt: skip
        hit = via == code
        cause[hit] = GAP_CAUSES.index(label)
        delay_ns[label] = int(gap[hit].sum())
    per_kind = np.bincount(kinds[path], weights=dur, minlength=len(names))
    for i, name in enumerate(names):
        kind_ns[name] = int(per_kind[i])
    kind_ns["delay"] = int(gap.sum())
    graph_of = np.searchsorted(result.task_offsets, path, side="right") - 1
    total = int(result.end_ns[last])
    return CriticalPath(
        path,
        graph_of.astype(np.int64),
        total,
        kind_ns,
        delay_ns,
        dur.astype(np.int64),
        gap.astype(np.int64),
        cause,
    )


def critical_path_by_op(result: SimResult, cp: CriticalPath, gi: int) -> list[dict[str, Any]]:
    """The critical path ``cp`` (to a task of graph ``gi``) by op, longest first: ``{op, tasks,
    task_ns, delay_ns, share}``. A task's op is the one :func:`lumos.report.ops.task_ops` gives;
    ``delay_ns`` is the delay or wait on the path just before the op's tasks; ``share`` is
    ``(task_ns + delay_ns) / length_ns`` (the shares sum to 1). An op on another rank (reached
    through a collective) is named ``op (rank r)``; ``(before <step>)`` is the wait for a step
    to begin (a rank that starts late), ``(start)`` the time before a processor's first task."""
    graphs = result.graphs
    acc: dict[str, list[int]] = {}
    graph_of = np.asarray(cp.graph_of)
    for of in np.unique(graph_of).tolist():
        g = graphs[of]
        sel = np.flatnonzero(graph_of == of)
        local = np.asarray(cp.tasks)[sel] - int(result.task_offsets[of])
        ops = task_ops(g)[0][local].astype(np.int64)
        ns = np.asarray(cp.task_ns, dtype=np.int64)[sel]
        gap = np.asarray(cp.gap_ns, dtype=np.int64)[sel]
        suffix = "" if of == gi else f" (rank {g.rank})"
        # per op at once (sorted by op, summed per run of equal ops: exact int64 sums)
        order = np.argsort(ops, kind="stable")
        o_sorted = ops[order]
        cut = np.flatnonzero(np.r_[True, o_sorted[1:] != o_sorted[:-1]])
        counts = np.diff(np.r_[cut, len(ops)])
        task_sum = np.add.reduceat(ns[order], cut) if len(ops) else ns[:0]
        gap_sum = np.add.reduceat(gap[order], cut) if len(ops) else gap[:0]
        for o, c, tn, gn in zip(o_sorted[cut].tolist(), counts.tolist(), task_sum.tolist(),
                                gap_sum.tolist(), strict=True):  # fmt: skip
            if o >= 0:
                parts = [(g.names[o], c, tn, gn)]
            else:  # not an op: named per task (step markers, anchors), few of them
                hit = ops == o
                named = np.array([_not_an_op(g, int(x)) for x in local[hit].tolist()], object)
                parts = [(n, int((named == n).sum()), int(ns[hit][named == n].sum()),
                          int(gap[hit][named == n].sum())) for n in sorted(set(named))]  # fmt: skip
            for name, count, task_ns, delay_ns in parts:
                a = acc.setdefault(name + suffix, [0, 0, 0])
                a[0] += count
                a[1] += task_ns
                a[2] += delay_ns
    length = max(cp.length_ns, 1)
    ranked = sorted(acc.items(), key=lambda kv: (-kv[1][1] - kv[1][2], kv[0]))
    return [
        {
            "op": name,
            "tasks": a[0],
            "task_ns": a[1],
            "delay_ns": a[2],
            "share": (a[1] + a[2]) / length,
        }
        for name, a in ranked
        if a[1] + a[2] > 0
    ]


def critical_path_by_kernel(result: SimResult, cp: CriticalPath, gi: int) -> list[dict[str, Any]]:
    """The GPU tasks (kernels, copies, collectives) on the critical path ``cp`` by name, longest
    first: ``{kernel, tasks, task_ns, delay_ns, share}``, as :func:`critical_path_by_op` counts
    them (a kernel on another rank is ``name (rank r)``). The shares sum to the GPU tasks' part
    of the path, not to 1: the rest is CPU work and delay before it.
    """
    acc: dict[str, list[int]] = {}
    graph_of = np.asarray(cp.graph_of)
    for of in np.unique(graph_of).tolist():
        g = result.graphs[of]
        sel = np.flatnonzero(graph_of == of)
        local = np.asarray(cp.tasks)[sel] - int(result.task_offsets[of])
        gpu = np.isin(g.tasks.kind[local], _GPU)
        names = g.tasks.name_idx[local[gpu]].astype(np.int64)
        ns, gap = np.asarray(cp.task_ns)[sel][gpu], np.asarray(cp.gap_ns)[sel][gpu]
        for n in np.unique(names).tolist():
            hit = names == n
            name = g.names[n] if of == gi else f"{g.names[n]} (rank {g.rank})"
            a = acc.setdefault(name, [0, 0, 0])
            a[0] += int(hit.sum())
            a[1] += int(ns[hit].sum())
            a[2] += int(gap[hit].sum())
    length = max(cp.length_ns, 1)
    ranked = sorted(acc.items(), key=lambda kv: (-kv[1][1] - kv[1][2], kv[0]))
    return [
        {"kernel": name, "tasks": a[0], "task_ns": a[1], "delay_ns": a[2],
         "share": (a[1] + a[2]) / length}
        for name, a in ranked
        if a[1] + a[2] > 0
    ]  # fmt: skip


def _not_an_op(g: ExecGraph, task: int) -> str:
    ev = int(g.tasks.event_idx[task])
    if ev == MARK:  # the zero-cost task where a step begins: the path waited for the step
        return f"(before {g.task_name(task)})"
    return "(start)" if ev == START else "(unattributed)"


# ---------------------------------------------------------------------------------------------
# Everything a replay report shows, in one JSON-ready dict


#: Ops (and kernels) on the critical path that a replay summary lists per rank.
CRITICAL_PATH_TOP_OPS = 10


def critical_path_summary(result: SimResult, gi: int) -> dict[str, Any]:
    """The critical-path entries of :func:`replay_summary` for graph ``gi``."""
    cp = critical_path(result, gi if len(result.graphs) > 1 else None)
    return {
        "critical_path": cp.share,
        "critical_path_ns": cp.kind_ns,
        "critical_path_delay_ns": cp.delay_ns,
        "critical_path_ops": critical_path_by_op(result, cp, gi)[:CRITICAL_PATH_TOP_OPS],
        "critical_path_kernels": critical_path_by_kernel(result, cp, gi)[:CRITICAL_PATH_TOP_OPS],
    }


def replay_summary(
    result: SimResult,
    gi: int = 0,
    bin_ns: int = 1_000_000,
    recorded: ExecGraph | None = None,
) -> dict[str, Any]:
    """Measured vs predicted for graph ``gi`` of a replay, JSON-ready::

    steps          [{name, measured_ns, predicted_ns, error,        (STEP annotations)
                     measured_peak_memory_bytes, predicted_peak_memory_bytes, memory}]
                   (peaks None without [memory] events; see lumos.report.memory)
    memory         {device, levels_recorded, capacity_bytes, ...} or {device: None, note}
    error          {mean_abs, max_abs}                           (over steps; None if none)
    window_ns      {measured: [t0, t1], predicted: [t0, t1]}     (first step start..last end,
                                                                  or the whole run)
    breakdown      {measured: {...4 parts}, predicted: {...}}    (over the windows)
    sm_util        {bin_ns, device, measured: [...], predicted: [...]}
    critical_path  {kind: share} (task kinds + "delay"), critical_path_ns
    critical_path_ops  [{op, tasks, task_ns, delay_ns, share}]   (the top ops on it, see
                                                                  :func:`critical_path_by_op`)
    critical_path_kernels  [{kernel, tasks, ...}]              (the top GPU tasks on it, see
                                                                  :func:`critical_path_by_kernel`)
    time_classes   [{name, task_ns, overhead_ns, wait_ns, unexplained_ns}] per step (recorded,
                   on the step's thread; see :mod:`lumos.report.time_classes`)
    calibration    what the build measured: launch_latency_ns, gpu_clock_offset_ns
    makespan_ns, diagnostics

    ``recorded`` is the graph as built from the trace when ``result`` simulated an edited copy
    (same tasks): the measured side is taken from it.
    """
    g = result.graphs[gi]
    t = g.tasks
    steps = result.steps(gi)
    # measured times come from the recording, not from an edited graph (--scale)
    rec = t if recorded is None else recorded.tasks
    rec_s, rec_e = rec.ts_ns, rec.ts_ns + rec.dur_ns
    sim_s, sim_e = result.starts(gi), result.ends(gi)
    measured = measured_window(g if recorded is None else recorded)
    predicted = predicted_window(result, gi)
    p = g.processors
    streams = np.flatnonzero(p.kind == ProcessorKind.STREAM)
    device = int(p.device[streams].min()) if len(streams) else -1
    errors = [abs(s["error"]) for s in steps if s["error"] is not None]
    span = max(int(measured[1]) - int(measured[0]), int(predicted[1]) - int(predicted[0]), 0)
    bin_ns = max(bin_ns, -(-span // MAX_SM_BINS))  # wider bins past MAX_SM_BINS: bounded output
    lo, hi = result.annotation_spans(gi)
    per_step, memory = step_memory(
        g, g if recorded is None else recorded, sim_s, sim_e, lo, hi,
        windows=((int(measured[0]), int(measured[1])), (int(predicted[0]), int(predicted[1]))),
        bin_ns=bin_ns,
    )  # fmt: skip
    for step, mem in zip(steps, per_step, strict=True):
        step.update(mem)
    return {
        "rank": g.rank,
        "steps": steps,
        "error": {
            "mean_abs": float(np.mean(errors)) if errors else None,
            "max_abs": float(np.max(errors)) if errors else None,
        },
        "window_ns": {"measured": list(measured), "predicted": list(predicted)},
        "breakdown": {
            "measured": graph_breakdown(g, rec_s, rec_e, *measured).to_dict(),
            "predicted": graph_breakdown(g, sim_s, sim_e, *predicted).to_dict(),
        },
        "sm_util": {
            "bin_ns": bin_ns,
            "device": device,
            "measured": graph_sm_utilization(g, rec_s, rec_e, *measured, device, bin_ns).tolist(),
            "predicted": graph_sm_utilization(g, sim_s, sim_e, *predicted, device, bin_ns).tolist(),
        },
        **critical_path_summary(result, gi),
        "makespan_ns": result.makespan_ns,
        "time_classes": step_time_classes(g),
        "calibration": dict(g.calibration),
        "memory": memory,
        "diagnostics": {**g.diagnostics.to_dict(), **result.diagnostics.to_dict()},
    }
