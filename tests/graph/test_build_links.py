"""GPU tasks bound to the calls that launched them (``lumos.graph.build_links.find_launches``).

A hand-written Kineto trace (times in us): every expected value below follows from the recorded
times and correlation ids by the rules in :class:`lumos.graph.build_links.Launches`.
"""

from __future__ import annotations

import json
from typing import Any

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
