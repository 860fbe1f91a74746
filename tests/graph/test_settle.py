"""An unedited recording always replays (``lumos.graph.build_causal``).

Inferred dependencies that run against the recorded order are never found
(:func:`causal`), and a graph whose own replay still cannot finish has the dependency that
closes each cycle cut, its task falling back to its recorded timing, counted with the share of
step time that froze. Hand-made graphs pin the exact cut, the frozen nanoseconds and the replay.
"""

from __future__ import annotations

import numpy as np
import pytest

from lumos.diagnostics import Diagnostics
from lumos.errors import SimulationError
from lumos.graph.build_causal import CUT, causal, settle, submitted_ns
from lumos.graph.model import DepKind, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder
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
