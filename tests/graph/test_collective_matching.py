"""Collectives matched across ranks (``lumos.graph.algorithms.match_collectives``).

Two-rank workloads built with :class:`~lumos.graph.synthetic.GraphBuilder`; every expected
group, key and warning follows from the matching rules in ``match_collectives``'s docstring.
"""

from __future__ import annotations

from lumos.graph.algorithms import match_collectives
from lumos.graph.model import CommType, TaskKind, Workload
from lumos.graph.synthetic import GraphBuilder


def _rank(
    rank: int,
    kinds: list[CommType],
    seqs: list[int],
    ts_ns: list[int] | None = None,
    ranks: tuple[int, ...] = (0, 1),
) -> tuple[GraphBuilder, list[int]]:
    """One rank's graph: its collectives on one stream of process group "0" of ``ranks``
    (world size: the largest rank + 1), 10 ns each, recorded at ``ts_ns`` (default 100 ns
    apart) in list order."""
    b = GraphBuilder(rank=rank, world_size=max(ranks) + 1)
    st = b.stream(20)
    pg = b.process_group("0", ranks)
    starts = ts_ns if ts_ns is not None else [100 * i for i in range(len(kinds))]
    tasks = [
        b.task(st, "nccl", 10, TaskKind.COMM, comm=b.comm(kind, 1024, pg, seq_id=seq), ts_ns=t)
        for kind, seq, t in zip(kinds, seqs, starts, strict=True)
    ]
    return b, tasks


def test_a_group_without_seq_ids_matches_its_collectives_by_order_numbered_from_zero():
    """Process group "0" has no seq ids on rank 1, so the whole group falls back to order of
    appearance (rank 0's seq ids 7 and 8 are not used): the k-th collective on each rank is
    group k, keyed ``("coll", "0", "order", k)`` for k = 0, 1, 2 — one group per collective,
    both ranks in each, in rank order."""
    ar = [CommType.ALL_REDUCE] * 3
    b0, t0 = _rank(0, ar, [7, 8, 9])
    b1, t1 = _rank(1, ar, [-1, -1, -1])
    g = match_collectives(Workload((b0.build(), b1.build())))
    assert g.keys == (("coll", "0", "order", 0), ("coll", "0", "order", 1),
                      ("coll", "0", "order", 2))  # fmt: skip
    assert g.indptr.tolist() == [0, 2, 4, 6]
    assert g.member_graph.tolist() == [0, 1, 0, 1, 0, 1]
    assert g.member_task.tolist() == [t0[0], t1[0], t0[1], t1[1], t0[2], t1[2]]
    assert g.diagnostics.count("collective_kind_mismatch") == 0


def test_ranks_that_disagree_on_a_collectives_kind_are_counted_once_per_group():
    """Seq ids 0 and 1 on both ranks: two groups keyed by seq id. Seq 0 is an all-reduce on
    rank 0 and an all-gather on rank 1 (Chakra numbers 0 and 2): one
    ``collective_kind_mismatch``, whose example names group 0, its key and both kinds; seq 1
    agrees."""
    b0, _ = _rank(0, [CommType.ALL_REDUCE, CommType.ALL_REDUCE], [0, 1])
    b1, _ = _rank(1, [CommType.ALL_GATHER, CommType.ALL_REDUCE], [0, 1])
    g = match_collectives(Workload((b0.build(), b1.build())))
    assert g.keys == (("coll", "0", "seq", 0), ("coll", "0", "seq", 1))
    assert g.sizes().tolist() == [2, 2]
    assert g.diagnostics.count("collective_kind_mismatch") == 1
    assert g.diagnostics.example("collective_kind_mismatch") == (
        "group 0 key ('coll', '0', 'seq', 0) kinds [0, 2]"
    )


def test_sends_match_receives_by_direction_and_ordinal_and_an_unpaired_one_stands_alone():
    """Rank 0 sends to rank 1 at 0, 100 and 200 ns; the one at 100 ns is marked unpaired
    (``P2P_UNPAIRED``), so it is a group of its own keyed by graph and task and takes no
    ordinal. Rank 1 receives from rank 0 twice. A send from 0 to 1 and a receive on 1 from 0
    share the direction (0, 1), so the k-th of each match: keys ``("p2p", "0", 0, 1, k)``
    for k = 0, 1, in order of first appearance (rank 0's rows first)."""
    from lumos.graph.algorithms import P2P_UNPAIRED

    def rank(r: int, kind: CommType, seqs: list[int]) -> tuple[GraphBuilder, list[int]]:
        b = GraphBuilder(rank=r, world_size=2)
        st = b.stream(20)
        pg = b.process_group("0", (0, 1))
        tasks = [
            b.task(st, "nccl", 10, TaskKind.COMM, ts_ns=100 * i,
                   comm=b.comm(kind, 64, pg, seq_id=seq, peer_rank=1 - r))
            for i, seq in enumerate(seqs)
        ]  # fmt: skip
        return b, tasks

    b0, t0 = rank(0, CommType.SEND, [-1, P2P_UNPAIRED, -1])
    b1, t1 = rank(1, CommType.RECV, [-1, -1])
    g = match_collectives(Workload((b0.build(), b1.build())))
    assert g.keys == (("p2p", "0", 0, 1, 0), ("p2p-unpaired", 0, t0[1]), ("p2p", "0", 0, 1, 1))
    assert g.indptr.tolist() == [0, 2, 3, 5]
    assert g.member_graph.tolist() == [0, 1, 0, 0, 1]
    assert g.member_task.tolist() == [t0[0], t1[0], t0[1], t0[2], t1[1]]
    assert g.group_of[0].tolist() == [0, 1, 2] and g.group_of[1].tolist() == [0, 2]
    assert len(g.diagnostics.to_dict()) == 0


def test_only_communication_tasks_carrying_a_comm_are_matched_and_a_rank_without_any_is_skipped():
    """Ranks 0, 1, 2. Rank 0 has a kernel that names comm row 0 (not a communication kind) and
    a COMM task naming no comm row: neither is matched, so rank 0 adds no row (and the ranks
    after it are still read). Rank 1 runs all-reduce seq 4 as a COMM kernel and a plain kernel;
    rank 2 runs all-reduce seq 4 as a CPU_COMM span on a thread, then all-reduce seq 6 that no
    other rank has. Expected: group 0 = seq 4 on ranks 1 and 2, group 1 = seq 6 on rank 2
    alone (groups of one are listed); every other task is in no group (-1); the index arrays
    have the documented dtypes."""
    import numpy as np

    b0 = GraphBuilder(rank=0, world_size=3)
    st0 = b0.stream(7)
    pg0 = b0.process_group("0", (0, 1, 2))
    b0.task(st0, "gemm", 10, TaskKind.KERNEL, comm=b0.comm(CommType.ALL_REDUCE, 8, pg0, 4))
    b0.task(st0, "nccl", 10, TaskKind.COMM, ts_ns=20)
    b1 = GraphBuilder(rank=1, world_size=3)
    st1 = b1.stream(7)
    pg1 = b1.process_group("0", (0, 1, 2))
    b1.task(st1, "nccl", 10, TaskKind.COMM, comm=b1.comm(CommType.ALL_REDUCE, 8, pg1, 4))
    b1.task(st1, "gemm", 10, TaskKind.KERNEL, ts_ns=20)
    b2 = GraphBuilder(rank=2, world_size=3)
    th2 = b2.thread(1)
    pg2 = b2.process_group("0", (0, 1, 2))
    b2.task(th2, "gloo", 10, TaskKind.CPU_COMM, comm=b2.comm(CommType.ALL_REDUCE, 8, pg2, 4))
    b2.task(th2, "gloo", 10, TaskKind.CPU_COMM, ts_ns=50,
            comm=b2.comm(CommType.ALL_REDUCE, 8, pg2, 6))  # fmt: skip
    g = match_collectives(Workload((b0.build(), b1.build(), b2.build())))
    assert g.keys == (("coll", "0", "seq", 4), ("coll", "0", "seq", 6))
    assert g.num_groups == 2 and g.sizes().tolist() == [2, 1]
    assert g.indptr.tolist() == [0, 2, 3] and g.indptr.dtype == np.int64
    assert g.member_graph.tolist() == [1, 2, 2] and g.member_graph.dtype == np.int32
    assert g.member_task.tolist() == [0, 0, 1] and g.member_task.dtype == np.int32
    assert isinstance(g.group_of, tuple)
    assert [x.tolist() for x in g.group_of] == [[-1, -1], [0, -1], [0, 1]]
    assert all(x.dtype == np.int32 for x in g.group_of)
    assert len(g.diagnostics.to_dict()) == 0


def test_collectives_fall_back_to_recorded_start_then_task_index_and_sends_do_not_count():
    """Process group "0" on ranks 0 and 1 (graphs in rank order). Rank 0 records its three
    all-reduces (no seq ids) at 300, 100, 100 ns in task order 0, 1, 2: by start, then task
    index, its order is task 1, task 2, task 0. Rank 1 records tasks 0, 1, 2 at 0, 10, 20 ns.
    So the k-th groups are (0:1, 1:0), (0:2, 1:1), (0:0, 1:2), keyed ``("coll", "0", "order",
    k)``. Process group "1" holds a send from rank 0 to 1 and its receive (seq -1, as p2p
    usually is) and a reduce-scatter with seq id 9 on both ranks: missing p2p seq ids do not
    send "1" to the fallback, so the collective keys on its seq id; the send and receive pair
    as ``("p2p", "1", 0, 1, 0)`` without a kind-mismatch warning. Rank 1's third order-group
    member is a barrier (Chakra 9) where rank 0 has an all-reduce: one warning for group 2."""
    b0 = GraphBuilder(rank=0, world_size=2)
    st0 = b0.stream(7)
    a0, b_0 = b0.process_group("0", (0, 1)), b0.process_group("1", (0, 1))
    for ts in (300, 100, 100):
        b0.task(st0, "ar", 10, TaskKind.COMM, ts_ns=ts, comm=b0.comm(CommType.ALL_REDUCE, 8, a0))
    b0.task(st0, "send", 10, TaskKind.COMM, ts_ns=400,
            comm=b0.comm(CommType.SEND, 8, b_0, peer_rank=1))  # fmt: skip
    b0.task(st0, "rs", 10, TaskKind.COMM, ts_ns=500,
            comm=b0.comm(CommType.REDUCE_SCATTER, 8, b_0, seq_id=9))  # fmt: skip
    b1 = GraphBuilder(rank=1, world_size=2)
    st1 = b1.stream(7)
    a1, b_1 = b1.process_group("0", (0, 1)), b1.process_group("1", (0, 1))
    for ts, kind in ((0, CommType.ALL_REDUCE), (10, CommType.ALL_REDUCE), (20, CommType.BARRIER)):
        b1.task(st1, "ar", 10, TaskKind.COMM, ts_ns=ts, comm=b1.comm(kind, 8, a1))
    b1.task(st1, "recv", 10, TaskKind.COMM, ts_ns=400,
            comm=b1.comm(CommType.RECV, 8, b_1, peer_rank=0))  # fmt: skip
    b1.task(st1, "rs", 10, TaskKind.COMM, ts_ns=500,
            comm=b1.comm(CommType.REDUCE_SCATTER, 8, b_1, seq_id=9))  # fmt: skip
    g = match_collectives(Workload((b0.build(), b1.build())))
    assert g.keys == (
        ("coll", "0", "order", 0), ("coll", "0", "order", 1), ("coll", "0", "order", 2),
        ("p2p", "1", 0, 1, 0), ("coll", "1", "seq", 9),
    )  # fmt: skip
    assert g.indptr.tolist() == [0, 2, 4, 6, 8, 10]
    assert g.member_graph.tolist() == [0, 1] * 5
    assert g.member_task.tolist() == [1, 0, 2, 1, 0, 2, 3, 3, 4, 4]
    assert [x.tolist() for x in g.group_of] == [[2, 0, 1, 3, 4], [0, 1, 2, 3, 4]]
    assert g.diagnostics.to_dict() == {
        "collective_kind_mismatch": {
            "count": 1,
            "example": "group 2 key ('coll', '0', 'order', 2) kinds [0, 9]",
        }
    }


def test_a_rank_twice_under_one_key_is_warned_and_its_later_task_stands_alone():
    """Ranks 3 and 5 (graphs 0 and 1). Rank 3 records all-reduce seq 1 at 0 ns, an
    all-gather also claiming seq 1 at 100 ns, then seq 2 at 200 ns; rank 5 records seq 1 and
    seq 2. The all-gather is rank 3's second task under ``("coll", "0", "seq", 1)``: one
    ``collective_duplicate_rank`` naming rank 3, task 1 and the key; the task becomes group
    ``("dup", 0, 1)`` of its own, listed where it was met (after seq 1, before seq 2), and
    matching goes on: seq 1 and seq 2 pair ranks 3 and 5. A duplicate group is not checked
    for kinds, and seq 1 itself agrees (all-reduce on both), so no mismatch is warned. Barriers
    (Chakra 9) with seq 7 on rank 3 and an all-gather (2) on rank 5 mismatch: the example
    lists the kinds sorted, [2, 9]."""
    ar, ag = CommType.ALL_REDUCE, CommType.ALL_GATHER
    b0, _ = _rank(3, [ar, ag, ar, CommType.BARRIER], [1, 1, 2, 7], ranks=(3, 5))
    b1, _ = _rank(5, [ar, ar, ag], [1, 2, 7], [0, 200, 300], ranks=(3, 5))
    g = match_collectives(Workload((b1.build(), b0.build())))
    assert g.keys == (("coll", "0", "seq", 1), ("dup", 0, 1), ("coll", "0", "seq", 2),
                      ("coll", "0", "seq", 7))  # fmt: skip
    assert g.indptr.tolist() == [0, 2, 3, 5, 7]
    assert g.member_graph.tolist() == [0, 1, 0, 0, 1, 0, 1]
    assert g.member_task.tolist() == [0, 0, 1, 2, 1, 3, 2]
    assert [x.tolist() for x in g.group_of] == [[0, 1, 2, 3], [0, 2, 3]]
    assert g.diagnostics.to_dict() == {
        "collective_duplicate_rank": {
            "count": 1,
            "example": "rank 3 task 1 key ('coll', '0', 'seq', 1)",
        },
        "collective_kind_mismatch": {
            "count": 1,
            "example": "group 3 key ('coll', '0', 'seq', 7) kinds [2, 9]",
        },
    }
