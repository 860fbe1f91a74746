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


def test_a_launch_at_the_same_instant_as_a_stream_sync_counts_as_before_it() -> None:
    """Both become ready at 10, when ``mm`` (task 0, [0, 10]) ends: the sync (task 1) as the next
    task on its thread, the launch (task 2) through an inter-thread edge. The launch is taken as
    submitted before the sync although its index is higher, so the sync waits for the kernel:
    launch [10, 15], kernel [15, 115] (launch edge, no delay), sync [115, 117]. Were the sync
    resolved first, nothing would be launched on the stream yet and it would run [10, 12]."""
    b = GraphBuilder()
    th0, th1, st = b.thread(1), b.thread(2), b.stream(7)
    mm = b.task(th0, "aten::mm", 10)
    sync = b.task(th0, "cudaStreamSynchronize", 2, TaskKind.RUNTIME)
    launch = b.task(th1, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k = b.task(st, "gemm", 100)
    b.edge(mm, launch, DepKind.INTER_THREAD)
    b.edge(launch, k, DepKind.LAUNCH)
    b.wait(sync, WaitKind.STREAM, stream=st)
    assert (mm, sync, launch, k) == (0, 1, 2, 3)
    r = simulate(b.build().validate())
    assert times(r) == [(0, 10), (115, 117), (10, 15), (15, 115)]
    assert (int(r.cause_kind[sync]), int(r.cause_ref[sync])) == (CAUSE_WAIT, k)
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
