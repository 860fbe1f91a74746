"""A recorded GPipe pipeline re-ordered to 1F1B: each send issued together with the receive after
it (Megatron's ``batch_isend_irecv``), as a real 1F1B run does; with the trace's blocking
send-then-receive, both stages would send first and wait for each other forever."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.errors import ConfigError, SimulationError
from lumos.estimate import estimate, parse_scenario
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.reorder import batch_sends, rebuild_in_order, reorder_blocks
from lumos.estimate.reshape import reshape_workload
from lumos.graph.kinds import AnnotationKind, CommType, DepKind, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload
from lumos.sim import simulate
from lumos.sim.cost import TracedCost

# 2 stages (rank 0 first), 4 micro-batches, 3 recorded steps, GPipe with blocking send/recv
RUN = Path(__file__).parents[1] / "data" / "whatif_pairs" / "pp_microbatches_x2_B"


def _issue_order(g):
    """Sends and receives in the order the main thread issues them: a batched send where the
    thread issued it (right after the task its issue edge comes from)."""
    t, e = g.tasks, g.edges
    lane = np.array(["batched sends" in lb for lb in g.processors.label])
    where = t.order.astype(np.float64)
    issue = (e.kind == int(DepKind.INTER_THREAD)) & lane[t.processor_idx[e.dst]]
    where[e.dst[issue]] = t.order[e.src[issue]] + 0.5
    assert lane[t.processor_idx[e.dst[issue]]].all()
    p2p = np.flatnonzero(t.comm_idx >= 0)
    kinds = g.comms.kind[t.comm_idx[p2p]]
    p2p = p2p[np.isin(kinds, [int(CommType.SEND), int(CommType.RECV)])]
    p2p = p2p[np.argsort(where[p2p], kind="stable")]
    kinds = g.comms.kind[t.comm_idx[p2p]]
    return "".join("S" if k == int(CommType.SEND) else "R" for k in kinds.tolist())


def test_1f1b_runs_each_stage_in_its_order_with_sends_batched():
    workload, _ = build_workload([str(RUN)])
    edited, edits = reshape_workload(workload, detect_baseline(workload, None), {}, "1f1b")
    simulate(edited, TracedCost())  # no deadlock
    # F1 F2 B1 F3 B2 F4 B3 B4 on stage 0 (forwards send, backwards receive) and
    # F1 B1 F2 B2 F3 B3 F4 B4 on stage 1 (forwards receive, backwards send), every step
    assert _issue_order(edited.graphs[0]) == "SSRSRSRR" * 3
    assert _issue_order(edited.graphs[1]) == "RSRSRSRS" * 3
    assert (edits[-1].name, edits[-1].model) == ("schedule 1f1b", "micro-batch blocks re-ordered")
    # a send followed by a receive: 3 per stage and step
    assert edits[-1].detail.endswith("; 18 sends issued together with the receive after them")
    labels = [lb for g in edited.graphs for lb in g.processors.label if "batched sends" in lb]
    assert len(labels) == 2


def test_1f1b_keeps_gpipes_step_on_two_balanced_stages():
    # with p = 2 both schedules idle (p-1)/(m+p-1) of the step; re-ordering moves no work
    workload, _ = build_workload([str(RUN)])
    est = estimate(
        workload, [parse_scenario(["schedule=gpipe"]), parse_scenario(["schedule=1f1b"])]
    )
    _, gpipe, one_f_one_b = est.rows
    assert abs(one_f_one_b.step_ns / gpipe.step_ns - 1) < 0.10
    assert one_f_one_b.edits[-1]["detail"].endswith(
        "18 sends issued together with the receive after them"
    )


def _two_processors(dims: bool):
    """Thread: ``a`` (ts 10), ``b`` (ts 30, 5 ns after ``a``), ``send`` (ts 50, 3 ns after
    ``b``, comm 0); stream: ``k1`` (ts 30, launched by ``a`` 1 ns after), ``k2`` (ts 55, 2 ns
    after ``k1``, launched by ``b``). Waits: ``send`` on the event recorded by ``b``, ``b`` on
    the one recorded by ``a``, ``send`` on the stream; spans ``a..a``, ``a..b``, ``b..send``,
    ``send..send`` and one on no task; with ``dims``, shapes ``0, -1, 1, -1, 0``."""
    bld = GraphBuilder(rank=0, world_size=2)
    th, st = bld.thread(1), bld.stream(7)
    a = bld.task(th, "a", 10, ts_ns=10)
    b = bld.task(th, "b", 10, gap_ns=5, ts_ns=30)
    comm = bld.comm(CommType.SEND, 64, peer_rank=1)
    send = bld.task(th, "send", 10, TaskKind.CPU_COMM, gap_ns=3, ts_ns=50, comm=comm)
    k1 = bld.task(st, "k1", 8, ts_ns=30)
    k2 = bld.task(st, "k2", 8, gap_ns=2, ts_ns=55)
    bld.edge(a, k1, DepKind.LAUNCH, 1)
    bld.edge(b, k2, DepKind.LAUNCH)
    bld.wait(send, WaitKind.EVENT, stream=st, record=b)
    bld.wait(b, WaitKind.EVENT, stream=st, record=a)
    bld.wait(send, WaitKind.STREAM, stream=st)
    for name, first, last in (("a", a, a), ("ab", a, b), ("b-send", b, send),
                              ("send", send, send), ("nothing", -1, -1)):  # fmt: skip
        bld.annotate(name, th, first, last, kind=AnnotationKind.USER)
    g = bld.build()
    if dims:
        g = g.replace(dims=("[[1]]", "[[2]]"), task_dims_idx=np.array([0, -1, 1, -1, 0], np.int32))
    return g.validate()


@pytest.mark.parametrize("dims", [True, False])
def test_rebuilt_in_a_new_order_every_task_keeps_its_columns_and_dependencies(dims):
    """The thread runs ``a, send, b`` (old 0, 2, 1), the stream as before: new indices
    ``a 0, b 2, send 1, k1 3, k2 4`` (integers: they index). The launches keep their tasks
    and delay (0 -> 3 with 1 ns, 2 -> 4), then program order is regenerated, each task keeping
    the overhead before it: ``send`` 3 ns after ``a``, ``b`` 5 ns after ``send``, ``k2`` 2 ns
    after ``k1``. Start times: a group's first task keeps its start, the others follow by their
    old gaps (``send`` 20 after ``b``'s 30 -> 30, ``b`` 20 after ``a`` -> 50; ``k2`` 25 after
    ``k1``). The waits move with their tasks and records (``send`` 1 on ``b`` 2, ``b`` 2 on
    ``a`` 0, ``send`` 1 on no record); the span ``b..send`` now ends before it starts and is
    dropped, ``a..a`` and the one on no task are kept; the comm and the shapes go with their
    tasks."""
    g = _two_processors(dims)
    out, new_of = rebuild_in_order(g, np.array([0, 2, 1, 3, 4]))
    out.validate()
    assert new_of.tolist() == [0, 2, 1, 3, 4]
    assert new_of.dtype == np.int64
    t = out.tasks
    assert [out.task_name(i) for i in range(5)] == ["a", "send", "b", "k1", "k2"]
    assert t.processor_idx.tolist() == [0, 0, 0, 1, 1]
    assert t.order.tolist() == [0, 1, 2, 0, 1]
    assert t.ts_ns.tolist() == [10, 30, 50, 30, 55]
    assert t.dur_ns.tolist() == [10, 10, 10, 8, 8]
    assert t.kind.tolist() == [int(k) for k in (TaskKind.CPU_OP, TaskKind.CPU_COMM,
                                                TaskKind.CPU_OP, TaskKind.KERNEL,
                                                TaskKind.KERNEL)]  # fmt: skip
    assert t.comm_idx.tolist() == [-1, 0, -1, -1, -1]
    e = out.edges
    edges = list(zip(e.src.tolist(), e.dst.tolist(), e.kind.tolist(), e.delay_ns.tolist(),
                     strict=True))  # fmt: skip
    launch, thread, stream = (
        int(DepKind.LAUNCH),
        int(DepKind.INTRA_THREAD),
        int(DepKind.INTRA_STREAM),
    )
    assert edges == [(0, 3, launch, 1), (2, 4, launch, 0), (0, 1, thread, 3), (1, 2, thread, 5),
                     (3, 4, stream, 2)]  # fmt: skip
    w = out.waits
    assert w.task_idx.tolist() == [1, 2, 1]
    assert w.record_task_idx.tolist() == [2, 0, -1]
    assert w.kind.tolist() == [int(WaitKind.EVENT), int(WaitKind.EVENT), int(WaitKind.STREAM)]
    a = out.annotations
    assert [out.names[i] for i in a.name_idx.tolist()] == ["a", "ab", "send", "nothing"]
    assert a.first_task_idx.tolist() == [0, 0, 1, -1]
    assert a.last_task_idx.tolist() == [0, 2, 1, -1]
    if dims:
        assert out.dims == ("[[1]]", "[[2]]")
        assert out.task_dims_idx.tolist() == [0, 1, -1, -1, 0]
    else:
        assert out.task_dims_idx is None


def test_a_span_from_the_first_task_that_now_ends_before_it_is_dropped():
    """One thread ``a, b`` with a span ``a..b``, rebuilt as ``b, a``: the span would end
    (new 0) before it starts (new 1), so it is dropped."""
    bld = GraphBuilder()
    th = bld.thread(1)
    a, b = bld.task(th, "a", 10), bld.task(th, "b", 10)
    bld.annotate("ab", th, a, b, kind=AnnotationKind.USER)
    out, new_of = rebuild_in_order(bld.build().validate(), np.array([1, 0]))
    assert new_of.tolist() == [1, 0]
    assert len(out.annotations) == 0


def test_a_graph_without_program_order_edges_keeps_its_launch():
    """A thread holding one op that launches the stream's one kernel (2 ns after): no
    program-order edge to regenerate, the launch edge is kept as it was (integer columns)."""
    bld = GraphBuilder()
    th, st = bld.thread(1), bld.stream(7)
    bld.edge(bld.task(th, "a", 10), bld.task(st, "k", 8), DepKind.LAUNCH, 2)
    out, _ = rebuild_in_order(bld.build().validate(), np.array([0, 1]))
    e = out.validate().edges
    assert (e.src.tolist(), e.dst.tolist()) == ([0], [1])
    assert (e.kind.tolist(), e.delay_ns.tolist()) == ([int(DepKind.LAUNCH)], [2])


@pytest.mark.parametrize("tail", [True, False])
def test_a_batched_send_is_issued_after_the_op_before_it_and_waited_for_after_the_receive(tail):
    """One thread: ``a`` (10 ns), a send (3 ns of overhead before it), a receive (4 ns), and
    with ``tail`` an op ``b`` (5 ns) after the receive. The send moves to a lane of its own
    (the thread's rows first: a 0, receive 1, b 2; the lane's send 3 with ``tail``, 2
    without). Added: the issue edge a -> send with the send's 3 ns of overhead, and, when an op
    follows the receive, the wait edge send -> that op (0 ns); a receive that ends the thread
    has nothing after it to hold. On the thread each op keeps the overhead before it."""
    bld = GraphBuilder(rank=0, world_size=2)
    th = bld.thread(1)
    send = bld.comm(CommType.SEND, 1024, peer_rank=1)
    recv = bld.comm(CommType.RECV, 1024, peer_rank=1)
    bld.task(th, "a", 10)
    bld.task(th, "gloo:send", 50, TaskKind.CPU_COMM, gap_ns=3, comm=send)
    bld.task(th, "gloo:recv", 40, TaskKind.CPU_COMM, gap_ns=4, comm=recv)
    if tail:
        bld.task(th, "b", 10, gap_ns=5)
    g = bld.build().validate()
    out, n = batch_sends(g)
    out.validate()
    assert n == 1
    assert out.processors.label == ("thread 1", "thread 1: batched sends")
    lane_send = 3 if tail else 2
    assert [out.task_name(i) for i in range(out.num_tasks)] == (
        ["a", "gloo:recv", "b", "gloo:send"] if tail else ["a", "gloo:recv", "gloo:send"]
    )
    e = out.edges
    inter = e.kind == int(DepKind.INTER_THREAD)
    added = sorted(
        zip(e.src[inter].tolist(), e.dst[inter].tolist(), e.delay_ns[inter].tolist(), strict=True)
    )
    assert added == ([(0, 3, 3), (3, 2, 0)] if tail else [(0, lane_send, 3)])
    intra = e.kind == int(DepKind.INTRA_THREAD)
    on_thread = sorted(
        zip(e.src[intra].tolist(), e.dst[intra].tolist(), e.delay_ns[intra].tolist(), strict=True)
    )
    assert on_thread == ([(0, 1, 4), (1, 2, 5)] if tail else [(0, 1, 4)])


def test_with_every_each_peer_gets_a_lane_of_its_own():
    """One thread of rank 0 of 3: ``a``, a send to rank 1, a send to rank 2, a send to rank 1,
    ``b``. With ``every`` all 3 sends move off the thread and nothing waits for them; sends to
    different peers do not queue behind each other, so rank 1's two sends share one lane
    (processor 1, in their order) and rank 2's send has its own (processor 2)."""
    bld = GraphBuilder(rank=0, world_size=3)
    th = bld.thread(1)
    bld.task(th, "a", 10)
    for peer in (1, 2, 1):
        comm = bld.comm(CommType.SEND, 1024, peer_rank=peer)
        bld.task(th, f"send to {peer}", 50, TaskKind.CPU_COMM, gap_ns=3, comm=comm)
    bld.task(th, "b", 10, gap_ns=5)
    out, n = batch_sends(bld.build().validate(), every=True)
    out.validate()
    assert n == 3
    assert out.processors.label == ("thread 1", *["thread 1: batched sends"] * 2)
    where = sorted(
        (int(out.tasks.processor_idx[i]), int(out.tasks.order[i]), out.task_name(i))
        for i in range(out.num_tasks)
    )
    assert where == [
        (0, 0, "a"),
        (0, 1, "b"),
        (1, 0, "send to 1"),
        (1, 1, "send to 1"),
        (2, 0, "send to 2"),
    ]


def test_a_re_ordered_pipeline_that_cannot_finish_says_why(monkeypatch):
    """Whatever stops the simulation of a re-ordered schedule is reported as a deadlock of
    the schedule, in one message naming the scenario, why lumos's orders can wait forever, and
    the simulator's own words after it (here a stand-in: the real replay of this run finishes)."""
    import lumos.estimate.run as run

    row = run._row

    def stuck(edited, s, *args, **kwargs):
        if s.schedule is not None:
            raise SimulationError("stage 1 waits for a send")
        return row(edited, s, *args, **kwargs)

    monkeypatch.setattr(run, "_row", stuck)
    workload, _ = build_workload([str(RUN)])
    with pytest.raises(SimulationError) as err:
        estimate(workload, [parse_scenario(["schedule=1f1b"])])
    assert str(err.value) == (
        "schedule=1f1b: the re-ordered pipeline deadlocks: a stage waits for a send or receive "
        "its neighbour never reaches (lumos issues a send together with the receive right after "
        "it, as batch_isend_irecv does, in 1f1b orders, and every send without blocking in "
        "interleaved ones). (stage 1 waits for a send)"
    )


def _blocks_on_two_processors():
    """A thread ``x A1 A2 y B1 B2 z`` (tasks 0-6) and a stream ``kA m kB`` (7-9); block 0 is
    ``A1 A2 kA``, block 1 ``B1 B2 kB``, each listed out of program order."""
    bld = GraphBuilder()
    th, st = bld.thread(1), bld.stream(7)
    for name in ("x", "A1", "A2", "y", "B1", "B2", "z"):
        bld.task(th, name, 10)
    for name in ("kA", "m", "kB"):
        bld.task(st, name, 5)
    return bld.build().validate(), [np.array([7, 2, 1]), np.array([5, 9, 4])]


def test_blocks_run_in_the_new_order_from_where_the_first_began_on_each_processor():
    """Order ``[1, 0]``: on the thread, at ``A1`` (the first block task) come block 1's
    ``B1 B2`` then block 0's ``A1 A2``, each in program order, and the tasks between them
    (``y``) and after (``z``) follow; on the stream ``kB kA`` at ``kA``'s place, then ``m``.
    New indices: x 0, B1 1, B2 2, A1 3, A2 4, y 5, z 6, kB 7, kA 8, m 9."""
    g, blocks = _blocks_on_two_processors()
    out, new_of = reorder_blocks(g, blocks, [1, 0])
    assert [out.task_name(i) for i in range(10)] == [
        "x", "B1", "B2", "A1", "A2", "y", "z", "kB", "kA", "m"]  # fmt: skip
    assert new_of.tolist() == [0, 3, 4, 5, 1, 2, 6, 8, 9, 7]
    assert out.tasks.processor_idx.tolist() == [0] * 7 + [1] * 3
    same, _ = reorder_blocks(g, blocks, [0, 1])
    assert [same.task_name(i) for i in range(10)] == [
        "x", "A1", "A2", "B1", "B2", "y", "z", "kA", "kB", "m"]  # fmt: skip


@pytest.mark.parametrize("order", [[0, 0], [1], [0, 1, 2], [1, 2]])
def test_an_order_that_is_not_a_permutation_of_the_blocks_is_refused(order):
    """A repeated, missing, extra or out-of-range block index: one ConfigError saying so."""
    g, blocks = _blocks_on_two_processors()
    with pytest.raises(ConfigError) as err:
        reorder_blocks(g, blocks, order)
    assert str(err.value) == "reorder_blocks: order must be a permutation of the blocks"


def test_no_blocks_on_an_empty_graph_is_an_empty_graph():
    """No task, no block: an empty graph and an empty integer index."""
    out, new_of = reorder_blocks(GraphBuilder().build(), [], [])
    assert (out.num_tasks, new_of.tolist(), new_of.dtype) == (0, [], np.int64)


def _sends_graph():
    """Thread A (tid 1; processor 0): 0 a, 1 send (3 ns before it, peer 1), 2 recv (4), 3 b
    (5), 4 send (6, peer 1), 5 c (7), 6 recv (8), 7 send (9, peer 1), 8 send (2, peer 2).
    Thread B (tid 5, pid 3; processor 1): 9 send (peer 0), 10 recv (4). Stream 7 (processor
    2): 11 a send kernel, 12 a receive kernel. Edges: 1 -> 3 (the send's own thread resumes,
    INTER_THREAD), 1 -> 10 (INTER_THREAD to the other thread), 4 -> 5 (SYNC, 1 ns), 9 -> 3
    (INTER_THREAD from B's send to A)."""
    bld = GraphBuilder(rank=0, world_size=3)
    a, b_, s = bld.thread(1), bld.thread(5, pid=3), bld.stream(7)

    def comm(kind, peer=1):
        return bld.comm(kind, 1024, peer_rank=peer)

    S, R = CommType.SEND, CommType.RECV
    bld.task(a, "a", 10)
    for name, gap, c in [("send1", 3, comm(S)), ("recv1", 4, comm(R)), ("b", 5, -1),
                         ("send2", 6, comm(S)), ("c", 7, -1), ("recv2", 8, comm(R)),
                         ("send3", 9, comm(S)), ("send4", 2, comm(S, 2))]:  # fmt: skip
        bld.task(a, name, 10, TaskKind.CPU_COMM if c >= 0 else None, gap_ns=gap, comm=c)
    bld.task(b_, "sendB", 10, TaskKind.CPU_COMM, comm=comm(S, 0))
    bld.task(b_, "recvB", 10, TaskKind.CPU_COMM, gap_ns=4, comm=comm(R, 0))
    bld.task(s, "ksend", 10, comm=comm(S))
    bld.task(s, "krecv", 10, comm=comm(R))
    bld.edge(1, 3, DepKind.INTER_THREAD)
    bld.edge(1, 10, DepKind.INTER_THREAD)
    bld.edge(4, 5, DepKind.SYNC, 1)
    bld.edge(9, 3, DepKind.INTER_THREAD)
    return bld.build().validate()


_IT, _TH = int(DepKind.INTER_THREAD), int(DepKind.INTRA_THREAD)
_SY, _ST = int(DepKind.SYNC), int(DepKind.INTRA_STREAM)


def _edge_rows(g):
    e = g.edges
    return list(
        zip(e.src.tolist(), e.dst.tolist(), e.kind.tolist(), e.delay_ns.tolist(), strict=True)
    )


def test_batch_sends_moves_each_send_followed_by_a_receive_and_rewires_it():
    """Pairs: on A send1 (next comm recv1) and send2 (next comm recv2, c between); send3 is
    followed by a send and send4 by nothing; on B sendB (the thread's first task); the stream's
    kernels are not on a thread. Lanes: processor 3 for A (pid 0, tid 7 + 1, its label),
    processor 4 for B (pid 3, tid 9). New tasks by processor and order: A ``0 2 3 5 6 7 8``
    (new 0-6), B ``10`` (7), stream ``11 12`` (8, 9), A's lane ``1 4`` (10, 11), B's lane
    ``9`` (12).

    Edges: 1 -> 3 is dropped (the thread no longer waits for its own moved send); 1 -> 10,
    4 -> 5, 9 -> 3 kept (10 -> 7, 11 -> 3, 12 -> 2); program order regenerated with each
    task's overhead, except on the lane (10 -> 11 with 0, not send2's 6). Added: issue edges
    a -> send1 (0 -> 10, 3 ns) and b -> send2 (2 -> 11, 6 ns) (sendB has no task before it),
    wait edges send1 -> b (10 -> 2) and send2 -> send3 (11 -> 5), the task after each
    receive (recvB ends B: none). 3 sends moved."""
    out, n = batch_sends(_sends_graph())
    out.validate()
    assert n == 3
    pr = out.processors
    assert pr.label == ("thread 1", "thread 5", "stream 7", "thread 1: batched sends",
                        "thread 5: batched sends")  # fmt: skip
    assert pr.kind.tolist()[3:] == [0, 0]
    assert (pr.pid.tolist()[3:], pr.tid.tolist()[3:], pr.device.tolist()[3:]) == (
        [0, 3], [8, 9], [-1, -1],
    )  # fmt: skip
    names = ["a", "recv1", "b", "c", "recv2", "send3", "send4", "recvB", "ksend", "krecv",
             "send1", "send2", "sendB"]  # fmt: skip
    assert [out.task_name(i) for i in range(out.num_tasks)] == names
    assert out.tasks.processor_idx.tolist() == [0] * 7 + [1, 2, 2, 3, 3, 4]
    assert out.tasks.order.tolist() == [0, 1, 2, 3, 4, 5, 6, 0, 0, 1, 0, 1, 0]
    assert _edge_rows(out) == [
        (10, 7, _IT, 0), (11, 3, _SY, 1), (12, 2, _IT, 0),
        (0, 1, _TH, 4), (1, 2, _TH, 5), (2, 3, _TH, 7), (3, 4, _TH, 8), (4, 5, _TH, 9),
        (5, 6, _TH, 2), (8, 9, _ST, 0), (10, 11, _TH, 0),
        (0, 10, _IT, 3), (2, 11, _IT, 6), (10, 2, _IT, 0), (11, 5, _IT, 0),
    ]  # fmt: skip


def test_batch_sends_moves_only_the_eligible_sends():
    """send2 (task 4) not eligible: send1 and sendB move (2); send2 stays on A between b and
    c. Nothing eligible: the graph comes back as it was, with 0."""
    g = _sends_graph()
    eligible = np.ones(g.num_tasks, dtype=bool)
    eligible[4] = False
    out, n = batch_sends(g, eligible)
    out.validate()
    assert n == 2
    assert [out.task_name(i) for i in np.flatnonzero(out.tasks.processor_idx >= 3)] == [
        "send1", "sendB",
    ]  # fmt: skip
    assert out.tasks.processor_idx.tolist() == [0] * 8 + [1, 2, 2, 3, 4]
    same, none = batch_sends(g, np.zeros(g.num_tasks, dtype=bool))
    assert same is g and none == 0


def test_batch_sends_every_moves_all_sends_to_a_lane_per_peer_and_waits_for_none():
    """With ``every``: A's sends to peer 1 (send1, send2, send3) share a lane (processor 3),
    send4 (peer 2) gets processor 4, sendB processor 5 (tids 8, 9, 10; pids 0, 0, 3). New
    tasks: A ``0 2 3 5 6`` (0-4), B ``10`` (5), stream (6, 7), lanes ``1 4 7`` (8-10), ``8``
    (11), ``9`` (12). Edges: 1 -> 3 dropped, 1 -> 10, 4 -> 5, 9 -> 3 kept; the lane's program
    order loses its overheads; issue edges from the task before each send with its overhead
    (send4's is send3, itself moved: 10 -> 11, 2 ns); no wait edges. 5 sends moved."""
    out, n = batch_sends(_sends_graph(), every=True)
    out.validate()
    assert n == 5
    pr = out.processors
    assert pr.label[3:] == ("thread 1: batched sends",) * 2 + ("thread 5: batched sends",)
    assert (pr.pid.tolist()[3:], pr.tid.tolist()[3:]) == ([0, 0, 3], [8, 9, 10])
    assert out.tasks.processor_idx.tolist() == [0] * 5 + [1, 2, 2, 3, 3, 3, 4, 5]
    assert [out.task_name(i) for i in range(8, 13)] == ["send1", "send2", "send3", "send4",
                                                         "sendB"]  # fmt: skip
    assert _edge_rows(out) == [
        (8, 5, _IT, 0), (9, 3, _SY, 1), (12, 2, _IT, 0),
        (0, 1, _TH, 4), (1, 2, _TH, 5), (2, 3, _TH, 7), (3, 4, _TH, 8), (6, 7, _ST, 0),
        (8, 9, _TH, 0), (9, 10, _TH, 0),
        (0, 8, _IT, 3), (2, 9, _IT, 6), (4, 10, _IT, 9), (10, 11, _IT, 2),
    ]  # fmt: skip


def test_batch_sends_every_moves_a_threads_only_send():
    """With ``every`` a thread with one communication, a send, still moves it (without, a
    lone send has no receive after it and stays)."""
    bld = GraphBuilder(rank=0, world_size=2)
    th = bld.thread(1)
    bld.task(th, "a", 10)
    bld.task(
        th, "send", 10, TaskKind.CPU_COMM, gap_ns=3, comm=bld.comm(CommType.SEND, 8, peer_rank=1)
    )
    g = bld.build().validate()
    out, n = batch_sends(g, every=True)
    assert n == 1 and out.tasks.processor_idx.tolist() == [0, 1]
    assert _edge_rows(out) == [(0, 1, _IT, 3)]
    assert batch_sends(g) == (g, 0)


def _three_threads():
    """Thread X (processor 0) without communication; Y (1): 1 send (peer 1), 2 all-reduce,
    3 recv; Z (2): 4 send (group 0, peer 2), 5 recv (1 ns before it), 6 send (group 1, peer
    1; 2 ns), 7 recv (3 ns)."""
    bld = GraphBuilder(rank=0, world_size=3)
    x, y, z = bld.thread(1), bld.thread(2), bld.thread(3)
    pg0, pg1 = bld.process_group("0", (0, 2)), bld.process_group("1", (0, 1))
    bld.task(x, "x", 10)
    bld.task(y, "ysend", 10, TaskKind.CPU_COMM, comm=bld.comm(CommType.SEND, 8, peer_rank=1))
    bld.task(y, "yar", 10, TaskKind.CPU_COMM, comm=bld.comm(CommType.ALL_REDUCE, 8))
    bld.task(y, "yrecv", 10, TaskKind.CPU_COMM, comm=bld.comm(CommType.RECV, 8, peer_rank=1))
    for name, gap, kind, pg, peer in [("zsendA", 0, CommType.SEND, pg0, 2),
                                      ("zrecvA", 1, CommType.RECV, pg0, 2),
                                      ("zsendB", 2, CommType.SEND, pg1, 1),
                                      ("zrecvB", 3, CommType.RECV, pg1, 1)]:  # fmt: skip
        c = bld.comm(kind, 8, pg=pg, peer_rank=peer)
        bld.task(z, name, 10, TaskKind.CPU_COMM, gap_ns=gap, comm=c)
    return bld.build().validate()


def test_batch_sends_pairs_a_send_only_with_the_very_next_communication():
    """X has no communication, Y's send is followed by an all-reduce (kind 0, a communication
    too), so neither moves; Z's two sends each precede a receive and move to one lane
    (processor 3), whatever their groups and peers. New tasks: x, Y's three, zrecvA, zrecvB,
    then the lane's zsendA, zsendB. Edges: program order (Z's zrecvA -> zrecvB keeps its 3 ns,
    the lane's zsendA -> zsendB loses 2), issue zrecvA -> zsendB (2 ns), wait zsendA -> the
    task after zrecvA, zsendB."""
    out, n = batch_sends(_three_threads())
    out.validate()
    assert n == 2
    assert [out.task_name(i) for i in range(8)] == ["x", "ysend", "yar", "yrecv", "zrecvA",
                                                    "zrecvB", "zsendA", "zsendB"]  # fmt: skip
    assert out.tasks.processor_idx.tolist() == [0, 1, 1, 1, 2, 2, 3, 3]
    assert _edge_rows(out) == [(1, 2, _TH, 0), (2, 3, _TH, 0), (4, 5, _TH, 3), (6, 7, _TH, 0),
                               (4, 7, _IT, 2), (6, 7, _IT, 0)]  # fmt: skip


def test_batch_sends_every_orders_lanes_by_group_then_peer():
    """With ``every``: Y's send gets lane 3; Z's sends one lane each, ordered by (group,
    peer): zsendA (group 0, peer 2) lane 4 before zsendB (group 1, peer 1) lane 5."""
    out, n = batch_sends(_three_threads(), every=True)
    out.validate()
    assert n == 3
    assert [out.task_name(i) for i in range(8)] == ["x", "yar", "yrecv", "zrecvA", "zrecvB",
                                                    "ysend", "zsendA", "zsendB"]  # fmt: skip
    assert out.tasks.processor_idx.tolist() == [0, 1, 1, 2, 2, 3, 4, 5]
