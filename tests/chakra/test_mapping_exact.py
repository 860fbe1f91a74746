"""Exact values of the ExecGraph <-> Chakra mapping on small hand-built graphs.

Each case is worked out by hand from the mapping's documented rules (module docstrings of
:mod:`lumos.chakra.mapping`, :mod:`lumos.chakra.mapping_delay`, :mod:`lumos.chakra.trace`).
"""

from __future__ import annotations

import numpy as np

from lumos.chakra import read_chakra, write_chakra
from lumos.chakra.mapping import (
    from_chakra,
    graph_differences,
    static_wait_targets,
    to_chakra,
    workload_from_chakra,
)
from lumos.chakra.mapping_delay import resolve_delay_deps
from lumos.chakra.trace import MISSING
from lumos.graph.model import CommType, DepKind, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder

#: A realistic Kineto timestamp (ns since the epoch): above 2**53, so a float64 cannot hold it.
EPOCH_NS = 1_700_000_000_000_000_001


def _p2p_graph():
    """Rank 0 of 2: four p2p transfers on one stream whose tags sit on both sides of the int32
    range (-2**31 and 2**31 - 1 fit; -2**31 - 1 and 2**31 do not)."""
    b = GraphBuilder(rank=0, world_size=2)
    th, st = b.thread(1), b.stream(7)
    b.task(th, "step", 10_000, ts_ns=EPOCH_NS)
    tags = (-(2**31), -(2**31) - 1, 2**31 - 1, 2**31)
    kinds = (CommType.SEND, CommType.RECV, CommType.SEND, CommType.RECV)
    for k, (tag, kind) in enumerate(zip(tags, kinds, strict=True)):
        c = b.comm(kind, size_bytes=64, peer_rank=1, tag=tag)
        b.task(st, f"p2p{k}", 1_000, TaskKind.COMM, ts_ns=EPOCH_NS + 2_000 * (k + 1), comm=c)
    return b.build().validate()


def test_p2p_tags_outside_int32_are_left_out():
    """``comm_tag`` is an int32 attribute: a tag in [-2**31, 2**31) is written as is, one outside
    is left out (never wrapped), and sends name this rank as source, receives as destination."""
    t = to_chakra(_p2p_graph())
    assert t.num_nodes == 5  # no process groups: no METADATA node
    c = t.comm
    assert c.comm_tag.tolist() == [MISSING, -(2**31), MISSING, 2**31 - 1, MISSING]
    assert c.comm_src.tolist() == [MISSING, 0, 1, 0, 1]
    assert c.comm_dst.tolist() == [MISSING, 1, 0, 1, 0]
    assert c.comm_size.tolist() == [MISSING, 64, 64, 64, 64]


def test_trace_in_memory_equals_the_trace_read_from_its_file(tmp_path):
    """The trace :func:`to_chakra` returns holds what its file decodes to: ns timestamps above
    2**53 exact in ``attr_int`` (so :func:`from_chakra` on it gives the graph back without going
    through a file), and ``inputs_len``/``outputs_len`` -1 where a node has none (the documented
    "absent")."""
    g = _p2p_graph()
    t = to_chakra(g)
    path = tmp_path / "g.0.et"
    write_chakra(t, path)
    back = read_chakra(path)
    names = [t.attr_names[i] for i in t.attr_name_idx]
    ts = t.attr_int[[k for k, s in enumerate(names) if s == "ts_ns"]]
    assert ts.tolist() == [EPOCH_NS + 2_000 * k for k in range(5)]
    assert t.attr_int.dtype == np.int64
    assert np.array_equal(t.attr_int, back.attr_int)
    assert t.inputs_len.tolist() == t.outputs_len.tolist() == [-1] * 5
    assert back.outputs_len.tolist() == [-1] * 5
    mem = from_chakra(t)
    assert mem.tasks.ts_ns.tolist() == [EPOCH_NS + 2_000 * k for k in range(5)]
    assert graph_differences(g, mem) == []


def test_a_single_trace_is_a_workload_of_its_rank():
    """``workload_from_chakra`` of one trace (not a :class:`ChakraWorkload`): one graph, of the
    trace's rank, equal to the graph written."""
    g = _p2p_graph().replace(rank=1)
    w = workload_from_chakra(to_chakra(g))
    assert w.ranks == (1,)
    assert graph_differences(g, w.graphs[0]) == []


def test_static_wait_pairs_that_close_a_cycle_are_dropped_the_others_kept():
    """Two stream syncs. Thread 1's ``a`` (ts 100) waits for stream 7, whose kernel ``k`` was
    launched by ``l`` at ts 20 (before ``a``), but the graph has ``a -> l -> k`` (an edited
    graph whose times disagree with its order): the pair ``k -> a`` would close a cycle and is
    dropped. Thread 3's ``c`` (ts 300) waits for stream 8, whose last kernel ``k2`` started at
    ts 50: the pair ``k2 -> c`` closes nothing and is kept."""
    b = GraphBuilder()
    th1, th2, th3, st7, st8 = b.thread(1), b.thread(2), b.thread(3), b.stream(7), b.stream(8)
    a = b.task(th1, "a", 10, ts_ns=100)
    launch = b.task(th2, "l", 5, TaskKind.RUNTIME, ts_ns=20)
    k = b.task(st7, "k", 10, ts_ns=30)
    c = b.task(th3, "c", 10, ts_ns=300)
    k2 = b.task(st8, "k2", 10, ts_ns=50)
    b.edge(a, launch, DepKind.INTER_THREAD)
    b.edge(launch, k, DepKind.LAUNCH)
    b.wait(a, WaitKind.STREAM, stream=st7)
    b.wait(c, WaitKind.STREAM, stream=st8)
    src, dst = static_wait_targets(b.build())
    assert (src.tolist(), dst.tolist()) == ([k2], [c])
    assert (a, k) == (0, 2)


def _three_on_a_thread_with_delays():
    """``a`` (0-1000), ``b`` (1500-2500), ``c`` (3000-4000) on one thread: two 500 ns gaps, so
    ``to_chakra(delay_nodes=True)`` writes delay nodes 3 (a -> 3 -> b) and 4 (b -> 4 -> c)."""
    b = GraphBuilder()
    th = b.thread(1)
    b.task(th, "a", 1000, ts_ns=0)
    b.task(th, "b", 1000, ts_ns=1500, gap_ns=500)
    b.task(th, "c", 1000, ts_ns=3000, gap_ns=500)
    t = to_chakra(b.build().validate(), delay_nodes=True)
    assert t.data_ptr.tolist() == [0, 0, 1, 2, 3, 4] and t.data_deps.tolist() == [3, 4, 0, 1]
    return t


def test_delay_deps_when_a_tool_cut_the_delay_nodes_off():
    """A tool keeps only ``b``'s dependency on delay node 3 and drops every other: node 3 then
    has no dependency, so nothing resolves and ``b`` still names 3, which is no task (one
    dangling dependency). With no dependency left at all there is nothing to resolve. Either
    way the thread order comes back from the processor (two intra-thread edges)."""
    t = _three_on_a_thread_with_delays()
    is_delay = np.array([False, False, False, True, True])
    one = t.with_deps(
        t.ctrl_ptr, t.ctrl_deps, np.array([0, 0, 1, 1, 1, 1]), np.array([3], np.uint64)
    )
    assert resolve_delay_deps(one, is_delay)[0].tolist() == [3]
    g = from_chakra(one)
    assert g.diagnostics.count("chakra_deps_edited") == 1
    assert g.diagnostics.count("data_dep_dangling") == 1
    assert (g.edges.src.tolist(), g.edges.dst.tolist()) == ([0, 1], [1, 2])
    none = t.with_deps(t.ctrl_ptr, t.ctrl_deps, np.zeros(6, np.int64), np.zeros(0, np.uint64))
    assert resolve_delay_deps(none, is_delay)[0].tolist() == []
    g = from_chakra(none)
    assert g.diagnostics.count("chakra_deps_edited") == 1
    assert g.diagnostics.count("data_dep_dangling") == 0
    assert (g.edges.src.tolist(), g.edges.dst.tolist()) == ([0, 1], [1, 2])


def test_edited_deps_count_each_dangling_dependency():
    """A lumos trace (no delay nodes) of ``a``, ``b``, ``c`` on one thread and ``d`` on another:
    data_deps b:[a], c:[b], d:[]. An edit that only drops ``c``'s dependency leaves nothing
    dangling (count 0); one that makes ``d`` depend on the unknown ids 98 and 99 leaves two."""
    b = GraphBuilder()
    th, th2 = b.thread(1), b.thread(2)
    for name in "abc":
        b.task(th, name, 10)
    b.task(th2, "d", 10)
    t = to_chakra(b.build().validate())
    assert t.data_ptr.tolist() == [0, 0, 1, 2, 2] and t.data_deps.tolist() == [0, 1]
    dropped = t.with_deps(t.ctrl_ptr, t.ctrl_deps, np.array([0, 0, 1, 1, 1]), t.data_deps[:1])
    g = from_chakra(dropped)
    assert g.diagnostics.count("chakra_deps_edited") == 1
    assert g.diagnostics.count("data_dep_dangling") == 0
    unknown = t.with_deps(
        t.ctrl_ptr, t.ctrl_deps, np.array([0, 0, 1, 2, 4]), np.array([0, 1, 98, 99], np.uint64)
    )
    g = from_chakra(unknown)
    assert g.diagnostics.count("data_dep_dangling") == 2
    assert (g.edges.src.tolist(), g.edges.dst.tolist()) == ([0, 1], [1, 2])


def test_build_trace_takes_columns_of_any_integer_dtype(tmp_path):
    """``AttrColumn.values`` are integers in whatever dtype a caller holds them (node ids are
    uint64, flags bool, small counts int32): each is written as its kind's value, exactly."""
    from lumos.chakra.mapping_encode import AttrColumn, build_trace
    from lumos.chakra.trace import ChakraMetadata

    t = build_trace(
        ChakraMetadata.build("0.0.4", []),
        names=["n"],
        name_idx=np.zeros(2, np.int64),
        node_type=np.full(2, 4, np.int8),
        data_ptr=np.zeros(3, np.int64),
        data_deps=np.zeros(0, np.int64),
        start_time_micros=np.zeros(2, np.int64),
        duration_micros=np.array([1, 2], np.int64),
        columns=[
            AttrColumn("ref", "int64_val", np.array([5, 2**40], np.uint64)),
            AttrColumn("flag", "bool_val", np.array([True, False])),
            AttrColumn("w", "int32_val", np.array([-3, 7], np.int32)),
        ],
    )
    path = tmp_path / "t.0.et"
    write_chakra(t, path)
    for trace in (t, read_chakra(path)):
        got = [[(a.name, a.value, a.kind) for a in trace.attrs_of(i)] for i in range(2)]
        assert got == [
            [("ref", 5, "int64_val"), ("flag", True, "bool_val"), ("w", -3, "int32_val")],
            [("ref", 2**40, "int64_val"), ("flag", False, "bool_val"), ("w", 7, "int32_val")],
        ]
        assert trace.attr_int.tolist() == [5, 1, -3, 2**40, 0, 7]


def _edited_delay_trace():
    """``a`` (0-1000), ``b`` (1500-2500), ``c`` (3000-4000) on thread 1 (500 ns gaps) and kernel
    ``k`` on stream 7 launched by ``b`` 300 ns after its end (ids 0..3). Written with delay
    nodes: 4 (a -> 4 -> b), 5 (b -> 5 -> c), 6 (b -> 6 -> k, the cross-processor one)."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    b.task(th, "a", 1000, ts_ns=0)
    tb = b.task(th, "b", 1000, ts_ns=1500, gap_ns=500)
    b.task(th, "c", 1000, ts_ns=3000, gap_ns=500)
    k = b.task(st, "k", 1000, TaskKind.KERNEL, ts_ns=2800)
    b.edge(tb, k, DepKind.LAUNCH, 300)
    t = to_chakra(b.build().validate(), delay_nodes=True)
    assert t.data_ptr.tolist() == [0, 0, 1, 2, 3, 4, 5, 6]
    assert t.data_deps.tolist() == [4, 5, 6, 0, 1, 1]
    return t


def _read_back(trace, path):
    write_chakra(trace, path)
    return from_chakra(read_chakra(path))


def _edge_list(g):
    e = g.edges
    return list(zip(e.src.tolist(), e.dst.tolist(), e.kind.tolist(), e.delay_ns.tolist(),
                    strict=True))  # fmt: skip


def test_edited_delay_trace_keeps_the_edges_through_delay_nodes(tmp_path):
    """A tool drops ``c``'s only dependency (on delay node 5) from a trace written with delay
    nodes. Read back, the edges are rebuilt from ``data_deps`` with each delay node folded into
    its dependency and its exact delay: ``a -> b`` (intra-thread, 500 ns) and ``b -> k`` (launch,
    300 ns); ``c`` gets its thread order back (``b -> c``, delay 0, counted). Delay node 5, now
    used by no task, and the delay nodes' own deps are not dependencies: nothing dangles. When
    ``k`` names the unknown id 99 instead, that one dependency dangles and its edge is gone."""
    t = _edited_delay_trace()
    no_c = t.with_deps(
        t.ctrl_ptr, t.ctrl_deps, np.array([0, 0, 1, 1, 2, 3, 4, 5]),
        np.array([4, 6, 0, 1, 1], np.uint64),
    )  # fmt: skip
    g = _read_back(no_c, tmp_path / "no_c.0.et")
    assert g.num_tasks == 4
    assert _edge_list(g) == [
        (0, 1, DepKind.INTRA_THREAD, 500),
        (1, 3, DepKind.LAUNCH, 300),
        (1, 2, DepKind.INTRA_THREAD, 0),
    ]
    assert g.diagnostics.count("chakra_deps_edited") == 1
    assert g.diagnostics.count("data_dep_dangling") == 0
    assert g.diagnostics.count("intra_processor_order_added") == 1
    unknown = t.with_deps(t.ctrl_ptr, t.ctrl_deps, t.data_ptr,
                          np.array([4, 5, 99, 0, 1, 1], np.uint64))  # fmt: skip
    g = _read_back(unknown, tmp_path / "unknown.0.et")
    assert _edge_list(g) == [
        (0, 1, DepKind.INTRA_THREAD, 500),
        (1, 2, DepKind.INTRA_THREAD, 500),
    ]
    assert g.diagnostics.count("data_dep_dangling") == 1
    assert g.diagnostics.count("intra_processor_order_added") == 0
