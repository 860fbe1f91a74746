"""``build_graph``: a Kineto trace -> one rank's :class:`~lumos.graph.model.ExecGraph`.

The graph follows Lumos (DESIGN.md section 3): leaf CPU work and runtime calls as tasks on their
threads, GPU work on its streams, and every dependency kind the trace reveals. Edge delays are
*calibrated* so that replaying the graph with traced durations reproduces the trace, while each
delay keeps its physical meaning for what-if questions:

* intra-thread: the CPU overhead gap before a task, unless another thread explains the gap (a
  thread resuming right after another thread's task ends: an inter-thread edge takes it);
* launch: the trace's smallest launch-to-start latency; a kernel whose start is explained by its
  launch (not by its stream or another stream) takes its own observed latency;
* intra-stream: 0, or the GPU-side gap when the kernel was queued behind its predecessor;
* inter-stream: 0, or the observed gap when the event wait was what held the kernel back;
* sync: blocking calls keep only their cost after the GPU work they waited for ended; the wait
  is a runtime dependency the simulator resolves.

The simulator never reads recorded start times: they are used here, once, to choose delays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_comms import build_comms
from lumos.graph.build_deps import TOL_NS, calibrate_gpu, inter_thread_edges, processor_chain
from lumos.graph.build_links import find_launches, launching_event
from lumos.graph.build_sync import plan_syncs
from lumos.graph.build_tasks import TaskLayout, lay_out_tasks
from lumos.graph.model import (
    AnnotationKind,
    Annotations,
    DepKind,
    Edges,
    ExecGraph,
    Processors,
    Tasks,
    Waits,
)
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_schema import Category

__all__ = ["align_ranks", "build_graph"]


def build_graph(trace: KinetoTrace) -> ExecGraph:
    """Build the execution graph of one rank's Kineto trace (see the module docstring).

    Degradations (a sync whose target stream cannot be found, an inferred inter-stream edge
    the recording contradicts...) are counted in ``graph.diagnostics``; nothing is dropped
    silently.
    """
    diag = Diagnostics()
    blocking = _blocking_copies(trace)
    layout = lay_out_tasks(trace, blocking)
    if len(layout) == 0:
        from lumos.errors import GraphError

        raise GraphError(f"{trace.path}: trace has no CPU or GPU work to build a graph from")
    launches = find_launches(trace, layout)
    plan = plan_syncs(trace, layout, launches, diag)

    ts = layout.ts_ns.copy()
    dur = layout.dur_ns.copy()
    _shorten_blocking(trace, layout, ts, dur, launching_event(trace))
    arrive = ts.copy()  # when the thread reached the task (a blocked call starts later)
    w_idx = np.flatnonzero(layout.is_wait)
    arrive[w_idx] = ts[w_idx - 1] + dur[w_idx - 1]  # a copy's wait is held by the copy alone
    keep_wait = _shorten_syncs(layout, plan.wait_task, plan.waited_end_ns, ts, dur, diag)

    src: list[NDArray[np.int64]] = []
    dst: list[NDArray[np.int64]] = []
    kinds: list[NDArray[np.int8]] = []
    delays: list[NDArray[np.int64]] = []

    def add(s: NDArray[np.int64], d: NDArray[np.int64], k: DepKind, dl: NDArray[np.int64]) -> None:
        src.append(s.astype(np.int64))
        dst.append(d.astype(np.int64))
        kinds.append(np.full(s.size, int(k), dtype=np.int8))
        delays.append(dl.astype(np.int64))

    end = ts + dur
    is_stream = trace.processors.kind[layout.processors] == 1
    stream_of_task = is_stream[layout.processor_idx]
    # ---- the wait tasks of blocking copies hang on their copy (SYNC)
    wait_tasks = np.flatnonzero(layout.is_wait)
    if wait_tasks.size:
        copy_task = _copy_task_of_wait(trace, layout, wait_tasks)
        ok = copy_task >= 0
        add(copy_task[ok], wait_tasks[ok], DepKind.SYNC, np.zeros(int(ok.sum()), dtype=np.int64))

    # ---- CPU threads: intra-thread order with overhead gaps, inter-thread resumes
    intra_src, intra_dst, intra_delay = processor_chain(layout, arrive, end)
    thread_edge = ~stream_of_task[intra_dst]
    inter = inter_thread_edges(
        layout, ts, end, stream_of_task, intra_src[thread_edge], intra_dst[thread_edge]
    )
    resumed = np.zeros(len(layout), dtype=bool)
    if inter[0].size:
        add(inter[0], inter[1], DepKind.INTER_THREAD, inter[2])
        resumed[inter[1]] = True
    t_delay = np.where(resumed[intra_dst] & thread_edge, 0, intra_delay)
    add(intra_src[thread_edge], intra_dst[thread_edge], DepKind.INTRA_THREAD, t_delay[thread_edge])

    # ---- GPU streams: launch, intra-stream and inter-stream, calibrated on the binding one
    s_src, s_dst = intra_src[~thread_edge], intra_dst[~thread_edge]
    edges_gpu = calibrate_gpu(layout, launches.launcher, ts, end, s_src, s_dst,
                               np.asarray(plan.stream_src, dtype=np.int64),
                               np.asarray(plan.stream_dst, dtype=np.int64), diag)  # fmt: skip
    for s, d, k, dl in edges_gpu:
        add(s, d, k, dl)

    edges = Edges.create(
        src=np.concatenate(src).astype(np.int32),
        dst=np.concatenate(dst).astype(np.int32),
        kind=np.concatenate(kinds),
        delay_ns=np.concatenate(delays),
    )
    w = np.asarray(keep_wait, dtype=bool)
    waits = Waits.create(
        task_idx=np.asarray(plan.wait_task, dtype=np.int32)[w],
        kind=np.asarray(plan.wait_kind, dtype=np.int8)[w],
        target_processor_idx=np.asarray(plan.wait_stream, dtype=np.int32)[w],
        device=np.asarray(plan.wait_device, dtype=np.int32)[w],
        record_task_idx=np.asarray(plan.wait_record, dtype=np.int32)[w],
    )
    names, name_idx = _task_names(trace, layout)
    comms, comm_idx, groups = build_comms(trace, layout, launches.launcher, diag)
    order = np.arange(len(layout), dtype=np.int64) - layout.proc_ptr[layout.processor_idx]
    tasks = Tasks.create(
        name_idx=name_idx,
        kind=layout.kind,
        processor_idx=layout.processor_idx,
        order=order.astype(np.int32),
        dur_ns=dur,
        ts_ns=ts,
        event_idx=np.where(layout.is_wait, -1, layout.event_idx),
        comm_idx=comm_idx,
    )
    rank = trace.meta.rank if trace.meta.rank >= 0 else 0
    world = max(trace.meta.world_size, rank + 1, 1)
    for code, n in trace.diagnostics.items():
        diag.warn(f"ingest:{code}", count=n)
    return ExecGraph(
        names=names,
        processors=_processors(trace, layout),
        tasks=tasks,
        edges=edges,
        waits=waits,
        annotations=_step_annotations(trace, layout, ts, end, names),
        comms=comms,
        process_groups=groups,
        rank=rank,
        world_size=world,
        diagnostics=diag,
    )


def _blocking_copies(trace: KinetoTrace) -> NDArray[np.bool_]:
    """Runtime calls that launched a copy/set and returned only after it finished."""
    ev = trace.events
    out = np.zeros(len(ev), dtype=bool)
    launch = launching_event(trace)
    gpu = np.flatnonzero(
        np.isin(ev.cat, (int(Category.MEMCPY), int(Category.MEMSET))) & (launch >= 0)
    )
    for g in gpu.tolist():
        r = int(launch[g])
        call = trace.names[int(ev.name_idx[r])]
        sync_api = "Async" not in call or "Pageable" in trace.names[int(ev.name_idx[g])]
        if not sync_api:
            continue
        g_end = int(ev.ts_ns[g] + ev.dur_ns[g])
        if ev.ts_ns[g] + TOL_NS >= ev.ts_ns[r] and g_end <= ev.ts_ns[r] + ev.dur_ns[r] + TOL_NS:
            out[r] = True
    return out


def _shorten_blocking(
    trace: KinetoTrace,
    layout: TaskLayout,
    ts: NDArray[np.int64],
    dur: NDArray[np.int64],
    launch: NDArray[np.int64],
) -> None:
    """Split a blocking copy call: the call keeps its launch part, its [wait] task the rest."""
    ev = trace.events
    copy_of_call = {int(launch[g]): int(g) for g in np.flatnonzero(launch >= 0).tolist()}
    for w in np.flatnonzero(layout.is_wait).tolist():
        call_t = w - 1
        r = int(layout.event_idx[w])
        g = copy_of_call.get(r)
        c_ts, c_end = int(ev.ts_ns[r]), int(ev.ts_ns[r] + ev.dur_ns[r])
        g_ts = int(ev.ts_ns[g]) if g is not None else c_ts
        g_end = int(ev.ts_ns[g] + ev.dur_ns[g]) if g is not None else c_end
        part = min(max(g_ts - c_ts, 0), c_end - c_ts)
        dur[call_t] = part
        start = min(max(g_end, c_ts + part), c_end)
        ts[w] = start
        dur[w] = c_end - start


def _copy_task_of_wait(
    trace: KinetoTrace, layout: TaskLayout, waits: NDArray[np.int64]
) -> NDArray[np.int64]:
    launch = launching_event(trace)
    task_of = layout.task_of_event(len(trace.events))
    copy_of_call = {int(launch[g]): int(g) for g in np.flatnonzero(launch >= 0).tolist()}
    out = np.full(waits.size, -1, dtype=np.int64)
    for i, w in enumerate(waits.tolist()):
        g = copy_of_call.get(int(layout.event_idx[w]))
        if g is not None:
            out[i] = task_of[g]
    return out


def _shorten_syncs(
    layout: TaskLayout,
    tasks: list[int],
    waited_end: dict[int, int],
    ts: NDArray[np.int64],
    dur: NDArray[np.int64],
    diag: Diagnostics,
) -> list[bool]:
    """A sync call that blocked keeps only its cost after the GPU work ended."""
    keep: list[bool] = []
    for t in tasks:
        g_end = waited_end.get(t, -1)
        s, e = int(ts[t]), int(ts[t] + dur[t])
        if g_end > e + TOL_NS:
            # the recording says the call returned before that work ended: not what it waited on
            diag.warn("sync_wait_contradicted", f"task {t}")
            keep.append(False)
            continue
        keep.append(True)
        if g_end > s:
            ts[t] = min(g_end, e)
            dur[t] = e - ts[t]
    return keep


def _task_names(
    trace: KinetoTrace, layout: TaskLayout
) -> tuple[tuple[str, ...], NDArray[np.int32]]:
    names = list(trace.names)
    extra: dict[str, int] = {}

    def intern(s: str) -> int:
        if s not in extra:
            extra[s] = len(names)
            names.append(s)
        return extra[s]

    ev = trace.events
    idx = np.empty(len(layout), dtype=np.int32)
    real = layout.event_idx >= 0
    idx[real] = ev.name_idx[layout.event_idx[real]]
    idx[~real] = intern("<start>")
    for m in np.flatnonzero(layout.mark >= 0).tolist():
        idx[m] = intern(trace.steps.name[int(layout.mark[m])])
    for w in np.flatnonzero(layout.is_wait).tolist():
        idx[w] = intern(trace.names[int(ev.name_idx[layout.event_idx[w]])] + " [wait]")
    return tuple(names), idx


def _processors(trace: KinetoTrace, layout: TaskLayout) -> Processors:
    p = layout.processors
    tp = trace.processors
    return Processors(
        kind=tp.kind[p], pid=tp.pid[p], tid=tp.tid[p], device=tp.device[p],
        label=tuple(tp.label[i] for i in p.tolist()),
    )  # fmt: skip


def _step_annotations(
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


def align_ranks(graphs: Sequence[ExecGraph]) -> tuple[ExecGraph, ...]:
    """Put the ranks of one job on a common time origin.

    Each graph starts its own replay at 0 at its first recorded task. Ranks traced on one clock
    (one host, or hosts whose traces overlap in time) must keep their relative offsets, or
    collectives would see arrivals shifted by however late each rank started profiling. The
    release delays of every processor's ``<start>`` task are moved by the rank's offset from the
    earliest rank. Traces whose time ranges do not overlap (unsynchronized clocks) are left as
    they are.
    """
    if len(graphs) < 2:
        return tuple(graphs)
    spans = []
    for g in graphs:
        t = g.tasks
        spans.append((int(t.ts_ns.min()), int((t.ts_ns + t.dur_ns).max())))
    if max(s for s, _ in spans) > min(e for _, e in spans):
        return tuple(graphs)  # no common window: clocks are not comparable
    origin = min(s for s, _ in spans)
    out = []
    for g, (s, _) in zip(graphs, spans, strict=True):
        shift = s - origin
        if shift == 0:
            out.append(g)
            continue
        e = g.edges
        from_anchor = (g.tasks.order[e.src] == 0) & (
            np.asarray(g.names, dtype=object)[g.tasks.name_idx[e.src]] == "<start>"
        )
        delay = e.delay_ns + np.where(from_anchor, shift, 0)
        out.append(g.replace(edges=e.replace(delay_ns=delay)))
    return tuple(out)
