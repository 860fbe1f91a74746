"""The replay engine at its corners: same-instant ties, index 0, a cost model's bad durations.

Each test is a hand-made graph whose every time follows from the rules of
:mod:`lumos.sim.engine` by hand (worked out in the docstrings).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lumos.errors import SimulationError
from lumos.graph.model import CommType, DepKind, ExecGraph, TaskKind, WaitKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim import SimResult, TracedCost, simulate
from lumos.sim._kernel import CAUSE_COLLECTIVE, CAUSE_EDGE, CAUSE_NONE, CAUSE_WAIT

from .test_engine import two_rank_collective


def times(r: SimResult) -> list[tuple[int, int]]:
    return list(zip(r.start_ns.tolist(), r.end_ns.tolist(), strict=True))


def sync_and_launch_at_10(sync_on_own_thread: bool) -> ExecGraph:
    """``mm`` (task 0, [0, 10]), then a stream sync (task 1) and a launch (task 2, of ``gemm``,
    100) both released at 10: the launch through an inter-thread edge; the sync as ``mm``'s
    successor on its thread or, with ``sync_on_own_thread``, as the first task of its own
    thread through an inter-thread edge."""
    b = GraphBuilder()
    th0, th1, th2, st = b.thread(1), b.thread(2), b.thread(3), b.stream(7)
    mm = b.task(th0, "aten::mm", 10)
    sync = b.task(th2 if sync_on_own_thread else th0, "cudaStreamSynchronize", 2,
                  TaskKind.RUNTIME)  # fmt: skip
    launch = b.task(th1, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k = b.task(st, "gemm", 100)
    if sync_on_own_thread:
        b.edge(mm, sync, DepKind.INTER_THREAD)
    b.edge(mm, launch, DepKind.INTER_THREAD)
    b.edge(launch, k, DepKind.LAUNCH)
    b.wait(sync, WaitKind.STREAM, stream=st)
    assert (mm, sync, launch, k) == (0, 1, 2, 3)
    return b.build().validate()


def test_a_launch_at_the_same_instant_as_a_stream_sync_counts_as_before_it() -> None:
    """Both become ready at 10, when ``mm`` (task 0, [0, 10]) ends: the sync (task 1) as the next
    task on its thread, the launch (task 2) through an inter-thread edge. The launch is taken as
    submitted before the sync although its index is higher, so the sync waits for the kernel:
    launch [10, 15], kernel [15, 115] (launch edge, no delay), sync [115, 117]. Were the sync
    resolved first, nothing would be launched on the stream yet and it would run [10, 12]."""
    r = simulate(sync_and_launch_at_10(sync_on_own_thread=False))
    assert times(r) == [(0, 10), (115, 117), (10, 15), (15, 115)]
    assert (int(r.cause_kind[1]), int(r.cause_ref[1])) == (CAUSE_WAIT, 3)
    assert r.makespan_ns == 117


def event_on_first_stream() -> ExecGraph:
    """Processor 0 is the stream, task 0 the event record on the thread (processor 1)."""
    b = GraphBuilder()
    st, th = b.stream(7), b.thread(1)
    rec = b.task(th, "cudaEventRecord", 1, TaskKind.RUNTIME)
    es = b.task(th, "cudaEventSynchronize", 1, TaskKind.RUNTIME)
    k = b.task(st, "k", 50)  # no launch edge: counts as launched at time 0
    b.wait(es, WaitKind.EVENT, stream=st, record=rec)
    assert (st, rec, es, k) == (0, 0, 1, 2)
    return b.build().validate()


def test_an_event_recorded_by_task_0_on_processor_0_is_waited_for() -> None:
    """The record (task 0, [0, 1]) captures the kernel on stream processor 0 (launched at time 0,
    running [0, 50]); the event synchronize, ready at 1, waits for it: [50, 51]. Index 0 is a
    task and a processor like any other (an unrecorded or uncaptured event would let the
    synchronize run [1, 2])."""
    r = simulate(event_on_first_stream())
    assert times(r) == [(0, 1), (50, 51), (0, 50)]
    assert (int(r.cause_kind[1]), int(r.cause_ref[1])) == (CAUSE_WAIT, 2)
    assert r.diagnostics.count("event_wait_before_record") == 0


class MinusOneForTask(TracedCost):
    """Traced durations, except task ``task`` costs -1 ns."""

    def __init__(self, task: int) -> None:
        self.task = task

    def durations(self, graph: ExecGraph) -> np.ndarray:
        d = graph.tasks.dur_ns.astype(np.int64)
        d[self.task] = -1
        return d


def test_a_negative_duration_from_the_cost_model_is_refused_naming_the_rank() -> None:
    b = GraphBuilder(rank=3, world_size=4)
    th = b.thread(1)
    b.task(th, "a", 5)
    b.task(th, "b", 5)
    with pytest.raises(
        SimulationError, match=r"^cost model returned a negative duration for rank 3$"
    ):
        simulate(b.build().validate(), MinusOneForTask(1))


def test_a_sync_released_by_an_edge_still_lets_a_same_instant_launch_count_as_before_it() -> None:
    """Like the test above, but the sync (task 1) is the first task on its own thread, released
    at 10 by an inter-thread edge from ``mm`` (task 0, [0, 10]) rather than by a processor
    predecessor; the launch (task 2) is released at 10 the same way. A task with runtime waits
    yields to every task without waits at the same instant, whichever releases it: launch
    [10, 15], kernel [15, 115], sync [115, 117] (taken first, it would find nothing launched on
    the stream and run [10, 12])."""
    r = simulate(sync_and_launch_at_10(sync_on_own_thread=True))
    assert times(r) == [(0, 10), (115, 117), (10, 15), (15, 115)]
    assert (int(r.cause_kind[1]), int(r.cause_ref[1])) == (CAUSE_WAIT, 3)


def test_a_device_sync_waits_for_every_launched_stream_of_its_device_and_no_other() -> None:
    """Device 0 has stream 3 with kernel ``k0`` (no launch edge: launched at 0, runs
    [0, 1000]); device 1 has streams 5 (processor 1) and 6 (processor 2). The thread launches
    ``kB`` on stream 6 ([0, 5]; kB [5, 55]), synchronizes device 1, then launches ``kA`` on
    stream 5. At the sync (ready at 5) nothing is launched on stream 5 yet, so only kB counts:
    sync [55, 57], second launch [57, 62], kA [62, 162]. Stream 5 being empty must not stop the
    search before stream 6 (that would give sync [5, 7]), and device 0's ``k0`` is not waited
    for (that would give sync [1000, 1002])."""
    b = GraphBuilder()
    s3 = b.stream(3, device=0)
    s5, s6 = b.stream(5, device=1), b.stream(6, device=1)
    th = b.thread(1)
    k0 = b.task(s3, "k0", 1000)
    launch_b = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    sync = b.task(th, "cudaDeviceSynchronize", 2, TaskKind.RUNTIME)
    launch_a = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k_a = b.task(s5, "kA", 100)
    k_b = b.task(s6, "kB", 50)
    b.edge(launch_b, k_b, DepKind.LAUNCH)
    b.edge(launch_a, k_a, DepKind.LAUNCH)
    b.wait(sync, WaitKind.DEVICE, device=1)
    assert (s3, s5, s6, th) == (0, 1, 2, 3)
    assert (k0, launch_b, sync, launch_a, k_a, k_b) == (0, 1, 2, 3, 4, 5)
    r = simulate(b.build().validate())
    assert times(r) == [(0, 1000), (0, 5), (55, 57), (57, 62), (62, 162), (5, 55)]
    assert (int(r.cause_kind[sync]), int(r.cause_ref[sync])) == (CAUSE_WAIT, k_b)


def test_times_beyond_float_precision_stay_exact_in_integer_ns() -> None:
    """Task ``a`` lasts 2**53 + 1 ns, past the last integer float64 holds exactly after 2**53.
    ``b`` follows it on its thread, ``c`` on another thread through an edge with a 2 ns delay:
    a [0, 2**53 + 1], b [2**53 + 1, 2**53 + 4], c [2**53 + 3, 2**53 + 8]. Any time kept as a
    float on the way would round the odd values (2**53 + 1 and 2**53 + 3) to even ones."""
    big = 2**53
    b = GraphBuilder()
    th1, th2 = b.thread(1), b.thread(2)
    a = b.task(th1, "a", big + 1)
    b.task(th1, "b", 3)
    c = b.task(th2, "c", 5)
    b.edge(a, c, DepKind.INTER_THREAD, 2)
    r = simulate(b.build().validate())
    assert r.start_ns.dtype == np.int64 and r.end_ns.dtype == np.int64
    assert times(r) == [(0, big + 1), (big + 1, big + 4), (big + 3, big + 8)]
    assert r.makespan_ns == big + 8


def test_a_tie_between_releases_keeps_the_first_edge_and_a_zero_time_edge_is_a_cause() -> None:
    """``a``, ``b`` and ``p`` (tasks 0-2, one thread each, 10 ns) all start at 0 and end at 10;
    ``d`` (task 3) follows ``p`` on its thread (the builder's intra-thread edge, index 0) and
    has edges from ``a`` (index 1) and ``b`` (index 2): it runs [10, 15]. Tasks start in index
    order at the same instant, so ``a``'s edge releases ``d`` first and a later release at the
    same time does not replace it: cause (edge, 1). ``z`` (task 4) lasts 0 ns and releases
    ``y`` (task 5, another thread) at time 0 through edge 3: ``y`` runs [0, 4], and its start
    is still caused by that edge, not "nothing to wait for"."""
    b = GraphBuilder()
    ths = [b.thread(tid) for tid in range(1, 6)]
    a = b.task(ths[0], "a", 10)
    bb = b.task(ths[1], "b", 10)
    p = b.task(ths[2], "p", 10)
    d = b.task(ths[2], "d", 5)
    e_ad = b.edge(a, d, DepKind.INTER_THREAD)
    e_bd = b.edge(bb, d, DepKind.INTER_THREAD)
    z = b.task(ths[3], "z", 0)
    y = b.task(ths[4], "y", 4)
    e_zy = b.edge(z, y, DepKind.INTER_THREAD)
    assert (a, bb, p, d, z, y) == (0, 1, 2, 3, 4, 5) and (e_ad, e_bd, e_zy) == (1, 2, 3)
    r = simulate(b.build().validate())
    assert times(r) == [(0, 10), (0, 10), (0, 10), (10, 15), (0, 0), (0, 4)]
    assert r.cause_kind.tolist() == [CAUSE_NONE] * 3 + [CAUSE_EDGE, CAUSE_NONE, CAUSE_EDGE]
    assert r.cause_ref.tolist() == [-1, -1, -1, e_ad, -1, e_zy]


class WrongShapes(TracedCost):
    """Traced durations and transfers, except that ``durations`` drops the last task or
    ``transfer_ns`` adds a participant, as asked."""

    def __init__(self, short_durations: bool, extra_transfer: bool) -> None:
        self.short_durations, self.extra_transfer = short_durations, extra_transfer

    def durations(self, graph: ExecGraph) -> np.ndarray:
        d = graph.tasks.dur_ns
        return d[:-1] if self.short_durations else d

    def transfer_ns(self, workload: Workload, groups: Any, durations: Any) -> np.ndarray:
        t = super().transfer_ns(workload, groups, durations)
        return np.append(t, 1) if self.extra_transfer else t


def test_a_cost_model_returning_the_wrong_number_of_durations_or_transfers_is_refused() -> None:
    """Rank 3 of 4 has 2 tasks: 1 duration is refused naming the rank and both counts. The
    two-rank all-reduce (one collective of 2 participants) given 3 transfer times is refused
    with both counts (one per collective or one per participant would do)."""
    b = GraphBuilder(rank=3, world_size=4)
    th = b.thread(1)
    b.task(th, "a", 5)
    b.task(th, "b", 5)
    with pytest.raises(
        SimulationError, match=r"^cost model returned \(1,\) durations for rank 3, expected 2$"
    ):
        simulate(b.build().validate(), WrongShapes(True, False))
    with pytest.raises(
        SimulationError,
        match=r"^cost model returned \(3,\) transfer times for 1 collectives with 2 participants$",
    ):
        simulate(two_rank_collective(10, 50, 100, 60), WrongShapes(False, True))


def test_event_waits_before_their_record_are_counted_each_with_no_example() -> None:
    """Two event synchronizes (tasks 0 and 1 on thread 1, [0, 1] and [1, 2]) wait on a record
    (task 2) that thread 2 runs only 10 ns after the second one ends, through an edge: neither
    waits ([12, 13] for the record) and the result counts 2 waits before their record, with
    no example text."""
    b = GraphBuilder()
    th, th2, st = b.thread(1), b.thread(2), b.stream(7)
    es1 = b.task(th, "cudaEventSynchronize", 1, TaskKind.RUNTIME)
    es2 = b.task(th, "cudaEventSynchronize", 1, TaskKind.RUNTIME)
    rec = b.task(th2, "cudaEventRecord", 1, TaskKind.RUNTIME)
    k = b.task(st, "k", 5)
    b.edge(es2, rec, DepKind.INTER_THREAD, 10)
    b.wait(es1, WaitKind.EVENT, stream=st, record=rec)
    b.wait(es2, WaitKind.EVENT, stream=st, record=rec)
    assert (es1, es2, rec, k) == (0, 1, 2, 3)
    r = simulate(b.build().validate())
    assert times(r) == [(0, 1), (1, 2), (12, 13), (0, 5)]
    assert r.diagnostics.to_dict() == {"event_wait_before_record": {"count": 2, "example": ""}}


def rank0_sync_and_collective() -> ExecGraph:
    """Rank 0 of 2: thread 1 (processor 0) launches ``kr0`` (40 ns) on stream 9 (processor 1)
    and then synchronizes stream 9; the all-reduce (seq 1, 42 ns of which 12 waited) follows
    ``kr0`` on the stream without a launch edge, so it counts as launched at time 0."""
    b = GraphBuilder(rank=0, world_size=2)
    th, st = b.thread(1), b.stream(9)
    pg = b.process_group("0", (0, 1))
    launch = b.task(th, "cudaLaunchKernel", 3, TaskKind.RUNTIME)
    k = b.task(st, "kr0", 40)
    b.edge(launch, k, DepKind.LAUNCH)
    sync = b.task(th, "cudaStreamSynchronize", 2, TaskKind.RUNTIME)
    b.wait(sync, WaitKind.STREAM, stream=st)
    c = b.comm(CommType.ALL_REDUCE, 1 << 20, pg, seq_id=1, wait_ns=12)
    ar = b.task(st, "ncclAllReduce", 42, TaskKind.COMM, comm=c)
    assert (launch, k, sync, ar) == (0, 1, 2, 3)
    return b.build().validate()


def rank1_every_wait_kind() -> ExecGraph:
    """Rank 1 of 2: the device-sync graph of the test above (streams 3 on device 0, 5 and 6 on
    device 1, thread 1 as processor 3), then on the thread an event record on stream 5, its
    event synchronize and a stream synchronize of stream 3; stream 4 (device 2, processor 4)
    holds the all-reduce (seq 1, 73 ns of which 43 waited)."""
    b = GraphBuilder(rank=1, world_size=2)
    s3 = b.stream(3, device=0)
    s5, s6 = b.stream(5, device=1), b.stream(6, device=1)
    th, s4 = b.thread(1), b.stream(4, device=2)
    pg = b.process_group("0", (0, 1))
    b.task(s3, "k0", 1000)
    launch_b = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    sync = b.task(th, "cudaDeviceSynchronize", 2, TaskKind.RUNTIME)
    launch_a = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k_a = b.task(s5, "kA", 100)
    k_b = b.task(s6, "kB", 50)
    b.edge(launch_b, k_b, DepKind.LAUNCH)
    b.edge(launch_a, k_a, DepKind.LAUNCH)
    b.wait(sync, WaitKind.DEVICE, device=1)
    rec = b.task(th, "cudaEventRecord", 1, TaskKind.RUNTIME)
    es = b.task(th, "cudaEventSynchronize", 1, TaskKind.RUNTIME)
    b.wait(es, WaitKind.EVENT, stream=s5, record=rec)
    ss = b.task(th, "cudaStreamSynchronize", 2, TaskKind.RUNTIME)
    b.wait(ss, WaitKind.STREAM, stream=s3)
    c = b.comm(CommType.ALL_REDUCE, 1 << 20, pg, seq_id=1, wait_ns=43)
    ar = b.task(s4, "ncclAllReduce", 73, TaskKind.COMM, comm=c)
    assert (s3, s5, s6, th, s4) == (0, 1, 2, 3, 4)
    assert (rec, es, ss, ar) == (6, 7, 8, 9)
    return b.build().validate()


def test_the_second_rank_resolves_every_wait_kind_on_its_own_tasks_and_streams() -> None:
    """Rank 0 comes first (4 tasks, 2 processors), so rank 1's tasks, processors, edges, waits
    and devices are all offset in the workload. Rank 0: launch [0, 3], kr0 [3, 43]; the
    all-reduce arrives at 43, rank 1's (first on its stream) at 0, so both start at 43 and
    run their 30 ns of transfer (42 - 12, 73 - 43): [43, 73]. Rank 0's stream sync, ready at
    3, waits for the last task submitted on stream 9, the all-reduce: [73, 75]. Rank 1: as
    in the device-sync test, kB [5, 55], sync [55, 57], second launch [57, 62], kA [62, 162],
    k0 [0, 1000]; the record [62, 63] captures kA (launched at 57), so the event sync waits
    for it: [162, 163]; the stream sync of stream 3 waits for k0: [1000, 1002]. Causes (global
    task indices, rank 1's start at 4): rank 1's all-reduce by rank 0's (3), the waits by
    all-reduce 3, kB 9, kA 8 and k0 4."""
    r = simulate(Workload((rank0_sync_and_collective(), rank1_every_wait_kind())))
    assert r.task_offsets.tolist() == [0, 4, 14]
    assert times(r)[:4] == [(0, 3), (3, 43), (73, 75), (43, 73)]
    assert times(r)[4:] == [
        (0, 1000), (0, 5), (55, 57), (57, 62), (62, 162), (5, 55),
        (62, 63), (162, 163), (1000, 1002), (43, 73),
    ]  # fmt: skip
    waits = [2, 4 + 2, 4 + 7, 4 + 8]
    assert [(int(r.cause_kind[t]), int(r.cause_ref[t])) for t in waits] == [
        (CAUSE_WAIT, 3), (CAUSE_WAIT, 4 + 5), (CAUSE_WAIT, 4 + 4), (CAUSE_WAIT, 4 + 0),
    ]  # fmt: skip
    assert (int(r.cause_kind[13]), int(r.cause_ref[13])) == (CAUSE_COLLECTIVE, 3)
    assert r.makespan_ns == 1002 and r.diagnostics.to_dict() == {}


def test_without_launch_pacing_kernels_skip_their_launch_but_a_sync_waits_only_for_submitted_work() -> (
    None
):
    """Thread: launch 1 [0, 5] of ``k1`` (100 ns), a stream sync (2 ns), launch 2 (5 ns) of
    ``k2`` (500 ns), both kernels on stream 7. Paced (the default): k1 [5, 105], the sync
    (ready at 5, k1 submitted) [105, 107], launch 2 [107, 112], k2 [112, 612]. With
    ``launch_paces=False`` the kernels no longer wait for their launches: k1 [0, 100], k2 right
    behind it [100, 600]; the sync still waits only for k1, submitted before it (k2 is
    submitted only at 102): [100, 102], launch 2 [102, 107]."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    l1 = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k1 = b.task(st, "k1", 100)
    b.edge(l1, k1, DepKind.LAUNCH)
    sync = b.task(th, "cudaStreamSynchronize", 2, TaskKind.RUNTIME)
    b.wait(sync, WaitKind.STREAM, stream=st)
    l2 = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k2 = b.task(st, "k2", 500)
    b.edge(l2, k2, DepKind.LAUNCH)
    assert (l1, k1, sync, l2, k2) == (0, 1, 2, 3, 4)
    g = b.build().validate()
    assert times(simulate(g)) == [(0, 5), (5, 105), (105, 107), (107, 112), (112, 612)]
    r = simulate(g, launch_paces=False)
    assert times(r) == [(0, 5), (0, 100), (100, 102), (102, 107), (100, 600)]
    assert (int(r.cause_kind[sync]), int(r.cause_ref[sync])) == (CAUSE_WAIT, k1)


def test_with_several_ranks_a_tie_between_two_edges_of_one_task_keeps_the_first_edge() -> None:
    """Rank 0 is one task ``a`` [0, 3] and no edge, so rank 1's edge indices are global as
    built. Rank 1: ``h`` [0, 10] and ``g`` [0, 5] (threads of their own) each feed ``x0`` and
    ``x1`` (1 ns each, edges 0-3 built alternately h, g, h, g), then ``d`` (5 ns) gets edges
    from ``h`` (4, inter-thread), ``g`` (5) and ``h`` again (6, inter-stream). ``g``'s edge
    releases ``d`` at 5, ``h``'s two at 10: a tie between edges 4 and 6 of the same task,
    which the engine breaks by edge order (the first edge a task releases through wins), so
    ``d`` runs [10, 15] caused by edge 4. With several graphs the engine orders out-edges
    itself (a sort of their sources, which must be stable to keep that order: sources
    interleaved as here are what an unstable sort reorders)."""
    r0 = GraphBuilder(rank=0, world_size=2)
    r0.task(r0.thread(1), "a", 3)
    b = GraphBuilder(rank=1, world_size=2)
    h = b.task(b.thread(1), "h", 10)
    g = b.task(b.thread(2), "g", 5)
    xs = [b.task(b.thread(3 + i), f"x{i}", 1) for i in range(2)]
    d = b.task(b.thread(5), "d", 5)
    fan = [b.edge(src, x, DepKind.INTER_THREAD) for x in xs for src in (h, g)]
    e_hd = b.edge(h, d, DepKind.INTER_THREAD)
    e_gd = b.edge(g, d, DepKind.INTER_THREAD)
    e_hd2 = b.edge(h, d, DepKind.INTER_STREAM)
    assert (h, g, *xs, d) == (0, 1, 2, 3, 4) and fan == [0, 1, 2, 3]
    assert (e_hd, e_gd, e_hd2) == (4, 5, 6)
    r = simulate(Workload((r0.build().validate(), b.build().validate())))
    assert r.task_offsets.tolist() == [0, 1, 6]
    assert times(r) == [(0, 3), (0, 10), (0, 5), (10, 11), (10, 11), (10, 15)]
    assert (int(r.cause_kind[1 + d]), int(r.cause_ref[1 + d])) == (CAUSE_EDGE, e_hd)
    assert [int(r.cause_ref[1 + x]) for x in xs] == [0, 2]
