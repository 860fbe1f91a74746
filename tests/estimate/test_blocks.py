"""Helpers of :mod:`lumos.estimate.blocks` pinned on hand-built graphs: the collectives of
the re-sized task list (``_comms``), the stand-ins of dropped tasks (``_fill_dropped``) and the
task table of a new order (``tasks_in_order``)."""

from __future__ import annotations

import numpy as np

from lumos.estimate.blocks import SEQ_STRIDE, _comms, _fill_dropped, tasks_in_order
from lumos.graph.kinds import CommType, DepKind
from lumos.graph.synthetic import GraphBuilder


def test_each_copy_of_a_collective_gets_its_own_sequence_number():
    """Old tasks: 0 runs collective A (seq 5), 1 collective B (no seq, -1), 2 none, 3
    collective C (seq 0, a known one). The new list is ``src = [0, 1, 0, 2, 1, 3]`` with copy
    numbers ``[0, 0, 1, 0, 3, 2]``: the 5 tasks that run a collective get comms 0..4 in order
    (new task 3 none); A's copies are 5 x 1024 + copy (0 and 1), C's 0 x 1024 + 2, B's keep -1
    whatever their copy; sizes and kinds are copied."""
    b = GraphBuilder()
    th = b.thread(1)
    a = b.comm(CommType.ALL_REDUCE, size_bytes=64, seq_id=5)
    c = b.comm(CommType.BROADCAST, size_bytes=8)
    b.task(th, "nccl:all_reduce", 10, comm=a)
    b.task(th, "nccl:broadcast", 10, ts_ns=20, comm=c)
    b.task(th, "aten::mm", 10, ts_ns=40)
    b.task(th, "nccl:all_gather", 10, ts_ns=60, comm=b.comm(CommType.ALL_GATHER, 32, seq_id=0))
    g = b.build().validate()
    comms, comm_idx = _comms(g, np.array([0, 1, 0, 2, 1, 3]), np.array([0, 0, 1, 0, 3, 2]))
    assert SEQ_STRIDE == 1024
    assert comm_idx.tolist() == [0, 1, 2, -1, 3, 4]
    assert comm_idx.dtype == np.int32
    assert comms.seq_id.tolist() == [5 * 1024, -1, 5 * 1024 + 1, -1, 2]
    assert comms.size_bytes.tolist() == [64, 8, 64, 8, 32]
    ar, bc, ag = (int(k) for k in (CommType.ALL_REDUCE, CommType.BROADCAST, CommType.ALL_GATHER))
    assert comms.kind.tolist() == [ar, bc, ar, bc, ag]


def test_a_dropped_task_stands_in_with_its_neighbours_on_its_own_processor():
    """Thread A runs old tasks 0-4, thread B 5-8. Kept: 1 (new task 0, the first), 3 (13), 5
    (copies 20..22), 8 (23); dropped (-1): 0, 2, 4, 6, 7. A span starting at a dropped task starts at
    the next survivor's first copy on its processor, one ending there ends at the previous
    survivor's last copy; none when there is none: 0 has no previous (its last stays -1), 4 no
    next (its first stays -1); 6 and 7, after 5 (the processor's first task), end at 22 and
    start at 23. Kept tasks are left alone."""
    b = GraphBuilder()
    ta, tb = b.thread(1), b.thread(2)
    for k in range(5):
        b.task(ta, f"a{k}", 5, ts_ns=10 * k)
    for k in range(4):
        b.task(tb, f"b{k}", 5, ts_ns=10 * k)
    g = b.build().validate()
    first = np.array([-1, 0, -1, 13, -1, 20, -1, -1, 23])
    last = np.array([-1, 0, -1, 13, -1, 22, -1, -1, 23])
    _fill_dropped(g, first, last)
    assert first.tolist() == [0, 0, 13, 13, -1, 20, 23, 23, 23]
    assert last.tolist() == [-1, 0, 0, 13, 13, 22, 22, 22, 23]


def test_tasks_in_order_restarts_each_processors_clock_and_keeps_only_recorded_gaps():
    """Thread: ``z`` (ts 50), ``w`` (ts 70, overhead 4), ``v`` (ts 90, overhead 6); stream 7:
    ``x`` (ts 100), ``y`` (ts 150, overhead 7). In the order ``w z v | y x`` each processor's
    first task keeps its recorded start (70, 150) and each later one starts its recorded gap
    to its old predecessor after the new one: ``z`` and ``x`` had no predecessor (gap 0, so
    70 and 150), ``v`` 90 - 70 = 20 after ``z`` (90). Only ``v`` had overhead and is not first:
    one regenerated thread edge, task 1 -> 2 with delay 6. A first task of the stream is not
    the thread's last task's successor (``x`` would start 10 later)."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    b.task(th, "z", 3, ts_ns=50)
    b.task(th, "w", 3, ts_ns=70, gap_ns=4)
    b.task(th, "v", 3, ts_ns=90, gap_ns=6)
    b.task(st, "x", 5, ts_ns=100)
    b.task(st, "y", 5, ts_ns=150, gap_ns=7)
    g = b.build().validate()
    tasks, (isrc, idst, ikind, idelay) = tasks_in_order(g, np.array([1, 0, 2, 4, 3]), g.edges)
    assert [g.names[i] for i in tasks.name_idx.tolist()] == ["w", "z", "v", "y", "x"]
    assert tasks.processor_idx.tolist() == [0, 0, 0, 1, 1]
    assert tasks.order.tolist() == [0, 1, 2, 0, 1]
    assert tasks.ts_ns.tolist() == [70, 70, 90, 150, 150]
    assert (isrc, idst, ikind, idelay) == ([1], [2], [int(DepKind.INTRA_THREAD)], [6])
