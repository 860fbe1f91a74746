"""Causality on real traces: edits move the replay the way the hardware would.

Each test changes the *work* and checks where the simulation puts the steps. A model that
freezes the recording into delays fails the first one: before causal gap attribution, halving
the kernels of the GPU-bound V100 rank changed none of its steps.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from tests.realdata import trace

from lumos.graph.build import build_graph
from lumos.graph.model import AnnotationKind, DepKind, ExecGraph, TaskKind
from lumos.ingest.kineto import read_kineto
from lumos.sim import simulate

#: Traces with several ProfilerSteps.
STEPPED = ["nccl_a100", "v100_stream_wait_event", "gpu_bound_v100", "alltoall_4streams"]
#: Every Kineto trace with steps that the causality properties must hold on.
ALL = [*STEPPED, "rccl_mi300", "legacy_2021_v100", "sendrecv_5streams_rank0", "hip_mi250",
       "cuda_event_sync", "backward_thread", "gloo_cpu_only"]  # fmt: skip


def _graph(name: str) -> ExecGraph:
    return build_graph(read_kineto(trace(name)))


def _steps(g: ExecGraph) -> list[int]:
    return [s["predicted_ns"] for s in simulate(g).steps()]


def _halve_kernels(g: ExecGraph) -> ExecGraph:
    kernel = g.tasks.kind == int(TaskKind.KERNEL)
    return g.with_durations(np.where(kernel, g.tasks.dur_ns // 2, g.tasks.dur_ns))


def test_a_gpu_bound_step_gets_shorter_when_kernels_get_faster():
    """The V100 rank's GPU is busy for the whole step from the second step on; its steps then
    shrink with the kernels (the first step is paced by the CPU and data loading)."""
    g = _graph("gpu_bound_v100")
    base, fast = _steps(g), _steps(_halve_kernels(g))
    change = [f / b - 1 for b, f in zip(base, fast, strict=True)]
    assert abs(change[0]) < 0.01
    assert all(-0.60 < c < -0.45 for c in change[1:]), [f"{c:+.1%}" for c in change]


@pytest.mark.parametrize("name", ALL)
def test_faster_kernels_never_make_a_step_slower(name):
    """Halving every kernel: each kernel replays in exactly half its recorded time, and every
    step's length lands in ``[base - removed, base]``. The upper end is the property (no step
    gets longer, with no allowance); the lower end holds for any schedule where a task starts
    at the latest end of what it waits for: then no time moves earlier by more than the total
    kernel time ``removed``, and a step, which starts no later than before, can shorten by no
    more. A model that ignored the edit would leave the kernels' replayed lengths unchanged."""
    g = _graph(name)
    kernel = g.tasks.kind == int(TaskKind.KERNEL)
    faster = _halve_kernels(g)
    r = simulate(faster)
    assert ((r.ends() - r.starts())[kernel] == g.tasks.dur_ns[kernel] // 2).all()
    removed = int((g.tasks.dur_ns[kernel] - g.tasks.dur_ns[kernel] // 2).sum())
    base, fast = _steps(g), [s["predicted_ns"] for s in r.steps()]
    assert all(b - removed <= f <= b for b, f in zip(base, fast, strict=True))


@pytest.mark.parametrize("name", STEPPED)
def test_removing_a_step_moves_the_next_one_earlier_by_its_length(name):
    g = _graph(name)
    t, a, e = g.tasks, g.annotations, g.edges
    steps = np.flatnonzero(a.kind == int(AnnotationKind.STEP))
    lo0, _ = simulate(g).annotation_spans()
    k = steps[len(steps) // 2 - 1]
    s0, s1 = int(a.ts_ns[k]), int(a.ts_ns[k] + a.dur_ns[k])
    inside = (t.ts_ns >= s0) & (t.ts_ns < s1)
    delay = np.where(inside[e.dst] & inside[e.src] & (e.kind != DepKind.LAUNCH), 0, e.delay_ns)
    removed = g.with_durations(np.where(inside, 0, t.dur_ns)).replace(
        edges=e.replace(delay_ns=delay)
    )
    lo, _ = simulate(removed).annotation_spans()
    nxt = steps[len(steps) // 2]
    moved = (lo0[nxt] - lo[nxt]) / a.dur_ns[k]
    assert 0.9 < moved <= 1.0


@pytest.mark.parametrize("name", ALL)
def test_no_wait_points_at_a_task_that_ended_after_the_thread_resumed(name):
    """A wait found in a gap is on a task that ended before the thread went on (recorded)."""
    g = _graph(name)
    t, e = g.tasks, g.edges
    wait = np.isin(e.kind, [int(DepKind.INTER_THREAD), int(DepKind.SYNC)])
    on_thread = np.isin(t.kind[e.dst], [int(k) for k in (TaskKind.CPU_OP, TaskKind.RUNTIME)])
    sel = wait & on_thread
    src_end = t.ts_ns[e.src[sel]] + t.dur_ns[e.src[sel]]
    assert (t.ts_ns[e.dst[sel]] + 1_000 >= src_end).all()
    assert (e.delay_ns[sel] >= 0).all()


def test_a_gloo_worker_is_released_by_the_call_that_issued_its_collective():
    """The bundled gloo run: each ``gloo:all_reduce`` on a worker thread hangs on the
    ``c10d::allreduce_`` that handed it over (not on the worker's recorded idle gap), so
    halving the main thread's matrix products moves every step's first all-reduce earlier (and
    the products replay in exactly half their recorded time)."""
    from lumos.examples_data import example_run_dir
    from lumos.graph.edits import scale_by_name
    from lumos.graph.model import DepKind, TaskKind
    from lumos.replay import build_workload
    from lumos.sim import simulate
    from lumos.sim.cost import TracedCost

    workload, _ = build_workload([str(example_run_dir())])
    for g in workload.graphs:
        comm = np.flatnonzero(g.tasks.kind == int(TaskKind.CPU_COMM))
        e = g.edges
        handoff = (e.kind == int(DepKind.INTER_THREAD)) & np.isin(e.dst, comm)
        issuers = {g.task_name(int(s)) for s in e.src[handoff]}
        assert set(e.dst[handoff].tolist()) == set(comm.tolist())
        assert issuers == {"c10d::allreduce_"}
    base = simulate(workload, TracedCost())
    faster = workload.replace_graphs(
        scale_by_name(g, [(r"^aten::(mm|addmm|gelu|gelu_backward)$", 0.5)])[0]
        for g in workload.graphs
    )
    fast = simulate(faster, TracedCost())
    for gi, g in enumerate(workload.graphs):
        comm = np.flatnonzero(g.tasks.kind == int(TaskKind.CPU_COMM))
        assert (fast.starts(gi)[comm] < base.starts(gi)[comm]).all()
        mm = g.name_mask(re.compile(r"^aten::(mm|addmm|gelu|gelu_backward)$").search)
        replayed = (fast.ends(gi) - fast.starts(gi))[mm]
        assert (replayed == np.rint(g.tasks.dur_ns[mm] * 0.5)).all()


def test_ddp_finalize_waits_for_each_bucket_the_thread_issued():
    """DDP over gloo, after the backward: the main thread waits for each bucket's all-reduce
    (``work.wait()``, no profiler event) and copies it back (``aten::as_strided`` first). The
    wait hangs on the bucket's ``gloo:all_reduce``, although the worker began the next bucket
    before the thread resumed and the bucket began before the thread blocked. Rank 0 of
    ``whatif_pairs/ddp_layers_x2`` (3 steps x 4 buckets) waited 11 times; rank 1, the later
    one, found most buckets done (3). Doubling the all-reduces' transfer now delays the copies
    (the waits were frozen into the thread's gaps: the steps did not move at all)."""
    from pathlib import Path

    from lumos.graph.edits import scale_by_name
    from lumos.replay import build_workload
    from lumos.sim.cost import TracedCost

    run = Path(__file__).parents[1] / "data" / "whatif_pairs" / "ddp_layers_x2"
    workload, _ = build_workload([str(run)])
    waits = []
    for g in workload.graphs:
        e, t = g.edges, g.tasks
        work = t.kind == int(TaskKind.CPU_COMM)
        sel = (e.kind == int(DepKind.INTER_THREAD)) & work[e.src] & ~work[e.dst]
        assert {g.task_name(int(d)) for d in e.dst[sel]} == {"aten::as_strided"}
        assert (e.delay_ns[sel] < 500_000).all()  # the thread's reaction, not its gap
        waits.append((e.src[sel], e.dst[sel], e.delay_ns[sel]))
    assert [len(s) for s, _, _ in waits] == [11, 3]
    base = simulate(workload, TracedCost())
    slow = workload.replace_graphs(
        scale_by_name(g, [(r"^gloo:all_reduce$", 2.0)])[0] for g in workload.graphs
    )
    res = simulate(slow, TracedCost())
    # in the replay each copy starts exactly when its wait releases it; with the transfers
    # doubled, 11 of the 14 still do, three start later (held by the thread's earlier work)
    slack = [((r.starts(gi)[dst] - (r.ends(gi)[src] + delay)).tolist(),)
             for r in (base, res) for gi, (src, dst, delay) in enumerate(waits)]  # fmt: skip
    assert slack == [
        ([0] * 11,),
        ([0] * 3,),
        ([0] * 5 + [6_023_224] + [0] * 4 + [8_508_539],),
        ([0, 0, 1_174_682],),
    ]
    assert (base.makespan_ns, res.makespan_ns) == (652_497_116, 709_123_119)
