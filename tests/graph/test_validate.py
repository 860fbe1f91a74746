"""``lumos.graph.validate.validate_graph``: every invariant's error, message for message.

One small valid graph (:func:`_graph`, rank 1 of 2) is broken one column at a time; each case
gives the exact message, worked out from the rule in the module docstring and the broken row
(``describe_task`` reads ``task i 'name' (KIND on label #order)``). Rows that break a rule are
placed after rows that keep it, so the index in the message is the first bad row's, and the
valid graph holds every border case the rules allow (a delay of exactly ``-dur_ns(src)``, a
zero duration, stream 0 as a wait target, event record task 0, a span ending on another
processor, a span over no task), so a rule tightened by one fails it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from lumos.errors import GraphError
from lumos.graph.model import CommType, DepKind, ExecGraph, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder
from lumos.graph.validate import validate_graph

LAUNCH = "task 0 'launch' (RUNTIME on thread 1 #0)"
GEMM = "task 1 'gemm' (KERNEL on stream 7 #0)"
SYNC = "task 2 'sync' (RUNTIME on thread 1 #1)"
NCCL = "task 3 'nccl' (COMM on stream 7 #1)"


def _graph() -> ExecGraph:
    """Processor 0 is stream 7, processor 1 thread 1. Tasks: 0 launch (thread, 5 ns),
    1 gemm (stream, 10 ns), 2 sync (thread, 0 ns), 3 nccl (stream, 20 ns, comm row 0 of
    process group 0; comm row 1 has no group). Edges: 0 launch 0->1 (+1 ns), 1 thread order
    0->2 (-5 ns, exactly -dur of task 0), 2 stream order 1->3. Waits of task 2: 0 STREAM on
    processor 0, 1 DEVICE 0 (no target), 2 EVENT on processor 0 recorded by task 0.
    Annotations (names 4..6): 0 "step" on the thread, tasks 0..2; 1 "tail" on the thread,
    task 2 (#1) to task 1 (stream, #0); 2 "mark" on the stream, no task."""
    b = GraphBuilder(rank=1, world_size=2)
    st, th = b.stream(7), b.thread(1)
    pg = b.process_group("dp", (0, 1))
    launch = b.task(th, "launch", 5, TaskKind.RUNTIME)
    gemm = b.task(st, "gemm", 10)
    b.edge(launch, gemm, DepKind.LAUNCH, 1)
    sync = b.task(th, "sync", 0, TaskKind.RUNTIME, gap_ns=-5)
    b.task(st, "nccl", 20, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, 8, pg, 0))
    b.comm(CommType.BARRIER)
    b.wait(sync, WaitKind.STREAM, stream=st)
    b.wait(sync, WaitKind.DEVICE, device=0)
    b.wait(sync, WaitKind.EVENT, stream=st, record=launch)
    b.annotate("step", th, launch, sync)
    b.annotate("tail", th, sync, gemm)
    b.annotate("mark", st, -1, -1)
    return b.build()


def _broken(table: str, **columns: Any) -> ExecGraph:
    """The valid graph with some columns of one table replaced. Set on the built graph so that
    the constructor's own checks (task name and processor ranges) do not stop it first: the
    validator must catch a table changed after construction too."""
    g = _graph()
    bad = getattr(g, table).replace(**columns)
    object.__setattr__(g, table, bad)
    return g


def test_the_valid_graph_validates_and_validate_returns_the_graph():
    g = _graph()
    assert validate_graph(g) is None
    assert g.validate() is g


def test_a_graph_without_tasks_validates_with_a_span_over_no_task():
    """Nothing indexes the (empty) task table: spans with no task are not looked up."""
    b = GraphBuilder()
    th = b.thread(1)
    b.stream(7)
    b.annotate("idle", th, -1, -1)
    assert validate_graph(b.build()) is None


def test_a_span_of_one_task_validates():
    """Span 0 made to cover task 0 alone (first == last on its own processor) is allowed."""
    assert validate_graph(_broken("annotations", last_task_idx=[0, 1, -1])) is None


CASES = [
    ("tasks", {"name_idx": [0, 1, 2, 7]}, "tasks.name_idx[3] = 7 is dangling (valid: 0..6)"),
    ("tasks", {"name_idx": [0, -1, 2, 3]}, "tasks.name_idx[1] = -1 is dangling (valid: 0..6)"),
    ("tasks", {"processor_idx": [1, 0, 1, 2]},
     "tasks.processor_idx[3] = 2 is dangling (valid: 0..1)"),
    ("tasks", {"processor_idx": [1, -1, 1, 0]},
     "tasks.processor_idx[1] = -1 is dangling (valid: 0..1)"),
    ("tasks", {"comm_idx": [-1, -1, -1, 2]}, "tasks.comm_idx[3] = 2 is dangling (valid: -1..1)"),
    ("tasks", {"comm_idx": [-1, -2, -1, 0]}, "tasks.comm_idx[1] = -2 is dangling (valid: -1..1)"),
    ("tasks", {"dur_ns": [5, 10, 0, -1]}, f"rank 1: {NCCL} has negative duration -1"),
    ("tasks", {"kind": [1, 2, 1, 7]}, "rank 1: task 3 has unknown kind 7"),
    ("tasks", {"kind": [1, 2, 1, -1]}, "rank 1: task 3 has unknown kind -1"),
    ("tasks", {"kind": [1, 2, 1, 6]},
     "rank 1: task 3 'nccl' (CPU_COMM on stream 7 #1) is a CPU task on a stream"),
    ("tasks", {"kind": [1, 2, 4, 5]},
     "rank 1: task 2 'sync' (MEMSET on thread 1 #1) is a GPU task on a thread"),
    ("tasks", {"order": [0, 0, 2, 1]},
     "rank 1: processor order broken at task 2 'sync' (RUNTIME on thread 1 #2): orders on a "
     "processor must be 0..k-1 without gaps or repeats"),
    ("tasks", {"order": [0, 0, 1, 0]},
     "rank 1: processor order broken at task 3 'nccl' (COMM on stream 7 #0): orders on a "
     "processor must be 0..k-1 without gaps or repeats"),
    ("tasks", {"order": [1, 0, 0, 1]},
     "rank 1: task 0 'launch' (RUNTIME on thread 1 #1) is listed before a task that precedes "
     "it on its processor"),
    ("edges", {"src": [0, 0, 4]}, "edges.src[2] = 4 is dangling (valid: 0..3)"),
    ("edges", {"src": [0, -1, 1]}, "edges.src[1] = -1 is dangling (valid: 0..3)"),
    ("edges", {"dst": [1, 2, 4]}, "edges.dst[2] = 4 is dangling (valid: 0..3)"),
    ("edges", {"dst": [1, -1, 3]}, "edges.dst[1] = -1 is dangling (valid: 0..3)"),
    ("edges", {"dst": [1, 2, 1]}, f"rank 1: edge 2 is a self-loop on {GEMM}"),
    ("edges", {"delay_ns": [1, -6, 0]},
     f"rank 1: edge 1 has delay -6 ns, more negative than the duration of its source {LAUNCH}"),
    ("waits", {"task_idx": [2, 2, 4]}, "waits.task_idx[2] = 4 is dangling (valid: 0..3)"),
    ("waits", {"task_idx": [2, -1, 2]}, "waits.task_idx[1] = -1 is dangling (valid: 0..3)"),
    ("waits", {"target_processor_idx": [0, -1, 2]},
     "waits.target_processor_idx[2] = 2 is dangling (valid: -1..1)"),
    ("waits", {"target_processor_idx": [0, -2, 0]},
     "waits.target_processor_idx[1] = -2 is dangling (valid: -1..1)"),
    ("waits", {"record_task_idx": [-1, -1, 4]},
     "waits.record_task_idx[2] = 4 is dangling (valid: -1..3)"),
    ("waits", {"record_task_idx": [-1, -2, 0]},
     "waits.record_task_idx[1] = -2 is dangling (valid: -1..3)"),
    ("waits", {"task_idx": [2, 1, 2]}, f"rank 1: wait 1 blocks a GPU task, {GEMM}"),
    ("waits", {"target_processor_idx": [0, -1, 1]},
     "rank 1: wait 2 must target a stream, got processor 1"),
    ("waits", {"target_processor_idx": [1, -1, 0]},
     "rank 1: wait 0 must target a stream, got processor 1"),
    ("waits", {"target_processor_idx": [0, -1, -1]},
     "rank 1: wait 2 must target a stream, got processor -1"),
    ("waits", {"record_task_idx": [-1, -1, -1]}, "rank 1: event wait 2 has no record task"),
    ("waits", {"device": [-1, -1, -1]}, "rank 1: device wait 1 has no device"),
    ("waits", {"kind": [0, 1, 3]}, "rank 1: wait 2 has unknown kind 3"),
    ("waits", {"kind": [0, -1, 2]}, "rank 1: wait 1 has unknown kind -1"),
    ("annotations", {"processor_idx": [1, 1, 2]},
     "annotations.processor_idx[2] = 2 is dangling (valid: 0..1)"),
    ("annotations", {"processor_idx": [1, -1, 0]},
     "annotations.processor_idx[1] = -1 is dangling (valid: 0..1)"),
    ("annotations", {"first_task_idx": [0, 2, -2]},
     "annotations.first_task_idx[2] = -2 is dangling (valid: -1..3)"),
    ("annotations", {"first_task_idx": [0, 4, -1]},
     "annotations.first_task_idx[1] = 4 is dangling (valid: -1..3)"),
    ("annotations", {"last_task_idx": [2, 1, 4]},
     "annotations.last_task_idx[2] = 4 is dangling (valid: -1..3)"),
    ("annotations", {"last_task_idx": [2, -2, -1]},
     "annotations.last_task_idx[1] = -2 is dangling (valid: -1..3)"),
    ("annotations", {"first_task_idx": [0, 2, 0]},
     "rank 1: annotation 2 has only one of first/last task"),
    ("annotations", {"last_task_idx": [2, -1, -1]},
     "rank 1: annotation 1 has only one of first/last task"),
    ("annotations", {"processor_idx": [1, 0, 0]},
     "rank 1: annotation 1 ('tail') must start on its own processor, and first <= last there"),
    ("annotations", {"processor_idx": [0, 1, 0]},
     "rank 1: annotation 0 ('step') must start on its own processor, and first <= last there"),
    ("annotations", {"first_task_idx": [2, 2, -1], "last_task_idx": [0, 1, -1]},
     "rank 1: annotation 0 ('step') must start on its own processor, and first <= last there"),
    ("comms", {"pg_idx": [0, 1]}, "comms.pg_idx[1] = 1 is dangling (valid: -1..0)"),
    ("comms", {"pg_idx": [-2, -1]}, "comms.pg_idx[0] = -2 is dangling (valid: -1..0)"),
    ("edges", {"src": [0, 0, 3], "dst": [1, 2, 0]},
     f"rank 1: dependency cycle among 4 tasks (edges plus processor order), e.g. {LAUNCH}; "
     f"{GEMM}; {SYNC}"),
    ("edges", {"src": [0, 0, 3], "dst": [1, 2, 1]},
     f"rank 1: dependency cycle among 2 tasks (edges plus processor order), e.g. {GEMM}; {NCCL}"),
]  # fmt: skip


@pytest.mark.parametrize(("table", "columns", "message"), CASES)
def test_each_broken_invariant_raises_its_own_message(
    table: str, columns: dict[str, Any], message: str
) -> None:
    """Expected messages: see :data:`CASES` and the module docstring. The cycles: edge 2 made
    3 -> 0 closes 0 -> 1 (launch) -> 3 (stream order) -> 0, and task 2 waits behind task 0, so
    all 4 tasks are stuck and the first 3 are named; edge 2 made 3 -> 1 closes 1 -> 3 -> 1
    only, so tasks 0 and 2 still run and 2 are stuck."""
    with pytest.raises(GraphError, match="^" + re.escape(message) + "$"):
        validate_graph(_broken(table, **columns))
