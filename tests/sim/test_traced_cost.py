"""``TracedCost.transfer_ns`` by hand: a collective's transfer is its duration less the waiting
the build recorded, in exact integer ns."""

from __future__ import annotations

import numpy as np

from lumos.graph.algorithms import CollectiveGroups
from lumos.graph.model import CommType, TaskKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim import TracedCost


def all_reduce(durs: tuple[int, ...], waits: tuple[int, ...]) -> Workload:
    """One all-reduce per rank (task 1 of each rank, after a 10 ns ``compute``), recorded
    ``durs[r]`` long with ``waits[r]`` of it spent waiting for peers."""
    graphs = []
    for rank, (dur, wait) in enumerate(zip(durs, waits, strict=True)):
        b = GraphBuilder(rank=rank, world_size=len(durs))
        st = b.stream(20)
        pg = b.process_group("0", tuple(range(len(durs))))
        b.task(st, "compute", 10)
        c = b.comm(CommType.ALL_REDUCE, 1 << 20, pg, seq_id=1, wait_ns=wait)
        b.task(st, "ncclAllReduce", dur, TaskKind.COMM, comm=c)
        graphs.append(b.build().validate())
    return Workload(tuple(graphs))


def transfers(w: Workload, groups: CollectiveGroups) -> list[int]:
    durations = tuple(g.tasks.dur_ns.astype(np.int64) for g in w.graphs)
    out = TracedCost().transfer_ns(w, groups, durations)
    assert out.dtype == np.int64
    return out.tolist()


def test_transfer_is_exact_in_integer_ns_beyond_float_precision() -> None:
    """2**53 + 1 ns (about 104 days) is the first integer float64 cannot hold: a transfer of
    ``dur - wait`` computed in integers keeps its last ns on both ranks (2**53 + 1 - 0 and
    2**53 + 1 - 2); through float64 they would come out 2**53 and 2**53 - 2."""
    big = 2**53 + 1
    w = all_reduce((big, big), (0, 2))
    groups = w.collective_groups()
    assert groups.sizes().tolist() == [2]
    assert transfers(w, groups) == [big, big - 2]


def test_a_member_without_a_comm_row_keeps_its_whole_duration() -> None:
    """The CostModel protocol takes any :class:`CollectiveGroups`; ``match_collectives`` lists only
    tasks with a comm row, but a group built by hand may hold one without: it has no recorded
    waiting, so its transfer is its whole duration (70), while rank 0 gives 100 - 30 = 70."""
    w = all_reduce((100, 70), (30, 0))
    g1 = w.graphs[1]
    g1 = g1.replace(tasks=g1.tasks.replace(comm_idx=np.array([-1, -1], dtype=np.int32)))
    w = Workload((w.graphs[0], g1))
    groups = CollectiveGroups(
        indptr=np.array([0, 2], dtype=np.int64),
        member_graph=np.array([0, 1], dtype=np.int32),
        member_task=np.array([1, 1], dtype=np.int32),
        group_of=(np.array([-1, 0], dtype=np.int32), np.array([-1, 0], dtype=np.int32)),
        keys=(("coll", "0", "seq", 1),),
    )
    assert transfers(w, groups) == [70, 70]
