"""Annotations of a graph: ProfilerStep spans, and the CPU spans of parent ops.

Steps delimit iterations for the replay's measured-vs-predicted table; CPU spans (every parent
op or user annotation on a thread) let an edit re-time an op with everything it did.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_tasks import TaskLayout
from lumos.graph.model import AnnotationKind, Annotations
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_schema import Category

__all__ = ["MODULE_PREFIX", "cpu_spans", "step_annotations"]

#: Name prefix of the module calls PyTorch's profiler records with ``with_stack=True``.
MODULE_PREFIX = "nn.Module: "


def step_annotations(
    trace: KinetoTrace,
    layout: TaskLayout,
    ts: NDArray[np.int64],
    end: NDArray[np.int64],
    names: tuple[str, ...],
) -> Annotations:
    """ProfilerStep spans over the tasks of their thread."""
    steps = trace.steps
    gp_of = {int(p): gp for gp, p in enumerate(layout.processors.tolist())}
    rows: dict[str, list[int]] = {
        k: [] for k in ("name", "proc", "first", "last", "ts", "dur", "lead", "tail")
    }
    name_pos = {n: i for i, n in enumerate(names)}
    mark_task = {int(layout.mark[m]): m for m in np.flatnonzero(layout.mark >= 0).tolist()}
    for k in range(len(steps)):
        gp = gp_of.get(int(steps.processor_idx[k]))
        s0, s1 = int(steps.ts_ns[k]), int(steps.ts_ns[k] + steps.dur_ns[k])
        first = last = -1
        if gp is not None:
            lo, hi = int(layout.proc_ptr[gp]) + 1, int(layout.proc_ptr[gp + 1])
            a = mark_task[k]
            b = lo + int(np.searchsorted(ts[lo:hi], s1, side="left")) - 1
            # the next step's marker sits at s1 and is excluded by the left search
            if a < b:
                first, last = a, b
            else:
                # the step is annotated on a thread that does no work (another process or
                # thread ran the step): it ends with the last work that ran inside it
                inside = np.flatnonzero(
                    (layout.event_idx >= 0) & (layout.ts_ns >= s0) & (layout.ts_ns < s1)
                )
                # a step with no work at all is idle time, kept as recorded (tail = its length)
                first, last = a, int(inside[np.argmax(end[inside])]) if inside.size else a
        rows["name"].append(name_pos[steps.name[k]])
        rows["proc"].append(gp if gp is not None else 0)
        rows["first"].append(first)
        rows["last"].append(last)
        rows["ts"].append(s0)
        rows["dur"].append(s1 - s0)
        rows["lead"].append(int(ts[first]) - s0 if first >= 0 else 0)
        rows["tail"].append(s1 - int(end[last]) if last >= 0 else 0)
    return Annotations.create(
        name_idx=np.asarray(rows["name"], dtype=np.int32),
        kind=np.full(len(rows["name"]), int(AnnotationKind.STEP), dtype=np.int8),
        processor_idx=np.asarray(rows["proc"], dtype=np.int32),
        first_task_idx=np.asarray(rows["first"], dtype=np.int32),
        last_task_idx=np.asarray(rows["last"], dtype=np.int32),
        ts_ns=np.asarray(rows["ts"], dtype=np.int64),
        dur_ns=np.asarray(rows["dur"], dtype=np.int64),
        lead_ns=np.asarray(rows["lead"], dtype=np.int64),
        tail_ns=np.asarray(rows["tail"], dtype=np.int64),
    )


def cpu_spans(
    trace: KinetoTrace, layout: TaskLayout, ts: NDArray[np.int64], end: NDArray[np.int64]
) -> Annotations:
    """USER annotations: every CPU op or user annotation on a thread that is not itself a task
    (the parents of the leaf tasks: modules, ``aten::linear``, the data loader, ...; and childless
    annotations such as ``zero_grad``) and every module call a trace recorded with its Python
    stack names (``nn.Module: TransformerBlock_3``, :data:`MODULE_PREFIX`), so an edit can re-time an op with everything it did,
    untraced time between its children included. Each span carries the work its recorded
    shapes give (``flops``, ``bytes``; see :mod:`lumos.ingest.op_work`)."""
    ev = trace.events
    task_ev = np.zeros(len(ev), dtype=bool)
    task_ev[layout.event_idx[layout.event_idx >= 0]] = True
    step_ev = np.zeros(len(ev), dtype=bool)
    step_ev[trace.steps.event_idx] = True
    module = np.fromiter((n.startswith(MODULE_PREFIX) for n in trace.names), bool,
                         len(trace.names))  # fmt: skip
    cand = np.flatnonzero(
        (
            np.isin(ev.cat, (int(Category.CPU_OP), int(Category.USER_ANNOTATION)))
            | ((ev.cat == int(Category.PYTHON_FUNCTION)) & module[ev.name_idx])
        )
        & ~task_ev
        & ~step_ev
        & (ev.dur_ns > 0)
    )
    gp_of = np.full(len(trace.processors), -1, dtype=np.int64)
    gp_of[layout.processors] = np.arange(len(layout.processors))
    gp = gp_of[ev.processor_idx[cand]]
    cand, gp = cand[gp >= 0], gp[gp >= 0]
    s0 = ev.ts_ns[cand]
    s1 = s0 + ev.dur_ns[cand]
    first = np.full(cand.size, -1, dtype=np.int64)
    last = np.full(cand.size, -1, dtype=np.int64)
    for p in np.unique(gp).tolist():
        sel = np.flatnonzero(gp == p)
        lo, hi = int(layout.proc_ptr[p]) + 1, int(layout.proc_ptr[p + 1])
        real = layout.event_idx[lo:hi] >= 0
        starts = layout.ts_ns[lo:hi]
        a = lo + np.searchsorted(starts, s0[sel], side="left")
        b = lo + np.searchsorted(starts, s1[sel], side="left") - 1
        ok = (a <= b) & (b < hi)
        a, b = a[ok], b[ok]
        # a span's first and last work are real tasks, not markers or anchors: the first real
        # task at or after its first covered one, the last at or before its last
        n = hi - lo
        idx = np.arange(n)
        nxt = np.minimum.accumulate(np.where(real, idx, n)[::-1])[::-1]
        prv = np.maximum.accumulate(np.where(real, idx, -1))
        a, b = lo + nxt[a - lo], lo + prv[b - lo]
        ok2 = a <= b
        first[sel[ok][ok2]] = a[ok2]
        last[sel[ok][ok2]] = b[ok2]
    # spans with no task inside (``zero_grad``, a childless user annotation) are kept too: their
    # time is an intra-thread delay that an edit may re-time
    has = first >= 0
    first, last = np.where(has, first, -1), np.where(has, last, -1)
    return Annotations.create(
        name_idx=ev.name_idx[cand].astype(np.int32),
        kind=np.full(cand.size, int(AnnotationKind.USER), dtype=np.int8),
        processor_idx=gp.astype(np.int32),
        first_task_idx=first.astype(np.int32),
        last_task_idx=last.astype(np.int32),
        ts_ns=s0,
        dur_ns=s1 - s0,
        lead_ns=np.where(has, np.maximum(ts[np.maximum(first, 0)] - s0, 0), 0),
        tail_ns=np.where(has, np.maximum(s1 - end[np.maximum(last, 0)], 0), 0),
        # rows of trace.dims here; the graph builder renumbers them into ExecGraph.dims
        dims_idx=ev.dims_idx[cand] if ev.dims_idx is not None else -1,
        **_work_columns(trace.op_work, cand),
    )


def _work_columns(
    op_work: dict[int, tuple[int, int]], rows: NDArray[np.int64]
) -> dict[str, NDArray[np.int64]]:
    """``flops`` and ``bytes`` of the event ``rows`` (sorted) from ``KinetoTrace.op_work``."""
    out = np.zeros((2, rows.size), dtype=np.int64)
    if op_work and rows.size:
        have = np.fromiter(op_work, np.int64, len(op_work))
        work = np.array(list(op_work.values()), dtype=np.int64).reshape(-1, 2)
        pos = np.minimum(np.searchsorted(rows, have), rows.size - 1)
        hit = rows[pos] == have
        out[:, pos[hit]] = work[hit].T
    return {"flops": out[0], "bytes": out[1]}
