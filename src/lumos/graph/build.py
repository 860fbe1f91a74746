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

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_blocking import (
    blocked_calls,
    blocking_copies,
    blocking_ops,
    copy_task_of_wait,
    enqueue_names,
    merge_blocked,
    shorten_blocking,
    shorten_syncs,
)
from lumos.graph.build_causal import settle, submitted_ns
from lumos.graph.build_clock import clock_bounds, fit_clock, shift_gpu_clock
from lumos.graph.build_comms import build_comms, handoffs
from lumos.graph.build_deps import calibrate_gpu, processor_chain
from lumos.graph.build_gaps import attribute_gaps
from lumos.graph.build_gloo import gloo_lanes
from lumos.graph.build_links import find_launches, launching_event
from lumos.graph.build_ranks import align_ranks
from lumos.graph.build_spans import cpu_spans, step_annotations
from lumos.graph.build_sync import plan_syncs
from lumos.graph.build_tasks import (
    GLOO_LEFT_OUT,
    TaskLayout,
    lay_out_tasks,
    left_out_gloo_spans,
)
from lumos.graph.kinds import CPU_TASK_KINDS
from lumos.graph.memory import anchor_memory
from lumos.graph.model import (
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
    trace, lane_of = gloo_lanes(trace)
    blocking = blocking_copies(trace)
    layout = lay_out_tasks(trace, blocking, lane_of)
    if len(layout) == 0:
        from lumos.errors import GraphError

        raise GraphError(f"{trace.path}: trace has no CPU or GPU work to build a graph from")
    launches = find_launches(trace, layout)
    clock = fit_clock(clock_bounds(trace, layout, launches), diag)
    if clock.moves:
        trace = shift_gpu_clock(trace, clock, layout.origin_ns)
        blocking = blocking_copies(trace)
        layout = lay_out_tasks(trace, blocking, lane_of)
        launches = find_launches(trace, layout)
    left_out = left_out_gloo_spans(trace, layout)
    if left_out.size:
        e = int(left_out[0])
        diag.warn(GLOO_LEFT_OUT, f"{trace.names[int(trace.events.name_idx[e])]} at "
                  f"{int(trace.events.ts_ns[e])} ns", int(left_out.size))  # fmt: skip
    plan = plan_syncs(trace, layout, launches, diag)

    ts = layout.ts_ns.copy()
    dur = layout.dur_ns.copy()
    shorten_blocking(trace, layout, ts, dur, launching_event(trace))
    arrive = ts.copy()  # when the thread reached the task (a blocked call starts later)
    w_idx = np.flatnonzero(layout.is_wait)
    arrive[w_idx] = ts[w_idx - 1] + dur[w_idx - 1]  # a copy's wait is held by the copy alone
    keep_wait = shorten_syncs(layout, plan.wait_task, plan.waited_end_ns, ts, dur, diag)

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
        copy_task = copy_task_of_wait(trace, layout, wait_tasks)
        ok = copy_task >= 0
        add(copy_task[ok], wait_tasks[ok], DepKind.SYNC, np.zeros(int(ok.sum()), dtype=np.int64))

    # ---- CPU threads: intra-thread order with overhead gaps; waits on whatever released them
    task_names = _layout_names(trace, layout)
    blocked = merge_blocked(
        blocked_calls(layout, task_names, enqueue_names(trace), arrive, end, stream_of_task,
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
    # a gloo worker runs a collective when handed it: released by the issuing call, with the
    # reaction (or, when the work queued behind the previous one, the worker's own gap)
    h_call, h_comm = handoffs(trace, layout)
    h_comm_ok = ~settled[h_comm]
    h_call, h_comm = h_call[h_comm_ok], h_comm[h_comm_ok]
    settled[h_comm] = True
    h_gap = np.maximum(arrive[h_comm] - end[np.maximum(h_comm - 1, 0)], 0)
    h_delay = np.minimum(arrive[h_comm] - end[h_call], h_gap)
    add(h_call, h_comm, DepKind.INTER_THREAD, np.maximum(h_delay, -dur[h_call]))
    thread_edge = ~stream_of_task[intra_dst]
    submitted = submitted_ns(arrive, launches.launcher, stream_of_task)
    gaps = attribute_gaps(layout, arrive, end, stream_of_task, launches.launcher, task_names,
                          diag, settled, recorded_end, (h_call, h_comm), submitted)  # fmt: skip
    for k in (DepKind.INTER_THREAD, DepKind.SYNC):
        sel = gaps.kind == int(k)
        if sel.any():
            add(gaps.src[sel], gaps.dst[sel], k, gaps.delay_ns[sel])
    edge_into = np.full(len(layout), -1, dtype=np.int64)
    edge_into[intra_dst] = np.arange(intra_dst.size)
    t_delay = intra_delay.copy()
    t_delay[edge_into[gaps.dst]] = gaps.intra_delay_ns
    t_delay[edge_into[blocked.next_task]] = blocked.gap_ns
    t_delay[edge_into[h_comm]] = np.clip(h_delay, 0, h_gap)
    add(intra_src[thread_edge], intra_dst[thread_edge], DepKind.INTRA_THREAD, t_delay[thread_edge])

    # ---- GPU streams: launch, intra-stream and inter-stream, calibrated on the binding one
    s_src, s_dst = intra_src[~thread_edge], intra_dst[~thread_edge]
    edges_gpu, launch_latency = calibrate_gpu(layout, launches.launcher, ts, end, s_src, s_dst,
                               np.asarray(plan.stream_src, dtype=np.int64),
                               np.asarray(plan.stream_dst, dtype=np.int64), diag,
                               submitted)  # fmt: skip
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
    spans = Annotations.concat(
        [step_annotations(trace, layout, ts, end, names), cpu_spans(trace, layout, ts, end)]
    )
    for code, n in trace.diagnostics.items():
        diag.warn(f"ingest:{code}", count=n)
    graph = ExecGraph(
        names=names,
        processors=_processors(trace, layout),
        tasks=tasks,
        edges=edges,
        waits=waits,
        comms=comms,
        process_groups=groups,
        rank=rank,
        world_size=world,
        diagnostics=diag,
        calibration={**clock.calibration(), "launch_latency_ns": launch_latency},
        **_task_dims(trace, tasks.event_idx, spans),
    )
    recorded = layout.ts_ns + layout.dur_ns
    graph = settle(graph, arrive, recorded, _recorded_step_ns(trace, layout, recorded), diag)
    return _with_memory(graph, trace, layout)


def _with_memory(graph: ExecGraph, trace: KinetoTrace, layout: TaskLayout) -> ExecGraph:
    """``graph`` with its trace's memory events anchored to its tasks (see
    :mod:`lumos.graph.memory`)."""
    if not len(trace.memory):
        return graph
    t = graph.tasks
    inv = np.full(len(trace.processors), -1, dtype=np.int64)
    inv[layout.processors] = np.arange(layout.processors.size)
    ev = trace.events
    user = np.flatnonzero(trace.mask(Category.USER_ANNOTATION))
    spans = (
        inv[ev.processor_idx[user]].astype(np.int32), ev.ts_ns[user], ev.end_ns[user],
        [trace.name_of(int(i)) for i in user.tolist()],
    )  # fmt: skip
    capacity = {
        int(d.get("id", i)): int(d.get("totalGlobalMem", 0) or 0)
        for i, d in enumerate(trace.meta.devices)
        if isinstance(d, dict) and isinstance(d.get("totalGlobalMem", 0), int)
    }
    mem = anchor_memory(
        trace.memory, trace.names, ev.name_idx, (ev.dims_idx, trace.dims), t.event_idx, t.processor_idx, t.ts_ns, t.dur_ns,
        np.isin(t.kind, [int(k) for k in CPU_TASK_KINDS]), inv, spans, capacity,
    )  # fmt: skip
    return graph if mem is None else graph.replace(memory=mem)


def _recorded_step_ns(trace: KinetoTrace, layout: TaskLayout, end: NDArray[np.int64]) -> int:
    """The recorded time of the trace's steps (its window when it has none)."""
    if len(trace.steps):
        return int(trace.steps.dur_ns.sum())
    return int(end.max(initial=layout.origin_ns)) - layout.origin_ns


def _layout_names(trace: KinetoTrace, layout: TaskLayout) -> NDArray[np.int32]:
    """Name index of each laid-out task (-1 for synthetic tasks)."""
    real = layout.event_idx >= 0
    out = np.full(len(layout), -1, dtype=np.int32)
    out[real] = trace.events.name_idx[layout.event_idx[real]]
    return out


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


def _task_dims(trace: KinetoTrace, event_idx: np.ndarray, spans: Annotations) -> dict[str, Any]:
    """``dims``, ``task_dims_idx`` and the spans' ``dims_idx``: each task's and each parent op's
    recorded "Input Dims" (or -1), renumbered into the distinct values this graph uses."""
    ev = trace.events.dims_idx
    if ev is None or not trace.dims:
        return {"annotations": spans}
    idx = np.full(len(event_idx), -1, dtype=np.int32)
    has = event_idx >= 0
    idx[has] = ev[event_idx[has]]
    span_idx = spans.dims_idx.astype(np.int32)
    both = np.concatenate([idx, span_idx])
    used = np.unique(both[both >= 0])
    remap = np.full(len(trace.dims), -1, dtype=np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    idx[idx >= 0] = remap[idx[idx >= 0]]
    span_idx[span_idx >= 0] = remap[span_idx[span_idx >= 0]]
    return {
        "dims": tuple(trace.dims[i] for i in used.tolist()),
        "task_dims_idx": idx,
        "annotations": spans.replace(dims_idx=span_idx),
    }
