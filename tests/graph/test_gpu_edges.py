"""GPU dependency edges and their delays (``lumos.graph.build_deps.calibrate_gpu``).

A hand-written trace; the expected delays are worked out from its recorded times.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from lumos.graph.build import build_graph
from lumos.graph.build_deps import _held_by_other_stream
from lumos.graph.build_tasks import TaskLayout
from lumos.graph.model import DepKind, ExecGraph
from lumos.ingest.kineto import read_kineto


def _launch(ts: float, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts, "dur": 5, "args": {"correlation": corr}}  # fmt: skip


def _kernel(name: str, ts: float, dur: float, stream: int, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
            "dur": dur, "args": {"device": 0, "stream": stream, "correlation": corr}}  # fmt: skip


def _graph(tmp_path: Path, events: list[dict[str, Any]]) -> ExecGraph:
    """The graph of a Kineto trace holding ``events``; its GPU clock reads like the host's."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    g = build_graph(read_kineto(p))
    assert g.calibration["gpu_clock_offset_ns"] == 0
    return g


def test_a_kernel_held_long_after_its_launch_waits_for_the_other_streams_kernel_it_followed(
    tmp_path: Path,
) -> None:
    """Kernels ``a`` (stream 7) and ``c`` (stream 9) start 5 us after their launch calls end,
    ``b`` (stream 8) 202 us after: the launch latency is the median over these idle launches,
    5 us. Nothing known held ``b`` for the other 197 us (> 50 us, more than a launch can cost),
    and it started 3 us after ``a`` ended on another stream: an event wait the trace does not
    show, found by timing (an INTER_STREAM edge with the 3 us, counted). ``b``'s launch keeps
    only the 5 us latency, and no GPU gap is left unexplained."""
    events = [
        _launch(0, 1), _kernel("a", 10, 200, 7, 1),
        _launch(6, 2), _kernel("b", 213, 20, 8, 2),
        _launch(12, 3), _kernel("c", 22, 10, 9, 3),
    ]  # fmt: skip
    g = _graph(tmp_path, events)
    assert g.calibration["launch_latency_ns"] == 5_000
    names = [g.names[int(i)] for i in g.tasks.name_idx]
    e = g.edges
    into_b = sorted((DepKind(int(k)).name, names[int(s)], int(d))
                    for s, t, k, d in zip(e.src, e.dst, e.kind, e.delay_ns, strict=True)
                    if names[int(t)] == "b")  # fmt: skip
    assert into_b == [
        ("INTER_STREAM", "a", 3_000),
        ("INTRA_STREAM", "<start>", 0),
        ("LAUNCH", "cudaLaunchKernel", 5_000),
    ]
    assert g.diagnostics.count("inter_stream_edge_from_timing") == 1
    assert g.diagnostics.count("gpu_gap_unexplained") == 0


def test_every_kernel_recorded_starting_before_its_stream_was_free_is_counted(
    tmp_path: Path,
) -> None:
    """Three kernels launched onto stream 7 (calls at 0, 6 and 12 us): ``k1`` runs 10-30 us,
    ``k2`` is recorded from 28 us and ``k3`` from 36 us, each 2 us (more than the 1 us
    tolerance) before the kernel ahead of it on the stream ended (30 and 38 us). Both start
    before their dependencies allow: counted twice, the example naming the first, ``k2``
    (task 6: the thread's anchor and three calls are tasks 0-3, the stream's anchor task 4)."""
    events = [
        _launch(0, 1), _kernel("k1", 10, 20, 7, 1),
        _launch(6, 2), _kernel("k2", 28, 10, 7, 2),
        _launch(12, 3), _kernel("k3", 36, 10, 7, 3),
    ]  # fmt: skip
    g = _graph(tmp_path, events)
    assert g.names[int(g.tasks.name_idx[6])] == "k2"
    assert g.diagnostics.count("gpu_task_starts_before_its_dependencies") == 2
    assert g.diagnostics.example("gpu_task_starts_before_its_dependencies") == "task 6"


def test_a_held_kernel_follows_the_latest_other_streams_end_passing_its_own_streams() -> None:
    """Kernel 1 (stream 1, 1000-2500 ns) was held though ready at 0. By end, latest first, the
    kernels ending by its start are 0 (its own stream, ending 950: passed over), then 2
    (stream 2, ending 800): 2 held it, 200 ns before its start. Had kernel 2 been launched
    after kernel 1 (submitted 60 vs 50), nothing held it. A task 2 ending 51 us before the
    start is beyond a launch's cost: nothing."""
    ts = np.array([900, 1_000, 700], dtype=np.int64)
    end = np.array([950, 2_500, 800], dtype=np.int64)
    n = ts.size
    layout = TaskLayout(
        event_idx=np.array([0, 1, 2], dtype=np.int64),
        kind=np.full(n, 2, dtype=np.int8),
        processor_idx=np.array([1, 1, 2], dtype=np.int32),
        ts_ns=ts,
        dur_ns=end - ts,
        is_wait=np.zeros(n, dtype=bool),
        mark=np.full(n, -1, dtype=np.int32),
        proc_ptr=np.array([0, 0, 2, 3], dtype=np.int64),
        processors=np.array([0, 1, 2], dtype=np.int32),
        origin_ns=0,
    )
    held, ready = np.array([1], dtype=np.int64), np.zeros(n, dtype=np.int64)
    src, dst, delay = _held_by_other_stream(layout, held, ts, end, ready)
    assert (src.tolist(), dst.tolist(), delay.tolist()) == ([2], [1], [200])
    submitted = np.array([40, 50, 60], dtype=np.int64)
    src, dst, delay = _held_by_other_stream(layout, held, ts, end, ready, submitted)
    assert (src.tolist(), dst.tolist(), delay.tolist()) == ([], [], [])
    far = np.array([950, 2_500, 1_000 - 51_000], dtype=np.int64)
    src, _, _ = _held_by_other_stream(layout, held, ts, far, ready)
    assert src.tolist() == []
