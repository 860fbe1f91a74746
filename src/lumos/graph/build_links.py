"""Who launched what, and which stream a CUDA call referred to, recovered from a Kineto trace.

CUDA runtime events in Kineto carry a correlation id (shared with the GPU activity they
launched) but not the stream or CUDA event they refer to. These helpers recover that from the
order of launches on the calling thread, the way PyTorch issues work: an event record captures
the stream of the thread's latest launch, a stream-wait-event applies to the stream of the
thread's next launch. HIP traces write the stream into ``args`` and ``cuda_sync`` events
(``enable_cuda_sync_events``) say it outright; both are preferred when present.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_tasks import TaskLayout
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_schema import Category

__all__ = ["Launches", "find_launches", "search_many"]


@dataclass(frozen=True, eq=False)
class Launches:
    """Launch facts per task and per thread.

    ``launcher[t]``: the RUNTIME task that launched GPU task ``t`` (-1: none in the trace).
    ``launch_ts[t]``: recorded start of that call (-1 when none). ``stream_order[p]``: GPU tasks
    of graph processor ``p`` sorted by launch time, with their launch times, for "the last task
    launched on stream p before time x" queries. ``thread_launches[p]``: (call ts, stream
    processor) of every launch issued from thread ``p``, in time order.
    """

    launcher: NDArray[np.int64]
    launch_ts: NDArray[np.int64]
    stream_order: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]]
    thread_launches: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]]

    def last_launched_before(self, stream: int, ts_ns: int) -> int:
        """The task last launched on ``stream`` strictly before ``ts_ns`` (-1 if none)."""
        order = self.stream_order.get(stream)
        if order is None:
            return -1
        launch_ts, tasks = order
        k = int(launch_ts.searchsorted(ts_ns, side="left")) - 1
        return int(tasks[k]) if k >= 0 else -1

    def first_launched_after(self, stream: int, ts_ns: int) -> int:
        """The first task launched on ``stream`` at or after ``ts_ns`` (-1 if none)."""
        order = self.stream_order.get(stream)
        if order is None:
            return -1
        launch_ts, tasks = order
        k = int(launch_ts.searchsorted(ts_ns, side="left"))
        return int(tasks[k]) if k < len(tasks) else -1

    def stream_of_previous_launch(self, thread: int, ts_ns: int) -> int:
        """Stream processor of the thread's latest launch before ``ts_ns`` (-1 if none)."""
        tl = self.thread_launches.get(thread)
        if tl is None:
            return -1
        k = int(tl[0].searchsorted(ts_ns, side="left")) - 1
        return int(tl[1][k]) if k >= 0 else -1

    def stream_of_previous_launch_except(self, thread: int, ts_ns: int, stream: int) -> int:
        """Stream processor of the thread's latest launch before ``ts_ns`` onto a stream other
        than ``stream`` (-1 if none)."""
        tl = self.thread_launches.get(thread)
        if tl is None:
            return -1
        k = int(tl[0].searchsorted(ts_ns, side="left"))
        other = np.flatnonzero(tl[1][:k] != stream)
        return int(tl[1][other[-1]]) if other.size else -1

    def stream_of_next_launch(self, thread: int, ts_ns: int) -> int:
        """Stream processor of the thread's first launch after ``ts_ns`` (-1 if none)."""
        tl = self.thread_launches.get(thread)
        if tl is None:
            return -1
        k = int(tl[0].searchsorted(ts_ns, side="right"))
        return int(tl[1][k]) if k < len(tl[0]) else -1


def search_many(
    groups: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]],
    keys: NDArray[np.int64],
    ts_ns: NDArray[np.int64],
    *,
    side: Literal["left", "right"],
    shift: int,
) -> NDArray[np.int64]:
    """Many :class:`Launches` queries at once: for each ``(keys[i], ts_ns[i])``, the value at
    position ``searchsorted(times, ts_ns[i], side) + shift`` of ``groups[keys[i]] = (times,
    values)`` (times sorted), -1 where the key has no group or the position is out of range.
    ``side="left", shift=-1`` is "the last one strictly before", ``side="left", shift=0`` "the
    first one at or after", ``side="right", shift=0`` "the first one after"."""
    out = np.full(keys.shape[0], -1, dtype=np.int64)
    for key in np.unique(keys).tolist():
        group = groups.get(int(key))
        if group is None:
            continue
        times, values = group
        sel = np.flatnonzero(keys == key)
        k = times.searchsorted(ts_ns[sel], side=side) + shift
        ok = (k >= 0) & (k < times.shape[0])
        out[sel[ok]] = values[k[ok]]
    return out


def correlation_index(trace: KinetoTrace) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Sorted correlation ids of runtime/driver events and the matching event rows."""
    ev = trace.events
    rt = np.flatnonzero(
        np.isin(ev.cat, (int(Category.RUNTIME), int(Category.DRIVER))) & (ev.correlation_id >= 0)
    )
    corr = ev.correlation_id[rt]
    order = np.argsort(corr, kind="stable")
    return corr[order], rt[order]


def launching_event(trace: KinetoTrace) -> NDArray[np.int64]:
    """For every event, the runtime event with the same correlation id (-1 if none)."""
    ev = trace.events
    keys, rows = correlation_index(trace)
    out = np.full(len(ev), -1, dtype=np.int64)
    gpu = np.flatnonzero(
        np.isin(ev.cat, (int(Category.KERNEL), int(Category.MEMCPY), int(Category.MEMSET)))
        & (ev.correlation_id >= 0)
    )
    if keys.size and gpu.size:
        pos = np.searchsorted(keys, ev.correlation_id[gpu])
        pos = np.minimum(pos, keys.size - 1)
        hit = keys[pos] == ev.correlation_id[gpu]
        out[gpu[hit]] = rows[pos[hit]]
    return out


def find_launches(trace: KinetoTrace, layout: TaskLayout) -> Launches:
    """Bind every GPU task to the runtime task that launched it (see :class:`Launches`)."""
    ev = trace.events
    n = len(layout)
    launch_ev = launching_event(trace)
    task_of = layout.task_of_event(len(ev))
    real = (layout.event_idx >= 0) & ~layout.is_wait
    gpu_kinds = np.isin(layout.kind, (2, 3, 4, 5)) & real
    launcher = np.full(n, -1, dtype=np.int64)
    launch_ts = np.full(n, -1, dtype=np.int64)
    g = np.flatnonzero(gpu_kinds)
    le = launch_ev[layout.event_idx[g]]
    has = le >= 0
    launch_ts[g[has]] = ev.ts_ns[le[has]]
    lt = task_of[le[has]]
    # a runtime call with nested driver calls is not itself a task: use the task it encloses
    missing = lt < 0
    if missing.any():
        lt[missing] = _enclosed_task(
            layout, ev.ts_ns[le[has][missing]], ev.processor_idx[le[has][missing]]
        )
    launcher[g[has]] = lt

    stream_order: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]] = {}
    for gp in range(len(layout.processors)):
        lo, hi = int(layout.proc_ptr[gp]), int(layout.proc_ptr[gp + 1])
        tasks = np.arange(lo, hi)[gpu_kinds[lo:hi]]
        if tasks.size == 0:
            continue
        lts = launch_ts[tasks]
        # tasks ahead of the stream's first launch were queued before the trace window opened:
        # launched before everything in it; other unlaunched tasks keep their place in stream
        # order at their recorded start
        launched_pos = np.flatnonzero(lts >= 0)
        n_head = int(launched_pos[0]) if launched_pos.size else tasks.size
        lts = np.where(lts >= 0, lts, layout.ts_ns[tasks])
        lts[:n_head] = layout.origin_ns - 1
        o = np.argsort(lts, kind="stable")
        stream_order[gp] = (lts[o], tasks[o])
    thread_launches: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]] = {}
    lt_all = np.flatnonzero(launcher >= 0)
    if lt_all.size:
        call = launcher[lt_all]
        thread = layout.processor_idx[call]
        ts = launch_ts[lt_all]
        stream = layout.processor_idx[lt_all]
        o = np.lexsort((ts, thread))
        thread, ts, stream = thread[o], ts[o], stream[o]
        for p in np.unique(thread).tolist():
            sel = thread == p
            thread_launches[int(p)] = (ts[sel], stream[sel].astype(np.int64))
    return Launches(launcher, launch_ts, stream_order, thread_launches)


def _enclosed_task(
    layout: TaskLayout, ts_ns: NDArray[np.int64], trace_proc: NDArray[np.int32]
) -> NDArray[np.int64]:
    """The first task at or after ``ts_ns`` on the same thread (for non-leaf runtime calls)."""
    out = np.full(ts_ns.size, -1, dtype=np.int64)
    gp_of = {int(p): gp for gp, p in enumerate(layout.processors.tolist())}
    for i, (t, p) in enumerate(zip(ts_ns.tolist(), trace_proc.tolist(), strict=True)):
        gp = gp_of.get(int(p))
        if gp is None:
            continue
        lo, hi = int(layout.proc_ptr[gp]) + 1, int(layout.proc_ptr[gp + 1])
        k = lo + int(np.searchsorted(layout.ts_ns[lo:hi], t, side="left"))
        if k < hi:
            out[i] = k
    return out
