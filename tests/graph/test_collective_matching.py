"""Collectives matched across ranks (``lumos.graph.algorithms.match_collectives``).

Two-rank workloads built with :class:`~lumos.graph.synthetic.GraphBuilder`; every expected
group, key and warning follows from the matching rules in ``match_collectives``'s docstring.
"""

from __future__ import annotations

from lumos.graph.algorithms import match_collectives
from lumos.graph.model import CommType, TaskKind, Workload
from lumos.graph.synthetic import GraphBuilder


def _rank(rank: int, kinds: list[CommType], seqs: list[int]) -> tuple[GraphBuilder, list[int]]:
    """One rank's graph: its collectives on one stream of process group "0", 10 ns each,
    recorded 100 ns apart in list order."""
    b = GraphBuilder(rank=rank, world_size=2)
    st = b.stream(20)
    pg = b.process_group("0", (0, 1))
    tasks = [
        b.task(
            st, "nccl", 10, TaskKind.COMM, comm=b.comm(kind, 1024, pg, seq_id=seq), ts_ns=100 * i
        )
        for i, (kind, seq) in enumerate(zip(kinds, seqs, strict=True))
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
