"""Choose the tasks of an execution graph from a Kineto trace and lay them out per processor.

=====================  =========================================================
trace event            becomes
=====================  =========================================================
leaf ``cpu_op``        CPU_OP task on its thread (parents become annotations only)
runtime / driver call  RUNTIME task (a blocking memcpy also gets a ``[wait]`` task)
``gloo:<op>`` span     CPU_COMM task on the gloo worker thread, CPU ops inside it included
kernel                 KERNEL task, or COMM for NCCL/RCCL kernels
memcpy / memset        MEMCPY / MEMSET task
annotations, syncs     no task (they become annotations and dependencies)
=====================  =========================================================

A *leaf* has no other task-candidate event nested inside it on its thread. A gloo span on a
gloo worker thread is a task whatever runs inside it: the copies a collective makes around its
transfer (gloo's ``_allgather_base_`` gathers into a flat buffer, then copies it out) are the
collective's own time, and a span split into its copies would leave the transfer an unexplained
gap. A gloo span on a thread that runs other work too (point-to-point: gloo records
``gloo:send``/``gloo:recv`` on the calling thread) is a task when nothing starts inside it (a
blocking send or receive); one that later work starts inside (an asynchronous isend/irecv still
in flight) goes onto a lane beside its thread (both: :mod:`lumos.graph.build_gloo`). Every processor
also gets a zero-cost ``<start>`` task at position 0, the anchor its first task's release
delay hangs from, so that nothing has to read a recorded start time at simulation time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_gloo import CPU_CANDIDATES, gloo_spans, inside_gloo_workers
from lumos.graph.model import TaskKind
from lumos.ingest.comm_names import is_comm_kernel
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_schema import Category

__all__ = [
    "GLOO_LEFT_OUT",
    "TaskLayout",
    "lay_out_tasks",
    "left_out_gloo_spans",
]

_GPU_WORK = {
    int(Category.KERNEL): TaskKind.KERNEL,
    int(Category.MEMCPY): TaskKind.MEMCPY,
    int(Category.MEMSET): TaskKind.MEMSET,
}
#: Diagnostic code of the gloo spans that are no task (:func:`left_out_gloo_spans`).
GLOO_LEFT_OUT = "gloo_span_left_out"
START = -2  # event_idx of a processor's synthetic <start> task
MARK = -4  # event_idx of a zero-cost marker where an iteration (ProfilerStep) begins


@dataclass(frozen=True, eq=False)
class TaskLayout:
    """Tasks chosen from a trace, grouped by processor in program order.

    ``event_idx`` is the source event (``START`` for a processor's anchor task; for a
    ``[wait]`` task, the event of the blocking call it belongs to, with ``is_wait`` set).
    ``proc_ptr[p]:proc_ptr[p+1]`` are the tasks of processor ``p`` (the anchor first).
    """

    event_idx: NDArray[np.int64]
    kind: NDArray[np.int8]
    processor_idx: NDArray[np.int32]
    ts_ns: NDArray[np.int64]
    dur_ns: NDArray[np.int64]
    is_wait: NDArray[np.bool_]
    mark: NDArray[np.int32]  # step row of a MARK task, -1 otherwise
    proc_ptr: NDArray[np.int64]
    processors: NDArray[np.int32]  # trace processor row of each graph processor
    origin_ns: int

    def __len__(self) -> int:
        return int(self.event_idx.shape[0])

    def task_of_event(self, num_events: int) -> NDArray[np.int64]:
        """Map trace event row -> task index (-1 when the event is not a task)."""
        out = np.full(num_events, -1, dtype=np.int64)
        real = (self.event_idx >= 0) & ~self.is_wait
        out[self.event_idx[real]] = np.flatnonzero(real)
        return out


def _leaf_mask(trace: KinetoTrace, cand: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Candidates with no candidate nested inside them on the same processor."""
    idx = np.flatnonzero(cand)
    if idx.size == 0:
        return np.zeros_like(cand)
    ev = trace.events
    ts = ev.ts_ns[idx]
    end = ts + ev.dur_ns[idx]
    proc = ev.processor_idx[idx]
    nxt_same = np.zeros(idx.size, dtype=bool)
    nxt_same[:-1] = proc[1:] == proc[:-1]
    has_child = np.zeros(idx.size, dtype=bool)
    has_child[:-1] = nxt_same[:-1] & (ts[1:] < end[:-1])
    leaf = np.zeros_like(cand)
    leaf[idx[~has_child]] = True
    return leaf


def lay_out_tasks(
    trace: KinetoTrace, blocking_copy: NDArray[np.bool_], lane_of: NDArray[np.int32] | None = None
) -> TaskLayout:
    """Pick task events (see the module docstring) and group them by processor.

    ``lane_of`` (from :func:`lumos.graph.build_gloo.gloo_lanes`, whose trace this is then)
    puts the gloo spans in flight beside their thread on their lanes, as tasks.

    ``blocking_copy`` marks runtime calls that launched a copy and waited for it; each gets a
    synthetic ``[wait]`` task right after it on its thread. Each ProfilerStep gets a zero-cost
    ``MARK`` task on its thread at the step's start: the moment the thread *reached* the step,
    so a step that begins by waiting (e.g. for the previous step's GPU work) counts that wait.
    """
    marks_of: dict[int, list[tuple[int, int]]] = {}
    for step in range(len(trace.steps)):
        marks_of.setdefault(int(trace.steps.processor_idx[step]), []).append(
            (int(trace.steps.ts_ns[step]), step)
        )
    ev = trace.events
    names = trace.names
    cat = ev.cat
    cpu_cand = np.isin(cat, CPU_CANDIDATES)
    gloo = gloo_spans(trace)
    on_lane = np.zeros(len(ev), dtype=bool) if lane_of is None else lane_of >= 0
    cand = (cpu_cand & ~inside_gloo_workers(trace, gloo, cpu_cand)) | (gloo & ~on_lane)
    cpu_task = _leaf_mask(trace, cand) | on_lane
    gpu_task = np.isin(cat, list(_GPU_WORK))
    is_task = cpu_task | gpu_task
    rows = np.flatnonzero(is_task)  # sorted by (processor, ts, -dur)
    p_rows = ev.processor_idx[rows]
    if lane_of is not None and on_lane.any():
        p_rows = np.where(on_lane[rows], lane_of[rows], p_rows).astype(p_rows.dtype)
        order = np.argsort(p_rows, kind="stable")  # a lane's spans keep their time order
        rows, p_rows = rows[order], p_rows[order]

    kind = np.empty(rows.size, dtype=np.int8)
    c = cat[rows]
    kind[:] = int(TaskKind.CPU_OP)
    kind[np.isin(c, (int(Category.RUNTIME), int(Category.DRIVER)))] = int(TaskKind.RUNTIME)
    kind[gloo[rows]] = int(TaskKind.CPU_COMM)
    for cval, tk in _GPU_WORK.items():
        kind[c == cval] = int(tk)
    comm_names = np.array([is_comm_kernel(n) for n in names], dtype=bool)
    kern = c == int(Category.KERNEL)
    kind[kern & comm_names[ev.name_idx[rows]]] = int(TaskKind.COMM)

    # the origin is the earliest thing placed on a processor, step markers included
    starts = [int(ev.ts_ns[rows].min())] if rows.size else []
    if len(trace.steps):
        starts.append(int(trace.steps.ts_ns.min()))
    origin = min(starts) if starts else 0
    # threads that only carry a ProfilerStep annotation still get a processor (for the marker)
    procs_used = np.union1d(p_rows, trace.steps.processor_idx).astype(np.int32)
    out_ev: list[NDArray[np.int64]] = []
    out_kind: list[NDArray[np.int8]] = []
    out_proc: list[NDArray[np.int32]] = []
    out_ts: list[NDArray[np.int64]] = []
    out_dur: list[NDArray[np.int64]] = []
    out_wait: list[NDArray[np.bool_]] = []
    out_mark: list[NDArray[np.int32]] = []
    ptr = [0]
    bounds = np.searchsorted(p_rows, procs_used, side="left")
    bounds_hi = np.searchsorted(p_rows, procs_used, side="right")
    for gp, (lo, hi) in enumerate(zip(bounds.tolist(), bounds_hi.tolist(), strict=True)):
        r = rows[lo:hi]
        k = kind[lo:hi]
        wait = blocking_copy[r]
        n_extra = int(wait.sum())
        n = 1 + r.size + n_extra
        e_col = np.empty(n, dtype=np.int64)
        k_col = np.empty(n, dtype=np.int8)
        w_col = np.zeros(n, dtype=bool)
        # position of each real task after inserting the anchor and the [wait] tasks
        pos = 1 + np.arange(r.size) + np.concatenate(([0], np.cumsum(wait)[:-1])).astype(np.int64)
        e_col[0] = START
        on_stream = trace.processors.kind[int(procs_used[gp])] == 1
        k_col[0] = int(TaskKind.KERNEL if on_stream else TaskKind.CPU_OP)
        e_col[pos] = r
        k_col[pos] = k
        wpos = pos[wait] + 1
        e_col[wpos] = r[wait]
        k_col[wpos] = int(TaskKind.RUNTIME)
        w_col[wpos] = True
        ts = np.empty(n, dtype=np.int64)
        dur = np.zeros(n, dtype=np.int64)
        ts[0] = origin
        ts[pos] = ev.ts_ns[r]
        dur[pos] = ev.dur_ns[r]
        ts[wpos] = ev.ts_ns[r[wait]] + ev.dur_ns[r[wait]]  # refined by the sync pass
        m_col = np.full(n, -1, dtype=np.int32)
        marks = sorted(marks_of.get(int(procs_used[gp]), []))
        if marks:
            m_ts = np.array([m[0] for m in marks], dtype=np.int64)
            at = 1 + np.searchsorted(ts[1:], m_ts, side="left")
            at = np.where((at < n) & w_col[np.minimum(at, n - 1)], at + 1, at)  # keep call+[wait]
            e_col = np.insert(e_col, at, MARK)
            k_col = np.insert(k_col, at, int(TaskKind.CPU_OP))
            w_col = np.insert(w_col, at, False)
            ts = np.insert(ts, at, m_ts)
            dur = np.insert(dur, at, 0)
            m_col = np.insert(m_col, at, np.array([m[1] for m in marks], dtype=np.int32))
            n += len(marks)
        out_ev.append(e_col)
        out_kind.append(k_col)
        out_proc.append(np.full(n, gp, dtype=np.int32))
        out_ts.append(ts)
        out_dur.append(dur)
        out_wait.append(w_col)
        out_mark.append(m_col)
        ptr.append(ptr[-1] + n)
    if not out_ev:
        z = np.zeros(0, dtype=np.int64)
        return TaskLayout(
            z, z.astype(np.int8), z.astype(np.int32), z, z, z.astype(bool), z.astype(np.int32),
            np.zeros(1, dtype=np.int64), procs_used.astype(np.int32), origin,
        )  # fmt: skip
    return TaskLayout(
        event_idx=np.concatenate(out_ev),
        kind=np.concatenate(out_kind),
        processor_idx=np.concatenate(out_proc),
        ts_ns=np.concatenate(out_ts),
        dur_ns=np.concatenate(out_dur),
        is_wait=np.concatenate(out_wait),
        mark=np.concatenate(out_mark),
        proc_ptr=np.asarray(ptr, dtype=np.int64),
        processors=procs_used.astype(np.int32),
        origin_ns=origin,
    )


def left_out_gloo_spans(trace: KinetoTrace, layout: TaskLayout) -> NDArray[np.int64]:
    """Event rows of the gloo spans that are no task (another gloo span starts inside them on
    a gloo worker thread: no trace seen so far does that); their peers would wait for them
    forever in a replay of several ranks."""
    ev = trace.events
    gloo_ids = [i for i, n in enumerate(trace.names) if n.startswith("gloo:")]
    spans = np.flatnonzero(
        (ev.cat == int(Category.USER_ANNOTATION)) & np.isin(ev.name_idx, gloo_ids)
    )
    placed = layout.event_idx[layout.event_idx >= 0]
    return spans[~np.isin(spans, placed)]
