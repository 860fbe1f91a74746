"""Class selectors of ``--scale`` (``@compute``, ``@comm``, ``@host``): exactly what each re-times."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.examples_data import example_run_dir
from lumos.graph.edits_class import cpu_op_gap_share, has_gpu_compute, scale_class
from lumos.graph.model import DepKind, TaskKind
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload

GPU_BASE = Path(__file__).parents[1] / "data" / "gpu_h200_gpt" / "base"
GPU = (int(TaskKind.KERNEL), int(TaskKind.MEMCPY), int(TaskKind.MEMSET))
COMM = (int(TaskKind.COMM), int(TaskKind.CPU_COMM))


@pytest.fixture(scope="module")
def gpu_graph():
    return build_workload([str(GPU_BASE)], workers=1)[0].graphs[0]


@pytest.fixture(scope="module")
def cpu_graph():
    return build_workload([str(example_run_dir())], workers=1)[0].graphs[0]


def test_compute_on_a_gpu_job_halves_kernels_and_nothing_else(gpu_graph):
    g = gpu_graph
    out, n = scale_class(g, "@compute", 0.5)
    gpu = np.isin(g.tasks.kind, GPU)
    assert n == int(gpu.sum()) > 0
    np.testing.assert_array_equal(out.tasks.dur_ns[gpu], np.rint(g.tasks.dur_ns[gpu] * 0.5))
    np.testing.assert_array_equal(out.tasks.dur_ns[~gpu], g.tasks.dur_ns[~gpu])
    np.testing.assert_array_equal(out.edges.delay_ns, g.edges.delay_ns)


def test_host_on_a_gpu_job_halves_cpu_work_gaps_and_launch_latency(gpu_graph):
    g = gpu_graph
    out, _ = scale_class(g, "@host", 0.5)
    cpu = np.isin(g.tasks.kind, (int(TaskKind.CPU_OP), int(TaskKind.RUNTIME)))
    np.testing.assert_array_equal(out.tasks.dur_ns[cpu], np.rint(g.tasks.dur_ns[cpu] * 0.5))
    np.testing.assert_array_equal(out.tasks.dur_ns[~cpu], g.tasks.dur_ns[~cpu])
    e = g.edges
    hit = np.isin(e.kind, (int(DepKind.INTRA_THREAD), int(DepKind.LAUNCH))) & (e.delay_ns > 0)
    np.testing.assert_array_equal(out.edges.delay_ns[hit], np.rint(e.delay_ns[hit] * 0.5))
    np.testing.assert_array_equal(out.edges.delay_ns[~hit], e.delay_ns[~hit])


def test_comm_keeps_the_wait_for_peers(cpu_graph):
    g = cpu_graph
    out, n = scale_class(g, "@comm", 0.0)
    comm = np.flatnonzero(np.isin(g.tasks.kind, COMM))
    assert n == len(comm) > 0
    wait = np.minimum(g.comms.wait_ns[g.tasks.comm_idx[comm]], g.tasks.dur_ns[comm])
    np.testing.assert_array_equal(out.tasks.dur_ns[comm], wait)  # transfer gone, wait kept


def test_a_cpu_job_computes_inside_its_aten_ops(cpu_graph):
    g = cpu_graph
    assert not has_gpu_compute(g)
    share = cpu_op_gap_share(g)
    intra = g.edges.kind == int(DepKind.INTRA_THREAD)
    assert (share[~intra] == 0).all() and ((share >= 0) & (share <= 1)).all()
    assert 0.3 < float(np.average(share[intra], weights=g.edges.delay_ns[intra].clip(0))) < 1.0
    comp, _ = scale_class(g, "@compute", 0.5)
    host, _ = scale_class(g, "@host", 0.5)
    d0 = g.edges.delay_ns[intra].astype(np.int64).clip(0).sum()
    # each gap's part inside an op is compute, the rest host: the two halvings split it
    dc = d0 - comp.edges.delay_ns[intra].astype(np.int64).clip(0).sum()
    dh = d0 - host.edges.delay_ns[intra].astype(np.int64).clip(0).sum()
    assert dc + dh == pytest.approx(d0 / 2, rel=0.01)
    ops = g.tasks.kind == int(TaskKind.CPU_OP)
    np.testing.assert_array_equal(comp.tasks.dur_ns[ops], np.rint(g.tasks.dur_ns[ops] * 0.5))
    np.testing.assert_array_equal(host.tasks.dur_ns[ops], g.tasks.dur_ns[ops])


def test_unknown_class_is_one_clear_error(gpu_graph):
    with pytest.raises(ConfigError, match=r"unknown class.*@compute, @comm, @host"):
        scale_class(gpu_graph, "@gpu", 0.5)


def test_comm_without_comm_rows_scales_the_whole_transfer():
    """A stream runs a 100 us GEMM, then a 40 us NCCL kernel that has no ``Comms`` row (the
    graph has none: no wait for peers is known). ``@comm=0.5`` scales all of the NCCL kernel's
    time, 40 -> 20 us, leaves the GEMM alone and counts one task changed."""
    b = GraphBuilder()
    s = b.stream(7)
    b.task(s, "gemm", 100_000)
    b.task(s, "ncclDevKernel_AllReduce", 40_000, TaskKind.COMM)
    g = b.build()
    assert len(g.comms) == 0
    out, n = scale_class(g, "@comm", 0.5)
    assert out.tasks.dur_ns.tolist() == [100_000, 20_000] and n == 1
