"""The replay engine at its corners: same-instant ties, index 0, a cost model's bad durations.

Each test is a hand-made graph whose every time follows from the rules of
:mod:`lumos.sim.engine` by hand (worked out in the docstrings).
"""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import SimulationError
from lumos.graph.model import DepKind, ExecGraph, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder
from lumos.sim import SimResult, TracedCost, simulate
from lumos.sim._kernel import CAUSE_WAIT


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
