"""Processor order and GPU dependency edges, with delays chosen from the recording.

Per processor, consecutive tasks are chained (:func:`processor_chain`). A GPU task can be held
back by three things: its launch (the runtime call plus the *launch latency*), the previous task
on its stream, and inter-stream edges (event record/wait). :func:`calibrate_gpu` gives each
edge a delay that is a cost, not a wait:

* **launch latency** (:func:`launch_latency_ns`): measured on launches onto an *idle* stream
  (nothing else held the task), where the gap from the call's end to the task's start is the
  launch itself; a low queueing floor measured over every launch would make each launch wait as
  long as the GPU's backlog did;
* the dependency that actually held the task back (the *binding* one: the latest of the three
  ready times) also gets the task's remaining recorded slack, so a replay with traced durations
  starts the task when it started; slack on a launch beyond :data:`LAUNCH_LATENCY_MAX_NS` is
  counted as an unexplained GPU gap (``gpu_gap_unexplained``);
* the others get their intrinsic part only (0 for stream and event edges).

The GPU clock is put on the CPU clock before any of this, by :mod:`lumos.graph.build_clock`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_tasks import START, TaskLayout
from lumos.graph.model import DepKind

__all__ = [
    "LAUNCH_LATENCY_MAX_NS",
    "LAUNCH_LATENCY_NOMINAL_NS",
    "TOL_NS",
    "calibrate_gpu",
    "idle_launches",
    "launch_latency_ns",
    "processor_chain",
]

#: Recorded times closer than this are treated as equal (Kineto rounds to microseconds).
TOL_NS = 1_000
#: What a kernel launch can physically cost, call end to kernel start, on an idle stream.
LAUNCH_LATENCY_MAX_NS = 50_000
#: Launch latency assumed when a clock offset must be removed (typical CUDA/HIP figure).
LAUNCH_LATENCY_NOMINAL_NS = 5_000
_NONE = np.iinfo(np.int64).min


def processor_chain(
    layout: TaskLayout, arrive: NDArray[np.int64], end: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Consecutive task pairs on every processor, with the recorded gap between them.

    The gap into a processor's first task is measured from the trace origin (the anchor task).
    """
    n = len(layout)
    dst = np.arange(1, n, dtype=np.int64)
    same = layout.processor_idx[1:] == layout.processor_idx[:-1]
    dst = dst[same]
    src = dst - 1
    anchor = layout.event_idx[src] == START
    gap = np.where(anchor, arrive[dst] - layout.origin_ns, arrive[dst] - end[src])
    return src, dst, np.maximum(gap, 0)


def _stream_ready(
    layout: TaskLayout, end: NDArray[np.int64], s_src: NDArray[np.int64], s_dst: NDArray[np.int64]
) -> NDArray[np.int64]:
    """End of the previous task on each GPU task's stream (``_NONE`` for a stream's first)."""
    ready = np.full(len(layout), _NONE, dtype=np.int64)
    real_prev = layout.event_idx[s_src] != START
    ready[s_dst[real_prev]] = end[s_src[real_prev]]
    return ready


def idle_launches(
    layout: TaskLayout,
    launcher: NDArray[np.int64],
    ts: NDArray[np.int64],
    stream_ready: NDArray[np.int64],
    cross_ready: NDArray[np.int64],
) -> NDArray[np.int64]:
    """GPU tasks launched onto an idle stream: nothing but their launch held them back."""
    held = np.maximum(stream_ready, cross_ready)
    return np.flatnonzero((launcher >= 0) & (ts > held + TOL_NS))


def launch_latency_ns(latencies: NDArray[np.int64]) -> int:
    """Intrinsic launch latency: the median over idle launches, within physical bounds.

    ``latencies`` are call-end-to-start times of idle launches (clock offset removed). With no
    idle launch in the trace the nominal figure is used.
    """
    if latencies.size == 0:
        return LAUNCH_LATENCY_NOMINAL_NS
    return int(np.clip(np.median(latencies), 0, LAUNCH_LATENCY_MAX_NS))


def calibrate_gpu(
    layout: TaskLayout,
    launcher: NDArray[np.int64],
    ts: NDArray[np.int64],
    end: NDArray[np.int64],
    s_src: NDArray[np.int64],
    s_dst: NDArray[np.int64],
    x_src: NDArray[np.int64],
    x_dst: NDArray[np.int64],
    diag: Diagnostics,
    submitted: NDArray[np.int64] | None = None,
) -> tuple[list[tuple[NDArray[np.int64], NDArray[np.int64], DepKind, NDArray[np.int64]]], int]:
    """Launch, intra-stream and inter-stream edges (see the module docstring).

    ``s_src -> s_dst`` are consecutive tasks of each stream (the anchor first), ``x_src ->
    x_dst`` the inter-stream edges. ``submitted`` (:func:`lumos.graph.build_causal.submitted_ns`)
    rules out an edge found by timing from a task launched after the task it would hold.
    Returns the edge groups and the launch latency used.
    """
    launched = np.flatnonzero(launcher >= 0)
    call_end = end[launcher[launched]]
    stream_ready = _stream_ready(layout, end, s_src, s_dst)
    cross_ready = np.full(len(layout), _NONE, dtype=np.int64)
    np.maximum.at(cross_ready, x_dst, end[x_src])
    idle = idle_launches(layout, launcher, ts, stream_ready, cross_ready)
    latency_ns = launch_latency_ns(ts[idle] - end[launcher[idle]])

    # a task can start no earlier than its launch call's end plus the launch latency (never
    # more than its own recorded latency, so no recorded start is contradicted)
    observed_latency = ts[launched] - call_end
    own_latency = np.minimum(observed_latency, latency_ns)
    launch_ready = np.full(len(layout), _NONE, dtype=np.int64)
    launch_ready[launched] = call_end + own_latency
    # the first task of a stream that nothing launched was queued before the window opened:
    # the pre-window work it waited behind is a fixed offset from the origin
    first = layout.event_idx[s_src] == START
    queued_head = s_dst[first & (launcher[s_dst] < 0)]
    stream_ready[queued_head] = layout.origin_ns

    ready = np.maximum(np.maximum(stream_ready, launch_ready), cross_ready)
    constrained = ready > _NONE
    slack = np.where(constrained, ts - ready, 0)
    early = np.flatnonzero(slack < -TOL_NS)
    if early.size:
        diag.warn("gpu_task_starts_before_its_dependencies", f"task {int(early[0])}", early.size)
    slack = np.maximum(slack, 0)
    binds_launch = (launcher >= 0) & (launch_ready >= stream_ready) & (launch_ready >= cross_ready)
    binds_cross = ~binds_launch & (cross_ready > stream_ready)
    binds_stream = ~binds_launch & ~binds_cross

    # a task that waited far longer than any launch or stream order explains was held by work
    # on another stream: an event wait the record/wait inference missed, found by timing
    held = np.flatnonzero((launcher >= 0) & binds_launch & (slack > LAUNCH_LATENCY_MAX_NS))
    t_src, t_dst, t_delay = _held_by_other_stream(layout, held, ts, end, ready, submitted)
    binds_launch[t_dst] = False
    slack[t_dst] = 0
    launch_delay = own_latency + np.where(binds_launch[launched], slack[launched], 0)
    unexplained = launch_delay - LAUNCH_LATENCY_MAX_NS
    if (unexplained > 0).any():
        diag.warn("gpu_gap_unexplained", f"task {int(launched[np.argmax(unexplained)])}",
                  int((unexplained > 0).sum()))  # fmt: skip
    if t_dst.size:
        diag.warn("inter_stream_edge_from_timing", f"task {int(t_src[0])} -> {int(t_dst[0])}",
                  t_dst.size)  # fmt: skip
    # a negative latency (task started before its call returned) may not reach before the call
    launch_delay = np.maximum(launch_delay, -(end - ts)[launcher[launched]])

    stream_delay = np.where(binds_stream[s_dst], slack[s_dst], 0)
    stream_delay = np.where(first & (launcher[s_dst] >= 0), 0, stream_delay)
    head = first & (launcher[s_dst] < 0)
    stream_delay = np.where(head, ts[s_dst] - layout.origin_ns, stream_delay)
    cross_delay = np.where(binds_cross[x_dst] & (end[x_src] == cross_ready[x_dst]), slack[x_dst], 0)
    edges = [
        (s_src, s_dst, DepKind.INTRA_STREAM, stream_delay),
        (launcher[launched], launched, DepKind.LAUNCH, launch_delay),
        (x_src, x_dst, DepKind.INTER_STREAM, cross_delay),
        (t_src, t_dst, DepKind.INTER_STREAM, t_delay),
    ]
    return edges, latency_ns


def _held_by_other_stream(
    layout: TaskLayout,
    held: NDArray[np.int64],
    ts: NDArray[np.int64],
    end: NDArray[np.int64],
    ready: NDArray[np.int64],
    submitted: NDArray[np.int64] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """For GPU tasks that started long after anything known allowed them, the task of another
    stream whose end they followed within a launch's cost (the latest such launched no later
    than the held task; none if none)."""
    gpu = np.flatnonzero((layout.kind >= 2) & (layout.kind <= 5) & (layout.event_idx >= 0))
    by_end = gpu[np.argsort(end[gpu], kind="stable")]
    ends = end[by_end]
    src, dst, delay = [], [], []
    for t in held.tolist():
        # ends within the recording's resolution after the start count as touching
        k = int(np.searchsorted(ends, ts[t] + TOL_NS, side="right")) - 1
        while k >= 0 and ends[k] > ready[t] and ts[t] - ends[k] <= LAUNCH_LATENCY_MAX_NS:
            u = int(by_end[k])
            k -= 1
            if submitted is not None and submitted[u] > submitted[t]:
                continue
            if layout.processor_idx[u] != layout.processor_idx[t]:
                src.append(u)
                dst.append(t)
                delay.append(int(ts[t] - end[u]))
                break
    i64 = np.int64
    return np.asarray(src, i64), np.asarray(dst, i64), np.asarray(delay, i64)
