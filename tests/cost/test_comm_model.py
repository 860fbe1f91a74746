"""CommCost in the simulator: modelled collectives on a two-rank workload, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.cost.collectives import Link
from lumos.cost.comm_model import CommCost
from lumos.errors import SimulationError
from lumos.graph.kinds import CommType, TaskKind
from lumos.graph.model import Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim.engine import simulate

LINK = Link(bw_bytes_per_s=50e9, latency_ns=500)


def two_rank(kind=CommType.ALL_REDUCE, size=1 << 20, pg_name="0", pg_ranks=(0, 1)):
    """compute (10 / 50 ns) -> 1 MiB all_reduce (traced 100 / 60 ns) -> after (7 ns); with
    ``pg_name=None`` the collective names no process group."""
    graphs = []
    for rank, arrive, dur in ((0, 10, 100), (1, 50, 60)):
        b = GraphBuilder(rank=rank, world_size=2)
        st = b.stream(20)
        pg = -1 if pg_name is None else b.process_group(pg_name, pg_ranks)
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


# --- each option reaches the model; exact messages and diagnostics --------------------------
def _end(workload, model) -> int:
    return int(simulate(workload, model).ends(0)[1])


def test_the_defaults_are_the_auto_algorithm_and_the_simple_protocol():
    model = CommCost(LINK)
    assert model.diagnostics.total == 0  # a fresh model has counted nothing
    assert _end(two_rank(), model) == 50 + MODELLED  # auto picks the ring here


def test_algorithm_and_protocol_are_passed_to_the_model():
    # tree over 2 ranks: 42,943 ns; the LL128 protocol (auto algorithm): 23,370 ns
    assert _end(two_rank(), CommCost(LINK, algorithm="tree")) == 50 + 42_943
    assert _end(two_rank(), CommCost(LINK, protocol="ll128")) == 50 + 23_370


def test_group_size_applies_only_to_the_kinds_to_resize():
    w = two_rank(pg_name="dp")
    resized = 50 + 3000 + 31457  # 4 ranks (see test_slow_link_paces_the_group...)
    assert _end(w, CommCost(LINK, group_size={"dp": 4}, resize_kinds=(CommType.ALL_REDUCE,))) == (
        resized
    )
    assert _end(w, CommCost(LINK, group_size={"dp": 4}, resize_kinds=(CommType.ALL_GATHER,))) == (
        50 + MODELLED
    )


def test_a_collective_without_a_named_group_is_job_wide():
    """No process group: the world size (2), or the override keyed ``""``; a group that lists
    no ranks is the world too."""
    assert _end(two_rank(pg_name=None), CommCost(LINK)) == 50 + MODELLED
    assert _end(two_rank(pg_name=None), CommCost(LINK, group_size={"": 4})) == 50 + 3000 + 31457
    assert _end(two_rank(pg_ranks=()), CommCost(LINK)) == 50 + MODELLED


def test_a_faster_link_and_a_group_of_one_are_valid():
    # bandwidth term 20,972 x 0.5 = 10,486; a 1-rank all-reduce moves nothing: 0 ns
    assert _end(two_rank(), CommCost(LINK, link={0: 0.5, 1: 0.5})) == 50 + 1000 + 10_486
    assert _end(two_rank(pg_name="dp"), CommCost(LINK, group_size={"dp": 1})) == 50


def test_bad_options_are_named_exactly():
    import pytest

    from lumos.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        CommCost(LINK, link={1: 0.0})
    assert str(err.value) == "link factor of rank 1 must be positive, got 0.0"
    with pytest.raises(ConfigError) as err:
        CommCost(LINK, group_size={"dp": 0})
    assert str(err.value) == "group size of 'dp' must be >= 1, got 0"


def test_each_kept_collective_is_counted_by_its_reason():
    model = CommCost(LINK)
    simulate(two_rank(kind=CommType.UNKNOWN), model)
    assert model.diagnostics.count("comm_kept_traced_unknown_kind") == 1
    simulate(two_rank(size=0), model)
    assert model.diagnostics.count("comm_kept_traced_unknown_size") == 1
    assert _end(two_rank(size=1), model) == 50 + 1000  # one byte is a known size
    assert model.diagnostics.count("comm_modelled") == 1


LAB = 'gpus_per_node = 4\nintra_bw = "100GB/s"\nintra_latency = "2us"\n'


def test_the_estimate_factory_builds_the_relative_model_it_names(tmp_path):
    """``comm_model_for(path, "tree")`` reads the TOML topology once and gives every scenario a
    RelativeCommCost on it with that algorithm, the scenario's link factors and ``dp`` as
    (recorded, new); the name is the topology's own (``name = "lab"``), else, when the file
    names it "", the path given."""
    from lumos.cost.comm_model import comm_model_for
    from lumos.cost.comm_relative import RelativeCommCost
    from lumos.cost.topology import Topology
    from lumos.estimate import parse_scenario

    lab = Topology(name="lab", gpus_per_node=4, intra_bw_bytes_per_s=100e9,
                   intra_latency_ns=2000)  # fmt: skip
    named, unnamed = tmp_path / "t.toml", tmp_path / "u.toml"
    named.write_text(LAB + 'name = "lab"\n')
    unnamed.write_text(LAB + 'name = ""\n')
    cost, name = comm_model_for(str(named), "tree")(two_rank(), parse_scenario(["dp=8"]), 2)
    assert isinstance(cost, RelativeCommCost) and name == "comm:lab/tree relative to dp=2"
    assert (cost.network, cost.algorithm, cost.protocol) == (lab, "tree", "simple")
    assert (cost.dp, cost.link) == ((2, 8), {})
    cost, name = comm_model_for(str(unnamed), "ring")(two_rank(), parse_scenario(["link=1:2"]))
    assert name == f"comm:{unnamed}/ring relative to the recording"
    assert (cost.network.name, cost.algorithm, cost.dp, cost.link) == ("", "ring", None, {1: 2.0})


def test_durations_model_each_communication_task_of_known_kind_and_size():
    """``durations`` on one graph (rank 0 of 2): the NCCL all-reduce of 1 MiB in group (0, 1)
    and a gloo one (CPU_COMM) naming no group (the world, 2) cost the modelled 21,972 ns; a
    kernel that names a collective row, a COMM task without one, an UNKNOWN collective and
    one of size 0 keep their traced times. With ``link={0: 2.0}`` both modelled ones pay
    1000 + 2 x 20,972 (rank 0 is in the group, and is the gloo task's only known rank); with
    ``{1: 2.0}`` only the grouped one does. Each call counts afresh."""
    b = GraphBuilder(rank=0, world_size=2)
    st, th = b.stream(20), b.thread(1)
    pg = b.process_group("0", (0, 1))
    b.task(st, "compute", 10)
    b.task(st, "ncclAllReduce", 100, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, 1 << 20, pg))
    b.task(st, "gemm", 500, TaskKind.KERNEL, comm=b.comm(CommType.ALL_REDUCE, 1 << 20, pg))
    b.task(st, "ncclKernel", 700, TaskKind.COMM)
    b.task(th, "gloo:all_reduce", 5000, TaskKind.CPU_COMM,
           comm=b.comm(CommType.ALL_REDUCE, 1 << 20))  # fmt: skip
    b.task(st, "nccl?", 900, TaskKind.COMM, comm=b.comm(CommType.UNKNOWN, 1 << 20, pg))
    b.task(st, "ncclAllReduce", 800, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, 0, pg))
    b.task(st, "after", 7)
    g = b.build()
    traced = g.tasks.dur_ns.tolist()
    model = CommCost(LINK, algorithm="ring")
    for _ in range(2):
        dur = model.durations(g)
        assert dur.dtype == np.int64
        assert dur.tolist() == [10, MODELLED, 500, 700, MODELLED, 900, 800, 7]
        assert model.diagnostics.count("comm_modelled") == 2
        assert model.diagnostics.count("comm_kept_traced_unknown_kind") == 1
        assert model.diagnostics.count("comm_kept_traced_unknown_size") == 1
        assert model.diagnostics.total == 4
    assert g.tasks.dur_ns.tolist() == traced  # the graph is not changed
    slow = 1000 + 2 * 20_972
    assert CommCost(LINK, algorithm="ring", link={0: 2.0}).durations(g).tolist() == [
        10, slow, 500, 700, slow, 900, 800, 7]  # fmt: skip
    assert CommCost(LINK, algorithm="ring", link={1: 2.0}).durations(g).tolist() == [
        10, slow, 500, 700, MODELLED, 900, 800, 7]  # fmt: skip


class _Table:
    """A lookup-table fallback: traced durations, and the same stored transfer array on every
    call (one value per participant, or per group, as the CostModel protocol allows)."""

    def __init__(self, table):
        self.table = np.array(table, dtype=np.int64)

    def durations(self, graph):
        return graph.tasks.dur_ns

    def transfer_ns(self, workload, groups, durations):
        return self.table


def _three_groups():
    """Ranks 0 and 1 each run a kernel (10 ns), an all-reduce of unknown size (0), an
    all-reduce of 1 MiB in group (0, 1) and a kernel (7 ns); the groups are built by hand, as a
    test double may: the two kernels, the two unknown all-reduces, the two known ones."""
    from lumos.graph.algorithms import CollectiveGroups

    graphs = []
    for rank in (0, 1):
        b = GraphBuilder(rank=rank, world_size=2)
        st = b.stream(20)
        pg = b.process_group("0", (0, 1))
        b.task(st, "gemm", 10)
        b.task(st, "ncclAllReduce", 60, TaskKind.COMM,
               comm=b.comm(CommType.ALL_REDUCE, 0, pg, seq_id=1))  # fmt: skip
        b.task(st, "ncclAllReduce", 90, TaskKind.COMM,
               comm=b.comm(CommType.ALL_REDUCE, 1 << 20, pg, seq_id=2))  # fmt: skip
        b.task(st, "after", 7)
        graphs.append(b.build().validate())
    groups = CollectiveGroups(
        indptr=np.array([0, 2, 4, 6], dtype=np.int64),
        member_graph=np.array([0, 1, 0, 1, 0, 1], dtype=np.int32),
        member_task=np.array([0, 0, 1, 1, 2, 2], dtype=np.int32),
        group_of=(np.array([0, 1, 2, -1], dtype=np.int32),) * 2,
        keys=(("k",), ("u",), ("c",)),
    )
    return Workload(tuple(graphs)), groups


def test_transfer_is_modelled_per_group_and_the_fallbacks_array_is_left_alone():
    """Per participant, in group order: a group with a task that is not communication (the
    kernels) and a collective of unknown size keep the fallback's values, whether given per
    participant (1-4, also as a column of 6 x 1) or per group (7, 8: repeated for each
    member); the known all-reduce that follows them is modelled for both ranks (21,972 ns).
    The fallback's stored table is never written into, so a second call gives the same."""
    w, groups = _three_groups()
    durations = tuple(g.tasks.dur_ns for g in w.graphs)
    for table, expected in (
        ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, MODELLED, MODELLED]),
        ([[1], [2], [3], [4], [5], [6]], [1, 2, 3, 4, MODELLED, MODELLED]),
        ([7, 8, 9], [7, 7, 8, 8, MODELLED, MODELLED]),
    ):
        fallback = _Table(table)
        model = CommCost(LINK, algorithm="ring", fallback=fallback)
        for _ in range(2):
            out = model.transfer_ns(w, groups, durations)
            assert out.dtype == np.int64 and out.tolist() == expected
            assert model.diagnostics.count("comm_modelled") == 1
            assert model.diagnostics.count("comm_kept_traced_unknown_size") == 1
            assert model.diagnostics.total == 2
        assert fallback.table.tolist() == table


def test_a_fallback_with_the_wrong_number_of_transfer_times_is_refused_naming_it():
    """Three groups of two participants take 3 values (one per group) or 6 (one per
    participant, also as a column); 5 or 4 values are refused with one SimulationError (a
    LumosError) naming the fallback's class, its shape and both counts, not numpy's
    ValueError from a reshape."""
    w, groups = _three_groups()
    durations = tuple(g.tasks.dur_ns for g in w.graphs)
    for table, shape in (([1, 2, 3, 4, 5], "(5,)"), ([[1, 2], [3, 4]], "(2, 2)")):
        model = CommCost(LINK, algorithm="ring", fallback=_Table(table))
        with pytest.raises(SimulationError) as err:
            model.transfer_ns(w, groups, durations)
        assert str(err.value) == (
            f"fallback cost model _Table returned {shape} transfer times for 3 collectives "
            "with 6 participants"
        )
