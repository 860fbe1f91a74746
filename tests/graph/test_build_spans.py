"""Spans of a graph built from a hand-written Kineto trace (``lumos.graph.build_spans``): which
events become USER spans, and which tasks a ProfilerStep covers.

Times in the traces are in us, as Kineto writes them; every expected task index, lead and tail
below follows from the recorded times by the rules in the functions' docstrings.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from lumos.graph.build import build_graph
from lumos.graph.model import AnnotationKind, ExecGraph
from lumos.ingest.kineto import trace_from_bytes

US = 1_000


def _ev(cat: str, name: str, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _graph(events: list[dict[str, Any]]) -> ExecGraph:
    return build_graph(trace_from_bytes(json.dumps({"traceEvents": events}).encode(), "t.json"))


def _spans(g: ExecGraph) -> list[tuple[str, int, int, int, int, int, int, int, int]]:
    a = g.annotations
    return [(g.names[int(a.name_idx[i])], int(a.kind[i]), int(a.processor_idx[i]),
             int(a.first_task_idx[i]), int(a.last_task_idx[i]), int(a.ts_ns[i]),
             int(a.dur_ns[i]), int(a.lead_ns[i]), int(a.tail_ns[i]))
            for i in range(len(a))]  # fmt: skip


def test_user_spans_are_the_ops_annotations_and_modules_that_are_no_task():
    """One thread: ``ProfilerStep#1`` (0-200 us), ``data`` (0-3 us, over the step's marker
    only), module ``nn.Module: Block_0`` (5-95), a plain
    Python function (5-95), ``aten::linear`` (10-90) over two leaf ops, ``aten::mm`` (20-50)
    and ``aten::add`` (60-70), a zero-length annotation ``mark`` (75) and a childless
    ``zero_grad`` (120-140). Tasks: 0 the anchor, 1 the step's marker, 2 ``aten::mm``, 3
    ``aten::add``. The step covers its marker to ``aten::add`` (tail 200 - 70 = 130 us). USER
    spans, in event order: ``data``, with no task (its only one is the step's marker, no
    work: lead and tail 0), the module (lead 20 - 5 = 15, tail 95 - 70 = 25) and
    ``aten::linear`` (lead 10, tail 20) over tasks 2-3, and ``zero_grad`` with no task (lead
    and tail 0). Not spans: the leaf ops (tasks themselves), the step (a STEP span), ``mark``
    (no length) and the Python function that is no module."""
    g = _graph([
        _ev("user_annotation", "ProfilerStep#1", 0, 200),
        _ev("user_annotation", "data", 0, 3),
        _ev("python_function", "nn.Module: Block_0", 5, 90),
        _ev("python_function", "train.py(3): step", 5, 90),
        _ev("cpu_op", "aten::linear", 10, 80),
        _ev("cpu_op", "aten::mm", 20, 30),
        _ev("cpu_op", "aten::add", 60, 10),
        _ev("user_annotation", "mark", 75, 0),
        _ev("user_annotation", "zero_grad", 120, 20),
    ])  # fmt: skip
    step, user = int(AnnotationKind.STEP), int(AnnotationKind.USER)
    assert [g.names[int(i)] for i in g.tasks.name_idx] == [
        "<start>",
        "ProfilerStep#1",
        "aten::mm",
        "aten::add",
    ]
    assert _spans(g) == [
        ("ProfilerStep#1", step, 0, 1, 3, 0, 200 * US, 0, 130 * US),
        ("data", user, 0, -1, -1, 0, 3 * US, 0, 0),
        ("nn.Module: Block_0", user, 0, 2, 3, 5 * US, 90 * US, 15 * US, 25 * US),
        ("aten::linear", user, 0, 2, 3, 10 * US, 80 * US, 10 * US, 20 * US),
        ("zero_grad", user, 0, -1, -1, 120 * US, 20 * US, 0, 0),
    ]


def test_a_step_on_a_thread_without_work_ends_with_the_last_work_inside_it():
    """``aten::mm`` (10-90 us) on thread 1 is the trace's first event (row 0);
    ``ProfilerStep#1`` (10-100 us), ``#2`` (200-300 us) and ``#3`` (400-500 us) are annotated
    on thread 2, which does nothing else. Thread 3 runs ``aten::gelu`` (20-70 us),
    ``aten::add`` (from 100 us, step 1's end) and ``aten::sub`` (410-420 us); thread 4
    ``aten::relu`` (5-95 us, begun before step 1) and ``aten::exp`` (405-450 us). Tasks: thread
    1 anchor and ``aten::mm`` (0, 1), thread 2 anchor and the three markers (2-5), thread 3
    anchor, gelu, add, sub (6-9), thread 4 anchor, relu, exp (10-12).

    Each step starts at its marker and ends with the work that started inside it and ended
    last. Step 1: ``aten::mm`` (task 1, ends 90 us; not relu, begun before; not add, begun at
    the end): tail 10 us. Step 2 has no work inside: it ends at its own marker, tail its whole
    length, 100 us. Step 3: ``aten::exp`` (task 12, ends 450 us; not sub, the first inside):
    tail 50 us."""
    g = _graph([
        _ev("cpu_op", "aten::mm", 10, 80, tid=1),
        _ev("user_annotation", "ProfilerStep#1", 10, 90, tid=2),
        _ev("user_annotation", "ProfilerStep#2", 200, 100, tid=2),
        _ev("user_annotation", "ProfilerStep#3", 400, 100, tid=2),
        _ev("cpu_op", "aten::gelu", 20, 50, tid=3),
        _ev("cpu_op", "aten::add", 100, 10, tid=3),
        _ev("cpu_op", "aten::sub", 410, 10, tid=3),
        _ev("cpu_op", "aten::relu", 5, 90, tid=4),
        _ev("cpu_op", "aten::exp", 405, 45, tid=4),
    ])  # fmt: skip
    assert [g.names[int(i)] for i in g.tasks.name_idx] == [
        "<start>", "aten::mm",
        "<start>", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3",
        "<start>", "aten::gelu", "aten::add", "aten::sub",
        "<start>", "aten::relu", "aten::exp",
    ]  # fmt: skip
    step = int(AnnotationKind.STEP)
    assert _spans(g) == [
        ("ProfilerStep#1", step, 1, 3, 1, 10 * US, 90 * US, 0, 10 * US),
        ("ProfilerStep#2", step, 1, 4, 4, 200 * US, 100 * US, 0, 100 * US),
        ("ProfilerStep#3", step, 1, 5, 12, 400 * US, 100 * US, 0, 50 * US),
    ]


def test_a_step_on_a_working_thread_ends_with_its_own_threads_last_task():
    """Thread 1 runs ``aten::mm`` (10-90 us); thread 2 is annotated ``ProfilerStep#1`` (0-100 us)
    and runs ``aten::add`` (20-30 us). Tasks: 0 and 1 on thread 1, 2-4 on thread 2 (anchor,
    marker, ``aten::add``). The step's thread works, so the step covers its own thread's tasks,
    marker to ``aten::add`` (tail 100 - 30 = 70 us), whatever ended later elsewhere."""
    g = _graph([
        _ev("cpu_op", "aten::mm", 10, 80, tid=1),
        _ev("user_annotation", "ProfilerStep#1", 0, 100, tid=2),
        _ev("cpu_op", "aten::add", 20, 10, tid=2),
    ])  # fmt: skip
    assert [g.names[int(i)] for i in g.tasks.name_idx] == [
        "<start>", "aten::mm", "<start>", "ProfilerStep#1", "aten::add"
    ]  # fmt: skip
    assert _spans(g) == [
        ("ProfilerStep#1", int(AnnotationKind.STEP), 1, 3, 4, 0, 100 * US, 0, 70 * US)
    ]


def test_spans_over_one_task_on_any_thread_carry_their_shapes_work():
    """Thread 1: ``aten::mm`` (10-50 us, "Input Dims" [[2, 3], [3, 4]], floats) holding one
    leaf, ``aten::resolve_conj`` (10-50 us, task 1). Thread 2: annotation ``fwd`` (0-100 us)
    over ``aten::add`` (20-30 us, task 3), and ``tick``, 1 ns long. Thread 3: only a module
    call, ``nn.Module: Head_0`` (0-10 us): no task, so no processor and no span.

    ``aten::mm``: tasks 1-1, lead and tail 0, 2 * 2 * 3 * 4 = 48 flops and (6 + 12 + 8) * 4 =
    104 bytes (inputs and output), its dims row 0 (the graph's only dims). ``fwd`` on processor
    1: tasks 3-3, lead 20, tail 70 us. ``tick``: kept (it has a length), no task."""
    mm = {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}
    events = [
        {**_ev("cpu_op", "aten::mm", 10, 40), "args": mm},
        _ev("cpu_op", "aten::resolve_conj", 10, 40),
        _ev("user_annotation", "fwd", 0, 100, tid=2),
        _ev("cpu_op", "aten::add", 20, 10, tid=2),
        _ev("user_annotation", "tick", 40, 0.001, tid=2),
        _ev("python_function", "nn.Module: Head_0", 0, 10, tid=3),
    ]
    g = _graph(events)
    user = int(AnnotationKind.USER)
    assert g.processors.label == ("thread 1 (pid 1)", "thread 2 (pid 1)")
    assert [g.names[int(i)] for i in g.tasks.name_idx] == [
        "<start>",
        "aten::resolve_conj",
        "<start>",
        "aten::add",
    ]
    assert _spans(g) == [
        ("aten::mm", user, 0, 1, 1, 10 * US, 40 * US, 0, 0),
        ("fwd", user, 1, 3, 3, 0, 100 * US, 20 * US, 70 * US),
        ("tick", user, 1, -1, -1, 40 * US, 1, 0, 0),
    ]
    a = g.annotations
    assert a.flops.tolist() == [48, 0, 0] and a.bytes.tolist() == [104, 0, 0]
    assert a.dims_idx.tolist() == [0, -1, -1] and g.dims == ("[[2, 3], [3, 4]]",)
    trace = trace_from_bytes(json.dumps({"traceEvents": events}).encode(), "t.json")
    bare = replace(trace, events=replace(trace.events, dims_idx=None))
    assert build_graph(bare).annotations.dims_idx.tolist() == [-1, -1, -1]


def test_a_span_over_the_step_marker_and_work_covers_the_work():
    """``ProfilerStep#1`` (0-200 us) on one thread, ``## forward ##`` (0-100 us) starting with
    the step, so its first covered task is the step's marker (task 1, not work), then
    ``aten::mm`` (20-50) and ``aten::add`` (60-70), tasks 2 and 3. The span's tasks are its
    work, 2-3, skipping the marker (lead 20 us, tail 100 - 70 = 30 us); a span over the
    marker only (``data``, 0-3 us) still has none; one over ``aten::add`` only (``tail``,
    55-75 us) has task 3 (lead 5 us, tail 5 us)."""
    g = _graph([
        _ev("user_annotation", "ProfilerStep#1", 0, 200),
        _ev("user_annotation", "## forward ##", 0, 100),
        _ev("user_annotation", "data", 0, 3),
        _ev("cpu_op", "aten::mm", 20, 30),
        _ev("user_annotation", "tail", 55, 20),
        _ev("cpu_op", "aten::add", 60, 10),
    ])  # fmt: skip
    step, user = int(AnnotationKind.STEP), int(AnnotationKind.USER)
    assert _spans(g) == [
        ("ProfilerStep#1", step, 0, 1, 3, 0, 200 * US, 0, 130 * US),
        ("## forward ##", user, 0, 2, 3, 0, 100 * US, 20 * US, 30 * US),
        ("data", user, 0, -1, -1, 0, 3 * US, 0, 0),
        ("tail", user, 0, 3, 3, 55 * US, 20 * US, 5 * US, 5 * US),
    ]
