"""``SimResult``'s summaries (``to_dict``, ``busy_ns``, ``annotation_spans``, ``steps``) pinned
whole on hand-made graphs whose replay times are worked out by hand."""

from __future__ import annotations

from lumos.graph.model import AnnotationKind, DepKind, ExecGraph, TaskKind
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
