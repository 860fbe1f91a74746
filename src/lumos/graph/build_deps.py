"""Dependency edges of a graph with calibrated delays (see :mod:`lumos.graph.build`).

Per processor, consecutive tasks are chained; a thread that resumes right after another thread's
task ended gets an inter-thread edge; GPU tasks get launch, intra-stream and inter-stream edges
whose delays give the recorded slack to the one dependency that held the task back.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_tasks import START, TaskLayout
from lumos.graph.model import DepKind

__all__ = [
    "RESUME_GAP_NS",
    "RESUME_WINDOW_NS",
    "TOL_NS",
    "calibrate_gpu",
    "inter_thread_edges",
    "processor_chain",
]

#: A thread gap longer than this may be a wait on another thread.
RESUME_GAP_NS = 50_000
#: ...when another thread's task ended at most this long before the resume.
RESUME_WINDOW_NS = 50_000
#: Recorded times closer than this are treated as equal (Kineto rounds to microseconds).
TOL_NS = 1_000


def processor_chain(
    layout: TaskLayout, arrive: NDArray[np.int64], end: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Consecutive task pairs on every processor, with the recorded gap between them."""
    ts = arrive
    n = len(layout)
    dst = np.arange(1, n, dtype=np.int64)
    same = layout.processor_idx[1:] == layout.processor_idx[:-1]
    dst = dst[same]
    src = dst - 1
    anchor = layout.event_idx[src] == START
    gap = ts[dst] - end[src]
    gap = np.where(anchor, ts[dst] - layout.origin_ns, gap)
    return src, dst, np.maximum(gap, 0)


def inter_thread_edges(
    layout: TaskLayout,
    ts: NDArray[np.int64],
    end: NDArray[np.int64],
    on_stream: NDArray[np.bool_],
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """A thread resuming right after another thread's task ended waited for it."""
    cpu = np.flatnonzero(~on_stream & (layout.event_idx != START))
    order = np.argsort(end[cpu], kind="stable")
    ends_sorted = end[cpu][order]
    tasks_sorted = cpu[order]
    gap = ts[dst] - end[src]
    cand = np.flatnonzero((gap > RESUME_GAP_NS) & (layout.event_idx[src] != START))
    out_s: list[int] = []
    out_d: list[int] = []
    out_l: list[int] = []
    for i in cand.tolist():
        t, prev = int(dst[i]), int(src[i])
        k = int(np.searchsorted(ends_sorted, ts[t], side="right")) - 1
        while k >= 0 and ends_sorted[k] >= end[prev] and ts[t] - ends_sorted[k] <= RESUME_WINDOW_NS:
            u = int(tasks_sorted[k])
            if layout.processor_idx[u] != layout.processor_idx[t]:
                out_s.append(u)
                out_d.append(t)
                out_l.append(int(ts[t] - ends_sorted[k]))
                break
            k -= 1
    return (np.asarray(out_s, dtype=np.int64), np.asarray(out_d, dtype=np.int64),
            np.asarray(out_l, dtype=np.int64))  # fmt: skip


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
) -> list[tuple[NDArray[np.int64], NDArray[np.int64], DepKind, NDArray[np.int64]]]:
    """Launch, intra-stream and inter-stream edges with the slack on the binding one."""
    n = len(layout)
    has_launch = launcher >= 0
    gl = np.flatnonzero(has_launch)
    lat = ts[gl] - end[launcher[gl]]
    # the launch latency a kernel pays when nothing else holds it: a low percentile, robust to
    # blocking calls whose GPU work starts long before they return; an edge never gets more
    # than its own observed latency, so no recorded start is contradicted
    base_lat = int(np.percentile(lat, 5)) if lat.size else 0
    own_lat = np.minimum(lat, base_lat)
    # latest constraint of each kind per task (recorded times)
    prev_end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    anchor = layout.event_idx[s_src] == START
    prev_end[s_dst] = np.where(anchor, layout.origin_ns, end[s_src])
    launch_ready = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    launch_ready[gl] = end[launcher[gl]] + own_lat
    cross_ready = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(cross_ready, x_dst, end[x_src])
    # a task with no launch hangs from its stream anchor at its recorded offset (see anchor)
    stream_gate = np.where(anchor & has_launch[s_dst], np.iinfo(np.int64).min, prev_end[s_dst])
    prev_end[s_dst] = stream_gate
    ready = np.maximum(np.maximum(prev_end, launch_ready), cross_ready)
    slack = ts - ready
    late = np.flatnonzero((slack < -TOL_NS) & (ready > np.iinfo(np.int64).min))
    if late.size:
        diag.warn("gpu_task_starts_before_its_dependencies", f"task {int(late[0])}", int(late.size))
    slack = np.maximum(slack, 0)
    bind_launch = has_launch & (launch_ready >= prev_end) & (launch_ready >= cross_ready)
    bind_cross = ~bind_launch & (cross_ready > prev_end)
    bind_stream = ~bind_launch & ~bind_cross

    d_stream = np.where(anchor & ~has_launch[s_dst], ts[s_dst] - layout.origin_ns, 0)
    d_stream = np.where(bind_stream[s_dst] & ~anchor, slack[s_dst], d_stream)
    d_launch = np.maximum(
        own_lat + np.where(bind_launch[gl], slack[gl], 0), -(end - ts)[launcher[gl]]
    )
    d_cross = np.where(bind_cross[x_dst] & (end[x_src] == cross_ready[x_dst]), slack[x_dst], 0)
    return [
        (s_src, s_dst, DepKind.INTRA_STREAM, d_stream),
        (launcher[gl], gl, DepKind.LAUNCH, d_launch),
        (x_src, x_dst, DepKind.INTER_STREAM, d_cross),
    ]
