"""``RelativeCommCost.factors`` and ``group_size`` on hand-built graphs, ratios worked by hand.

Link: 50e9 bytes/s, 500 ns per step; n = 1 MiB = 1,048,576 bytes. ``auto`` picks the ring for
an all-reduce of 1 MiB and ``direct`` for a send.
"""

from __future__ import annotations

import numpy as np
import pytest

from lumos.cost.collectives import Link
from lumos.cost.comm_relative import RelativeCommCost, RetimeSummary, dp_collectives, group_size
from lumos.errors import ConfigError
from lumos.graph.kinds import CommType, TaskKind
from lumos.graph.model import Workload
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


def alone(size_bytes: int = MIB):
    """Rank 0 of a trace that states no world (world size 1) and no group: one all-reduce."""
    b = GraphBuilder(rank=0, world_size=1)
    st = b.stream(7)
    c = b.comm(CommType.ALL_REDUCE, size_bytes)
    b.task(st, "ncclAllReduce", 40_000, TaskKind.COMM, comm=c)
    return b.build().validate()


def test_without_dp_a_trace_stating_no_world_is_one_rank():
    """No ``dp`` and no world: the all-reduce's group is this rank alone. A slow rank 1 is not
    in it (left as traced, not covered); a slow rank 0 is, but one rank moves nothing (model
    time 0 before and after), so its factor is exactly 1.0, covered."""
    factor, covered, kept = RelativeCommCost(LINK, link={1: 3.0}).factors(alone())
    assert (factor.tolist(), covered.tolist(), kept) == ([1.0], [False], {})
    factor, covered, kept = RelativeCommCost(LINK, link={0: 3.0}).factors(alone())
    assert (factor.tolist(), covered.tolist(), kept) == ([1.0], [True], {})


def test_ratios_at_the_smallest_model_times():
    """On a 1 byte/ns link with no latency an all-reduce of 1 byte over 2 ranks takes n / B =
    1 ns (ring, 2 x 1/2 x 1 byte). A slow rank 1 (x3) makes it 3 ns: factor 3.0 (a 1 ns time
    is a time, not a failure of the model). Resizing a group of 1 (model time 0) to 2 (1 ns)
    has no ratio: kept as traced, counted; resizing 1 to 1 is 0 over 0: x1, covered."""
    fast = Link(bw_bytes_per_s=1e9, latency_ns=0)
    b = GraphBuilder(rank=0, world_size=2)
    st = b.stream(7)
    b.task(st, "ncclAllReduce", 40_000, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, 1))
    factor, covered, kept = RelativeCommCost(fast, link={1: 3.0}).factors(b.build().validate())
    assert (factor.tolist(), covered.tolist(), kept) == ([3.0], [True], {})
    factor, covered, kept = RelativeCommCost(fast, dp=(1, 2)).factors(alone(1))
    assert (factor.tolist(), covered.tolist()) == ([1.0], [False])
    assert kept == {"the model cannot time it": 1}
    factor, covered, kept = RelativeCommCost(fast, dp=(1, 1)).factors(alone(1))
    assert (factor.tolist(), covered.tolist(), kept) == ([1.0], [True], {})


def test_data_parallel_collectives_are_counted_by_whether_their_size_is_known():
    """Rank 0 of 4 in group (0, 1, 2, 3): an all-reduce and a broadcast of 1 MiB (known), an
    all-gather of size 0 (unknown), an all-to-all (not a data-parallel kind) and an all-reduce
    in the 2-rank group (0, 1) (not the degree): (2 known, 1 unknown) at degree 4; at degree 2
    only the pair's all-reduce, (1, 0)."""
    b = GraphBuilder(rank=0, world_size=4)
    st = b.stream(7)
    world, pair = b.process_group("0", (0, 1, 2, 3)), b.process_group("1", (0, 1))
    for kind, size, pg in ((CommType.ALL_REDUCE, MIB, world), (CommType.BROADCAST, MIB, world),
                           (CommType.ALL_GATHER, 0, world), (CommType.ALL_TO_ALL, MIB, world),
                           (CommType.ALL_REDUCE, MIB, pair)):  # fmt: skip
        b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(kind, size, pg))
    w = Workload((b.build().validate(),))
    assert dp_collectives(w, 4) == (2, 1)
    assert dp_collectives(w, 2) == (1, 0)


def test_summary_of_what_is_and_is_not_retimed():
    """Nothing covered (no scenario): no collective, factors x1 to x1 (not undefined); a slow
    rank 2 covers the group's all-reduce only (the send from 0 to 1 does not involve it), by
    97,371 / 34,457 = 2.8259 (module docstring's arithmetic), shown to 3 decimals."""
    w = Workload((four_ranks(),))
    none = RelativeCommCost(LINK).summary(w)
    assert none == RetimeSummary({}, 1.0, 1.0, {})
    assert none.describe() == "no collective re-timed"
    slow = RelativeCommCost(LINK, link={2: 3.0}).summary(w)
    assert slow == RetimeSummary({"all_reduce": 1}, ALL_REDUCE_4_SLOW3, ALL_REDUCE_4_SLOW3, {})
    assert slow.describe() == "1 collectives (all_reduce 1) x2.826-x2.826"


@pytest.mark.parametrize(("kw", "message"), [
    ({"dp": (0, 4)}, "data-parallel degrees must be >= 1, got (0, 4)"),
    ({"dp": (2, 0)}, "data-parallel degrees must be >= 1, got (2, 0)"),
    ({"link": {1: 0.0}}, "link factor of rank 1 must be positive, got 0.0"),
])  # fmt: skip
def test_bad_scenarios_are_refused_naming_the_value(kw, message):
    with pytest.raises(ConfigError) as err:
        RelativeCommCost(LINK, **kw)
    assert str(err.value) == message


# all_to_all direct over 4 ranks: 1 step = 500; 3/4 n / 50 B/ns = 15728.64 -> 15729; x3: 47187
ALL_TO_ALL_4_SLOW3 = (500 + 47_187) / (500 + 15_729)


def rank_one_of_four():
    """Rank 1 of 4 in group (0, 1, 2, 3); tasks in this order: a kernel that names a collective
    (not a communication task), an all-reduce of size 0, a collective of unknown kind, a send to
    rank 0, an all-to-all, a broadcast that records its root (rank 0) as its peer, and an
    all-reduce, each of 1 MiB unless said."""
    b = GraphBuilder(rank=1, world_size=4)
    st = b.stream(7)
    pg = b.process_group("0", (0, 1, 2, 3))
    b.task(st, "gemm", 100, TaskKind.KERNEL, comm=b.comm(CommType.ALL_REDUCE, MIB, pg))
    b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, 0, pg))
    b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(CommType.UNKNOWN, MIB, pg))
    b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(CommType.SEND, MIB, pg, peer_rank=0))
    b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(CommType.ALL_TO_ALL, MIB, pg))
    b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(CommType.BROADCAST, MIB, pg, peer_rank=0))
    b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, MIB, pg))
    return b.build().validate()


def test_every_task_is_judged_on_its_own():
    """A slow rank 2 (x3), with and without a data-parallel resize (4 -> 8), over
    :func:`rank_one_of_four`: the kernel is not communication (x1, not covered); the size-0
    all-reduce and the unknown collective are kept and counted (2); the send from 1 to 0 does
    not involve rank 2 (x1, not covered); the all-to-all (not data-parallel, so still over its
    4 ranks even with dp) is slowed by ALL_TO_ALL_4_SLOW3; the broadcast (its group includes
    rank 2; 3 steps x 500 and n / 50 = 20972 -> 62916 at x3) by 64416 / 22472; the all-reduce
    by ALL_REDUCE_4_SLOW3, or with dp 8 (14 x 500 = 7000, 2 x 7/8 n / 50 = 36700 -> 110100 at
    x3) by 117100 / 34457. Nothing stops at a task it skips or keeps."""
    g = rank_one_of_four()
    bcast = (1500 + 62_916) / (1500 + 20_972)
    factor, covered, kept = RelativeCommCost(LINK, link={2: 3.0}).factors(g)
    assert factor.tolist() == [1.0, 1.0, 1.0, 1.0, ALL_TO_ALL_4_SLOW3, bcast, ALL_REDUCE_4_SLOW3]
    assert covered.tolist() == [False, False, False, False, True, True, True]
    assert kept == {"kind or size unknown": 2}
    factor, covered, kept = RelativeCommCost(LINK, link={2: 3.0}, dp=(4, 8)).factors(g)
    assert factor.tolist() == [1.0, 1.0, 1.0, 1.0, ALL_TO_ALL_4_SLOW3,
                               (7 * 500 + 62_916) / (1500 + 20_972), 117_100 / 34_457]  # fmt: skip
    assert kept == {"kind or size unknown": 2}


def test_shrinking_or_untimeable_collectives():
    """dp 4 -> 1: the all-reduce and the broadcast (data-parallel kinds of the 4-rank group) take
    0 ns on one rank: factor 0.0, covered (a ratio below 1 is a ratio). With the tree algorithm
    and a slow rank 2, the all-to-all, which has no tree, is kept twice over (two of them) as
    "the model cannot time it", and the all-reduce after them is still re-timed: tree over 4
    ranks is 2 log2 4 = 4 steps (2000) and 2n / 50 = 41943 -> 125829 at x3."""
    g = rank_one_of_four()
    factor, covered, kept = RelativeCommCost(LINK, dp=(4, 1)).factors(g)
    assert factor.tolist() == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert covered.tolist() == [False, False, False, False, False, True, True]
    assert kept == {"kind or size unknown": 1}
    b = GraphBuilder(rank=1, world_size=4)
    st = b.stream(7)
    pg = b.process_group("0", (0, 1, 2, 3))
    for size in (MIB, 2 * MIB):
        b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(CommType.ALL_TO_ALL, size, pg))
    b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, MIB, pg))
    factor, covered, kept = RelativeCommCost(LINK, algorithm="tree", link={2: 3.0}).factors(
        b.build().validate())  # fmt: skip
    assert factor.tolist() == [1.0, 1.0, (2000 + 125_829) / (2000 + 41_943)]
    assert covered.tolist() == [False, False, True]
    assert kept == {"the model cannot time it": 2}


@pytest.mark.parametrize(("summary", "text"), [
    (RetimeSummary({"all_gather": 2, "all_reduce": 15}, 0.5, 3.4121,
                   {"kind or size unknown": 6, "the model cannot time it": 1}),
     "17 collectives (all_gather 2, all_reduce 15) x0.500-x3.412; kept as traced: 6 (kind or "
     "size unknown), 1 (the model cannot time it)"),
    (RetimeSummary({}, 1.0, 1.0, {"kind or size unknown": 2}),
     "no collective re-timed; kept as traced: 2 (kind or size unknown)"),
])  # fmt: skip
def test_a_summary_describes_every_kind_and_every_reason(summary, text):
    """Kinds and reasons each listed, comma-separated, in the order the summary holds them."""
    assert summary.describe() == text


def test_data_parallel_collectives_are_counted_over_every_graph():
    """Degree 2, every collective in group (0, 1). Rank 0: a GEMM kernel that names an
    all-reduce row (not communication: not counted), a COMM task with no row (not counted),
    an all-reduce of 1 byte and a broadcast of 64 (known), an all-gather and a reduce-scatter
    of size 0 (unknown); rank 1: a reduce-scatter of 1 MiB (known). Counts add over the
    graphs: (3 known, 2 unknown)."""
    b = GraphBuilder(rank=0, world_size=2)
    st = b.stream(7)
    pair = b.process_group("0", (0, 1))
    b.task(st, "gemm", 1000, TaskKind.KERNEL, comm=b.comm(CommType.ALL_REDUCE, MIB, pair))
    b.task(st, "ncclKernel", 1000, TaskKind.COMM)
    for kind, size in ((CommType.ALL_REDUCE, 1), (CommType.ALL_GATHER, 0),
                       (CommType.REDUCE_SCATTER, 0), (CommType.BROADCAST, 64)):  # fmt: skip
        b.task(st, "nccl", 1000, TaskKind.COMM, comm=b.comm(kind, size, pair))
    c = GraphBuilder(rank=1, world_size=2)
    st1 = c.stream(7)
    c.task(st1, "nccl", 1000, TaskKind.COMM,
           comm=c.comm(CommType.REDUCE_SCATTER, MIB, c.process_group("0", (0, 1))))  # fmt: skip
    w = Workload((b.build(), c.build()))
    assert dp_collectives(w, 2) == (3, 2)
    assert dp_collectives(Workload((c.build(),)), 2) == (1, 0)
