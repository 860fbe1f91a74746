"""The ExecGraph data model: construction checks, cached structure, edits, validation."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.diagnostics import Diagnostics
from lumos.errors import GraphError
from lumos.graph.model import (
    AnnotationKind,
    Annotations,
    DepKind,
    Edges,
    ExecGraph,
    ProcessorKind,
    Processors,
    TaskKind,
    Tasks,
    WaitKind,
    Waits,
    Workload,
)
from lumos.graph.synthetic import GraphBuilder


def tiny() -> ExecGraph:
    # thread 0: op, launch ; stream 1: kernel
    procs = Processors.create(kind=[0, 1], pid=[1, 1], tid=[10, 7], device=[-1, 0])
    tasks = Tasks.create(
        name_idx=[0, 1, 2],
        kind=[TaskKind.CPU_OP, TaskKind.RUNTIME, TaskKind.KERNEL],
        processor_idx=[0, 0, 1],
        dur_ns=[10, 5, 100],
        ts_ns=[0, 12, 30],
    )
    edges = Edges.create(
        src=[0, 1], dst=[1, 2], kind=[DepKind.INTRA_THREAD, DepKind.LAUNCH], delay_ns=[2, 13]
    )
    return ExecGraph(
        names=("op", "cudaLaunchKernel", "gemm"), processors=procs, tasks=tasks, edges=edges
    )


def test_create_fills_defaults_and_order() -> None:
    g = tiny()
    assert g.tasks.order.tolist() == [0, 1, 0]
    assert g.tasks.event_idx.tolist() == [-1, -1, -1]
    assert g.tasks.comm_idx.dtype == np.int32
    assert g.processors.label == ("thread 10", "stream 7")
    g.validate()


def test_columns_are_read_only_and_typed() -> None:
    g = tiny()
    with pytest.raises(ValueError):
        g.tasks.dur_ns[0] = 1
    with pytest.raises(GraphError, match="rows"):
        Edges.create(src=[0], dst=[1, 2], kind=[0, 0])
    with pytest.raises(GraphError, match="integers"):
        Edges.create(src=[0.5], dst=[1], kind=[0])


def test_csr_and_processor_order() -> None:
    g = tiny()
    indptr, eidx = g.csr_out()
    assert indptr.tolist() == [0, 1, 2, 2]
    assert g.edges.dst[eidx].tolist() == [1, 2]
    iptr, eidx = g.csr_in()
    assert iptr.tolist() == [0, 0, 1, 2]
    ptr, perm = g.processor_order()
    assert ptr.tolist() == [0, 2, 3]
    assert perm.tolist() == [0, 1, 2]
    assert g.csr_out() is g.csr_out()  # cached


def test_edits_return_new_graphs() -> None:
    g = tiny()
    g2 = g.scale(np.array([False, False, True]), 2.0)
    assert g2.tasks.dur_ns.tolist() == [10, 5, 200]
    assert g.tasks.dur_ns.tolist() == [10, 5, 100]
    g3 = g.drop_edges([DepKind.LAUNCH])
    assert g3.num_edges == 1 and g.num_edges == 2
    assert g.with_durations(np.array([1, 2, 3])).tasks.dur_ns.tolist() == [1, 2, 3]
    with pytest.raises(GraphError):
        g.with_durations(np.array([1, 2]))
    assert g.name_mask(lambda s: s.startswith("g")).tolist() == [False, False, True]


def test_validate_detects_broken_graphs() -> None:
    g = tiny()
    with pytest.raises(GraphError, match="dangling"):
        g.replace(edges=Edges.create(src=[0], dst=[9], kind=[0])).validate()
    # one past the last task is dangling too, and the message names the column, row and range
    with pytest.raises(GraphError, match=r"^edges\.dst\[0\] = 3 is dangling \(valid: 0\.\.2\)$"):
        g.replace(edges=Edges.create(src=[0], dst=[3], kind=[0])).validate()
    with pytest.raises(GraphError, match=r"^edges\.src\[1\] = -1 is dangling \(valid: 0\.\.2\)$"):
        g.replace(edges=Edges.create(src=[0, -1], dst=[1, 2], kind=[0, 0])).validate()
    # a column that may say "none" (-1) allows -1, not -2; with no comms nothing else
    with pytest.raises(
        GraphError, match=r"^tasks\.comm_idx\[1\] = -2 is dangling \(valid: -1\.\.-1\)$"
    ):
        g.replace(tasks=g.tasks.replace(comm_idx=np.array([-1, -2, -1]))).validate()
    with pytest.raises(GraphError, match="cycle"):
        g.replace(edges=Edges.create(src=[2, 1], dst=[0, 2], kind=[4, 2])).validate()
    with pytest.raises(GraphError, match="cycle"):
        # an edge against processor order is a cycle too
        g.replace(edges=Edges.create(src=[1], dst=[0], kind=[1])).validate()
    with pytest.raises(GraphError, match="GPU task on a thread"):
        g.replace(tasks=g.tasks.replace(kind=np.array([2, 1, 2]))).validate()
    with pytest.raises(GraphError, match="processor order"):
        g.replace(tasks=g.tasks.replace(order=np.array([0, 2, 0]))).validate()
    with pytest.raises(GraphError, match="target a stream"):
        g.replace(
            waits=Waits.create(task_idx=[1], kind=[WaitKind.STREAM], target_processor_idx=[0])
        ).validate()
    with pytest.raises(GraphError, match="out of range"):
        g.replace(tasks=g.tasks.replace(name_idx=np.array([0, 1, 5])))


def test_validate_checks_annotations_that_cover_tasks_and_accepts_empty_ones() -> None:
    """A step covering no task is valid, even in a graph with no task at all (validate used to
    index the empty task table with it and raise IndexError); a span starting on another
    processor than its own is still refused."""
    b = GraphBuilder()
    th = b.thread(1)
    b.annotate("ProfilerStep#0", th, -1, -1, dur_ns=50)
    empty = b.build()
    assert empty.validate() is empty
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    k = b.task(st, "gemm", 5)
    b.annotate("ProfilerStep#0", th, -1, -1)
    b.annotate("ProfilerStep#1", th, k, k)
    with pytest.raises(
        GraphError, match=r"annotation 1 \('ProfilerStep#1'\) must start on its own"
    ):
        b.build().validate()


def test_validate_checks_what_waits_block_and_where_spans_start() -> None:
    """A wait blocks a CPU task (the launch call on thread 0), never a GPU task (the kernel,
    task 2). A span starts on its own processor and, when it ends there too, not before it
    starts; it may end on another processor (a step annotated on a thread that does none of
    its work)."""
    g = tiny()

    def waiting(task: int) -> ExecGraph:
        w = Waits.create(task_idx=[task], kind=[WaitKind.STREAM], target_processor_idx=[1])
        return g.replace(waits=w)

    waiting(1).validate()
    with pytest.raises(GraphError, match=r"^rank 0: wait 0 blocks a GPU task, "):
        waiting(2).validate()

    def span(processor: int, first: int, last: int) -> ExecGraph:
        a = Annotations.create(
            name_idx=[0], kind=[AnnotationKind.USER], processor_idx=[processor],
            first_task_idx=[first], last_task_idx=[last], ts_ns=[0], dur_ns=[50],
        )  # fmt: skip
        return g.replace(annotations=a)

    for ok in ((0, 0, 1), (0, 1, 1), (0, 1, 2), (1, 2, 1), (0, -1, -1)):
        span(*ok).validate()
    bad = r"annotation 0 \('op'\) must start on its own processor, and first <= last there"
    for wrong in ((0, 1, 0), (1, 0, 1), (0, 2, 2)):
        with pytest.raises(GraphError, match=bad):
            span(*wrong).validate()
    with pytest.raises(GraphError, match="annotation 0 has only one of first/last task"):
        span(0, 0, -1).validate()


def test_workload_sorted_and_unique() -> None:
    g0, g1 = tiny(), tiny().replace(rank=1, world_size=2)
    w = Workload((g1, g0.replace(world_size=2)))
    assert w.ranks == (0, 1)
    with pytest.raises(GraphError, match="two graphs"):
        Workload((g1, g1))


def test_diagnostics_counts() -> None:
    d = Diagnostics()
    d.warn("a", "first")
    d.warn("a", "second", 2)
    assert d.to_dict() == {"a": {"count": 3, "example": "first"}}
    assert ProcessorKind.STREAM == 1


def test_a_graph_checks_its_indices_and_rank_on_construction() -> None:
    """``tiny`` has 3 names and 2 processors: a name index 3 or -1, a processor 2, two rows of
    dims for three tasks, and rank 1 of a world of 1 are each refused with the bound they
    broke. A world size of 0 still admits rank 0 (``max(world_size, 1)``); names and process
    groups given as lists are kept as tuples."""
    g = tiny()
    t = g.tasks
    for bad in ([0, 1, 3], [-1, 1, 2]):
        with pytest.raises(GraphError, match=r"^tasks\.name_idx out of range \[0, 3\)$"):
            g.replace(tasks=t.replace(name_idx=np.array(bad)))
    for bad in ([0, 0, 2], [0, -1, 1]):
        with pytest.raises(GraphError, match=r"^tasks\.processor_idx out of range \[0, 2\)$"):
            g.replace(tasks=t.replace(processor_idx=np.array(bad)))
    with pytest.raises(GraphError, match=r"^task_dims_idx has 2 rows, tasks 3$"):
        g.replace(task_dims_idx=np.array([0, -1], dtype=np.int32))
    with pytest.raises(GraphError, match=r"^rank 1 outside world_size 1$"):
        g.replace(rank=1)
    with pytest.raises(GraphError, match=r"^rank -1 outside world_size 2$"):
        g.replace(rank=-1, world_size=2)
    assert g.replace(world_size=0).rank == 0
    listed = g.replace(names=["op", "cudaLaunchKernel", "gemm"], process_groups=[])
    assert listed.names == ("op", "cudaLaunchKernel", "gemm") and listed.process_groups == ()
    empty = ExecGraph(names=(), processors=Processors.empty(), tasks=Tasks.empty())
    assert empty.num_tasks == 0 and empty.summary()["tasks"] == 0


def test_a_graph_describes_itself_and_its_tasks() -> None:
    """``tiny``: 3 tasks, 2 edges, 2 processors and nothing else; task 2 is the kernel ``gemm``,
    first (#0) on stream 7; task 1 the launch call, second (#1) on thread 10."""
    g = tiny()
    assert g.summary() == {
        "tasks": 3, "edges": 2, "waits": 0, "processors": 2, "annotations": 0, "comms": 0,
    }  # fmt: skip
    assert repr(g) == (
        "ExecGraph(rank 0 of 1: 3 tasks, 2 edges, 0 waits, 2 processors, 0 annotations, 0 comms)"
    )
    assert g.describe_task(2) == "task 2 'gemm' (KERNEL on stream 7 #0)"
    assert g.describe_task(1) == "task 1 'cudaLaunchKernel' (RUNTIME on thread 10 #1)"
    assert g.task_name(0) == "op" and (g.num_tasks, g.num_edges) == (3, 2)


def test_edge_lists_of_a_graph_without_edges_are_empty_and_each_is_cached() -> None:
    """No edges: every task has no in- or out-edge (indptr all 0). Each structure is built once
    and returned again (the same read-only arrays), and out-edges are not in-edges."""
    g = tiny().replace(edges=Edges.empty())
    out_ptr, out_idx = g.csr_out()
    assert out_ptr.tolist() == [0, 0, 0, 0] and out_idx.tolist() == []
    assert out_ptr.dtype == np.int64 and out_idx.dtype == np.int64
    in_ptr, _ = g.csr_in()
    assert in_ptr.tolist() == [0, 0, 0, 0]
    assert g.csr_in() is g.csr_in() and g.processor_order() is g.processor_order()
    assert not out_ptr.flags.writeable and not out_idx.flags.writeable
    order_ptr, order_idx = g.processor_order()
    assert not order_ptr.flags.writeable and not order_idx.flags.writeable
    h = tiny()
    assert h.csr_in()[0].tolist() == [0, 0, 1, 2] and h.csr_out()[0].tolist() == [0, 1, 2, 2]


def test_with_durations_refuses_a_wrong_count_or_a_negative_duration() -> None:
    g = tiny()
    with pytest.raises(GraphError, match=r"^with_durations: expected 3 durations, got \(2,\)$"):
        g.with_durations(np.array([1, 2]))
    with pytest.raises(GraphError, match=r"^with_durations: negative duration$"):
        g.with_durations(np.array([1, -1, 3]))
    assert g.with_durations(np.array([0, 0, 0])).tasks.dur_ns.tolist() == [0, 0, 0]


def test_drop_edges_and_waits_remove_exactly_the_kinds_named() -> None:
    """``tiny``'s edges are INTRA_THREAD 0->1 (delay 2) and LAUNCH 1->2 (delay 13). Dropping
    LAUNCH keeps the first; dropping a kind no edge has (or none) keeps both, even one that
    no DepKind has. Waits: a STREAM wait and an EVENT wait on the launch call; dropping
    STREAM keeps the EVENT wait, dropping both or all (no kinds given) keeps none, dropping
    none keeps both. The other tables are untouched."""
    b = GraphBuilder()
    th, st = b.thread(10), b.stream(7)
    op = b.task(th, "op", 10)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, gap_ns=2)
    k = b.task(st, "gemm", 100)
    b.edge(launch, k, DepKind.LAUNCH, 13)
    b.wait(launch, WaitKind.STREAM, stream=st)
    b.wait(launch, WaitKind.EVENT, stream=st, record=op)
    g = b.build().validate()
    kept = g.drop_edges([DepKind.LAUNCH])
    assert (kept.edges.src.tolist(), kept.edges.dst.tolist()) == ([0], [1])
    assert kept.edges.kind.tolist() == [DepKind.INTRA_THREAD] and kept.edges.delay_ns.tolist() == [
        2
    ]
    assert kept.tasks is g.tasks and len(kept.waits) == 2
    assert g.drop_edges([DepKind.SYNC]).edges == g.edges
    assert g.drop_edges([]).edges == g.edges
    assert g.drop_edges(k for k in (DepKind.INTRA_THREAD, DepKind.LAUNCH)).num_edges == 0
    w = g.drop_waits([WaitKind.STREAM]).waits
    assert w.kind.tolist() == [WaitKind.EVENT] and w.record_task_idx.tolist() == [op]
    assert len(g.drop_waits([WaitKind.STREAM, WaitKind.EVENT]).waits) == 0
    assert len(g.drop_waits().waits) == 0 and g.drop_waits().waits == Waits.empty()
    assert g.drop_waits([]).waits == g.waits and g.drop_waits([WaitKind.DEVICE]).waits == g.waits
    assert g.drop_waits([WaitKind.EVENT]).num_edges == 2


def test_scale_multiplies_the_masked_tasks_and_refuses_bad_factors() -> None:
    """Costs 10, 5, 100. The mask is read as booleans, so ``[0, 0, 1]`` selects the kernel
    only; x0.5 gives 50, x0 gives 0 (allowed), x0.3 on 5 gives 1.5, rounded to even (2). A
    mask of the wrong length, and a factor that is negative, infinite or not a number, are
    refused with what was wrong."""
    g = tiny()
    assert g.scale([0, 0, 1], 0.5).tasks.dur_ns.tolist() == [10, 5, 50]
    assert g.scale(np.array([1, 1, 0]), 0).tasks.dur_ns.tolist() == [0, 0, 100]
    assert g.scale(np.array([False, True, False]), 0.3).tasks.dur_ns.tolist() == [10, 2, 100]
    assert g.scale(np.array([False, True, False]), 0.3).tasks.dur_ns.dtype == np.int64
    with pytest.raises(GraphError, match=r"^scale: mask has shape \(2,\), expected \(3,\)$"):
        g.scale(np.array([True, False]), 2.0)
    for bad in (-1.0, float("inf"), float("nan"), -float("inf")):
        with pytest.raises(GraphError, match=r"^scale: factor must be a finite number >= 0, got "):
            g.scale(np.array([True, True, True]), bad)
    with pytest.raises(GraphError, match=r"got -0\.5$"):
        g.scale(np.array([True, True, True]), -0.5)


def test_names_and_process_groups_are_looked_up_with_a_default() -> None:
    """Names: the predicate runs once per distinct name, and the mask follows each task's
    name. Process groups: index 0 and 1 name their group; -1 and 2 (one past the end) give
    the empty name."""
    g = tiny()
    seen: list[str] = []

    def starts_with_c(s: str) -> bool:
        seen.append(s)
        return s.startswith("c")

    assert g.name_mask(starts_with_c).tolist() == [False, True, False]
    assert seen == ["op", "cudaLaunchKernel", "gemm"]
    b = GraphBuilder()
    b.process_group("0", (0, 1))
    b.process_group("tp", (0,))
    pg = b.build()
    assert [pg.process_group_name(i) for i in (0, 1, -1, 2)] == ["0", "tp", "", ""]


def test_a_workload_finds_its_ranks_graphs_and_keeps_its_diagnostics() -> None:
    """Nine one-rank graphs of 3 tasks (given out of order) sort by rank; the repr lists the
    first eight ranks and 27 tasks. A missing rank is one error naming the ranks there are;
    ``of`` wraps a graph and returns a workload unchanged; ``replace_graphs`` keeps a copy of
    the diagnostics. Collective groups are matched once and cached."""
    graphs = [tiny().replace(rank=r, world_size=9) for r in (8, 3, 0, 1, 2, 4, 5, 6, 7)]
    d = Diagnostics()
    d.warn("clock", "rank 3", 2)
    w = Workload(tuple(graphs), d)
    assert w.ranks == tuple(range(9)) and w.num_tasks == 27
    assert repr(w) == "Workload(9 rank(s) [0, 1, 2, 3, 4, 5, 6, 7], 27 tasks)"
    assert w.graph_for_rank(3) is graphs[1]
    with pytest.raises(GraphError, match=r"^workload has no graph for rank 9 \(ranks: \[0, 1, "):
        w.graph_for_rank(9)
    with pytest.raises(GraphError, match=r"^a workload needs at least one graph$"):
        Workload(())
    one = Workload.of(graphs[2])
    assert one.graphs == (graphs[2],) and Workload.of(one) is one
    again = w.replace_graphs(g.replace(rank=g.rank) for g in w.graphs)
    assert again.ranks == w.ranks and again.diagnostics.to_dict() == d.to_dict()
    assert again.diagnostics is not d
    groups = w.collective_groups()
    assert w.collective_groups() is groups and groups.num_groups == 0
    assert w.validate() is w


def test_dropping_a_kind_that_no_edge_or_wait_can_have_drops_nothing() -> None:
    """Kind 300 fits no int8 column: no edge or wait has it, so nothing is dropped (it used to
    raise OverflowError building the int8 list of kinds); LAUNCH beside it is still dropped."""
    g = tiny().replace(waits=Waits.create(task_idx=[1], kind=[WaitKind.STREAM],
                                          target_processor_idx=[1]))  # fmt: skip
    assert g.drop_edges([300]).edges == g.edges
    assert g.drop_edges([DepKind.LAUNCH, 300]).edges.kind.tolist() == [DepKind.INTRA_THREAD]
    assert g.drop_waits([300]).waits == g.waits
    assert len(g.drop_waits([300, WaitKind.STREAM]).waits) == 0


def test_edges_of_one_task_keep_their_table_order() -> None:
    """34 edges alternating between tasks 1 and 0 as source (and 0 and 1 as destination): task
    0's out-edges are the odd rows 1, 3, ..., 33 and task 1's the even rows 0, 2, ..., 32, each
    in table order (a stable grouping; numpy's default sort reorders such ties); in-edges the
    other way round."""
    src = np.tile(np.array([1, 0]), 17)
    edges = Edges.create(src=src, dst=1 - src, kind=DepKind.SYNC)
    g = tiny().replace(edges=edges)
    out_ptr, out_idx = g.csr_out()
    assert out_ptr.tolist() == [0, 17, 34, 34]
    assert out_idx.tolist() == list(range(1, 34, 2)) + list(range(0, 34, 2))
    in_ptr, in_idx = g.csr_in()
    assert in_ptr.tolist() == [0, 17, 34, 34]
    assert in_idx.tolist() == list(range(0, 34, 2)) + list(range(1, 34, 2))
