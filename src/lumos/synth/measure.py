"""What a workload looks like per step: the numbers a fidelity report compares.

:func:`measure` replays a workload (:func:`lumos.sim.simulate`) and describes its steps in
name-free terms, so that two workloads of different sizes (steps, ranks) and different names
(a synthetic sample, an obfuscated copy) can be compared: every count is a mean per *rank-step*
(one rank's one step), every time a mean over rank-steps, every share a fraction of the steps'
time.

Steps are the graphs' STEP annotations (ProfilerStep), as simulated; a graph without one is one
step from 0 to its last task's end. Which tasks belong to a step is what the synthetic models
are fitted on (:func:`lumos.synth.skeleton.step_of_tasks`), judged on the simulated run: a CPU
task by its predicted start (a step's window runs from its start to the next step's start, the
last one to its end), a GPU task by the step of the runtime call that launched it (its
``LAUNCH`` edge), so that a GPU running behind the CPU still does this step's work. Tasks
outside every step (set-up before the first step, tear-down after the last, the processors'
``<start>`` anchors) are not counted.

=====================================  ======================================================
metric                                 value
=====================================  ======================================================
``ranks``, ``steps``                   graphs, and rank-steps (one rank's one step) over them
``step_time_ns``                       mean predicted step duration
``measured_step_time_ns``              mean recorded step duration (what the trace says)
``breakdown.<part>.share``             exposed_compute / overlapped / exposed_comm / other,
                                       summed over the ranks' predicted windows (first step
                                       start to last step end) over the windows' length
``class.<class>.per_step``             tasks of each :data:`~lumos.synth.classes.CLASSES` class
``comm.bytes_per_step``                message bytes of communication tasks (sizes known)
``comm.<type>.count_per_step``         per collective type (``all_reduce``, ``send``...);
``comm.<type>.bytes_per_step``         messages of unknown size count but carry no bytes
``comm.<type>.size_<q>_bytes``         ``p50``, ``p90``, ``max`` of the type's known sizes
``critical_path.cause.<c>.share``      share of the critical path inside steps: ``task``
                                       (running tasks) or a delay's cause (:data:`GAP_CAUSES`)
``critical_path.class.<class>.share``  share of it spent running tasks of that class
``graph.nodes_per_step``               tasks; ``graph.edges_per_step``: fixed dependencies out
                                       of them
``graph.depth``                        longest dependency chain inside a step, in tasks (mean)
``graph.fan_out_mean``, ``_max``       out-degree of a step's tasks (fixed dependencies)
=====================================  ======================================================
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.errors import GraphError
from lumos.graph._order import chain_depth as _chain_depth
from lumos.graph.algorithms import topological_order
from lumos.graph.build_tasks import START
from lumos.graph.model import (
    COMM_TASK_KINDS,
    AnnotationKind,
    CommType,
    ExecGraph,
    Workload,
)
from lumos.report.metrics import GAP_CAUSES, critical_path, graph_breakdown
from lumos.report.timeline import measured_window, predicted_window
from lumos.sim import simulate
from lumos.sim.result import SimResult
from lumos.synth.classes import CLASSES, task_classes
from lumos.synth.skeleton import step_of_tasks

__all__ = ["BREAKDOWN_PARTS", "Measures", "chain_depth", "measure", "task_steps"]

#: The four-way breakdown ``lumos replay`` prints, in its order.
BREAKDOWN_PARTS = ("exposed_compute", "overlapped", "exposed_comm", "other")
#: Quantiles of message sizes reported per collective type (``method="lower"``: a real size).
SIZE_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("max", 1.0))

_COMM = np.array(COMM_TASK_KINDS, dtype=np.int8)

#: Metric name -> value (None: not defined here, e.g. a quantile of no message).
Measures = dict[str, float | None]


def _step_spans(result: SimResult, gi: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Predicted ``(start, end)`` of graph ``gi``'s steps, by start; ``([0], [end of its last
    task])`` when it has none."""
    a = result.graphs[gi].annotations
    lo, hi = result.annotation_spans(gi)
    has = (a.kind == int(AnnotationKind.STEP)) & (a.first_task_idx >= 0)
    if not has.any():
        ends = result.ends(gi)
        return np.zeros(1, np.int64), np.array([int(ends.max()) if len(ends) else 0], np.int64)
    order = np.argsort(lo[has], kind="stable")
    return lo[has][order], hi[has][order]


def task_steps(result: SimResult, gi: int) -> tuple[NDArray[np.int64], int]:
    """Per task of graph ``gi``, its step (0-based, in time order; -1 for none) and the number
    of steps: :func:`lumos.synth.skeleton.step_of_tasks`, the rule synthetic models are fitted
    with, applied to the simulated run (each task's and step's predicted start instead of the
    recorded one). A graph without a step is one step of every task but the ``<start>``
    anchors."""
    g = result.graphs[gi]
    a = g.annotations
    lo, hi = result.annotation_spans(gi)
    held = a.first_task_idx >= 0  # a span of no task has no predicted time
    if not (a.kind[held] == int(AnnotationKind.STEP)).any():
        return np.where(g.tasks.event_idx == START, -1, 0).astype(np.int64), 1
    timed = g.replace(
        tasks=g.tasks.replace(ts_ns=result.starts(gi)),
        annotations=a.take(held).replace(ts_ns=lo[held], dur_ns=(hi - lo)[held]),
    )
    step = step_of_tasks(timed).astype(np.int64)
    return step, max(int(step.max()) + 1 if len(step) else 0, 1)


def chain_depth(graph: ExecGraph, step: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per task, the number of tasks on the longest chain of fixed dependencies that ends at it
    and stays inside its step (``step[src] == step[dst]``): 1 for a task with no predecessor
    in its step. Raises :class:`~lumos.errors.GraphError` on a cycle."""
    order = topological_order(graph)
    if len(order) < graph.num_tasks:
        raise GraphError("the graph has a dependency cycle: no longest chain")
    out_ptr, out_edge = graph.csr_out()
    return _chain_depth(
        np.ascontiguousarray(order, dtype=np.int64),
        np.ascontiguousarray(out_ptr, dtype=np.int64),
        np.ascontiguousarray(out_edge, dtype=np.int64),
        np.ascontiguousarray(graph.edges.dst, dtype=np.int32),
        np.ascontiguousarray(step, dtype=np.int64),
    )


def _quantiles(sizes: NDArray[np.int64]) -> list[float | None]:
    if not len(sizes):
        return [None] * len(SIZE_QUANTILES)
    return [float(np.quantile(sizes, q, method="lower")) for _, q in SIZE_QUANTILES]


def measure(workload: Workload | ExecGraph, result: SimResult | None = None) -> Measures:
    """The metrics of the module docstring, in that order (a class, collective type or cause
    that never occurs has no entry). ``result`` is the workload's simulation when the caller
    has one (else it is simulated here)."""
    w = Workload.of(workload)
    res = simulate(w) if result is None else result
    n_cls = len(CLASSES)
    counts = np.zeros(n_cls, np.int64)
    parts = np.zeros(len(BREAKDOWN_PARTS), np.int64)
    window_ns = 0
    step_ns: list[int] = []
    measured_ns: list[int] = []
    comm_kind: list[NDArray[np.int64]] = []
    comm_size: list[NDArray[np.int64]] = []
    nodes = edges = fan_max = depth_sum = rank_steps = 0
    steps_of: list[NDArray[np.int64]] = []
    classes_of: list[NDArray[np.int16]] = []
    for gi, g in enumerate(w.graphs):
        lo, hi = _step_spans(res, gi)
        step_ns.extend((hi - lo).tolist())
        a = g.annotations
        st = (a.kind == int(AnnotationKind.STEP)) & (a.first_task_idx >= 0)
        if st.any():
            measured_ns.extend(a.dur_ns[st].tolist())
        else:
            m0, m1 = measured_window(g)
            measured_ns.append(m1 - m0)
        step, n_steps = task_steps(res, gi)
        rank_steps += n_steps
        cls = task_classes(g)
        steps_of.append(step)
        classes_of.append(cls)
        on = step >= 0
        counts += np.bincount(cls[on], minlength=n_cls)
        t0, t1 = predicted_window(res, gi)
        b = graph_breakdown(g, res.starts(gi), res.ends(gi), t0, t1).to_dict()
        parts += np.array([b[f"{p}_ns"] for p in BREAKDOWN_PARTS], np.int64)
        window_ns += max(t1 - t0, 0)
        t = g.tasks
        comm = on & np.isin(t.kind, _COMM) & (t.comm_idx >= 0)
        comm_kind.append(g.comms.kind[t.comm_idx[comm]].astype(np.int64))
        comm_size.append(g.comms.size_bytes[t.comm_idx[comm]])
        out_deg = np.bincount(g.edges.src, minlength=g.num_tasks)[on]
        nodes += int(on.sum())
        edges += int(out_deg.sum())
        fan_max = max(fan_max, int(out_deg.max()) if len(out_deg) else 0)
        depth = chain_depth(g, step)
        per_step = np.zeros(n_steps, np.int64)
        np.maximum.at(per_step, step[on], depth[on])
        depth_sum += int(per_step.sum())
    m: Measures = {
        "ranks": float(len(w.graphs)),
        "steps": float(rank_steps),
        "step_time_ns": float(np.mean(step_ns)),
        "measured_step_time_ns": float(np.mean(measured_ns)),
    }
    for p, v in zip(BREAKDOWN_PARTS, parts.tolist(), strict=True):
        m[f"breakdown.{p}.share"] = v / window_ns if window_ns else 0.0
    for i in np.flatnonzero(counts).tolist():
        m[f"class.{CLASSES[i]}.per_step"] = float(counts[i]) / rank_steps
    m.update(_comm_measures(np.concatenate(comm_kind), np.concatenate(comm_size), rank_steps))
    m.update(_critical_path_measures(res, steps_of, classes_of))
    m["graph.nodes_per_step"] = nodes / rank_steps
    m["graph.edges_per_step"] = edges / rank_steps
    m["graph.depth"] = depth_sum / rank_steps
    m["graph.fan_out_mean"] = edges / nodes if nodes else 0.0
    m["graph.fan_out_max"] = float(fan_max)
    return m


def _comm_measures(kind: NDArray[np.int64], size: NDArray[np.int64], rank_steps: int) -> Measures:
    """Bytes per rank-step, and per collective type its count, bytes and size quantiles
    (messages of unknown size, ``size <= 0``, count but carry no bytes)."""
    known = size > 0
    m: Measures = {"comm.bytes_per_step": float(size[known].sum()) / rank_steps}
    for c in CommType:
        of = kind == int(c)
        if not of.any():
            continue
        name = f"comm.{c.name.lower()}"
        sizes = np.sort(size[of & known])
        m[f"{name}.count_per_step"] = float(of.sum()) / rank_steps
        m[f"{name}.bytes_per_step"] = float(sizes.sum()) / rank_steps
        for (label, _), v in zip(SIZE_QUANTILES, _quantiles(sizes), strict=True):
            m[f"{name}.size_{label}_bytes"] = v
    return m


def _critical_path_measures(
    res: SimResult, steps_of: list[NDArray[np.int64]], classes_of: list[NDArray[np.int16]]
) -> Measures:
    """Shares of the whole run's critical path, counting only the tasks (and the gaps before
    them) that belong to a step: by cause (running a task, or a delay's cause) and by class."""
    cp = critical_path(res)
    if not len(cp.tasks):
        return {}
    # the graphs' tasks concatenated in workload order are the result's global task indices
    step = np.concatenate(steps_of)[cp.tasks]
    cls = np.concatenate(classes_of)[cp.tasks].astype(np.int64)
    keep = step >= 0
    task_ns, gap_ns, cause = cp.task_ns[keep], cp.gap_ns[keep], cp.gap_cause[keep]
    total = int(task_ns.sum() + gap_ns.sum())
    if total == 0:
        return {}
    m: Measures = {"critical_path.cause.task.share": float(task_ns.sum()) / total}
    known = cause >= 0
    by_cause = np.bincount(cause[known], weights=gap_ns[known], minlength=len(GAP_CAUSES))
    for i in np.flatnonzero(by_cause).tolist():
        m[f"critical_path.cause.{GAP_CAUSES[i]}.share"] = float(by_cause[i]) / total
    by_class = np.bincount(cls[keep], weights=task_ns, minlength=len(CLASSES))
    for i in np.flatnonzero(by_class).tolist():
        m[f"critical_path.class.{CLASSES[i]}.share"] = float(by_class[i]) / total
    return m
