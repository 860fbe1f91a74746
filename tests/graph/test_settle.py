"""An unedited recording always replays (``lumos.graph.build_causal``).

Inferred dependencies that run against the recorded order are never found
(:func:`causal`), and a graph whose own replay still cannot finish has the dependency that
closes each cycle cut, its task falling back to its recorded timing, counted with the share of
step time that froze. Hand-made graphs pin the exact cut, the frozen nanoseconds and the replay.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from lumos.diagnostics import Diagnostics
from lumos.errors import SimulationError
from lumos.graph.build import build_graph
from lumos.graph.build_causal import CUT, causal, settle, submitted_ns
from lumos.graph.model import DepKind, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder
from lumos.ingest.kineto import read_kineto
from lumos.sim import simulate


def _times(r) -> list[tuple[int, int]]:
    return list(zip(r.start_ns.tolist(), r.end_ns.tolist(), strict=True))


def _late_sync_graph():
    """A thread launches k1, runs S (10 ns), launches k2; a wrongly inferred SYNC edge says S
    waited for k2, which only the launch after S submits: a cycle."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    a = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=0)
    s = b.task(th, "aten::item", 10, ts_ns=10)
    c = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=25, gap_ns=5)
    k1 = b.task(st, "k1", 100, ts_ns=8)
    k2 = b.task(st, "k2", 50, ts_ns=108)
    b.edge(a, k1, DepKind.LAUNCH, 3)
    b.edge(c, k2, DepKind.LAUNCH, 3)
    bad = b.edge(k2, s, DepKind.SYNC, 2)
    g = b.build()  # validate() would refuse the cycle
    arrive = np.array([0, 10, 25, 8, 108], dtype=np.int64)
    end = np.array([5, 20, 30, 108, 158], dtype=np.int64)
    return g, arrive, end, bad


def test_the_recorded_order_rules_out_a_releaser_submitted_later():
    _, arrive, _, _ = _late_sync_graph()
    on_stream = np.array([False, False, False, True, True])
    launcher = np.array([-1, -1, -1, 0, 2], dtype=np.int64)
    sub = submitted_ns(arrive, launcher, on_stream)
    assert sub.tolist() == [0, 10, 25, 0, 25]
    src, dst = np.array([3, 4]), np.array([1, 1])  # k1 -> S is possible, k2 -> S is not
    assert causal(src, dst, sub).tolist() == [True, False]


def test_a_cycle_through_an_inferred_edge_is_cut_and_the_task_keeps_its_recorded_gap():
    g, arrive, end, bad = _late_sync_graph()
    with pytest.raises(SimulationError, match="deadlock"):
        simulate(g)
    d = Diagnostics()
    fixed = settle(g, arrive, end, step_ns=200, diag=d)
    assert fixed.num_edges == g.num_edges - 1
    assert not ((fixed.edges.src == 4) & (fixed.edges.dst == 1)).any()
    # S falls back to its recorded start: 5 ns after A ended (the gap had been a 0 ns delay)
    assert _times(simulate(fixed)) == [(0, 5), (10, 20), (25, 30), (8, 108), (108, 158)]
    assert d.count(CUT) == 1
    assert "0.000 ms, 2.50% of step time" in d.example(CUT)
    _ = bad


def test_a_cycle_through_a_synchronize_cuts_the_edge_against_the_recorded_order():
    """S synchronizes stream 1, whose kernel k1 was (wrongly) made to wait for k2 on stream 2,
    launched after S: the inter-stream edge is cut, the synchronize kept."""
    b = GraphBuilder()
    th, s1, s2 = b.thread(1), b.stream(7), b.stream(8)
    a = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=0)
    sync = b.task(th, "cudaStreamSynchronize", 4, TaskKind.RUNTIME, ts_ns=6, gap_ns=1)
    c = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=120, gap_ns=5)
    k1 = b.task(s1, "k1", 100, ts_ns=9)
    k2 = b.task(s2, "k2", 50, ts_ns=128)
    b.edge(a, k1, DepKind.LAUNCH, 4)
    b.edge(c, k2, DepKind.LAUNCH, 3)
    b.edge(k2, k1, DepKind.INTER_STREAM)
    b.wait(sync, WaitKind.STREAM, stream=s1)
    g = b.build().validate()
    with pytest.raises(SimulationError, match="runtime wait never satisfied"):
        simulate(g)
    arrive = np.array([0, 6, 120, 9, 128], dtype=np.int64)
    end = np.array([5, 115, 125, 109, 178], dtype=np.int64)
    d = Diagnostics()
    fixed = settle(g, arrive, end, step_ns=1_000, diag=d)
    assert len(fixed.waits) == 1 and d.count(CUT) == 1
    assert not (fixed.edges.kind == int(DepKind.INTER_STREAM)).any()
    r = simulate(fixed)
    assert r.start_ns[k1] == 9 and r.end_ns[sync] == 9 + 100 + 4  # the sync still waits for k1
    _ = k2


def test_a_graph_that_replays_is_returned_unchanged():
    g, arrive, end, bad = _late_sync_graph()
    ok = g.replace(edges=g.edges.take(np.arange(g.num_edges) != bad))
    d = Diagnostics()
    assert settle(ok, arrive, end, step_ns=200, diag=d) is ok
    assert not d


def _two_late_syncs(gaps: tuple[int, int]):
    """Two copies of :func:`_late_sync_graph` on threads 1 and 2 (streams 7 and 8), S reached
    ``gap`` ns after A ended: two cycles, each closed by a wrongly inferred SYNC edge."""
    b = GraphBuilder()
    threads = [b.thread(1), b.thread(2)]
    streams = [b.stream(7), b.stream(8)]
    cpu: list[tuple[int, int, int]] = []
    for th, gap in zip(threads, gaps, strict=True):
        a = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=0)
        s = b.task(th, "aten::item", 10, ts_ns=5 + gap)
        c = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=20 + gap, gap_ns=5)
        cpu.append((a, s, c))
    arrive, end = [0] * 10, [0] * 10
    for (a, s, c), gap in zip(cpu, gaps, strict=True):
        arrive[a], end[a] = 0, 5
        arrive[s], end[s] = 5 + gap, 15 + gap
        arrive[c], end[c] = 20 + gap, 25 + gap
    for st, (a, s, c), gap in zip(streams, cpu, gaps, strict=True):
        k1 = b.task(st, "k1", 100, ts_ns=8)
        k2 = b.task(st, "k2", 50, ts_ns=28 + gap)
        b.edge(a, k1, DepKind.LAUNCH, 3)
        b.edge(c, k2, DepKind.LAUNCH, 3)
        b.edge(k2, s, DepKind.SYNC, 2)
        arrive[k1], end[k1] = 8, 108
        arrive[k2], end[k2] = 28 + gap, 78 + gap
    i64 = np.int64
    return b.build(), np.array(arrive, i64), np.array(end, i64), [s for _, s, _ in cpu]


def test_every_cycle_cut_in_one_round_adds_its_frozen_time_to_the_count():
    """Both cycles are cut in the same round; each S falls back to its recorded gap after A,
    1,000,000 and 1,000,501 ns, which its intra-thread edge had as a 0 ns delay: 2,000,501 ns
    froze: 2.001 ms to the microsecond, 20.01 % of a 10 ms step."""
    g, arrive, end, item = _two_late_syncs((1_000_000, 1_000_501))
    d = Diagnostics()
    fixed = settle(g, arrive, end, step_ns=10_000_000, diag=d)
    assert fixed.num_edges == g.num_edges - 2
    assert not (fixed.edges.kind == int(DepKind.SYNC)).any()
    assert d.count(CUT) == 2
    assert d.example(CUT) == (
        "2 dependencies the recording contradicts kept at their recorded length: "
        "2.001 ms, 20.01% of step time"
    )
    r = simulate(fixed)
    assert [int(r.start_ns[s]) for s in item] == [1_000_005, 1_000_506]


@pytest.mark.parametrize(
    ("intra", "unit"), [(True, 1), (False, 1_000)], ids=["intra-edges", "processor-order-only"]
)
def test_an_inferred_edge_in_a_cycle_is_cut_before_a_synchronize_even_when_it_runs_with_the_order(
    intra, unit
):
    """S synchronizes stream 1, whose kernel k1 was inferred to wait for X on stream 2; X
    queues on stream 2 behind k3, which C launches after S: a cycle through the synchronize
    (the graph's only wait). The inferred edge X -> k1 agrees with the recorded order (X's
    launch D, at 0 ns, came before k1's, A at 50 ns; score -50), the synchronize's target was
    submitted 6 ns before it (score -6): the edge is cut all the same, as any inferred edge goes
    before a synchronize, and the synchronize still waits for k1 (60 + 100 ns, then its 2 ns).

    Without intra-processor edges (the replay keeps each processor's order alone, and the
    inferred edge is edge row 0), times in us (scores 44 us apart, well beyond the float
    spacing at the 1e18 that ranks waits last), the same edge is cut; the thread then runs
    without its gaps: ``A`` ends at 10 us, ``k1`` runs 15-115 and the synchronize returns at
    117."""
    b = GraphBuilder()
    th, s1, s2 = b.thread(1), b.stream(7), b.stream(8)
    u = unit
    dd = b.task(th, "cudaLaunchKernel", 5 * u, TaskKind.RUNTIME, ts_ns=0)
    a = b.task(th, "cudaLaunchKernel", 5 * u, TaskKind.RUNTIME, ts_ns=50 * u, gap_ns=45 * u)
    sync = b.task(th, "cudaStreamSynchronize", 2 * u, TaskKind.RUNTIME, ts_ns=56 * u, gap_ns=u)
    c = b.task(th, "cudaLaunchKernel", 5 * u, TaskKind.RUNTIME, ts_ns=170 * u, gap_ns=8 * u)
    k1 = b.task(s1, "k1", 100 * u, ts_ns=60 * u)
    k3 = b.task(s2, "k3", 50 * u, ts_ns=178 * u)
    x = b.task(s2, "x", 10 * u, ts_ns=228 * u)
    b.edge(x, k1, DepKind.INTER_STREAM)
    b.edge(dd, x, DepKind.LAUNCH, 3 * u)
    b.edge(a, k1, DepKind.LAUNCH, 5 * u)
    b.edge(c, k3, DepKind.LAUNCH, 3 * u)
    b.wait(sync, WaitKind.STREAM, stream=s1)
    g = b.build()
    if not intra:
        kept = ~np.isin(g.edges.kind, [int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)])
        g = g.replace(edges=g.edges.take(kept))
        assert g.edges.kind[0] == int(DepKind.INTER_STREAM)
    arrive = np.array([0, 50, 56, 170, 60, 178, 228], dtype=np.int64) * u
    end = np.array([5, 55, 162, 175, 160, 228, 238], dtype=np.int64) * u
    d = Diagnostics()
    fixed = settle(g, arrive, end, step_ns=1_000 * u, diag=d)
    assert d.count(CUT) == 1
    assert len(fixed.waits) == 1
    assert not (fixed.edges.kind == int(DepKind.INTER_STREAM)).any()
    r = simulate(fixed)
    want = (60, 162) if intra else (15, 117)
    assert (int(r.start_ns[k1]), int(r.end_ns[sync])) == (want[0] * u, want[1] * u)
    _ = k3


def test_a_kernel_recorded_before_its_own_launch_releases_no_thread_that_reached_it_first(
    tmp_path,
):
    """One thread (times in us): launch ``L1`` 0-2 (kernel ``k1`` 5-15, stream 8), device
    sync ``S1`` 3-20, op ``b`` 60-62, launch ``L2`` 63-65, launch ``L3`` 66-68 (``k3`` 70-80,
    stream 8), device sync ``S2`` 69-85. ``L2``'s kernel ``u`` is recorded at 40-55 on stream 7,
    23 us before its call: the launches need an offset >= +23 us, both syncs one <= +5 us
    (each returned 5 us after the work it waited for), no drift within 5 % reconciles them, so
    the offset that breaks fewest bounds, 0, is kept and the one broken bound counted.

    ``b`` follows a 40 us gap (the thread's other gaps are 1 us) that ``u``'s end at 55 us
    would explain with a 5 us reaction, but ``u`` was submitted at 63 us, after the thread
    reached ``b``: no releaser, so no SYNC edge into ``b`` (it would close the cycle ``b -> L2
    -> u -> b``) and nothing to cut; ``b`` keeps its recorded 40 us gap after ``S1``."""

    def x(cat, name, ts, dur, tid=1, **args):
        pid = 0 if cat == "kernel" else 1
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
                "dur": dur, "args": args}  # fmt: skip

    def k(name, ts, dur, stream, corr):
        return x("kernel", name, ts, dur, tid=stream, device=0, stream=stream, correlation=corr)

    events = [
        x("cuda_runtime", "cudaLaunchKernel", 0, 2, correlation=1), k("k1", 5, 10, 8, 1),
        x("cuda_runtime", "cudaDeviceSynchronize", 3, 17, correlation=10),
        x("cpu_op", "b", 60, 2),
        x("cuda_runtime", "cudaLaunchKernel", 63, 2, correlation=2), k("u", 40, 15, 7, 2),
        x("cuda_runtime", "cudaLaunchKernel", 66, 2, correlation=3), k("k3", 70, 10, 8, 3),
        x("cuda_runtime", "cudaDeviceSynchronize", 69, 16, correlation=11),
    ]  # fmt: skip
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    g = build_graph(read_kineto(p))
    assert g.calibration["gpu_clock_offset_ns"] == 0
    assert g.diagnostics.count("gpu_clock_inconsistent") == 1
    names = [g.names[int(i)] for i in g.tasks.name_idx]
    b = names.index("b")
    e = g.edges
    into_b = sorted((DepKind(int(kd)).name, names[int(sr)], int(dl))
                    for sr, d, kd, dl in zip(e.src, e.dst, e.kind, e.delay_ns, strict=True)
                    if int(d) == b)  # fmt: skip
    assert into_b == [("INTRA_THREAD", "cudaDeviceSynchronize", 40_000)]
    assert g.diagnostics.count(CUT) == 0


def _sync_behind_a_later_collective(b: GraphBuilder, tid: int, stream: int, sync_end_ns: int):
    """Thread ``tid`` (times in ns): launch ``A`` 0-5,000 (kernel ``k1`` 20,000-35,000 on
    ``stream``), stream sync ``S`` on ``stream`` reached at 100,000 and returned at
    ``sync_end_ns`` (own cost 2,000), launch ``C`` at ``sync_end_ns + 5,000`` (kernel ``k2``
    3,000-13,000 on ``stream + 10``), and a COLLECTIVE edge ``k2 -> k1``. ``S`` waits for
    ``k1``, ``k1`` for ``k2``, which ``C`` launches only after ``S`` returns: a cycle holding no
    inferred dependency (program order, a launch, the collective edge and the wait), so the
    wait is what is cut."""
    th, st, other = b.thread(tid), b.stream(stream), b.stream(stream + 10)
    a = b.task(th, "cudaLaunchKernel", 5_000, TaskKind.RUNTIME, ts_ns=0)
    s = b.task(th, "cudaStreamSynchronize", 2_000, TaskKind.RUNTIME, ts_ns=100_000,
               gap_ns=95_000)  # fmt: skip
    c = b.task(th, "cudaLaunchKernel", 5_000, TaskKind.RUNTIME, ts_ns=sync_end_ns + 5_000,
               gap_ns=5_000)  # fmt: skip
    k1 = b.task(st, "k1", 15_000, ts_ns=20_000)
    k2 = b.task(other, "k2", 10_000, ts_ns=3_000)
    b.edge(a, k1, DepKind.LAUNCH, 3_000)
    b.edge(c, k2, DepKind.LAUNCH, 3_000)
    b.edge(k2, k1, DepKind.COLLECTIVE)
    b.wait(s, WaitKind.STREAM, stream=st)
    rec = {a: (0, 5_000), s: (100_000, sync_end_ns), c: (sync_end_ns + 5_000, sync_end_ns + 10_000),
           k1: (20_000, 35_000), k2: (3_000, 13_000)}  # fmt: skip
    return rec, (a, s, c, k2, k1)


def test_synchronizes_that_close_cycles_are_cut_and_keep_their_recorded_length():
    """Three threads. Thread 3 launches ``k`` (0-5 us, kernel 8-28 us on stream 9) and
    synchronizes (reached at 6 us, own cost 2 us): a wait that replays (row 0 of the waits;
    replayed, the sync starts when ``k`` ends and returns 2 us later). Threads 1 and
    2 each hold the cycle of :func:`_sync_behind_a_later_collective` (their waits are rows 1 and 2),
    their syncs reached at 100 us and returned at 140 and 160 us. Both waits are cut in one
    round and nothing else (``S -> C`` runs against the recorded order less than the wait does:
    ``S`` was reached 45 and 65 us before ``C``, ``k1``'s launch 100 us before ``S``; but it is
    the program's own order): each sync now starts when it was reached (100 us, 95 us after
    ``A``) and lasts its recorded 40 and 60 us, so 38 + 58 = 96 us froze, 9.60 % of a 1 ms
    step. Replayed, ``C`` starts 5 us after its sync, ``k2`` 3 us after ``C`` ends, and ``k1``
    when ``k2`` ends (its launch ended long before)."""
    b = GraphBuilder()
    th3, st9 = b.thread(3), b.stream(9)
    launch = b.task(th3, "cudaLaunchKernel", 5_000, TaskKind.RUNTIME, ts_ns=0)
    sync3 = b.task(th3, "cudaStreamSynchronize", 2_000, TaskKind.RUNTIME, ts_ns=6_000,
                   gap_ns=1_000)  # fmt: skip
    k = b.task(st9, "k", 20_000, ts_ns=8_000)
    b.edge(launch, k, DepKind.LAUNCH, 3_000)
    b.wait(sync3, WaitKind.STREAM, stream=st9)
    rec = {launch: (0, 5_000), sync3: (6_000, 30_000), k: (8_000, 28_000)}
    rec1, (_, s1, c1, k2_1, k1_1) = _sync_behind_a_later_collective(b, 1, 7, 140_000)
    rec2, (_, s2, c2, k2_2, k1_2) = _sync_behind_a_later_collective(b, 2, 8, 160_000)
    rec |= rec1 | rec2
    g = b.build()
    arrive = np.array([rec[i][0] for i in range(g.num_tasks)], dtype=np.int64)
    end = np.array([rec[i][1] for i in range(g.num_tasks)], dtype=np.int64)
    with pytest.raises(SimulationError, match="runtime wait never satisfied"):
        simulate(g)
    d = Diagnostics()
    fixed = settle(g, arrive, end, step_ns=1_000_000, diag=d)
    assert fixed.waits.task_idx.tolist() == [sync3]
    assert fixed.num_edges == g.num_edges
    assert d.count(CUT) == 2
    assert d.example(CUT) == (
        "2 dependencies the recording contradicts kept at their recorded length: "
        "0.096 ms, 9.60% of step time"
    )
    t = fixed.tasks
    assert [(int(t.ts_ns[s]), int(t.dur_ns[s])) for s in (s1, s2, sync3)] == [
        (100_000, 40_000), (100_000, 60_000), (6_000, 2_000)
    ]  # fmt: skip
    r = simulate(fixed)
    got = {i: (int(r.start_ns[i]), int(r.end_ns[i])) for i in (sync3, s1, c1, k2_1, k1_1, s2,
                                                                 c2, k2_2, k1_2)}  # fmt: skip
    assert got == {
        sync3: (28_000, 30_000),
        s1: (100_000, 140_000), c1: (145_000, 150_000), k2_1: (153_000, 163_000),
        k1_1: (163_000, 178_000),
        s2: (100_000, 160_000), c2: (165_000, 170_000), k2_2: (173_000, 183_000),
        k1_2: (183_000, 198_000),
    }  # fmt: skip


def test_cycles_found_through_the_processor_order_alone_cut_the_edge_or_the_wait_in_them():
    """A graph without intra-processor edges (the replay keeps each processor's order by
    itself), so each cycle runs through a processor predecessor. Times in us.

    Stream 7 (processor 0) runs ``k1`` (task 0) then ``k1b``, launched by thread 5 (``A1``
    0-5, ``A1b`` 6-11). Thread 1 holds ``P1`` (0-8), ``S1`` (stream sync on stream 7; reached
    at 10, returned at 40, own cost 2; waits row 0), ``C1`` (45-50, launches ``k2`` on stream
    17); a COLLECTIVE edge ``k2 -> k1``. ``S1`` waits for ``k1b``, queued behind ``k1`` (the
    first two tasks in processor order), ``k1`` for ``k2``, ``k2`` for ``C1``, which follows
    ``S1``: only the wait can go.

    Thread 2: ``A2`` 0-5 launches ``k3`` (stream 8, 20 us), ``S2`` syncs stream 8 (reached at
    10, returned at 30, own 2; waits row 1), ``C2`` (45-50) launches ``x`` (stream 18, 10 us);
    an INTER_STREAM edge ``x -> k3`` (edge row 0) closes the cycle ``S2 -> C2 -> x -> k3 ->
    S2``: the inferred edge is cut, the wait kept (any edge goes before a wait).

    Thread 3: ``A3`` 0-5 launches ``y1`` (stream 9, 10 us, recorded late at 45), ``C3`` 20-25
    launches ``y2`` (stream 19, 10 us); inferred edges ``y1 -> C3`` (SYNC, row 1) and ``y2 ->
    y1`` (INTER_STREAM, row 2) close ``C3 -> y2 -> y1 -> C3``. The one most against the
    recorded order goes: ``y2 -> y1`` (submitted 20 - 0 = +20 us), not ``y1 -> C3`` (0 - 20 =
    -20 us; scoring ``y2 -> y1`` from ``y1``'s recorded start instead, 20 - 45 = -25, would
    swap them).

    Cut: wait 0 and edges 0 and 2. ``S1`` keeps its recorded 30 us (28 us froze; the cut edges had no
    intra-thread edge to freeze): 2.80 % of a 1 ms step. Replayed: ``S1`` 8-38 (right after
    ``P1``), ``C1`` 38-43, ``k2`` 46-56 (3 us launch delay), ``k1`` 56-71, ``k1b`` 71-76;
    ``A1`` 0-5, ``A1b`` 5-10 (no gap kept without its intra-thread edge); ``A2`` 0-5, ``k3``
    8-28, ``S2`` returns 2 us after ``k3`` ends (28-30), ``C2`` 30-35, ``x`` 38-48; ``A3`` 0-5,
    ``y1`` 8-18, ``C3`` 18-23 (held by ``y1``), ``y2`` 26-36."""
    us = 1_000
    b = GraphBuilder()
    st7 = b.stream(7)  # processor 0
    th1, th2, th5, th3 = b.thread(1), b.thread(2), b.thread(5), b.thread(3)
    st8, st17, st18 = b.stream(8), b.stream(17), b.stream(18)
    st9, st19 = b.stream(9), b.stream(19)
    rec: dict[int, tuple[int, int]] = {}

    def task(p, name, dur, at, end, kind=TaskKind.RUNTIME):
        i = b.task(p, name, dur * us, kind, ts_ns=at * us)
        rec[i] = (at * us, end * us)
        return i

    k1 = task(st7, "k1", 15, 20, 35, TaskKind.KERNEL)  # task 0
    k1b = task(st7, "k1b", 5, 35, 40, TaskKind.KERNEL)
    p1 = task(th1, "aten::mul", 8, 0, 8, TaskKind.CPU_OP)
    s1 = task(th1, "cudaStreamSynchronize", 2, 10, 40)
    c1 = task(th1, "cudaLaunchKernel", 5, 45, 50)
    a2 = task(th2, "cudaLaunchKernel", 5, 0, 5)
    s2 = task(th2, "cudaStreamSynchronize", 2, 10, 30)
    c2 = task(th2, "cudaLaunchKernel", 5, 45, 50)
    a1 = task(th5, "cudaLaunchKernel", 5, 0, 5)
    a1b = task(th5, "cudaLaunchKernel", 5, 6, 11)
    k3 = task(st8, "k3", 20, 8, 28, TaskKind.KERNEL)
    k2 = task(st17, "k2", 10, 3, 13, TaskKind.KERNEL)
    x = task(st18, "x", 10, 50, 60, TaskKind.KERNEL)
    a3 = task(th3, "cudaLaunchKernel", 5, 0, 5)
    c3 = task(th3, "cudaLaunchKernel", 5, 20, 25)
    y1 = task(st9, "y1", 10, 45, 55, TaskKind.KERNEL)
    y2 = task(st19, "y2", 10, 28, 38, TaskKind.KERNEL)
    b.edge(x, k3, DepKind.INTER_STREAM)  # row 0 once the intra-thread edges are dropped
    b.edge(y1, c3, DepKind.SYNC)  # row 1
    b.edge(y2, y1, DepKind.INTER_STREAM)  # row 2
    b.edge(a3, y1, DepKind.LAUNCH, 3 * us)
    b.edge(c3, y2, DepKind.LAUNCH, 3 * us)
    b.edge(a1, k1, DepKind.LAUNCH, 3 * us)
    b.edge(c1, k2, DepKind.LAUNCH, 3 * us)
    b.edge(k2, k1, DepKind.COLLECTIVE)
    b.edge(a2, k3, DepKind.LAUNCH, 3 * us)
    b.edge(c2, x, DepKind.LAUNCH, 3 * us)
    b.edge(a1b, k1b, DepKind.LAUNCH, 3 * us)
    b.wait(s1, WaitKind.STREAM, stream=st7)
    b.wait(s2, WaitKind.STREAM, stream=st8)
    g = b.build()
    intra = np.isin(g.edges.kind, [int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)])
    g = g.replace(edges=g.edges.take(~intra))
    assert g.edges.kind[0] == int(DepKind.INTER_STREAM)
    arrive = np.array([rec[i][0] for i in range(g.num_tasks)], dtype=np.int64)
    end = np.array([rec[i][1] for i in range(g.num_tasks)], dtype=np.int64)
    d = Diagnostics()
    fixed = settle(g, arrive, end, step_ns=1_000_000, diag=d)
    assert fixed.waits.task_idx.tolist() == [s2]
    launch, coll = int(DepKind.LAUNCH), int(DepKind.COLLECTIVE)
    e = fixed.edges
    assert e.kind.tolist() == [int(DepKind.SYNC)] + [launch] * 4 + [coll] + [launch] * 3
    assert (int(e.src[0]), int(e.dst[0])) == (y1, c3)
    assert d.example(CUT) == (
        "3 dependencies the recording contradicts kept at their recorded length: "
        "0.028 ms, 2.80% of step time"
    )
    r = simulate(fixed)
    got = {i: (int(r.start_ns[i]) // us, int(r.end_ns[i]) // us) for i in range(g.num_tasks)}
    assert got == {
        p1: (0, 8), s1: (8, 38), c1: (38, 43), k2: (46, 56), k1: (56, 71), k1b: (71, 76),
        a1: (0, 5), a1b: (5, 10),
        a2: (0, 5), k3: (8, 28), s2: (28, 30), c2: (30, 35), x: (38, 48),
        a3: (0, 5), y1: (8, 18), c3: (18, 23), y2: (26, 36),
    }  # fmt: skip


def test_a_stuck_task_waits_on_its_own_processors_previous_task_never_anothers():
    """Thread: launch L (task 0), then S (task 1); stream: kernel K (task 2), launched by L; an
    inferred SYNC edge K -> S. With S and K stuck there is no cycle among them: S follows L on
    its thread (not stuck), K's only predecessor is L, and K, the first task on its stream,
    follows nothing there (S, before it in processor order, is on another processor). So
    nothing is cut. Had K followed S, K -> S -> K would be a cycle, and the SYNC edge cut."""
    from lumos.graph.build_causal import _cuts

    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=0)
    s = b.task(th, "aten::item", 10, ts_ns=10)
    k = b.task(st, "k", 100, ts_ns=8)
    b.edge(launch, k, DepKind.LAUNCH, 3)
    b.edge(k, s, DepKind.SYNC, 2)
    g = b.build()
    assert (launch, s, k) == (0, 1, 2)
    arrive = np.array([0, 10, 8], dtype=np.int64)
    edges, waits = _cuts(g, np.array([s, k], dtype=np.int64), arrive)
    assert (edges.tolist(), waits.tolist()) == ([], [])
