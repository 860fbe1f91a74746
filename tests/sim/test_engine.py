"""The replay engine on hand-made graphs: each runtime rule pinned by exact times."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import SimulationError
from lumos.graph.model import CommType, DepKind, ExecGraph, TaskKind, WaitKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim import SimResult, TracedCost, simulate


def sync_graph(kernel_ns: int = 100) -> ExecGraph:
    """launch(5) --13--> kernel(kernel_ns); then a stream sync(2) one ns after the launch."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k = b.task(st, "gemm", kernel_ns)
    b.edge(launch, k, DepKind.LAUNCH, 13)
    sync = b.task(th, "cudaStreamSynchronize", 2, TaskKind.RUNTIME, gap_ns=1)
    b.wait(sync, WaitKind.STREAM, stream=st)
    after = b.task(th, "aten::add", 10, gap_ns=3)
    b.annotate("ProfilerStep#1", th, launch, after, ts_ns=0, dur_ns=200, lead_ns=4, tail_ns=6)
    return b.build().validate()


def times(r: SimResult) -> list[tuple[int, int]]:
    return list(zip(r.start_ns.tolist(), r.end_ns.tolist(), strict=True))


def test_stream_sync_waits_for_launched_kernel() -> None:
    r = simulate(sync_graph())
    assert times(r) == [(0, 5), (18, 118), (118, 120), (123, 133)]
    assert r.makespan_ns == 133
    lo, hi = r.annotation_spans()
    assert (lo.tolist(), hi.tolist()) == ([-4], [139])
    assert r.steps()[0]["predicted_ns"] == 143


def test_doubling_the_waited_kernel_delays_the_thread() -> None:
    base, slow = simulate(sync_graph(100)), simulate(sync_graph(200))
    assert slow.start_ns[3] - base.start_ns[3] == 100


def test_without_wait_the_thread_runs_ahead() -> None:
    r = simulate(sync_graph().drop_waits())
    assert r.start_ns[2] == 6


def test_event_sync_waits_only_for_the_captured_kernel() -> None:
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    l1 = b.task(th, "cudaLaunchKernel", 1, TaskKind.RUNTIME)
    k1 = b.task(st, "k1", 50)
    b.edge(l1, k1, DepKind.LAUNCH)
    rec = b.task(th, "cudaEventRecord", 1, TaskKind.RUNTIME)
    l2 = b.task(th, "cudaLaunchKernel", 1, TaskKind.RUNTIME)
    k2 = b.task(st, "k2", 500)
    b.edge(l2, k2, DepKind.LAUNCH)
    es = b.task(th, "cudaEventSynchronize", 1, TaskKind.RUNTIME)
    b.wait(es, WaitKind.EVENT, stream=st, record=rec)
    r = simulate(b.build().validate())
    assert r.end_ns[k1] == 51
    assert r.start_ns[es] == 51  # not k2's end (551)
    assert r.end_ns[k2] == 551


def test_event_wait_before_record_is_counted_not_waited() -> None:
    b = GraphBuilder()
    th, th2, st = b.thread(1), b.thread(2), b.stream(7)
    es = b.task(th, "cudaEventSynchronize", 1, TaskKind.RUNTIME)
    rec = b.task(th2, "cudaEventRecord", 1, TaskKind.RUNTIME, gap_ns=0)
    b.task(th2, "x", 1)
    b.edge(es, rec, DepKind.INTER_THREAD, 10)
    b.task(st, "k", 5)
    b.wait(es, WaitKind.EVENT, stream=st, record=rec)
    r = simulate(b.build().validate())
    assert r.start_ns[es] == 0
    assert r.diagnostics.count("event_wait_before_record") == 1


def test_device_sync_waits_for_every_stream_of_the_device() -> None:
    b = GraphBuilder()
    th, s1, s2, s3 = (
        b.thread(1),
        b.stream(7, device=0),
        b.stream(8, device=0),
        b.stream(9, device=1),
    )
    l1 = b.task(th, "launch", 1, TaskKind.RUNTIME)
    b.edge(l1, b.task(s1, "k1", 100), DepKind.LAUNCH)
    l2 = b.task(th, "launch", 1, TaskKind.RUNTIME)
    b.edge(l2, b.task(s2, "k2", 300), DepKind.LAUNCH)
    l3 = b.task(th, "launch", 1, TaskKind.RUNTIME)
    b.edge(l3, b.task(s3, "k3", 900), DepKind.LAUNCH)
    ds = b.task(th, "cudaDeviceSynchronize", 1, TaskKind.RUNTIME)
    b.wait(ds, WaitKind.DEVICE, device=0)
    r = simulate(b.build().validate())
    assert r.start_ns[ds] == 302  # k2 runs [2, 302]; device 1's k3 is not waited for


def test_inter_stream_edge_orders_streams_and_dropping_it_lets_consumer_start_early() -> None:
    b = GraphBuilder()
    s1, s2 = b.stream(7), b.stream(8)
    producer = b.task(s1, "producer", 100)
    consumer = b.task(s2, "consumer", 10)
    b.edge(producer, consumer, DepKind.INTER_STREAM)
    g = b.build().validate()
    assert simulate(g).start_ns[consumer] == 100
    assert simulate(g.drop_edges([DepKind.INTER_STREAM])).start_ns[consumer] == 0


def test_one_task_at_a_time_even_without_intra_edges() -> None:
    g = sync_graph().drop_edges([DepKind.INTRA_THREAD, DepKind.INTRA_STREAM])
    r = simulate(g)
    assert times(r) == [(0, 5), (18, 118), (118, 120), (120, 130)]


def two_rank_collective(
    arrive0: int, arrive1: int, dur0: int, dur1: int, seq: bool = True
) -> Workload:
    graphs = []
    for rank, arrive, dur in ((0, arrive0, dur0), (1, arrive1, dur1)):
        b = GraphBuilder(rank=rank, world_size=2)
        st = b.stream(20)
        pg = b.process_group("0", (0, 1))
        b.task(st, "compute", arrive)
        # the later arrival waited least: its whole duration is the transfer (as the build
        # finds for recordings on one clock); the earlier one waited the difference
        wait = min(max(arrive0, arrive1) - arrive, dur)
        c = b.comm(CommType.ALL_REDUCE, 1 << 20, pg, seq_id=1 if seq else -1, wait_ns=wait)
        b.task(st, "ncclAllReduce", dur, TaskKind.COMM, comm=c)
        b.task(st, "after", 7)
        graphs.append(b.build().validate())
    return Workload(tuple(graphs))


@pytest.mark.parametrize("seq", [True, False])
def test_two_rank_collective_starts_together(seq: bool) -> None:
    w = two_rank_collective(10, 50, 100, 60, seq)
    r = simulate(w)
    # both start at the latest arrival (50); each then runs its duration less its wait (60)
    assert r.starts(0).tolist() == [0, 50, 110]
    assert r.starts(1).tolist() == [0, 50, 110]
    assert r.ends(0)[1] == r.ends(1)[1] == 110


def test_single_rank_collective_keeps_traced_duration() -> None:
    w = two_rank_collective(10, 50, 100, 60)
    r = simulate(w.graphs[0])
    assert r.end_ns.tolist() == [10, 110, 117]


def test_mismatched_collective_order_is_a_deadlock() -> None:
    graphs = []
    for rank, seqs in ((0, (1, 2)), (1, (2, 1))):
        b = GraphBuilder(rank=rank, world_size=2)
        st = b.stream(20)
        pg = b.process_group("0", (0, 1))
        for s in seqs:
            b.task(st, "nccl", 5, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, 8, pg, s))
        graphs.append(b.build())
    with pytest.raises(SimulationError, match="collective peers never arrived"):
        simulate(Workload(tuple(graphs)))


def test_wait_on_work_that_needs_the_waiter_is_a_deadlock() -> None:
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    sync = b.task(th, "cudaStreamSynchronize", 1, TaskKind.RUNTIME)
    later = b.task(th, "later", 1)
    k = b.task(st, "unlaunched", 5)  # no launch edge: counts as launched at time 0
    b.edge(later, k, DepKind.INTER_THREAD)
    b.wait(sync, WaitKind.STREAM, stream=st)
    with pytest.raises(SimulationError, match=r"deadlock: 3 of 3 .*cudaStreamSynchronize"):
        simulate(b.build().validate())


class DoubleKernels(TracedCost):
    def durations(self, graph: ExecGraph) -> np.ndarray:
        d = graph.tasks.dur_ns.copy()
        d[graph.tasks.kind == TaskKind.KERNEL] *= 2
        return d


def test_cost_model_is_swappable() -> None:
    r = simulate(sync_graph(), DoubleKernels())
    assert r.end_ns[1] == 218


def test_simulator_never_reads_recorded_starts() -> None:
    g = sync_graph()
    moved = g.replace(tasks=g.tasks.replace(ts_ns=np.array([999, 5, 1234, 7])))
    assert simulate(g).to_json(include_tasks=True) == simulate(moved).to_json(include_tasks=True)


def test_to_json_is_byte_identical_and_empty_graph_runs() -> None:
    assert simulate(sync_graph()).to_json(True) == simulate(sync_graph()).to_json(True)
    b = GraphBuilder()
    b.thread(1)
    assert simulate(b.build()).makespan_ns == 0


def test_negative_launch_delay_and_its_clamp() -> None:
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    launch = b.task(th, "cudaLaunchKernel", 10, TaskKind.RUNTIME)
    k = b.task(st, "k", 5)
    b.edge(launch, k, DepKind.LAUNCH, -7)  # kernel starts 3 ns into the launch call
    g = b.build().validate()
    assert simulate(g).start_ns[k] == 3
    # a cost model that shortens the launch below the negative delay: never before launch start
    b2 = g.with_durations(np.array([2, 5]))
    assert simulate(b2).start_ns[k] == 0
