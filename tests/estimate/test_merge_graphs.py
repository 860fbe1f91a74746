"""``merge_graphs`` column by column, on hand-built parts whose merged tables are worked out
by hand: processors matched by kind and position (extras appended), every task, edge, wait,
span, communication, process group and shape row re-based onto the merged tables."""

from __future__ import annotations

import numpy as np

from lumos.estimate.merge import _localize, _no_gap_before_steps, merge_graphs
from lumos.graph.kinds import CommType
from lumos.graph.model import AnnotationKind, DepKind, ProcessGroup, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder

L, IT, IS = int(DepKind.LAUNCH), int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)
STEP, USER = int(AnnotationKind.STEP), int(AnnotationKind.USER)
RT = TaskKind.RUNTIME


def _three_parts():
    """Part 0: thread 1, stream 7; a launch, its kernel, an op. Part 1 lists stream 7 first,
    then thread 1 and streams 8 and 9 (two processors part 0 lacks); part 2 has thread 1,
    stream 7 and stream 10 (one more), and reuses part 0's name ``launch``."""
    b = GraphBuilder(rank=0, world_size=3)
    th, st = b.thread(1), b.stream(7)
    t0 = b.task(th, "launch", 5, RT)
    b.edge(t0, b.task(st, "k_a", 100), DepKind.LAUNCH)
    b.task(th, "op_a", 7, gap_ns=2)
    p0 = b.build().validate()

    b = GraphBuilder(rank=1, world_size=3)
    s7, th, s8, s9 = b.stream(7), b.thread(1), b.stream(8), b.stream(9)
    u0 = b.task(th, "launch_b", 5, RT)
    b.edge(u0, b.task(s7, "k_b", 50), DepKind.LAUNCH, 3)
    b.task(th, "op_b", 4, gap_ns=1)
    b.task(s8, "k_b8", 30)
    b.task(s9, "k_b9", 20)
    b.task(s8, "k_b8x", 10, gap_ns=6)
    p1 = b.build().validate()

    b = GraphBuilder(rank=2, world_size=3)
    th, s7, s10 = b.thread(1), b.stream(7), b.stream(10)
    v0 = b.task(th, "launch", 5, RT)
    b.edge(v0, b.task(s7, "k_c", 40), DepKind.LAUNCH, 4)
    b.task(s10, "k_c10", 15)
    b.task(th, "op_c", 2, gap_ns=3)
    p2 = b.build().validate()
    return [p0, p1, p2]


def test_three_parts_merge_tasks_processors_orders_and_edges():
    """Part 1's stream 7 and thread 1 map onto part 0's processors 1 and 0, its streams 8 and 9
    become processors 2 and 3; part 2's stream 10 is processor 4 (after those). Part ``i``'s
    tasks follow the earlier parts' (offsets 3 and 9) and come after them on a shared
    processor: the thread's orders run 0-1 (part 0), 2-3 (part 1), 4-5 (part 2); stream 7's
    0, 1, 2. Edges keep kind and delay, moved by their part's offset. Names are the union in
    first-seen order (``launch`` once); rank and world size are part 0's."""
    merged = merge_graphs(_three_parts()).validate()
    assert (merged.rank, merged.world_size) == (0, 3)
    assert merged.processors.label == (
        "thread 1", "stream 7", "stream 8", "stream 9", "stream 10",
    )  # fmt: skip
    assert merged.processors.tid.tolist() == [1, 7, 8, 9, 10]
    assert merged.names == (
        "launch", "k_a", "op_a", "launch_b", "k_b", "op_b", "k_b8", "k_b9", "k_b8x",
        "k_c", "k_c10", "op_c",
    )  # fmt: skip
    t = merged.tasks
    assert t.name_idx.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 10, 11]
    assert t.processor_idx.tolist() == [0, 1, 0, 0, 1, 0, 2, 3, 2, 0, 1, 4, 0]
    assert t.order.tolist() == [0, 0, 1, 2, 1, 3, 0, 0, 1, 4, 2, 0, 5]
    assert t.dur_ns.tolist() == [5, 100, 7, 5, 50, 4, 30, 20, 10, 5, 40, 15, 2]
    assert t.comm_idx.tolist() == [-1] * 13
    e = merged.edges
    assert list(zip(e.src.tolist(), e.dst.tolist(), e.kind.tolist(), e.delay_ns.tolist(),
                    strict=True)) == [
        (0, 1, L, 0), (0, 2, IT, 2),
        (3, 4, L, 3), (3, 5, IT, 1), (6, 8, IS, 6),
        (9, 10, L, 4), (9, 12, IT, 3),
    ]  # fmt: skip
    assert merged.dims == () and merged.process_groups == ()
    assert merged.task_dims_idx is not None
    assert merged.task_dims_idx.dtype == np.int32
    assert merged.task_dims_idx.tolist() == [-1] * 13


def _waits_part(rank: int, stream_first: bool):
    """A record (task 0, thread), a kernel (task 1, stream 7), an event sync (task 2: EVENT
    wait on the stream, recorded by task 0) and a device sync (task 3: DEVICE wait on device
    0, no stream, no record); the stream is processor 0 when ``stream_first``."""
    b = GraphBuilder(rank=rank, world_size=2)
    if stream_first:
        st, th = b.stream(7), b.thread(1)
    else:
        th, st = b.thread(1), b.stream(7)
    rec = b.task(th, "record", 2, RT)
    b.task(st, "k", 100)
    sync = b.task(th, "sync", 3, RT, gap_ns=1)
    dev = b.task(th, "devsync", 4, RT, gap_ns=1)
    b.wait(sync, WaitKind.EVENT, stream=st, record=rec)
    b.wait(dev, WaitKind.DEVICE, device=0)
    return b.build().validate()


def test_waits_keep_their_stream_and_record_and_a_missing_one_stays_missing():
    """Part 0 has stream 7 as processor 0 and thread 1 as processor 1; part 1 the other way
    round, so its event wait's stream (its processor 1) is merged processor 0 and its
    tasks 0-3 are tasks 4-7. The record of part 0's event wait is task 0; the device waits
    keep no stream and no record (-1)."""
    merged = merge_graphs([_waits_part(0, True), _waits_part(1, False)]).validate()
    assert merged.processors.label == ("stream 7", "thread 1")
    assert merged.tasks.processor_idx.tolist() == [1, 0, 1, 1, 1, 0, 1, 1]
    assert merged.tasks.order.tolist() == [0, 0, 1, 2, 3, 1, 4, 5]
    w = merged.waits
    assert w.task_idx.tolist() == [2, 3, 6, 7]
    assert w.kind.tolist() == [int(WaitKind.EVENT), int(WaitKind.DEVICE)] * 2
    assert w.target_processor_idx.tolist() == [0, -1, 0, -1]
    assert w.device.tolist() == [-1, 0, -1, 0]
    assert w.record_task_idx.tolist() == [0, -1, 4, -1]


def _spans_part(rank: int):
    """Part 0 (dims ``d0``; thread 1 is processor 0): tasks ``a``, ``b`` (thread), ``k``
    (stream 7); spans STEP over 0-1, ``mod`` over 1 (dims 0), ``empty`` over no task, ``opA``
    over 0 (dims 0); no task shapes. Part 1 (dims ``d1``, ``d0``; stream 7 is processor 0):
    tasks ``k2`` (stream), ``c``, ``d`` (thread) with shapes 0, -1, 1; spans STEP over 1-2,
    ``mod2`` over 1-2 (dims 0), ``opC`` over 2 (dims 1), ``empty`` over no task."""
    b = GraphBuilder(rank=rank, world_size=2)
    if rank == 0:
        th, st = b.thread(1), b.stream(7)
        b.task(th, "a", 5)
        b.task(th, "b", 5, gap_ns=1)
        b.task(st, "k", 9)
        b.annotate("ProfilerStep#1", th, 0, 1)
        b.annotate("mod", th, 1, 1, kind=AnnotationKind.USER)
        b.annotate("empty", th, -1, -1, kind=AnnotationKind.USER)
        b.annotate("opA", th, 0, 0, kind=AnnotationKind.USER)
        g = b.build()
        a = g.annotations.replace(dims_idx=np.array([-1, 0, -1, 0], dtype=np.int32))
        return g.replace(annotations=a, dims=("d0",)).validate()
    st, th = b.stream(7), b.thread(1)
    b.task(st, "k2", 9)
    b.task(th, "c", 5)
    b.task(th, "d", 5, gap_ns=1)
    b.annotate("ProfilerStep#1", th, 1, 2)
    b.annotate("mod2", th, 1, 2, kind=AnnotationKind.USER)
    b.annotate("opC", th, 2, 2, kind=AnnotationKind.USER)
    b.annotate("empty", th, -1, -1, kind=AnnotationKind.USER)
    g = b.build()
    a = g.annotations.replace(dims_idx=np.array([-1, 0, 1, -1], dtype=np.int32))
    tdims = np.array([0, -1, 1], dtype=np.int32)
    return g.replace(annotations=a, dims=("d1", "d0"), task_dims_idx=tdims).validate()


def test_spans_and_shapes_move_to_the_merged_tasks_names_and_dims():
    """Merged dims are ``d0``, ``d1`` (part 1's ``d1`` appended), so part 1's dims rows 0 and
    1 become 1 and 0. Part 0's four spans stay as they were (task 0 and dims 0 included, the
    empty span keeps first/last -1); part 1's STEP span is dropped and its others move to its
    tasks 4-5 (offset 3) on the merged thread (processor 0). Task shapes: part 0 has none
    (-1 each), part 1's 0, -1, 1 become 1, -1, 0."""
    merged = merge_graphs([_spans_part(0), _spans_part(1)]).validate()
    assert merged.dims == ("d0", "d1")
    assert merged.names == (
        "a", "b", "k", "ProfilerStep#1", "mod", "empty", "opA", "k2", "c", "d", "mod2", "opC",
    )  # fmt: skip
    assert merged.tasks.processor_idx.tolist() == [0, 0, 1, 1, 0, 0]
    assert merged.tasks.name_idx.tolist() == [0, 1, 2, 7, 8, 9]
    a = merged.annotations
    assert a.name_idx.tolist() == [3, 4, 5, 6, 10, 11, 5]
    assert a.kind.tolist() == [STEP, USER, USER, USER, USER, USER, USER]
    assert a.processor_idx.tolist() == [0] * 7
    assert a.first_task_idx.tolist() == [0, 1, -1, 0, 4, 5, -1]
    assert a.last_task_idx.tolist() == [1, 1, -1, 0, 5, 5, -1]
    assert a.dims_idx.tolist() == [-1, 0, -1, 0, 1, 0, -1]
    assert merged.task_dims_idx is not None
    assert merged.task_dims_idx.dtype == np.int32
    assert merged.task_dims_idx.tolist() == [-1, -1, -1, 1, -1, 0]


def _comms_part(pgs: tuple[str, ...], comms: list[tuple[CommType, int, int]]):
    """Thread 1 and stream 7; per ``(kind, pg, peer)`` of ``comms`` a kernel on the stream
    carrying that communication (size 8), then one kernel without; ``pgs`` its groups."""
    b = GraphBuilder(rank=0, world_size=2)
    b.thread(1)
    st = b.stream(7)
    for name in pgs:
        b.process_group(name, (0, 1))
    for i, (kind, pg, peer) in enumerate(comms):
        c = b.comm(kind, 8, pg=pg, seq_id=i, peer_rank=peer)
        b.task(st, f"nccl{i}", 10, comm=c)
    b.task(st, "plain", 10)
    return b.build().validate()


def test_comms_follow_their_tasks_and_process_groups_are_matched_by_name():
    """Part 0: group ``pg_a``; an all-reduce on it and a send to rank 1 without a group.
    Part 1: groups ``pg_b`` (new: merged 1) and ``pg_a`` (merged 0); an all-gather on
    ``pg_b``, a send on ``pg_a``, a receive without a group. Part 2: no groups, one receive
    without a group (merging such a part used to fail: the group lookup had no entry).
    Comms are concatenated (part 1's from 2, part 2's at 5) and the tasks point at them."""
    parts = [
        _comms_part(("pg_a",), [(CommType.ALL_REDUCE, 0, -1), (CommType.SEND, -1, 1)]),
        _comms_part(
            ("pg_b", "pg_a"),
            [(CommType.ALL_GATHER, 0, -1), (CommType.SEND, 1, 1), (CommType.RECV, -1, 1)],
        ),
        _comms_part((), [(CommType.RECV, -1, 1)]),
    ]
    merged = merge_graphs(parts).validate()
    assert merged.process_groups == (ProcessGroup("pg_a", (0, 1)), ProcessGroup("pg_b", (0, 1)))
    c = merged.comms
    assert c.kind.tolist() == [
        int(k)
        for k in (
            CommType.ALL_REDUCE, CommType.SEND, CommType.ALL_GATHER, CommType.SEND,
            CommType.RECV, CommType.RECV,
        )
    ]  # fmt: skip
    assert c.pg_idx.tolist() == [0, -1, 1, 0, -1, -1]
    assert c.seq_id.tolist() == [0, 1, 0, 1, 2, 0]
    assert c.peer_rank.tolist() == [-1, 1, -1, 1, 1, 1]
    assert merged.tasks.comm_idx.tolist() == [0, 1, -1, 2, 3, 4, -1, 5, -1]
    assert merged.tasks.order.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_localize_makes_messages_between_merged_stages_free_and_readdresses_the_others():
    """Merged ranks 0 and 1 (stages 0 and 1, k = 2, new rank 0) on one thread: ``op_a``,
    ``send`` to rank 1 (a merged stage: local), ``op_b``, ``recv`` from rank 2 (stage 2: new
    rank 2 // 2 = 1), ``all_reduce`` with peer 0 (not point-to-point: untouched), ``send`` to
    rank 9 (no known stage: -k // k = -1). The local send takes 0 ns, becomes a CPU op
    without its message; the thread's gaps 40, 30, 5, 3, 2 have median 5, so the two gaps
    next to the local send shrink to 5 and the others stay; the stream's 1000 ns gap is
    not a thread gap (it would move the median to 17) and the launch edge's 100 ns from the
    send is not a gap either: both stay. One message made local."""
    b = GraphBuilder(rank=0, world_size=4)
    th, st = b.thread(1), b.stream(7)
    send, recv, ar, far = (b.comm(CommType.SEND, 8, peer_rank=1), b.comm(CommType.RECV, 8, peer_rank=2),
                           b.comm(CommType.ALL_REDUCE, 8, peer_rank=0),
                           b.comm(CommType.SEND, 8, peer_rank=9))  # fmt: skip
    b.task(th, "op_a", 10)
    t1 = b.task(th, "send", 50, TaskKind.COMM, gap_ns=40, comm=send)
    b.task(th, "op_b", 10, gap_ns=30)
    b.task(th, "recv", 20, TaskKind.COMM, gap_ns=5, comm=recv)
    b.task(th, "all_reduce", 15, TaskKind.COMM, gap_ns=3, comm=ar)
    b.task(th, "send_far", 25, TaskKind.COMM, gap_ns=2, comm=far)
    k0 = b.task(st, "k0", 7)
    b.task(st, "k1", 7, gap_ns=1000)
    b.edge(t1, k0, DepKind.LAUNCH, 100)
    g = b.build()
    out, n = _localize(g, {0: 0, 1: 1}, {0: 0, 1: 1, 2: 2, 3: 3}, 2, 0)
    assert n == 1
    assert out.tasks.dur_ns.tolist() == [10, 0, 10, 20, 15, 25, 7, 7]
    cpu, comm = int(TaskKind.CPU_OP), int(TaskKind.COMM)
    assert out.tasks.kind.tolist() == [cpu, cpu, cpu, comm, comm, comm,
                                       int(TaskKind.KERNEL), int(TaskKind.KERNEL)]  # fmt: skip
    assert out.tasks.comm_idx.tolist() == [-1, -1, -1, recv, ar, far, -1, -1]
    assert out.comms.peer_rank.tolist() == [1, 1, 0, -1]
    assert list(zip(out.edges.src.tolist(), out.edges.dst.tolist(), out.edges.delay_ns.tolist(),
                    strict=True)) == [(0, 1, 5), (1, 2, 5), (2, 3, 5), (3, 4, 3), (4, 5, 2),
                                      (6, 7, 1000), (1, 6, 100)]  # fmt: skip
    # the inputs are not changed in place
    assert g.tasks.dur_ns[1] == 50 and g.edges.delay_ns[0] == 40


def test_no_gap_before_steps_drops_only_thread_gaps_into_a_step_s_first_task():
    """Thread gaps 4, 6, 50, 7 before tasks 1 to 4; steps start at tasks 0 and 3, a user span
    at task 2 and a step with no first task (-1): only the gap into task 3 (50) becomes 0. A
    stream gap (9) into a kernel that a step names as its first task stays: only thread
    program order is the gap between steps."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    ts = [b.task(th, f"op{i}", 10, gap_ns=gap) for i, gap in enumerate((0, 4, 6, 50, 7))]
    k0 = b.task(st, "k0", 5)
    k1 = b.task(st, "k1", 5, gap_ns=9)
    b.annotate("ProfilerStep#0", th, ts[0], ts[2])
    b.annotate("ProfilerStep#1", th, ts[3], ts[4])
    b.annotate("user", th, ts[2], ts[2], kind=AnnotationKind.USER)
    b.annotate("ProfilerStep#2", th, -1, -1)
    b.annotate("ProfilerStep#3", st, k1, k1)
    g = b.build()
    out = _no_gap_before_steps(g)
    assert out.edges.delay_ns.tolist() == [4, 6, 0, 7, 9]
    assert out.edges.dst.tolist() == [1, 2, 3, 4, k1] and k0 == 5
    assert g.edges.delay_ns.tolist() == [4, 6, 50, 7, 9]
