"""Inter-stream edges of ``cudaStreamWaitEvent`` calls, all of a trace's calls at once.

A stream-wait call makes the stream that waits (the next work launched on it) depend on the
GPU task the waited event captured (the last work launched on the recording stream before the
event was recorded). What the trace says is used first: a ``cuda_sync`` "Stream Wait Event"
record names the waiting stream, the recording stream and the record call (by correlation id).
Without one, the record call is the thread's latest ``cudaEventRecord`` before the wait (or, in
Kineto versions that do not trace it, the wait itself: PyTorch records right before it waits),
the recording stream is that thread's latest launch before the record, and the waiting stream
the thread's next launch after the wait (see :mod:`lumos.graph.build_links`).

The lookups run as array searches over every call of a trace together (a trace replicated to a
million tasks holds a hundred thousand such calls); only the calls that need their thread's
launch history walked back (no later launch from the thread, or a record made on another stream
than the thread's latest launch without a ``cuda_sync`` record to say which) are planned one by
one. An edge the recording contradicts (its source ended after its destination started, beyond
a 1 us tolerance) is dropped and flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_links import Launches, search_many
from lumos.graph.build_tasks import TaskLayout

__all__ = ["StreamWaits", "plan_stream_waits"]

_TOLERANCE_NS = 1_000

Groups = dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]]


@dataclass(frozen=True)
class StreamWaits:
    """Per stream-wait call (in the order given): its start, the edge ``src -> dst`` it makes
    (-1: none), whether that edge was dropped as contradicted by the recording, and whether no
    record call was found for it (the wait itself stood in)."""

    ts_ns: NDArray[np.int64]
    src: NDArray[np.int64]
    dst: NDArray[np.int64]
    contradicted: NDArray[np.bool_]
    without_record: NDArray[np.bool_]


def plan_stream_waits(
    tasks: NDArray[np.int64],
    layout: TaskLayout,
    launches: Launches,
    sync_by_corr: dict[int, tuple[int, int, int]],
    wait_on_first: dict[int, int],
    stream_gp: dict[tuple[int, int], int],
    record_task_by_corr: dict[int, int],
    records_by_thread: Groups,
    corr: NDArray[np.int64],
) -> StreamWaits:
    """Plan the stream-wait calls ``tasks`` (runtime tasks; ``corr`` their correlation ids).

    ``sync_by_corr``: correlation -> (sync kind, stream, record correlation) of its
    ``cuda_sync`` record; ``wait_on_first``: correlation -> the recording stream of its first;
    ``stream_gp``: (device, stream id) -> graph processor; ``record_task_by_corr``: the
    ``cudaEventRecord`` task of a correlation id; ``records_by_thread``: per thread, its record
    calls' start times and tasks (times sorted)."""
    n = tasks.shape[0]
    thread = layout.processor_idx[tasks].astype(np.int64)
    s = layout.ts_ns[tasks]
    dev = min((d for d, _ in stream_gp), default=0)
    record = np.full(n, -1, dtype=np.int64)
    waiting = np.full(n, -1, dtype=np.int64)
    rec_stream = np.full(n, -1, dtype=np.int64)
    has_info = np.zeros(n, dtype=bool)
    for i, c in enumerate(corr.tolist()):
        info = sync_by_corr.get(c)
        if info is None:
            continue
        has_info[i] = True
        if info[0] == 3:
            record[i] = record_task_by_corr.get(info[2], -1)
            waiting[i] = stream_gp.get((dev, info[1]), -1)
            if c in wait_on_first:
                rec_stream[i] = stream_gp.get((dev, wait_on_first[c]), -1)
    miss = np.flatnonzero(record < 0)
    record[miss] = search_many(records_by_thread, thread[miss], s[miss], side="left", shift=-1)
    without = record < 0
    safe = np.maximum(record, 0)
    r_ts = np.where(without, s, layout.ts_ns[safe])
    r_thread = np.where(without, thread, layout.processor_idx[safe])
    miss = np.flatnonzero(rec_stream < 0)
    rec_stream[miss] = search_many(
        launches.thread_launches, r_thread[miss], r_ts[miss], side="left", shift=-1
    )
    unknown = np.flatnonzero(waiting < 0)
    waiting[unknown] = search_many(
        launches.thread_launches, thread[unknown], s[unknown], side="right", shift=0
    )
    # walked back one by one: no later launch from the thread, or a stream waiting for its
    # own event by the launch order alone
    walk = np.zeros(n, dtype=bool)
    walk[unknown] = (waiting[unknown] < 0) | (
        (waiting[unknown] == rec_stream[unknown]) & (record[unknown] >= 0) & ~has_info[unknown]
    )
    src, dst = _edges(launches, rec_stream, waiting, r_ts, s)
    src[walk] = dst[walk] = -1
    for i in np.flatnonzero(walk).tolist():
        src[i], dst[i] = _walked_edge(
            launches, int(thread[i]), int(s[i]), int(r_thread[i]), int(r_ts[i]),
            int(rec_stream[i]), int(waiting[i]),
        )  # fmt: skip
    made = (src >= 0) & (dst >= 0)
    end = layout.ts_ns + layout.dur_ns
    contradicted = np.zeros(n, dtype=bool)
    contradicted[made] = end[src[made]] > layout.ts_ns[dst[made]] + _TOLERANCE_NS
    return StreamWaits(s, src, dst, contradicted, without)


def _edges(
    launches: Launches,
    rec: NDArray[np.int64],
    wait_on: NDArray[np.int64],
    r_ts: NDArray[np.int64],
    s: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The edge of each pair of streams: last launched on ``rec`` before ``r_ts`` -> first
    launched on ``wait_on`` at or after ``s``; -1 both where there is none (a stream missing,
    the same stream on both sides, or nothing launched there)."""
    src = np.full(rec.shape[0], -1, dtype=np.int64)
    dst = src.copy()
    ok = np.flatnonzero((rec >= 0) & (wait_on >= 0) & (rec != wait_on))
    a = search_many(launches.stream_order, rec[ok], r_ts[ok], side="left", shift=-1)
    b = search_many(launches.stream_order, wait_on[ok], s[ok], side="left", shift=0)
    both = (a >= 0) & (b >= 0)
    src[ok[both]] = a[both]
    dst[ok[both]] = b[both]
    return src, dst


def _walked_edge(
    launches: Launches,
    thread: int,
    s: int,
    r_thread: int,
    r_ts: int,
    rec_stream: int,
    waiting: int,
) -> tuple[int, int]:
    """The edge of a call whose waiting stream the launch order alone does not settle."""
    if waiting < 0:
        # no later launch from this thread (the backward thread's last wait, for the optimizer
        # the main thread launches next): its current stream is its latest launch onto a stream
        # other than the event's, or, if the record was not on its latest launch's stream, the
        # other way round
        other = launches.stream_of_previous_launch_except(thread, s, rec_stream)
        pairs = [(rec_stream, other), (other, rec_stream)]
    else:
        # a stream never waits for its own event: the record was made on another stream than
        # the thread's latest launch, the latest other one it launched onto
        pairs = [(launches.stream_of_previous_launch_except(r_thread, r_ts, waiting), waiting)]
    for rec, wait_on in pairs:
        if rec < 0 or wait_on < 0 or rec == wait_on:
            continue
        src = launches.last_launched_before(rec, r_ts)
        dst = launches.first_launched_after(wait_on, s)
        if src >= 0 and dst >= 0:
            return src, dst
    return -1, -1
