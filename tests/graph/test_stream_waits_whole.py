"""``lumos.graph.build_stream_waits`` whole: every rule of ``plan_stream_waits`` on hand-built
launch histories.

Each test lays out a few tasks by hand (graph processor, start, duration; times in ns) with
the launch history the rules read: per stream, (launch time, task) in launch order; per thread,
(call time, stream) of its launches; per thread, (start, task) of its ``cudaEventRecord``
calls. Graph processors 0, 1 and 2 are streams and 3 and 4 threads, so that stream 0 and task
0 are a stream and a task like any other. The expected edge of each stream-wait call follows
the module's rules, worked out in each docstring: the record call is the one its ``cuda_sync``
record names, else the thread's latest record strictly before the wait, else the wait itself;
the recording stream is the one the record names, else the recording thread's latest launch
strictly before the record; the waiting stream the one the record names, else the thread's
next launch strictly after the wait. The edge runs from the last task launched on the recording
stream strictly before the record to the first launched on the waiting stream at or after the
wait; it is contradicted when its source ends more than 1,000 ns after its destination starts.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from lumos.graph.build_links import Launches
from lumos.graph.build_stream_waits import plan_stream_waits

S0, S1, S2, T, U = 0, 1, 2, 3, 4


def _group(d: dict[int, list[tuple[int, int]]]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return {k: (np.array([a for a, _ in v], dtype=np.int64),
                np.array([b for _, b in v], dtype=np.int64)) for k, v in d.items()}  # fmt: skip


def _plan(
    tasks: list[tuple[int, int, int]],
    streams: dict[int, list[tuple[int, int]]],
    threads: dict[int, list[tuple[int, int]]],
    calls: list[int],
    *,
    records: dict[int, list[tuple[int, int]]] | None = None,
    sync: dict[int, tuple[int, int, int]] | None = None,
    first: dict[int, int] | None = None,
    stream_gp: dict[tuple[int, int], int] | None = None,
    record_task: dict[int, int] | None = None,
    corr: list[int] | None = None,
) -> list[tuple[int, int, bool, bool]]:
    """Plan ``calls`` (tasks) with correlation ids ``corr`` (100, 101, ... by default); each
    row (src, dst, contradicted, without record), after checking the starts come back."""
    layout: Any = SimpleNamespace(
        processor_idx=np.array([p for p, _, _ in tasks], dtype=np.int32),
        ts_ns=np.array([s for _, s, _ in tasks], dtype=np.int64),
        dur_ns=np.array([d for _, _, d in tasks], dtype=np.int64),
    )
    launches = Launches(np.zeros(0, np.int64), np.zeros(0, np.int64), _group(streams),
                        _group(threads))  # fmt: skip
    ids = corr if corr is not None else [100 + i for i in range(len(calls))]
    w = plan_stream_waits(
        np.array(calls, dtype=np.int64), layout, launches, sync or {}, first or {},
        stream_gp or {}, record_task or {}, _group(records or {}), np.array(ids, dtype=np.int64),
    )  # fmt: skip
    assert w.ts_ns.tolist() == [tasks[c][1] for c in calls]
    for a, dtype in ((w.src, np.int64), (w.dst, np.int64), (w.contradicted, np.bool_),
                     (w.without_record, np.bool_)):  # fmt: skip
        assert a.dtype == dtype and a.shape == (len(calls),)
    return [(int(a), int(b), bool(c), bool(d)) for a, b, c, d in
            zip(w.src, w.dst, w.contradicted, w.without_record, strict=True)]  # fmt: skip


# Thread T launches task 0 onto S1 at 10, records at 20 (task 1), waits at 30 (task 2) and
# launches task 3 onto S0 at 40; task 0 runs 100-150, task 3 from ``dst_ts``.
def _basic(dst_ts: int = 149, **kw: Any) -> list[tuple[int, int, bool, bool]]:
    tasks = [(S1, 100, 50), (T, 20, 1), (T, 30, 1), (S0, dst_ts, 5)]
    return _plan(tasks, {S1: [(10, 0)], S0: [(40, 3)]}, {T: [(10, S1), (40, S0)]}, [2],
                 records={T: [(20, 1)]}, **kw)  # fmt: skip


def test_a_wait_by_launch_order_links_the_recorded_work_to_the_next_launch():
    """``_basic``: the record is T's latest before the wait (task 1, at 20), the recording
    stream T's latest launch before it (S1), the waiting stream T's next launch after the
    wait (S0): edge 0 -> 3. Task 0 ends at 150: with task 3 from 149 (or from exactly
    150 - 1,000 = -850 ns... the tolerance) it is not contradicted; from -851 it is."""
    assert _basic() == [(0, 3, False, False)]
    assert _basic(dst_ts=-850) == [(0, 3, False, False)]
    assert _basic(dst_ts=-851) == [(0, 3, True, False)]


def test_a_wait_searches_records_and_launches_strictly_before_and_launches_at_or_after():
    """As ``_basic``, plus a second record of T at exactly 30 (task 4, not before the wait), a
    launch by T onto S1 at exactly 20 (task 5, not before the record) and one by U onto S0 at
    exactly 30 (task 6, at the wait: the first on S0 at or after it), and T's launch of task
    3 at exactly 30 (not after the wait: the waiting stream is T's launch after, task 7 onto
    S0 at 31... kept on S0). Edge 0 -> 6."""
    tasks = [(S1, 100, 50), (T, 20, 1), (T, 30, 1), (S0, 300, 5), (T, 30, 1), (S1, 160, 5),
             (S0, 200, 5), (S0, 400, 5)]  # fmt: skip
    streams = {S1: [(10, 0), (20, 5)], S0: [(30, 6), (30, 3), (31, 7)]}
    threads = {T: [(10, S1), (20, S1), (30, S2), (31, S0)], U: [(30, S0)]}
    got = _plan(tasks, streams, threads, [2], records={T: [(20, 1), (30, 4)]})
    assert got == [(0, 6, False, False)]


def test_a_wait_without_a_record_stands_in_for_it():
    """No record on T: the wait (task 2, at 30) stands in. The recording stream is T's latest
    launch before 30 (task 0 onto S1 at 10), the waiting stream its next after 30 (task 3
    onto S0 at 40): edge 0 -> 3, flagged as without record."""
    tasks = [(S1, 100, 50), (T, 20, 1), (T, 30, 1), (S0, 200, 5)]
    got = _plan(tasks, {S1: [(10, 0)], S0: [(40, 3)]}, {T: [(10, S1), (40, S0)]}, [2])
    assert got == [(0, 3, False, True)]


def test_a_wait_with_no_later_launch_from_its_thread_pairs_its_last_two_streams():
    """T launches task 0 onto S1 at 10 and task 3 onto S0 at 15, waits at 30 (task 2, no
    record) and launches nothing after. The recording stream is S0 (T's latest launch), the
    waiting one unknown: walked back, T's latest launch onto another stream than S0 is S1.
    First pair S0 -> S1: with U's launch of task 4 onto S1 at 30, edge 3 -> 4. Without it,
    and U's launch of task 4 onto S0 at 35 instead, the second pair S1 -> S0: edge 0 -> 4.
    With neither, no edge."""
    tasks = [(S1, 100, 5), (T, 20, 1), (T, 30, 1), (S0, 200, 5), (S1, 300, 5)]
    threads = {T: [(10, S1), (15, S0)], U: [(30, S1)]}
    got = _plan(tasks, {S1: [(10, 0), (30, 4)], S0: [(15, 3)]}, threads, [2])
    assert got == [(3, 4, False, True)]
    threads = {T: [(10, S1), (15, S0)], U: [(35, S0)]}
    got = _plan(tasks, {S1: [(10, 0)], S0: [(15, 3), (35, 4)]}, threads, [2])
    assert got == [(0, 4, False, True)]
    got = _plan(tasks, {S1: [(10, 0)], S0: [(15, 3)]}, {T: [(10, S1), (15, S0)]}, [2])
    assert got == [(-1, -1, False, True)]
    # a thread that launched onto one stream only has no second stream to pair
    got = _plan(tasks, {S0: [(15, 3), (35, 4)]}, {T: [(15, S0)]}, [2])
    assert got == [(-1, -1, False, True)]


def test_a_stream_waiting_for_its_own_event_by_launch_order_waits_for_the_other_stream():
    """T launches task 0 onto S1 at 10 and task 5 onto S2 at 12, records at 20 (task 1),
    waits at 30 (task 2) and launches task 4 onto S2 at 40. By launch order S2 would wait for
    its own event: walked back, the recording stream is T's latest launch before the record
    onto another stream than S2, S1: edge 0 -> 4. When the wait has a ``cuda_sync`` record
    (any kind but a stream wait's: here a stream sync's, kind 0) the launch order is not
    walked back: S2 -> S2, no edge. A thread with no other stream: no edge."""
    tasks = [(S1, 100, 5), (T, 20, 1), (T, 30, 1), (S0, 0, 0), (S2, 300, 5), (S2, 50, 5)]
    streams = {S1: [(10, 0)], S2: [(12, 5), (40, 4)]}
    threads = {T: [(10, S1), (12, S2), (40, S2)]}
    records = {T: [(20, 1)]}
    assert _plan(tasks, streams, threads, [2], records=records) == [(0, 4, False, False)]
    got = _plan(tasks, streams, threads, [2], records=records, sync={100: (0, 7, -1)})
    assert got == [(-1, -1, False, False)]
    threads = {T: [(12, S2), (40, S2)]}
    assert _plan(tasks, streams, threads, [2], records=records) == [(-1, -1, False, False)]


def test_a_stream_wait_record_names_the_record_call_and_both_streams_on_the_lowest_device():
    """A "Stream Wait Event" record (kind 3) of the wait (correlation 100) names waiting
    stream 8, record correlation 77 and (first record) recording stream 7. Streams (device,
    id): (1, 8) -> S0, (1, 7) -> S1, (2, 7) -> S2; the lowest device is 1. Record 77 is task 1,
    a call of thread U at 20. Edge: the last launched on S1 before 20 (task 0 at 10, not task
    5 at 25) -> the first on S0 at or after 30 (task 3), though T's own history says nothing
    (T launched nothing). A kind-3 record whose record call, recording stream and waiting
    stream are unknown (77 -> none, no first record, stream 9) falls back to T's history:
    its record at 20 (task 6), its launch onto S2 before it (task 5 at 15),
    its launch onto S0 after the wait (task 3 at 40): edge 5 -> 3."""
    tasks = [(S1, 100, 5), (U, 20, 1), (T, 30, 1), (S0, 200, 5), (T, 0, 0), (S2, 60, 5),
             (T, 20, 1)]  # fmt: skip
    gp = {(1, 8): S0, (1, 7): S1, (2, 7): S2}
    streams = {S1: [(10, 0), (25, 4)], S0: [(40, 3)], S2: [(15, 5)]}
    got = _plan(tasks, streams, {}, [2], sync={100: (3, 8, 77)}, first={100: 7},
                stream_gp=gp, record_task={77: 1})  # fmt: skip
    assert got == [(0, 3, False, False)]
    threads = {T: [(15, S2), (40, S0)]}
    got = _plan(tasks, streams, threads, [2], sync={100: (3, 9, 77)}, stream_gp=gp,
                records={T: [(20, 6)]})  # fmt: skip
    assert got == [(5, 3, False, False)]
