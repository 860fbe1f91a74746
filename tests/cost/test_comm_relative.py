"""``RelativeCommCost.factors`` and ``group_size`` on hand-built graphs, ratios worked by hand.

Link: 50e9 bytes/s, 500 ns per step; n = 1 MiB = 1,048,576 bytes. ``auto`` picks the ring for
an all-reduce of 1 MiB and ``direct`` for a send.
"""

from __future__ import annotations

import numpy as np

from lumos.cost.collectives import Link
from lumos.cost.comm_relative import RelativeCommCost, group_size
from lumos.graph.kinds import CommType, TaskKind
from lumos.graph.synthetic import GraphBuilder

LINK = Link(bw_bytes_per_s=50e9, latency_ns=500)
MIB = 1 << 20

# all_reduce ring over 4 ranks: 6 steps x 500 = 3000; 2*3/4 n / 50 B/ns = 31457.28 -> 31457;
# a link 3x slower: 31457 x 3 = 94371
ALL_REDUCE_4_SLOW3 = (3000 + 94_371) / (3000 + 31_457)
# a send (one step, n / 50 B/ns = 20971.52 -> 20972): 500 + 62916 over 500 + 20972
SEND_SLOW3 = (500 + 62_916) / (500 + 20_972)
# all_reduce ring over 2 ranks: 2 steps = 1000; 2*1/2 n / 50 = 20972; x3: 62916
ALL_REDUCE_2_SLOW3 = (1000 + 62_916) / (1000 + 20_972)


def four_ranks():
    """Rank 0 of 4, all in process group "0": compute, an all-reduce of 1 MiB, a send of 1 MiB
    to rank 1 (in that group, as pipeline sends of the default group are)."""
    b = GraphBuilder(rank=0, world_size=4)
    st = b.stream(7)
    pg = b.process_group("0", (0, 1, 2, 3))
    b.task(st, "gemm", 100)
    b.task(st, "ncclAllReduce", 40_000, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, MIB, pg))
    send = b.comm(CommType.SEND, MIB, pg, peer_rank=1)
    b.task(st, "ncclSend", 30_000, TaskKind.COMM, comm=send)
    return b.build().validate()


def test_a_send_is_paced_by_its_own_two_ranks_not_by_its_group():
    """A slow rank 2 slows the all-reduce of the group it is in, not a send from 0 to 1 (which
    is left as traced and not counted as covered); a slow rank 1 slows both."""
    g = four_ranks()
    factor, covered, kept = RelativeCommCost(LINK, link={2: 3.0}).factors(g)
    assert factor.tolist() == [1.0, ALL_REDUCE_4_SLOW3, 1.0]
    assert covered.dtype == np.bool_ and covered.tolist() == [False, True, False]
    assert kept == {}
    factor, covered, _ = RelativeCommCost(LINK, link={1: 3.0}).factors(g)
    assert factor.tolist() == [1.0, ALL_REDUCE_4_SLOW3, SEND_SLOW3]
    assert covered.tolist() == [False, True, True]


def test_a_group_the_trace_does_not_list_is_the_world_even_of_two():
    """A collective naming no process group in a 2-rank job is job-wide: group size 2 whatever
    the data-parallel degree given, so a slow rank 1 slows it (x 63916 / 21972); only a trace
    stating no world (world size 1) falls back to the degree."""
    b = GraphBuilder(rank=0, world_size=2)
    st = b.stream(7)
    b.task(st, "ncclAllReduce", 40_000, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, MIB))
    g = b.build().validate()
    assert group_size(g, 0, 8) == 2
    assert group_size(g, 0, 1) == 2
    factor, covered, _ = RelativeCommCost(LINK, link={1: 3.0}).factors(g)
    assert factor.tolist() == [ALL_REDUCE_2_SLOW3]
    assert covered.tolist() == [True]

    b = GraphBuilder(rank=0, world_size=1)
    st = b.stream(7)
    b.task(st, "ncclAllReduce", 40_000, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, MIB))
    assert group_size(b.build().validate(), 0, 8) == 8
