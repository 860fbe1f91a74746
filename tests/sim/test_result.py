"""``SimResult``'s summaries (``to_dict``, ``to_json``, ``busy_ns``, ``annotation_spans``,
``steps``, ``repr``) and look-ups (``graph_index``, ``global_tables``) pinned whole on hand-made
graphs whose replay times are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.graph.model import AnnotationKind, DepKind, ExecGraph, TaskKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim import simulate


def launched_kernel() -> ExecGraph:
    """launch(5) --13--> gemm(100) on stream 7; aten::add(10) 3 ns after the launch; stream 8
    holds no task. Annotations: a step over launch..add (lead 4, tail 6, recorded 40 ns), a user
    span (left out of the summary), a GPU step over gemm (lead 2, tail 1) and a step that covers
    no task (recorded 50 ns)."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    b.stream(8)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    k = b.task(st, "gemm", 100)
    b.edge(launch, k, DepKind.LAUNCH, 13)
    add = b.task(th, "aten::add", 10, gap_ns=3)
    b.annotate("ProfilerStep#1", th, launch, add, dur_ns=40, lead_ns=4, tail_ns=6)
    b.annotate("fwd", th, add, add, kind=AnnotationKind.USER, dur_ns=10)
    b.annotate("gpu step", st, k, k, kind=AnnotationKind.GPU_STEP, lead_ns=2, tail_ns=1)
    b.annotate("ProfilerStep#2", th, -1, -1, dur_ns=50)
    return b.build().validate()


def test_to_dict_summarises_each_rank_and_lists_tasks_only_when_asked() -> None:
    """launch runs [0, 5], gemm [5 + 13, 118], add [5 + 3, 18]: makespan 118; thread busy
    5 + 10, stream 7 busy 100, stream 8 busy 0. Step 1 spans [0 - 4, 18 + 6] = 28 ns against 40
    recorded: error -12/40; the GPU step [18 - 2, 118 + 1]; the empty step is -1..-1 and
    predicts 0 ns (error -1). Tasks' start/end are listed only with ``include_tasks``."""
    r = simulate(launched_kernel())
    step1 = {"name": "ProfilerStep#1", "measured_ns": 40, "predicted_ns": 28, "error": -0.3}
    step2 = {"name": "ProfilerStep#2", "measured_ns": 50, "predicted_ns": 0, "error": -1.0}
    rank = {
        "rank": 0,
        "num_tasks": 3,
        "makespan_ns": 118,
        "processors": [
            {"label": "thread 1", "busy_ns": 15},
            {"label": "stream 7", "busy_ns": 100},
            {"label": "stream 8", "busy_ns": 0},
        ],
        "annotations": [
            {"name": "ProfilerStep#1", "kind": "step", "start_ns": -4, "end_ns": 24},
            {"name": "gpu step", "kind": "gpu_step", "start_ns": 16, "end_ns": 119},
            {"name": "ProfilerStep#2", "kind": "step", "start_ns": -1, "end_ns": -1},
        ],
        "steps": [step1, step2],
    }
    assert r.to_dict() == {"makespan_ns": 118, "ranks": [rank], "diagnostics": {}}
    with_tasks = {**rank, "start_ns": [0, 18, 8], "end_ns": [5, 118, 18]}
    assert r.to_dict(include_tasks=True) == {
        "makespan_ns": 118,
        "ranks": [with_tasks],
        "diagnostics": {},
    }
    assert r.busy_ns().tolist() == [15, 100, 0]
    assert r.steps() == [step1, step2]


def test_a_graph_without_tasks_summarises_to_zeros_and_empty_spans() -> None:
    """One thread, no task, one step covering nothing (recorded 50 ns): makespan 0, the thread
    busy 0, the step's span -1..-1, predicted 0 ns (error (0 - 50) / 50)."""
    b = GraphBuilder()
    th = b.thread(1)
    b.annotate("ProfilerStep#0", th, -1, -1, dur_ns=50)
    r = simulate(b.build())
    lo, hi = r.annotation_spans()
    assert (lo.tolist(), hi.tolist()) == ([-1], [-1])
    assert r.busy_ns().tolist() == [0]
    step = {"name": "ProfilerStep#0", "measured_ns": 50, "predicted_ns": 0, "error": -1.0}
    assert r.to_dict(include_tasks=True) == {
        "makespan_ns": 0,
        "ranks": [
            {
                "rank": 0,
                "num_tasks": 0,
                "makespan_ns": 0,
                "processors": [{"label": "thread 1", "busy_ns": 0}],
                "annotations": [
                    {"name": "ProfilerStep#0", "kind": "step", "start_ns": -1, "end_ns": -1}
                ],
                "steps": [step],
                "start_ns": [],
                "end_ns": [],
            }
        ],
        "diagnostics": {},
    }


def two_ranks() -> tuple[ExecGraph, ExecGraph]:
    """Rank 0: one CPU op of 1 ms on thread 1. Rank 1: 'a' (345,678 ns) then 'b' (2 ms) on
    thread 1, joined by the builder's intra-thread edge."""
    b0 = GraphBuilder(rank=0, world_size=2)
    b0.task(b0.thread(1), "step", 1_000_000)
    b1 = GraphBuilder(rank=1, world_size=2)
    th = b1.thread(1)
    b1.task(th, "a", 345_678)
    b1.task(th, "b", 2_000_000)
    return b0.build().validate(), b1.build().validate()


def test_a_two_rank_result_prints_indexes_and_serialises_its_ranks() -> None:
    """Rank 0 runs [0, 1e6]; rank 1 runs a [0, 345678], b [345678, 2345678]: 3 tasks, makespan
    2,345,678 ns, printed as 2.346 ms. Each rank's graph is found by identity or by rank; a
    copy of rank 1's graph by its rank. The workload's one edge (rank 1's a -> b) has global
    source 0 + 1 (rank 1's tasks start at 1); the tables are computed once and shared. The
    canonical JSON lists keys sorted, without spaces, tasks only when asked."""
    g0, g1 = two_ranks()
    r = simulate(Workload((g0, g1)))
    assert repr(r) == "SimResult(2 rank(s), 3 tasks, makespan 2.346 ms)"

    assert (r.graph_index(g0), r.graph_index(g1)) == (0, 1)
    copy1 = g1.replace()
    assert copy1 is not g1 and r.graph_index(copy1) == 1
    assert (r.graph_index(0), r.graph_index(1)) == (0, 1)
    with pytest.raises(KeyError, match="rank 7 is not part of this result"):
        r.graph_index(7)

    tables = r.global_tables()
    assert r.global_tables() is tables
    edge_src, edge_kind, task_kind = tables
    assert edge_src.tolist() == [1]
    assert edge_kind.tolist() == [DepKind.INTRA_THREAD]
    assert task_kind.tolist() == [TaskKind.CPU_OP] * 3

    rank0 = (
        '{"annotations":[],%s"makespan_ns":1000000,"num_tasks":1,'
        '"processors":[{"busy_ns":1000000,"label":"thread 1"}],"rank":0,%s"steps":[]}'
    )
    rank1 = (
        '{"annotations":[],%s"makespan_ns":2345678,"num_tasks":2,'
        '"processors":[{"busy_ns":2345678,"label":"thread 1"}],"rank":1,%s"steps":[]}'
    )
    doc = '{"diagnostics":{},"makespan_ns":2345678,"ranks":[%s,%s]}'
    assert r.to_json() == doc % (rank0 % ("", ""), rank1 % ("", ""))
    assert r.to_json(include_tasks=True) == doc % (
        rank0 % ('"end_ns":[1000000],', '"start_ns":[0],'),
        rank1 % ('"end_ns":[345678,2345678],', '"start_ns":[0,345678],'),
    )


def test_spans_of_the_second_rank_read_its_own_tasks_down_to_task_0() -> None:
    """Rank 0: ``x`` (7 ns) on thread 1. Rank 1: ``a`` [0, 5] then ``b`` [5, 15] on thread 1.
    Rank 1's spans: a step over ``a`` alone (lead 1, tail 2): [0 - 1, 5 + 2] = [-1, 7]; one
    over ``b`` alone (lead 0, tail 3): [5, 18]; one over both (lead 4, tail 0): [-4, 15]; one
    over no task: -1..-1. Rank 0's only span, over ``x`` (tail 1): [0, 8]. Task 0 of a rank is
    a first and a last task like any other. The global tables keep their dtypes (the one edge's
    source, rank 1's task 0, is global task 0 + 1) and are read-only: writing raises."""
    b0 = GraphBuilder(rank=0, world_size=2)
    th0 = b0.thread(1)
    x = b0.task(th0, "x", 7)
    b0.annotate("s", th0, x, x, tail_ns=1)
    b1 = GraphBuilder(rank=1, world_size=2)
    th = b1.thread(1)
    a = b1.task(th, "a", 5)
    bb = b1.task(th, "b", 10)
    b1.annotate("only a", th, a, a, lead_ns=1, tail_ns=2)
    b1.annotate("only b", th, bb, bb, tail_ns=3)
    b1.annotate("both", th, a, bb, lead_ns=4)
    b1.annotate("none", th, -1, -1)
    r = simulate(Workload((b0.build().validate(), b1.build().validate())))
    lo, hi = r.annotation_spans(1)
    assert (lo.tolist(), hi.tolist()) == ([-1, 5, -4, -1], [7, 18, 15, -1])
    assert lo.dtype == hi.dtype == np.int64
    lo0, hi0 = r.annotation_spans(0)
    assert (lo0.tolist(), hi0.tolist()) == ([0], [8])
    tables = r.global_tables()
    assert [t.dtype for t in tables] == [np.int64, np.int8, np.int8]
    assert tables[0].tolist() == [1]
    for table in tables:
        assert not table.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            table[0] = 1
