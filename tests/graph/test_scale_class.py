"""``lumos.graph.edits_class.scale_class`` on two hand-built graphs, every value worked by hand.

:func:`_gpu_job` has kernels, so ``@compute`` is the GPU kernels, copies and sets and ``@host``
the CPU ops and runtime calls with their positive intra-thread and launch delays.
:func:`_cpu_job` has no GPU work: ``@compute`` is the CPU ops plus the part of each positive
intra-thread gap inside an ``aten::`` span, ``@host`` the runtime calls plus the rest of each
positive intra-thread or launch gap. ``@comm`` scales what a communication task does beyond its
wait for peers (``Comms.wait_ns``, at most its duration; 0 without a comm row). The factor is
0.5 with odd values so every ``np.rint`` lands on a half and rounds to even (5.5 -> 6,
10.5 -> 10). The count is tasks selected plus delays selected, changed in value or not.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.graph.edits_class import scale_class
from lumos.graph.model import AnnotationKind, CommType, DepKind, ExecGraph, TaskKind
from lumos.graph.synthetic import GraphBuilder


def _gpu_job() -> ExecGraph:
    """Thread 1, streams 7 and 8. Tasks (duration ns): 0 aten::mm CPU op 101, 1 launch 11,
    2 gemm kernel 1001, 3 memcpy 51, 4 memset 21 (stream 8), 5 nccl COMM 402 (comm row 0, wait
    101), 6 gloo CPU_COMM 300 (comm row 1, wait 500 > its duration), 7 p2p COMM 81 (no comm
    row, stream 8), 8 aten::add CPU op 33, 9 launch 11. Edges (delay ns): 0 thread 0->1 +7,
    1 launch 1->2 +9, 2 stream 2->3 +3, 3 inter-stream 2->4 +13, 4 stream 3->5 0, 5 thread 1->6
    -2, 6 stream 4->7 0, 7 thread 6->8 0, 8 thread 8->9 +5, 9 launch 9->7 -4, 10 thread 0->8 +1,
    11 launch 1->4 0, 12 launch 0->9 +1 (the last three: 1 ns is scaled, 0 is not). An aten:: USER
    span covers everything (ignored: a GPU job computes on its GPU)."""
    b = GraphBuilder()
    th, st, st2 = b.thread(1), b.stream(7), b.stream(8)
    b.task(th, "aten::mm", 101, TaskKind.CPU_OP)
    b.task(th, "cudaLaunchKernel", 11, TaskKind.RUNTIME, gap_ns=7)
    b.task(st, "gemm", 1001, TaskKind.KERNEL)
    b.edge(1, 2, DepKind.LAUNCH, 9)
    b.task(st, "memcpy", 51, TaskKind.MEMCPY, gap_ns=3)
    b.task(st2, "memset", 21, TaskKind.MEMSET)
    b.edge(2, 4, DepKind.INTER_STREAM, 13)
    b.task(st, "nccl", 402, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, 8, wait_ns=101))
    b.task(th, "gloo", 300, TaskKind.CPU_COMM, gap_ns=-2,
           comm=b.comm(CommType.ALL_REDUCE, 8, wait_ns=500))  # fmt: skip
    b.task(st2, "p2p", 81, TaskKind.COMM)
    b.task(th, "aten::add", 33, TaskKind.CPU_OP)
    b.task(th, "cudaLaunchKernel", 11, TaskKind.RUNTIME, gap_ns=5)
    b.edge(9, 7, DepKind.LAUNCH, -4)
    b.edge(0, 8, DepKind.INTRA_THREAD, 1)
    b.edge(1, 4, DepKind.LAUNCH, 0)
    b.edge(0, 9, DepKind.LAUNCH, 1)
    b.annotate("aten::all", th, 0, 9, kind=AnnotationKind.USER, ts_ns=0, dur_ns=10**6)
    return b.build()


GPU_DELAY = [7, 9, 3, 13, 0, -2, 0, 0, 5, -4, 1, 0, 1]


def _cpu_job() -> ExecGraph:
    """Thread 1 only. Tasks (start, duration ns): 0 aten::expand CPU op (0, 11), 1 aten::copy_
    CPU op (31, 9), 2 runtime call (60, 7), 3 gloo CPU_COMM (100, 50; comm row 0, wait 10),
    4 aten::relu CPU op (160, 5). Thread edges (delay ns): 0 0->1 +21, 1 1->2 +21, 2 2->3 +33,
    3 3->4 -3, 4 0->1 0, 5 1->2 +1. USER spans: aten::addmm [0, 50), aten::relu [150, 170),
    "region" [60, 160) (not aten::), and a STEP span aten::step over everything (not USER).
    Recorded gaps: edge 0
    [11, 31) all inside aten::addmm (share 1); edge 1 [40, 60) half inside (share 0.5); edge 2
    [67, 100) inside no aten:: span (share 0); edge 3 [150, 160) inside aten::relu (share 1);
    edges 4 and 5 share the gaps of edges 0 and 1."""
    b = GraphBuilder()
    th = b.thread(1)
    b.task(th, "aten::expand", 11, TaskKind.CPU_OP, ts_ns=0)
    b.task(th, "aten::copy_", 9, TaskKind.CPU_OP, ts_ns=31, gap_ns=21)
    b.task(th, "rt", 7, TaskKind.RUNTIME, ts_ns=60, gap_ns=21)
    b.task(th, "gloo", 50, TaskKind.CPU_COMM, ts_ns=100, gap_ns=33,
           comm=b.comm(CommType.ALL_REDUCE, 8, wait_ns=10))  # fmt: skip
    b.task(th, "aten::relu", 5, TaskKind.CPU_OP, ts_ns=160, gap_ns=-3)
    b.edge(0, 1, DepKind.INTRA_THREAD, 0)
    b.edge(1, 2, DepKind.INTRA_THREAD, 1)
    user = AnnotationKind.USER
    b.annotate("aten::addmm", th, 0, 1, kind=user, ts_ns=0, dur_ns=50)
    b.annotate("aten::relu", th, 4, 4, kind=user, ts_ns=150, dur_ns=20)
    b.annotate("region", th, 2, 4, kind=user, ts_ns=60, dur_ns=100)
    b.annotate("aten::step", th, 0, 4, kind=AnnotationKind.STEP, ts_ns=0, dur_ns=200)
    return b.build()


def _no_comm_rows() -> ExecGraph:
    """Stream 7: a 101 ns gemm then a 41 ns NCCL kernel; the graph has no comm rows."""
    b = GraphBuilder()
    st = b.stream(7)
    b.task(st, "gemm", 101)
    b.task(st, "nccl", 41, TaskKind.COMM)
    return b.build()


CPU_DELAY = [21, 21, 33, -3, 0, 1]

CASES = [
    # GPU job, @compute: kernel 1001 -> 500.5 -> 500, copy 51 -> 26, set 21 -> 10; 3 tasks
    (_gpu_job, "@compute", 0.5,
     [101, 11, 500, 26, 10, 402, 300, 81, 33, 11], GPU_DELAY, 3),
    # GPU job, @host: ops/runtime 101 -> 50, 11 -> 6, 33 -> 16, 11 -> 6; positive thread delays
    # 7 -> 4, 5 -> 2, 1 -> 0.5 -> 0 and launch 9 -> 4, 1 -> 0 (not stream 3, inter-stream 13,
    # the -2, -4 and zeros); 4 + 5
    (_gpu_job, "@host", 0.5, [50, 6, 1001, 51, 21, 402, 300, 81, 16, 6],
     [4, 4, 3, 13, 0, -2, 0, 0, 2, -4, 0, 0, 0], 9),
    # GPU job, @comm: nccl 101 + 301 * 0.5 = 251.5 -> 252; gloo all wait (300); p2p without a
    # row 81 -> 40; 3 tasks
    (_gpu_job, "@comm", 0.5,
     [101, 11, 1001, 51, 21, 252, 300, 40, 33, 11], GPU_DELAY, 3),
    # factor 0: the transfer goes, the wait stays (101, 300, 0)
    (_gpu_job, "@comm", 0.0,
     [101, 11, 1001, 51, 21, 101, 300, 0, 33, 11], GPU_DELAY, 3),
    # CPU job, @compute: CPU ops 11 -> 6, 9 -> 4, 5 -> 2; delays times 1 - 0.5 * share:
    # 21 * 0.5 = 10.5 -> 10, 21 * 0.75 = 15.75 -> 16, 1 * 0.75 -> 1 (33: share 0; -3 and 0:
    # not positive); 3 + 3
    (_cpu_job, "@compute", 0.5, [6, 4, 7, 50, 2], [10, 16, 33, -3, 0, 1], 6),
    # CPU job, @host: the runtime call 7 -> 4; delays times 1 - 0.5 * (1 - share): 21 (share 1)
    # kept, 21 * 0.75 -> 16, 33 * 0.5 = 16.5 -> 16, 1 * 0.75 -> 1 (0 of share 1 kept); 1 + 3
    (_cpu_job, "@host", 0.5, [11, 9, 4, 50, 5], [21, 16, 16, -3, 0, 1], 4),
    # CPU job, @comm x2: 10 + 40 * 2 = 90; 1 task
    (_cpu_job, "@comm", 2.0, [11, 9, 7, 90, 5], CPU_DELAY, 1),
    # no comm rows at all: no wait is known, the whole 41 ns scale (20.5 -> 20); 1 task
    (_no_comm_rows, "@comm", 0.5, [101, 20], [0], 1),
]  # fmt: skip


@pytest.mark.parametrize(("make", "selector", "factor", "dur", "delay", "changed"), CASES)
def test_a_class_scales_exactly_its_tasks_and_delays(make, selector, factor, dur, delay, changed):
    """Expected values: see :data:`CASES` (each worked from the graph's docstring)."""
    g = make()
    before = (g.tasks.dur_ns.tolist(), g.edges.delay_ns.tolist())
    out, n = scale_class(g, selector, factor)
    assert out.tasks.dur_ns.tolist() == dur and out.tasks.dur_ns.dtype == np.int64
    assert out.edges.delay_ns.tolist() == delay and out.edges.delay_ns.dtype == np.int64
    assert n == changed and type(n) is int
    assert out.edges.src.tolist() == g.edges.src.tolist()
    assert out.tasks.kind.tolist() == g.tasks.kind.tolist()
    assert (g.tasks.dur_ns.tolist(), g.edges.delay_ns.tolist()) == before  # input untouched


@pytest.mark.parametrize(
    ("selector", "factor", "message"),
    [
        ("@gpu", 0.5, "--scale '@gpu': unknown class (choose from @compute, @comm, @host, or "
                      "give a name pattern)"),
        ("compute", 0.5, "--scale 'compute': unknown class (choose from @compute, @comm, "
                         "@host, or give a name pattern)"),
        ("@compute", -0.5, "--scale @compute=-0.5: FACTOR must be >= 0"),
        ("@comm", float("nan"), "--scale @comm=nan: FACTOR must be >= 0"),
    ],
)  # fmt: skip
def test_an_unknown_class_or_a_negative_factor_is_one_clear_error(selector, factor, message):
    """The selector is checked first, then the factor (NaN is not >= 0)."""
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        scale_class(_gpu_job(), selector, factor)
