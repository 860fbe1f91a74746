"""CommCost in the simulator: modelled collectives on a two-rank workload, by hand."""

from __future__ import annotations

from lumos.cost.collectives import Link
from lumos.cost.comm_model import CommCost
from lumos.graph.kinds import CommType, TaskKind
from lumos.graph.model import Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim.engine import simulate

LINK = Link(bw_bytes_per_s=50e9, latency_ns=500)


def two_rank(kind=CommType.ALL_REDUCE, size=1 << 20, pg_name="0"):
    """compute (10 / 50 ns) -> 1 MiB all_reduce (traced 100 / 60 ns) -> after (7 ns)."""
    graphs = []
    for rank, arrive, dur in ((0, 10, 100), (1, 50, 60)):
        b = GraphBuilder(rank=rank, world_size=2)
        st = b.stream(20)
        pg = b.process_group(pg_name, (0, 1))
        b.task(st, "compute", arrive)
        c = b.comm(kind, size, pg, seq_id=1, wait_ns=50 - arrive)
        b.task(st, "ncclAllReduce", dur, TaskKind.COMM, comm=c)
        b.task(st, "after", 7)
        graphs.append(b.build().validate())
    return Workload(tuple(graphs))


# ring all_reduce over 2 ranks: 2 steps x 500 = 1000; 2*1/2 * 1048576 / 50 B/ns = 20971.52
# -> 20972; the collective starts at the last arrival (50) and ends at 50 + 21972 = 22022
MODELLED = 21_972


def test_two_rank_step_by_hand():
    model = CommCost(LINK, algorithm="ring")
    r = simulate(two_rank(), model)
    for rank in (0, 1):
        assert r.starts(rank)[1] == 50
        assert r.ends(rank).tolist()[1:] == [50 + MODELLED, 50 + MODELLED + 7]
    assert model.diagnostics.count("comm_modelled") == 1


def test_single_rank_drops_recorded_waiting():
    r = simulate(two_rank().graphs[0], CommCost(LINK, algorithm="ring"))
    assert r.end_ns.tolist() == [10, 10 + MODELLED, 10 + MODELLED + 7]


def test_slow_link_paces_the_group_and_group_size_override():
    r = simulate(two_rank(), CommCost(LINK, algorithm="ring", link={1: 2.0}))
    assert r.ends(0)[1] == 50 + 1000 + 2 * 20972  # bandwidth term x 2
    # dp = 4 ranks: 6 steps x 500 = 3000; 2*3/4 * 1048576 / 50 = 31457.28 -> 31457
    r = simulate(two_rank(pg_name="dp"), CommCost(LINK, algorithm="ring", group_size={"dp": 4}))
    assert r.ends(0)[1] == 50 + 3000 + 31457


def test_unknown_size_or_kind_keeps_traced_transfer():
    for w in (two_rank(size=0), two_rank(kind=CommType.UNKNOWN)):
        model = CommCost(LINK)
        r = simulate(w, model)
        assert r.ends(0)[1] == 50 + 60  # as traced: duration less its wait
        assert model.diagnostics.total == 1
