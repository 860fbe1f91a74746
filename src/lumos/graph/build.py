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

import dataclasses
import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_comms import build_comms
from lumos.graph.build_deps import (
    LAUNCH_LATENCY_NOMINAL_NS,
    TOL_NS,
    calibrate_gpu,
    gpu_clock_offset_ns,
    processor_chain,
)
from lumos.graph.build_gaps import attribute_gaps, blocked_calls, blocking_ops, merge_blocked
from lumos.graph.build_links import Launches, find_launches, launching_event
from lumos.graph.build_sync import plan_syncs
from lumos.graph.build_tasks import TaskLayout, lay_out_tasks
from lumos.graph.model import (
    GPU_TASK_KINDS,
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
from lumos.ingest.kineto_trace import Events

__all__ = ["align_ranks", "build_graph"]

_GPU_CATEGORIES = (Category.KERNEL, Category.MEMCPY, Category.MEMSET, Category.GPU_USER_ANNOTATION)


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
    offset_ns = _gpu_clock_offset(layout, launches)
    if offset_ns:
        trace = _shift_gpu_clock(trace, offset_ns)
        blocking = _blocking_copies(trace)
        layout = lay_out_tasks(trace, blocking)
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

    # ---- CPU threads: intra-thread order with overhead gaps; waits on whatever released them
    task_names = _layout_names(trace, layout)
    blocked = merge_blocked(
        blocked_calls(layout, task_names, _enqueue_names(trace), arrive, end, stream_of_task,
                      launches.launcher),
        blocking_ops(layout, arrive, end, stream_of_task),
    )  # fmt: skip
    recorded_end = end
    if blocked.call.size:
        dur[blocked.call] = blocked.cost_ns
        end = ts + dur
        by_gpu = stream_of_task[blocked.releaser]
        for k, sel in ((DepKind.SYNC, by_gpu), (DepKind.INTER_THREAD, ~by_gpu)):
            add(blocked.releaser[sel], blocked.next_task[sel], k, blocked.reaction_ns[sel])
        diag.warn("blocking_call_split", f"task {int(blocked.call[0])}", blocked.call.size)
    settled = np.zeros(len(layout), dtype=bool)
    settled[blocked.next_task] = True
    intra_src, intra_dst, intra_delay = processor_chain(layout, arrive, end)
    thread_edge = ~stream_of_task[intra_dst]
    gaps = attribute_gaps(layout, arrive, end, stream_of_task, launches.launcher, task_names,
                          diag, settled, recorded_end)  # fmt: skip
    for k in (DepKind.INTER_THREAD, DepKind.SYNC):
        sel = gaps.kind == int(k)
        if sel.any():
            add(gaps.src[sel], gaps.dst[sel], k, gaps.delay_ns[sel])
    edge_into = np.full(len(layout), -1, dtype=np.int64)
    edge_into[intra_dst] = np.arange(intra_dst.size)
    t_delay = intra_delay.copy()
    t_delay[edge_into[gaps.dst]] = gaps.intra_delay_ns
    t_delay[edge_into[blocked.next_task]] = blocked.gap_ns
    add(intra_src[thread_edge], intra_dst[thread_edge], DepKind.INTRA_THREAD, t_delay[thread_edge])

    # ---- GPU streams: launch, intra-stream and inter-stream, calibrated on the binding one
    s_src, s_dst = intra_src[~thread_edge], intra_dst[~thread_edge]
    edges_gpu, launch_latency = calibrate_gpu(layout, launches.launcher, ts, end, s_src, s_dst,
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
        annotations=Annotations.concat(
            [_step_annotations(trace, layout, ts, end, names), _cpu_spans(trace, layout, ts, end)]
        ),
        comms=comms,
        process_groups=groups,
        rank=rank,
        world_size=world,
        diagnostics=diag,
        calibration={"gpu_clock_offset_ns": offset_ns, "launch_latency_ns": launch_latency},
    )


_ENQUEUE = re.compile(r"^(cuda|hip|cu)(Launch|ExtLaunch|ModuleLaunch|ExtModuleLaunch|Memcpy\w*Async|"
                      r"Memset\w*Async|GraphLaunch)")


def _enqueue_names(trace: KinetoTrace) -> NDArray[np.bool_]:
    """Per interned name: a runtime call that enqueues GPU work (and blocks when the queue is full)."""
    return np.array([bool(_ENQUEUE.match(n)) for n in trace.names], dtype=bool)


def _layout_names(trace: KinetoTrace, layout: TaskLayout) -> NDArray[np.int32]:
    """Name index of each laid-out task (-1 for synthetic tasks)."""
    real = layout.event_idx >= 0
    out = np.full(len(layout), -1, dtype=np.int32)
    out[real] = trace.events.name_idx[layout.event_idx[real]]
    return out


def _gpu_clock_offset(layout: TaskLayout, launches: Launches) -> int:
    """How far to move GPU timestamps onto the CPU clock (see ``gpu_clock_offset_ns``)."""
    end = layout.ts_ns + layout.dur_ns
    src, dst, _ = processor_chain(layout, layout.ts_ns, end)
    on_stream = np.zeros(len(layout), dtype=bool)
    on_stream[np.isin(layout.kind, [int(k) for k in GPU_TASK_KINDS])] = True
    keep = on_stream[dst]
    return gpu_clock_offset_ns(layout, launches.launcher, layout.ts_ns, end, src[keep], dst[keep])


def _shift_gpu_clock(trace: KinetoTrace, offset_ns: int) -> KinetoTrace:
    """The trace with every GPU activity moved by ``offset_ns`` (CPU events unchanged)."""
    ev = trace.events
    gpu = np.isin(ev.cat, [int(c) for c in _GPU_CATEGORIES])
    ts = np.where(gpu, ev.ts_ns + offset_ns, ev.ts_ns)
    return dataclasses.replace(trace, events=dataclasses.replace(ev, ts_ns=ts))


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
    """Split a blocking copy call: the call keeps its launch part, its [wait] task the rest.

    The launch part is the time to the copy's start when the copy's stream was idle; when the
    copy was queued behind earlier work it started when that work ended, so the call's own
    part is at most the nominal launch latency and the queueing comes from the simulation.
    """
    ev = trace.events
    copy_of_call = {int(launch[g]): int(g) for g in np.flatnonzero(launch >= 0).tolist()}
    stream_prev_end = _previous_end_on_processor(ev)
    for w in np.flatnonzero(layout.is_wait).tolist():
        call_t = w - 1
        r = int(layout.event_idx[w])
        g = copy_of_call.get(r)
        c_ts, c_end = int(ev.ts_ns[r]), int(ev.ts_ns[r] + ev.dur_ns[r])
        g_ts = int(ev.ts_ns[g]) if g is not None else c_ts
        g_end = int(ev.ts_ns[g] + ev.dur_ns[g]) if g is not None else c_end
        part = min(max(g_ts - c_ts, 0), c_end - c_ts)
        if g is not None and stream_prev_end[g] >= g_ts - TOL_NS and stream_prev_end[g] > c_ts:
            part = min(part, LAUNCH_LATENCY_NOMINAL_NS)
        dur[call_t] = part
        start = min(max(g_end, c_ts + part), c_end)
        ts[w] = start
        dur[w] = c_end - start


def _previous_end_on_processor(ev: Events) -> NDArray[np.int64]:
    """For every event, the end of the previous event on its processor (events are sorted by
    processor, then start); -1 for a processor's first."""
    out = np.full(len(ev), -1, dtype=np.int64)
    if len(ev) > 1:
        same = ev.processor_idx[1:] == ev.processor_idx[:-1]
        prev_end = np.maximum.accumulate(ev.ts_ns + ev.dur_ns)
        out[1:] = np.where(same, (ev.ts_ns + ev.dur_ns)[:-1], -1)
        del prev_end
    return out


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


def _cpu_spans(
    trace: KinetoTrace, layout: TaskLayout, ts: NDArray[np.int64], end: NDArray[np.int64]
) -> Annotations:
    """USER annotations: every CPU op or user annotation on a thread that is not itself a task
    (the parents of the leaf tasks: modules, ``aten::linear``, the data loader, ...; and childless
    annotations such as ``zero_grad``), so an edit can re-time an op with everything it did,
    untraced time between its children included."""
    ev = trace.events
    task_ev = np.zeros(len(ev), dtype=bool)
    task_ev[layout.event_idx[layout.event_idx >= 0]] = True
    step_ev = np.zeros(len(ev), dtype=bool)
    step_ev[trace.steps.event_idx] = True
    cand = np.flatnonzero(
        np.isin(ev.cat, (int(Category.CPU_OP), int(Category.USER_ANNOTATION)))
        & ~task_ev & ~step_ev & (ev.dur_ns > 0)
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
        # a span's first and last work are real tasks, not markers or anchors
        ok2 = real[a - lo] & real[b - lo]
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
    return _collective_waits(_common_origin(graphs))


def _common_origin(graphs: Sequence[ExecGraph]) -> tuple[ExecGraph, ...]:
    """Shift each rank's anchors by its start offset on a shared clock (see align_ranks)."""
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


def _collective_waits(graphs: tuple[ExecGraph, ...]) -> tuple[ExecGraph, ...]:
    """Each matched collective participant's waiting for its peers, from the recording.

    On a shared clock (recordings that overlap in time) a participant waited from its own
    arrival to the group's last arrival; otherwise each waited its duration less the group's
    shortest (the last to arrive waited least). Stored in ``Comms.wait_ns``, so the simulator
    runs only the transfer once every participant has arrived in the simulation.
    """
    from lumos.graph.model import Workload

    groups = Workload(graphs).collective_groups()
    sizes = groups.sizes()
    if groups.num_groups == 0 or sizes.max() < 2:
        return graphs
    order = {g.rank: gi for gi, g in enumerate(graphs)}
    sorted_graphs = Workload(graphs).graphs
    ts = np.empty(len(groups.member_task), dtype=np.int64)
    dur = np.empty(len(groups.member_task), dtype=np.int64)
    for wi, g in enumerate(sorted_graphs):
        sel = groups.member_graph == wi
        ts[sel] = g.tasks.ts_ns[groups.member_task[sel]]
        dur[sel] = g.tasks.dur_ns[groups.member_task[sel]]
    starts = [int(g.tasks.ts_ns.min()) for g in graphs if g.num_tasks]
    ends = [int((g.tasks.ts_ns + g.tasks.dur_ns).max()) for g in graphs if g.num_tasks]
    if max(starts) < min(ends):
        last = np.repeat(np.maximum.reduceat(ts, groups.indptr[:-1]), sizes)
        wait = np.clip(last - ts, 0, dur)
    else:
        wait = dur - np.repeat(np.minimum.reduceat(dur, groups.indptr[:-1]), sizes)
    together = np.repeat(sizes >= 2, sizes)
    out = list(graphs)
    for wi, g in enumerate(sorted_graphs):
        sel = (groups.member_graph == wi) & together
        rows = g.tasks.comm_idx[groups.member_task[sel]]
        keep = rows >= 0
        if not keep.any():
            continue
        w = g.comms.wait_ns.copy()
        w[rows[keep]] = wait[sel][keep]
        out[order[g.rank]] = g.replace(comms=g.comms.replace(wait_ns=w))
    return tuple(out)
