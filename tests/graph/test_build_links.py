"""GPU tasks bound to the calls that launched them (``lumos.graph.build_links.find_launches``).

A hand-written Kineto trace (times in us): every expected value below follows from the recorded
times and correlation ids by the rules in :class:`lumos.graph.build_links.Launches`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from lumos.graph.build_blocking import blocking_copies
from lumos.graph.build_links import find_launches
from lumos.graph.build_tasks import lay_out_tasks
from lumos.ingest.kineto import trace_from_bytes

US = 1_000


def _call(ts: float, corr: int, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
            "ts": ts, "dur": 2, "args": {"correlation": corr}}  # fmt: skip


def _kernel(name: str, ts: float, corr: int, stream: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": 5,
            "args": {"device": 0, "stream": stream, "correlation": corr}}  # fmt: skip


def test_every_launch_fact_per_task_per_stream_and_per_thread():
    """Thread 1 launches at 10 (corr 1, stream 7), 20 (corr 2, stream 8) and 30 us (corr 3,
    stream 7); thread 2 at 15 us (corr 4, stream 8). Stream 7 runs ``k0`` at 5 us (corr 50, no
    call in the trace), ``k1`` at 40, ``kq`` at 50 (corr 60, no call) and ``k3`` at 60; stream 8
    ``k4`` at 42 and ``k2`` at 50. Tasks (origin 5 us): thread 1 0-3 (anchor, the three calls),
    thread 2 4-5, stream 7 6-10 (anchor, k0, k1, kq, k3), stream 8 11-13 (anchor, k4, k2).

    ``launcher``: k1 <- task 1, k3 <- 3, k4 <- 5, k2 <- 2, every other task -1; ``launch_ts``
    the calls' starts (10, 30, 15, 20 us), -1 elsewhere. ``stream_order`` of stream 7: k0, ahead
    of the stream's first launch, was queued before the window (origin - 1 ns), k1 at 10 us, k3
    at 30 us, and kq, launched by no call after a launched task, at its own start (50 us);
    stream 8: k4 (15 us), k2 (20 us). ``thread_launches``: thread 1 (10 us onto processor 2,
    20 us onto 3, 30 us onto 2), thread 2 (15 us onto 3)."""
    events = [_call(10, 1), _call(20, 2), _call(30, 3), _call(15, 4, tid=2),
              _kernel("k0", 5, 50, 7), _kernel("k1", 40, 1, 7), _kernel("kq", 50, 60, 7),
              _kernel("k3", 60, 3, 7), _kernel("k2", 50, 2, 8), _kernel("k4", 42, 4, 8)]  # fmt: skip
    trace = trace_from_bytes(json.dumps({"traceEvents": events}).encode(), "t.json")
    layout = lay_out_tasks(trace, blocking_copies(trace))
    names = [trace.names[int(trace.events.name_idx[e])] if e >= 0 else "" for e in layout.event_idx]
    assert names == ["", *["cudaLaunchKernel"] * 3, "", "cudaLaunchKernel",
                     "", "k0", "k1", "kq", "k3", "", "k4", "k2"]  # fmt: skip
    assert layout.origin_ns == 5 * US
    got = find_launches(trace, layout)
    none = [-1] * 8
    assert got.launcher.tolist() == [*none, 1, -1, 3, -1, 5, 2]
    assert got.launch_ts.tolist() == [*none, 10 * US, -1, 30 * US, -1, 15 * US, 20 * US]
    assert {p: (a.tolist(), t.tolist()) for p, (a, t) in got.stream_order.items()} == {
        2: ([5 * US - 1, 10 * US, 30 * US, 50 * US], [7, 8, 10, 9]),
        3: ([15 * US, 20 * US], [12, 13]),
    }
    assert {p: (a.tolist(), s.tolist()) for p, (a, s) in got.thread_launches.items()} == {
        0: ([10 * US, 20 * US, 30 * US], [2, 3, 2]),
        1: ([15 * US], [3]),
    }
    assert got.last_launched_before(2, 30 * US) == 8 and got.last_launched_before(2, 5 * US) == 7
    assert (
        got.first_launched_after(2, 10 * US + 1) == 10
        and got.first_launched_after(3, 21 * US) == -1
    )
    assert got.last_launched_before(1, 30 * US) == -1 and got.first_launched_after(1, 0) == -1


def _ev(cat: str, name: str, ts: float, corr: int | None, dur: float = 2) -> dict[str, Any]:
    args = {} if corr is None else {"correlation": corr}
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def _on(cat: str, name: str, ts: float, corr: int, stream: int) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": 1,
            "args": {"device": 0, "stream": stream, "correlation": corr}}  # fmt: skip


def test_copies_sets_comm_kernels_nested_calls_and_graph_launches_are_bound_too():
    """Thread 1 (times in us): ``cudaLaunchKernel`` at 0 (corr 1), ``cudaMemcpyAsync`` at 3
    (corr 2), ``cudaMemsetAsync`` at 6 (corr 3), ``cudaLaunchKernel`` at 9-12 (corr 4) holding
    the driver call ``cuLaunchKernel`` at 10, ``cudaGraphLaunch`` at 12 (corr 5) and 14 (corr 6).
    Stream 7: kernel ``k`` at 10, the copy at 20, the set at 30, an
    NCCL kernel at 40; stream 8: a kernel of corr 99 (no call) at -5 (the trace's earliest); stream 9: graph 6's eight
    kernels ``h0``-``h7`` at 60-74, then graph 5's ``g0``-``g7`` at 80-94.

    Tasks (origin -5 us): thread 0-6 (anchor, the six leaf calls; the outer ``cudaLaunchKernel``
    holds a call so is no task), stream 7 7-11, stream 8 12-13, stream 9 14-30. Launchers:
    ``k`` 1, the copy 2, the set 3, the NCCL kernel 4 (the driver call the outer call encloses,
    at the outer call's start, 9 us), ``h*`` 6 and ``g*`` 5. Stream 7 in launch order (0 is a
    launch time like any other), stream 8's only task never launched (origin - 1 ns), and
    stream 9 with graph 5's kernels (launched at 12 us) before graph 6's (14 us), each group in
    stream order. Thread 1's launches: 0, 3, 6, 9 us onto processor 1, then 12 us (8 times) and
    14 us (8 times) onto processor 3, as int64."""
    events = [
        _on("kernel", "k", 10, 1, 7),
        _ev("cuda_runtime", "cudaLaunchKernel", 0, 1),
        _ev("cuda_runtime", "cudaMemcpyAsync", 3, 2),
        _on("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 20, 2, 7),
        _ev("cuda_runtime", "cudaMemsetAsync", 6, 3),
        _on("gpu_memset", "Memset (Device)", 30, 3, 7),
        _ev("cuda_runtime", "cudaLaunchKernel", 9, 4, dur=3),
        _ev("cuda_driver", "cuLaunchKernel", 10, None, dur=1),
        _on("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 40, 4, 7),
        _on("kernel", "orphan", -5, 99, 8),
        _ev("cuda_runtime", "cudaGraphLaunch", 12, 5),
        _ev("cuda_runtime", "cudaGraphLaunch", 14, 6),
        *[_on("kernel", f"h{i}", 60 + 2 * i, 6, 9) for i in range(8)],
        *[_on("kernel", f"g{i}", 80 + 2 * i, 5, 9) for i in range(8)],
    ]
    trace = trace_from_bytes(json.dumps({"traceEvents": events}).encode(), "t.json")
    layout = lay_out_tasks(trace, blocking_copies(trace))
    assert layout.kind.tolist() == [0, *[1] * 6, 2, 2, 3, 4, 5, 2, 2, *[2] * 17]
    assert layout.proc_ptr.tolist() == [0, 7, 12, 14, 31] and layout.origin_ns == -5 * US
    got = find_launches(trace, layout)
    assert got.launcher.tolist() == [*[-1] * 8, 1, 2, 3, 4, -1, -1, -1, *[6] * 8, *[5] * 8]
    assert got.launch_ts.tolist() == [
        *[-1] * 8,
        0,
        3 * US,
        6 * US,
        9 * US,
        -1,
        -1,
        -1,
        *[14 * US] * 8,
        *[12 * US] * 8,
    ]
    assert {p: (a.tolist(), t.tolist()) for p, (a, t) in got.stream_order.items()} == {
        1: ([0, 3 * US, 6 * US, 9 * US], [8, 9, 10, 11]),
        2: ([-5 * US - 1], [13]),
        3: ([12 * US] * 8 + [14 * US] * 8, [*range(23, 31), *range(15, 23)]),
    }
    ts, stream = got.thread_launches[0]
    assert list(got.thread_launches) == [0] and stream.dtype == np.int64
    assert ts.tolist() == [0, 3 * US, 6 * US, 9 * US, *[12 * US] * 8, *[14 * US] * 8]
    assert stream.tolist() == [1] * 4 + [3] * 16


def test_a_trace_of_gpu_work_alone_has_every_task_queued_before_it_opened():
    """Two kernels on stream 7 (0-1 and 5-6 us) and no thread: the first is the trace's event 0.
    Neither was launched in the trace, so both were queued before it opened (origin - 1 ns,
    in stream order), no launcher, no thread launches."""
    events = [_on("kernel", "a", 0, 1, 7), _on("kernel", "b", 5, 2, 7)]
    trace = trace_from_bytes(json.dumps({"traceEvents": events}).encode(), "t.json")
    layout = lay_out_tasks(trace, blocking_copies(trace))
    assert layout.event_idx.tolist()[1:] == [0, 1] and layout.origin_ns == 0
    got = find_launches(trace, layout)
    assert got.launcher.tolist() == [-1, -1, -1] and got.launch_ts.tolist() == [-1, -1, -1]
    assert {p: (a.tolist(), t.tolist()) for p, (a, t) in got.stream_order.items()} == {
        0: ([-1, -1], [1, 2])
    }
    assert got.thread_launches == {}
