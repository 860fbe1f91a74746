"""Fidelity of a candidate workload against its source: rows, deltas and bounds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lumos.graph.model import CommType, DepKind, TaskKind, WaitKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.synth.classes import CLASSES, task_classes
from lumos.synth.fidelity import Bounds, compare
from lumos.synth.measure import measure

MIB = 1 << 20


def steps(gemm_ns: int = 600, *, comm: bool = True, n_steps: int = 2) -> Workload:
    """Per step, on one thread: launch gemm, (launch all-reduce,) launch elementwise, then a
    stream synchronize that ends the step; the kernels run on one stream.

    Replayed (launches 10 ns, the kernels back to back from 10 ns, the sync after the last
    kernel): a step is 10 + gemm + 200 (all-reduce) + 200 (elementwise) + 10 (sync) ns:
    1020 ns with the defaults, 820 without the all-reduce, 1620 with gemm at 1200.
    """
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    pg = b.process_group("0", (0,))
    for i in range(n_steps):
        first = b.task(th, "cudaLaunchKernel", 10, TaskKind.RUNTIME)
        b.edge(first, b.task(st, "sm80_xmma_gemm_f16", gemm_ns), DepKind.LAUNCH)
        if comm:
            launch = b.task(th, "cudaLaunchKernel", 10, TaskKind.RUNTIME)
            c = b.comm(CommType.ALL_REDUCE, MIB, pg, seq_id=i)
            k = b.task(st, "ncclKernel_AllReduce_RING_LL", 200, TaskKind.COMM, comm=c)
            b.edge(launch, k, DepKind.LAUNCH)
        launch = b.task(th, "cudaLaunchKernel", 10, TaskKind.RUNTIME)
        b.edge(launch, b.task(st, "vectorized_elementwise_kernel", 200), DepKind.LAUNCH)
        sync = b.task(th, "cudaStreamSynchronize", 10, TaskKind.RUNTIME)
        b.wait(sync, WaitKind.STREAM, stream=st)
        b.annotate(f"ProfilerStep#{i}", th, first, sync, dur_ns=1020)
    return Workload((b.build().validate(),))


def doubled(w: Workload, cls: str) -> Workload:
    """A copy where every task of class ``cls`` takes twice as long."""
    g = w.graphs[0]
    return w.replace_graphs([g.scale(task_classes(g) == CLASSES.index(cls), 2.0)])


def test_a_workload_against_itself_meets_every_bound_with_zero_deltas():
    w = steps()
    fid = compare(w, w)
    assert fid.ok and fid.failures() == []
    assert all(r.delta == 0.0 for r in fid.rows)
    assert fid.row("step_time_ns")[1:] == (1020.0, 1020.0, 0.0, 0.05, True)
    bounded = sorted(r.metric for r in fid.rows if r.bound is not None)
    assert bounded == sorted([
        "step_time_ns", "comm.bytes_per_step",
        *(f"breakdown.{p}.share" for p in ("exposed_compute", "overlapped", "exposed_comm",
                                           "other")),
        *(f"class.{c}.per_step" for c in ("gemm", "elementwise", "comm.all_reduce",
                                          "runtime.launch", "runtime.sync")),
    ])  # fmt: skip


def test_one_class_twice_as_slow_misses_step_time_and_breakdown_by_the_expected_delta():
    """gemm 600 -> 1200 ns: a step is 1620 ns instead of 1020. Over the two steps' window
    (2040 -> 3240 ns) compute (gemm + elementwise) is 1600 -> 2800 ns, the all-reduce 400 ns,
    idle 40 ns (the two syncs); nothing overlaps."""
    w = steps()
    fid = compare(w, doubled(w, "gemm"))
    assert fid.row("step_time_ns").delta == pytest.approx(600 / 1020)
    compute = fid.row("breakdown.exposed_compute.share")
    assert (compute.source, compute.candidate) == pytest.approx((1600 / 2040, 2800 / 3240))
    assert compute.delta == pytest.approx(2800 / 3240 - 1600 / 2040)  # +7.99 points
    comm = fid.row("breakdown.exposed_comm.share")
    assert comm.delta == pytest.approx(400 / 3240 - 400 / 2040)  # -7.26 points
    other = fid.row("breakdown.other.share")
    assert other.delta == pytest.approx(40 / 3240 - 40 / 2040) and other.ok  # -0.73 points
    assert [r.metric for r in fid.failures()] == [
        "step_time_ns",
        "breakdown.exposed_compute.share",
        "breakdown.exposed_comm.share",
    ]
    assert not fid.ok


def test_dropping_the_collectives_misses_the_communication_bytes():
    w = steps()
    fid = compare(w, steps(comm=False))
    row = fid.row("comm.bytes_per_step")
    assert row[1:] == (float(MIB), 0.0, -1.0, 0.02, False)
    assert fid.row("class.comm.all_reduce.per_step")[1:4] == (1.0, 0.0, -1.0)
    assert fid.row("step_time_ns").delta == pytest.approx(820 / 1020 - 1)
    assert "comm.bytes_per_step" in [r.metric for r in fid.failures()]


def test_a_candidate_with_more_steps_compares_per_step():
    fid = compare(steps(n_steps=2), steps(n_steps=5))
    assert fid.ok
    assert fid.row("steps")[1:3] == (2.0, 5.0)
    assert fid.row("class.gemm.per_step")[1:4] == (1.0, 1.0, 0.0)


def test_bounds_can_be_tightened_and_a_small_class_is_information():
    """Out of 7 tasks a step, each class holds at least 1/7: all are bounded by default; with
    a 20 % floor only the three launches (3/7) are."""
    w = steps()
    fid = compare(w, w, bounds=Bounds(class_min_share=0.2))
    bounded = [r.metric for r in fid.rows if r.metric.startswith("class.") and r.bound]
    assert bounded == ["class.runtime.launch.per_step"]
    slower = compare(w, doubled(w, "elementwise"), bounds=Bounds(step_time_rel=0.5))
    assert slower.row("step_time_ns").delta == pytest.approx(200 / 1020)
    assert slower.row("step_time_ns").ok


def test_graph_statistics_of_a_hand_built_graph():
    """a -> b -> c on a thread, k1 -> k2 on one stream, k3 on another; a launches k1 and k3,
    b launches k2, c waits for k2 (a sync edge). Out-degrees: a 3 (b, k1, k3), b 2 (c, k2),
    k1 1, k2 1, c 0, k3 0: 7 edges over 6 tasks, max 3. Longest chain: a -> b -> k2 -> c (or
    a -> k1 -> k2 -> c): 4 tasks."""
    b = GraphBuilder()
    th, s1, s2 = b.thread(1), b.stream(7), b.stream(8)
    a = b.task(th, "cudaLaunchKernel", 10, TaskKind.RUNTIME)
    bb = b.task(th, "cudaLaunchKernel", 10, TaskKind.RUNTIME)
    c = b.task(th, "aten::add_", 10)
    k1, k2 = b.task(s1, "sgemm", 50), b.task(s1, "sgemm", 50)
    k3 = b.task(s2, "elementwise_kernel", 50)
    b.edge(a, k1, DepKind.LAUNCH)
    b.edge(a, k3, DepKind.LAUNCH)
    b.edge(bb, k2, DepKind.LAUNCH)
    b.edge(k2, c, DepKind.SYNC)
    b.annotate("ProfilerStep#1", th, a, c)
    m = measure(Workload((b.build().validate(),)))
    assert m["graph.nodes_per_step"] == 6
    assert m["graph.edges_per_step"] == 7
    assert m["graph.fan_out_mean"] == 7 / 6
    assert m["graph.fan_out_max"] == 3
    assert m["graph.depth"] == 4


def test_depth_stays_inside_a_step():
    """Each step of :func:`steps` chains 4 tasks (launch -> gemm -> all-reduce ->
    elementwise, or the four calls on the thread); the chain through both steps is longer
    but crosses a step boundary."""
    m = measure(steps(n_steps=3))
    assert m["graph.depth"] == 4
    assert m["graph.nodes_per_step"] == 7
    # per step 3 intra-thread + 2 intra-stream + 3 launch edges; steps 1 and 2 also hand on
    # to the next step (sync -> next launch, elementwise -> next gemm)
    assert m["graph.edges_per_step"] == (8 * 3 + 2 * 2) / 3


def test_kernels_count_in_the_step_that_launched_them():
    """Two steps of two 10 ns launches each; the four 500 ns kernels queue on one stream and
    run long after their step's launches ended (steps 0-20 and 20-40 ns, kernels 10-2010):
    each step still holds two kernels."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    for i in range(2):
        first = last = -1
        for _ in range(2):
            last = b.task(th, "cudaLaunchKernel", 10, TaskKind.RUNTIME)
            first = last if first < 0 else first
            b.edge(last, b.task(st, "sgemm", 500), DepKind.LAUNCH)
        b.annotate(f"ProfilerStep#{i}", th, first, last)
    m = measure(Workload((b.build().validate(),)))
    assert m["step_time_ns"] == 20
    assert m["class.gemm.per_step"] == 2
    assert m["graph.nodes_per_step"] == 4


def test_message_sizes_per_collective_type():
    m = measure(steps())
    assert m["comm.all_reduce.count_per_step"] == 1
    assert m["comm.all_reduce.bytes_per_step"] == MIB
    assert [m[f"comm.all_reduce.size_{q}_bytes"] for q in ("p50", "p90", "max")] == [MIB] * 3


def test_the_critical_path_composition_by_cause_and_class():
    """Each step's critical path: the first launch (10 ns), gemm, all-reduce, elementwise,
    then the sync (10 ns), with no delay between them: 2040 ns over two steps."""
    m = measure(steps())
    cp = {k.removeprefix("critical_path."): v for k, v in m.items()
          if k.startswith("critical_path.")}  # fmt: skip
    assert cp == pytest.approx({
        "cause.task.share": 1.0,
        "class.gemm.share": 1200 / 2040,
        "class.elementwise.share": 400 / 2040,
        "class.comm.all_reduce.share": 400 / 2040,
        "class.runtime.launch.share": 20 / 2040,
        "class.runtime.sync.share": 20 / 2040,
    })  # fmt: skip


def test_a_cpu_gap_shows_as_a_delay_cause_on_the_critical_path():
    """Two 100 ns ops on a thread, 50 ns of CPU overhead (an intra-thread delay) between
    them: the path is 250 ns, 50 of it the delay."""
    b = GraphBuilder()
    th = b.thread(1)
    first = b.task(th, "aten::add_", 100)
    last = b.task(th, "aten::mul_", 100, gap_ns=50)
    b.annotate("ProfilerStep#1", th, first, last)
    m = measure(Workload((b.build().validate(),)))
    assert m["critical_path.cause.task.share"] == pytest.approx(200 / 250)
    assert m["critical_path.cause.intra_thread.share"] == pytest.approx(50 / 250)
    assert m["step_time_ns"] == 250


def test_to_json_is_plain_json():
    w = steps()
    doc = compare(w, doubled(w, "gemm")).to_json()
    again = json.loads(json.dumps(doc, allow_nan=False))
    assert again["ok"] is False
    assert again["failures"][0] == "step_time_ns"
    row = next(r for r in again["rows"] if r["metric"] == "breakdown.other.share")
    assert row["delta_kind"] == "points" and row["bound"] == 0.05
    assert all(isinstance(r["source"], float | None) for r in again["rows"])
    assert np.isfinite([r["delta"] for r in again["rows"] if r["delta"] is not None]).all()
