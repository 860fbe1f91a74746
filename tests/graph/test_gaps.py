"""Waits found in the gaps of CPU threads (``lumos.graph.build_gaps``).

Hand-written traces and layouts; every expected edge and delay is worked out from the
recorded times by the rules of the module's table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lumos.graph.build import build_graph
from lumos.graph.build_blocking import blocking_copies
from lumos.graph.build_gaps import Candidates, _own_releaser, releaser, thread_gaps
from lumos.graph.build_tasks import MARK, START, TaskLayout, lay_out_tasks
from lumos.graph.model import DepKind
from lumos.ingest.kineto import read_kineto, trace_from_bytes


def _ev(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
    pid = 0 if cat == "kernel" else 1
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


@pytest.mark.parametrize(("start_us", "released"), [(112, True), (300, False)])
def test_a_thread_with_one_task_is_released_from_the_window_start_like_any_other(
    tmp_path: Path, start_us: int, released: bool
) -> None:
    """The main thread launches kernel ``k`` (10-110 us) and runs three short ops (1 us gaps:
    the usual overhead); a second thread's only task starts at ``start_us``. At 112 us its
    first gap (112 us from the window's start at 0) ends 2 us after ``k`` ended, within a
    quarter of the gap: ``k`` released it (a SYNC edge with the 2 us reaction; its start edge
    then carries no recorded offset). At 300 us the reaction would be 190 us, more than a
    quarter of 300 us: no release, the start stays at its recorded 300 us offset and is counted
    as unexplained."""
    events = [
        _ev("cuda_runtime", "cudaLaunchKernel", 0, 5, correlation=1),
        _ev("kernel", "k", 10, 100, tid=7, device=0, stream=7, correlation=1),
        *(_ev("cpu_op", "aten::add", t, 2) for t in (6, 9, 12)),
        _ev("cpu_op", "aten::copy_", start_us, 10, tid=2),
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    g = build_graph(read_kineto(p))
    assert g.calibration["gpu_clock_offset_ns"] == 0
    names = [g.names[int(i)] for i in g.tasks.name_idx]
    copy, k = names.index("aten::copy_"), names.index("k")
    e = g.edges
    into = {DepKind(int(kind)).name: (int(s), int(d)) for s, kind, d in
            zip(e.src[e.dst == copy], e.kind[e.dst == copy], e.delay_ns[e.dst == copy],
                strict=True)}  # fmt: skip
    start = into["INTRA_THREAD"][0]
    assert names[start] == "<start>"
    if released:
        assert into == {"SYNC": (k, 2_000), "INTRA_THREAD": (start, 0)}
        assert g.diagnostics.count("thread_start_unexplained") == 0
    else:
        assert into == {"INTRA_THREAD": (start, 300_000)}
        assert g.diagnostics.count("thread_start_unexplained") == 1


def test_a_processors_candidate_ends_are_a_running_maximum() -> None:
    """Candidates are found by a binary search on their ends, so the ends are the running
    maximum: a long task (20-100 ns) that later, shorter ones overlap still holds the
    processor busy until 100 ns for them (ends 10, 100, 100, 100, not 10, 100, 30, 40). The
    anchor and the empty task (start = end) are no candidates; the busy time before each is
    the sum of the earlier ones' durations (10, 80, 5, 5 ns)."""
    arrive = np.array([0, 0, 20, 25, 35, 45], dtype=np.int64)
    end = np.array([0, 10, 100, 30, 40, 45], dtype=np.int64)
    n = arrive.size
    layout = TaskLayout(
        event_idx=np.array([START, 0, 1, 2, 3, 4], dtype=np.int64),
        kind=np.full(n, 2, dtype=np.int8),
        processor_idx=np.zeros(n, dtype=np.int32),
        ts_ns=arrive,
        dur_ns=end - arrive,
        is_wait=np.zeros(n, dtype=bool),
        mark=np.full(n, -1, dtype=np.int32),
        proc_ptr=np.array([0, n], dtype=np.int64),
        processors=np.array([0], dtype=np.int32),
        origin_ns=0,
    )
    c = Candidates.of(layout, 0, arrive, end, end)
    assert c.tasks.tolist() == [1, 2, 3, 4]
    assert c.ends.tolist() == [10, 100, 100, 100]
    assert c.starts.tolist() == [0, 20, 25, 35]
    assert c.busy_before.tolist() == [0, 10, 90, 95, 100]


def test_thread_gaps_are_between_consecutive_real_tasks_of_each_thread_only() -> None:
    """Five processors, each led by its ``<start>`` anchor (no real task). Thread 0: ``a``
    0-10, ``b`` 15-20, ``c`` 30-31: gaps 15 - 10 = 5 and 30 - 20 = 10 ns. Processor 1 is a
    stream (no gaps). Thread 2: ``x`` 100-110, a step marker at 120 (zero length, real), ``y``
    125-130: gaps 10 and 5 ns, measured within thread 2 alone (not from the tasks laid out
    before it). Thread 3 has a single task: no gap, no entry. Thread 4 has two, ``u`` 200-210
    and ``v`` 212-215: one gap of 2 ns."""
    arrive = np.array([0, 0, 15, 30, 0, 12, 0, 100, 120, 125, 0, 0, 0, 200, 212], dtype=np.int64)
    end = np.array([0, 10, 20, 31, 0, 40, 0, 110, 120, 130, 0, 5, 0, 210, 215], dtype=np.int64)
    ev = np.array([START, 0, 1, 2, START, 3, START, 4, MARK, 5, START, 6, START, 7, 8], np.int64)
    proc = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4, 4], dtype=np.int32)
    n = arrive.size
    layout = TaskLayout(
        event_idx=ev,
        kind=np.full(n, 2, dtype=np.int8),
        processor_idx=proc,
        ts_ns=arrive,
        dur_ns=end - arrive,
        is_wait=np.zeros(n, dtype=bool),
        mark=np.where(ev == MARK, 0, -1).astype(np.int32),
        proc_ptr=np.array([0, 4, 6, 10, 12, 15], dtype=np.int64),
        processors=np.arange(5, dtype=np.int32),
        origin_ns=0,
    )
    on_stream = proc == 1
    real = (ev >= 0) | (ev == MARK)
    got = thread_gaps(layout, arrive, end, on_stream, real)
    assert {p: v.tolist() for p, v in got.items()} == {0: [5, 10], 2: [10, 5], 4: [2]}


def _same_pair_each_iteration(
    tmp_path: Path, released: tuple[bool, ...]
) -> tuple[Any, list[int], list[int]]:
    """One thread, per iteration ``i`` from ``t0 = 27 i`` us: launch ``L`` t0-t0+2 (kernel
    ``k`` t0+3 to t0+18 on stream 7 when ``released[i]``, else t0+3 to t0+4), ``aten::add``
    t0+3-t0+4, ``aten::item`` at t0+19, three ``aten::mul`` at t0+21, 23, 25, each 1 us. Every
    gap is 1 us (the median: the usual overhead) but add -> item, 15 us: medium (over 4 and at
    most 20 times the overhead). A 1 us kernel ends as ``aten::add`` does: not inside the gap."""
    events = []
    for i, rel in enumerate(released):
        t0 = 27 * i
        events += [
            _ev("cuda_runtime", "cudaLaunchKernel", t0, 2, correlation=i + 1),
            _ev("kernel", "k", t0 + 3, 15 if rel else 1, tid=7, device=0, stream=7,
                correlation=i + 1),
            _ev("cpu_op", "aten::add", t0 + 3, 1),
            _ev("cpu_op", "aten::item", t0 + 19, 1),
            *(_ev("cpu_op", "aten::mul", t0 + t, 1) for t in (21, 23, 25)),
        ]  # fmt: skip
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    g = build_graph(read_kineto(p))
    names = [g.names[int(i)] for i in g.tasks.name_idx]
    items = [i for i, n in enumerate(names) if n == "aten::item"]
    kernels = [i for i, n in enumerate(names) if n == "k"]
    return g, items, kernels


@pytest.mark.parametrize(
    ("released", "kept", "dropped"),
    [((True, True), [0, 1], 0), ((True, False, False), [], 1), ((True, True, False), [0, 1], 0)],
    ids=["two-of-two", "one-of-three", "two-of-three"],
)
def test_a_wait_between_the_same_two_ops_is_kept_when_found_in_at_least_half_their_gaps(
    tmp_path: Path, released: tuple[bool, ...], kept: list[int], dropped: int
) -> None:
    """The same pair of ops (``aten::add`` -> ``aten::item``) with a medium gap in every
    iteration (see :func:`_same_pair_each_iteration`). Where a kernel ends 1 us before the thread resumes
    (a 1 us reaction, within a tenth of the 15 us gap), it released the thread: a SYNC edge
    ``k -> aten::item`` with the 1 us reaction as its delay. Found in 2 of 2 or 2 of 3 such
    gaps (at least half) the waits are kept; in 1 of 3 the one release is a coincidence,
    dropped and counted (``wait_coincidence_dropped``)."""
    g, items, kernels = _same_pair_each_iteration(tmp_path, released)
    assert g.calibration["gpu_clock_offset_ns"] == 0
    e = g.edges
    sync = e.kind == int(DepKind.SYNC)
    got = sorted(zip(e.src[sync].tolist(), e.dst[sync].tolist(), e.delay_ns[sync].tolist(),
                     strict=True))  # fmt: skip
    assert got == [(kernels[i], items[i], 1_000) for i in kept]
    assert g.diagnostics.count("wait_coincidence_dropped") == dropped


def test_a_threads_own_collective_releases_it_only_when_it_ended_inside_the_gap() -> None:
    """The thread's own collectives 7 and 9 end at 100 and 200 ns. The latest ending by the
    resume (inclusive) is the releaser if it ended after the gap began: 9 for a gap 150-250 or
    150-200; none for a gap from 200 (9 ended as it began) or one resuming at 50 (none ended
    yet, however early the gap began); none without collectives of its own."""
    own = (np.array([7, 9], dtype=np.int64), np.array([100, 200], dtype=np.int64))
    assert _own_releaser(own, 150, 250) == 9
    assert _own_releaser(own, 150, 200) == 9
    assert _own_releaser(own, 50, 150) == 7
    assert _own_releaser(own, 200, 250) == -1
    assert _own_releaser(own, 20, 50) == -1
    assert _own_releaser(None, 150, 250) == -1


def test_a_cpu_task_releases_a_thread_only_if_it_started_within_the_gap_and_kept_busy() -> None:
    """Thread 0 waits from 100 to 400 ns. Thread 1's task 5 ran 100-300: it started as the gap
    began (not while the thread still ran, which would be a lock let go), kept thread 1 busy
    200 ns, so with a 200 ns busy floor it released the thread; with a 201 ns floor, or had
    it started at 99 ns, nothing did. Thread 0's own task 0 is never its releaser."""
    end = np.array([400, 0, 0, 0, 0, 300], dtype=np.int64)
    next_start = np.full(6, 1_000, dtype=np.int64)
    on_stream = np.zeros(6, dtype=bool)
    z = np.zeros(0, dtype=np.int64)

    def one(task, start, finish):
        arr = np.array([task], dtype=np.int64)
        return Candidates(arr, np.array([finish]), np.array([start]), np.array([0, finish - start]))

    own = one(0, 0, 400)
    assert releaser(100, 400, 200, 0, [own, one(5, 100, 300)], end, next_start, on_stream) == 5
    assert releaser(100, 400, 201, 0, [own, one(5, 100, 300)], end, next_start, on_stream) == -1
    assert releaser(100, 400, 200, 0, [own, one(5, 99, 300)], end, next_start, on_stream) == -1
    empty = Candidates(z, z, z, np.zeros(1, dtype=np.int64))
    assert releaser(100, 400, 0, 0, [own, empty], end, next_start, on_stream) == -1


def test_a_trace_with_nothing_to_place_lays_out_no_task() -> None:
    """A trace whose only event is a user annotation (an annotation, not a task) places no task
    on any processor: every column is empty, each with the type the layout declares (bool for
    ``is_wait``), one processor boundary (0), no processor, origin 0."""
    ev = {"ph": "X", "cat": "user_annotation", "name": "fwd", "pid": 1, "tid": 1, "ts": 5, "dur": 3}
    t = trace_from_bytes(json.dumps({"traceEvents": [ev]}).encode(), "t.json")
    layout = lay_out_tasks(t, blocking_copies(t))
    cols = ("event_idx", "kind", "processor_idx", "ts_ns", "dur_ns", "is_wait", "mark")
    got = {c: (getattr(layout, c).size, getattr(layout, c).dtype) for c in cols}
    i64, i32 = np.dtype(np.int64), np.dtype(np.int32)
    assert got == {"event_idx": (0, i64), "kind": (0, np.dtype(np.int8)), "processor_idx": (0, i32),
                   "ts_ns": (0, i64), "dur_ns": (0, i64), "is_wait": (0, np.dtype(bool)),
                   "mark": (0, i32)}  # fmt: skip
    assert layout.proc_ptr.tolist() == [0]
    assert (layout.processors.size, layout.origin_ns, len(layout)) == (0, 0, 0)
