"""A straggling rank (:func:`lumos.graph.edits.slow_down`): exactly what a slow-down re-times.

A hand-built graph: thread 1 runs ``aten::mm`` (11 ns), then 3 ns later the launch call
(5 ns) and, 4 ns later, ``c10d::allreduce_`` (7 ns, CPU_COMM); the launch starts ``gemm``
(100 ns) on stream 7 13 ns after it ends, and an NCCL kernel (COMM, 40 ns) follows ``gemm``
on the stream with a 2 ns gap.
"""

from __future__ import annotations

import pytest

from lumos.errors import ConfigError
from lumos.graph.edits import slow_down
from lumos.graph.model import DepKind, ExecGraph, TaskKind
from lumos.graph.synthetic import GraphBuilder


def _graph() -> ExecGraph:
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    b.task(th, "aten::mm", 11)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, gap_ns=3)
    b.task(th, "c10d::allreduce_", 7, TaskKind.CPU_COMM, gap_ns=4)
    gemm = b.task(st, "gemm", 100)
    b.task(st, "ncclKernel", 40, TaskKind.COMM, gap_ns=2)
    b.edge(launch, gemm, DepKind.LAUNCH, 13)
    return b.build().validate()


def test_a_slow_rank_stretches_its_work_and_cpu_gaps_but_not_its_communication():
    """x1.5: mm 11 -> 16.5, rounded to even 16; the launch 5 -> 7.5 -> 8; gemm 150; both
    communication tasks keep 7 and 40 ns. The thread's gaps (INTRA_THREAD) 3 -> 4.5 -> 4 and
    4 -> 6; the stream gap (2 ns), and the launch latency (13 ns) are unchanged."""
    g = _graph()
    out = slow_down(g, 1.5)
    assert out.tasks.dur_ns.tolist() == [16, 8, 7, 150, 40]
    e = out.edges
    assert e.kind.tolist() == [DepKind.INTRA_THREAD, DepKind.INTRA_THREAD, DepKind.INTRA_STREAM,
                               DepKind.LAUNCH]  # fmt: skip
    assert e.delay_ns.tolist() == [4, 6, 2, 13]
    assert (e.src.tolist(), e.dst.tolist()) == (g.edges.src.tolist(), g.edges.dst.tolist())
    assert out.tasks.dur_ns.dtype == e.delay_ns.dtype == out.tasks.ts_ns.dtype
    assert g.tasks.dur_ns.tolist() == [11, 5, 7, 100, 40]  # a new graph
    assert slow_down(g, 1.0).tasks.dur_ns.tolist() == [11, 5, 7, 100, 40]


@pytest.mark.parametrize("factor", [0, -1.0, float("nan")])
def test_a_factor_that_is_not_positive_is_one_clear_error(factor):
    with pytest.raises(ConfigError, match=rf"^slow_down: factor must be > 0, got {factor}$"):
        slow_down(_graph(), factor)
