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
