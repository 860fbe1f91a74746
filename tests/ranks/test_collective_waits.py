"""Each collective participant's wait for its peers, from the recording
(``lumos.graph.build_ranks.align_ranks``, stored in ``Comms.wait_ns``).

Two ranks written here, each running three all-reduces (sequence numbers 0, 1, 2 of one
process group) on stream 7. On one clock (the recordings overlap) a participant waited from
its arrival to the group's last; on clocks that cannot be compared (the recordings never
overlap, and no single offset makes the collectives end together) each waited its duration
less the group's shortest.
"""

from __future__ import annotations

import pytest

from lumos.graph.build import align_ranks
from lumos.graph.build_ranks import rank_clock_offsets, shared_clock_origin
from lumos.graph.model import CommType, ExecGraph, TaskKind
from lumos.graph.synthetic import GraphBuilder

US = 1_000
S = 1_000_000_000


def _rank(rank: int, starts_ns: list[int], durs_ns: list[int]) -> ExecGraph:
    b = GraphBuilder(rank=rank, world_size=2)
    pg = b.process_group("0", (0, 1))
    stream = b.stream(7)
    for seq, (ts, dur) in enumerate(zip(starts_ns, durs_ns, strict=True)):
        c = b.comm(CommType.ALL_REDUCE, 1 << 20, pg, seq_id=seq)
        b.task(stream, "ncclDevKernel_AllReduce", dur, TaskKind.COMM, ts_ns=ts, comm=c)
    return b.build()


def _waits(graphs: tuple[ExecGraph, ...]) -> list[list[int]]:
    return [g.comms.wait_ns[g.tasks.comm_idx].tolist() for g in graphs]


RANK0 = ([10 * US, 30 * US, 50 * US], [5 * US, 8 * US, 4 * US])  # ends 15, 38, 54 us


def _rank1_far() -> ExecGraph:
    """Rank 1 on a clock of its own: collectives 7, 3 and 4 us long ending 1.0, 1.5 and 2.0 s
    after rank 0's."""
    ends = [15 * US + 1 * S, 38 * US + 3 * S // 2, 54 * US + 2 * S]
    durs = [7 * US, 3 * US, 4 * US]
    return _rank(1, [e - d for e, d in zip(ends, durs, strict=True)], durs)


def test_on_one_clock_each_waited_from_its_arrival_to_the_last():
    """Rank 1 starts at 12, 30 and 51 us and ends at 16, 38 and 54 us: the recordings overlap,
    the collectives already overlap (no clock moved). Rank 0 arrived 2 us before rank 1 at the
    first and 1 us before it at the third, and waited that long; rank 1 arrived last at all
    three and never waited. (Duration less the shortest would give rank 0 1 us, not 2, at
    the first.)"""
    graphs = (_rank(0, *RANK0), _rank(1, [12 * US, 30 * US, 51 * US], [4 * US, 8 * US, 3 * US]))
    assert rank_clock_offsets(graphs) is None and shared_clock_origin(graphs) == 10 * US
    assert _waits(align_ranks(graphs)) == [[2 * US, 0, 1 * US], [0, 0, 0]]


def test_on_clocks_that_cannot_be_compared_each_waited_its_duration_less_the_shortest():
    """Rank 1's collectives (7, 3 and 4 us long) end 1.0, 1.5 and 2.0 s after rank 0's: its
    recording starts after rank 0's ends, and the best single offset (the median, 1.5 s)
    leaves two of the three collectives apart, so the clocks are left alone and cannot be
    compared. Each member waited its duration less the group's shortest: 5 - 5 and 7 - 5 us
    at the first, 8 - 3 and 3 - 3 us at the second, 4 - 4 at the third."""
    graphs = (_rank(0, *RANK0), _rank1_far())
    assert rank_clock_offsets(graphs) is None and shared_clock_origin(graphs) is None
    out = align_ranks(graphs)
    assert _waits(out) == [[0, 5 * US, 0], [2 * US, 0, 0]]
    assert not any(g.diagnostics.count("rank_clock_moved") for g in out)


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["ranks-in-order", "rank-1-first"])
def test_the_waits_follow_each_rank_whatever_order_the_graphs_come_in(order):
    """The same two recordings on incomparable clocks, in either order: each graph keeps its
    own waits (rank 0: 0, 5, 0 us; rank 1: 2, 0, 0 us)."""
    ranks = (_rank(0, *RANK0), _rank1_far())
    out = align_ranks(tuple(ranks[r] for r in order))
    want = {0: [0, 5 * US, 0], 1: [2 * US, 0, 0]}
    assert [g.rank for g in out] == list(order)
    assert _waits(out) == [want[r] for r in order]
