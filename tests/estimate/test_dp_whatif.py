"""``dp`` and ``link`` what-ifs re-time the recorded transfers by the network model's ratio, new
over recorded (``lumos.cost.comm_relative``): the recorded degree gives the baseline to the ns,
a sweep moves communication one way, a trace that states no degree refuses."""

from __future__ import annotations

import json

import pytest
from tests.realdata import trace

from lumos.cli.main import main
from lumos.cost.collectives import collective_time
from lumos.cost.comm_model import comm_model_for
from lumos.cost.topology import preset
from lumos.errors import ConfigError
from lumos.estimate import estimate, parse_scenario
from lumos.graph.model import CommType, TaskKind, Workload
from lumos.graph.synthetic import GraphBuilder

NET = "dgx-a100"
MIB = 1 << 20


def t(kind: CommType, size: int, ranks: int) -> int:
    return collective_time(int(kind), size, ranks, preset(NET)).time_ns


def one_rank(*, world: int = 2, ranks: tuple[int, ...] = (0, 1), wait_ns: int = 300) -> Workload:
    """Rank 0 of a data-parallel job, traced alone: 1000 ns of compute, an all-reduce of 1 MiB
    recorded as 800 ns (``wait_ns`` of them waiting for the peer it does not show), 100 ns of
    compute after it on the same stream."""
    b = GraphBuilder(rank=0, world_size=world)
    st = b.stream(7)
    pg = b.process_group("0", ranks) if ranks else -1
    first = b.task(st, "gemm", 1000)
    c = b.comm(CommType.ALL_REDUCE, MIB, pg, seq_id=1, wait_ns=wait_ns)
    b.task(st, "ncclAllReduce", 800, TaskKind.COMM, comm=c)
    last = b.task(st, "gemm2", 100)
    b.annotate("ProfilerStep#1", st, first, last, dur_ns=1900)
    return Workload((b.build().validate(),))


def rows_of(w: Workload, *sets: str, **kw) -> list:
    scenarios = [parse_scenario([s]) for s in sets]
    return list(estimate(w, scenarios, comm_model=comm_model_for(NET), **kw).rows)


def test_the_recorded_degree_is_the_baseline_to_the_ns():
    base, same = rows_of(one_rank(), "dp=2")
    assert (same.step_ns, same.breakdown, same.rank_step_ns) == (
        base.step_ns, base.breakdown, base.rank_step_ns) == (1900, same.breakdown, ((0, 1900),))  # fmt: skip
    (edit,) = same.edits
    assert edit["edit"] == "communication re-timed (dp 2 -> 2)"
    assert edit["detail"].startswith("1 collectives (all_reduce 1) x1.000-x1.000;")


@pytest.mark.parametrize("dp", [4, 8, 16, 64])
def test_a_single_rank_keeps_its_waiting_and_scales_its_transfer(dp):
    """Recorded: 300 ns waiting for the peer + 500 ns of transfer. With dp=N the transfer is
    500 x t(N) / t(2); the waiting stays (the peers are not in the trace)."""
    _, row = rows_of(one_rank(), f"dp={dp}")
    transfer = round(500 * t(CommType.ALL_REDUCE, MIB, dp) / t(CommType.ALL_REDUCE, MIB, 2))
    assert row.step_ns == 1000 + 300 + transfer + 100
    assert row.breakdown["exposed_comm_ns"] == 300 + transfer
    assert row.model == f"comm:{NET}/auto relative to dp=2"


def test_communication_grows_with_the_group_and_the_sweep_is_monotonic():
    rows = rows_of(one_rank(), *(f"dp={d}" for d in (2, 4, 8, 16, 32, 64)))
    comm = [r.breakdown["exposed_comm_ns"] for r in rows[1:]]
    ratio = [t(CommType.ALL_REDUCE, MIB, d) / t(CommType.ALL_REDUCE, MIB, 2)
             for d in (2, 4, 8, 16, 32, 64)]  # fmt: skip
    assert comm == [300 + round(500 * r) for r in ratio]
    assert comm == sorted(comm) and comm[0] == 800


def test_a_trace_that_states_no_degree_refuses_naming_the_baseline_flag():
    alone = one_rank(world=1, ranks=())
    with pytest.raises(ConfigError) as err:
        rows_of(alone, "dp=8")
    assert str(err.value) == (
        "dp=8: the baseline's dp could not be found in the trace (the trace has collectives "
        "but states no world size or process group ranks); give --baseline dp=N"
    )
    # given, the job-wide all-reduce is the data-parallel group's
    _, row = rows_of(alone, "dp=8", baseline={"dp": 2})
    transfer = round(500 * t(CommType.ALL_REDUCE, MIB, 8) / t(CommType.ALL_REDUCE, MIB, 2))
    assert row.step_ns == 1000 + 300 + transfer + 100


def test_the_model_factory_refuses_dp_without_a_recorded_degree():
    """Called without the recorded degree (0, its default: unknown), the factory ``lumos
    estimate`` uses refuses a ``dp`` scenario with one message naming the flag to give; a
    ``link`` scenario needs no degree and is named relative to the recording."""
    factory = comm_model_for(NET)
    message = "dp=8: the recorded data-parallel degree is unknown; give --baseline dp=N"
    for args in ((), (0,)):
        with pytest.raises(ConfigError) as err:
            factory(one_rank(), parse_scenario(["dp=8"]), *args)
        assert str(err.value) == message
    _, name = factory(one_rank(), parse_scenario(["link=1:2"]))
    assert name == f"comm:{NET}/auto relative to the recording"


def test_a_degree_without_data_parallel_communication_refuses_past_itself():
    b = GraphBuilder(rank=0, world_size=1)
    th = b.thread(1)
    b.process_group("0", (0,))
    first = b.task(th, "aten::mm", 100)
    b.annotate("ProfilerStep#1", th, first, first, dur_ns=100)
    w = Workload((b.build().validate(),))
    base, same = rows_of(w, "dp=1")
    assert same.step_ns == base.step_ns == 100
    with pytest.raises(ConfigError, match=r"^dp=4: the trace shows no collective of its "
                       r"data-parallel group \(1 rank\) to re-time"):  # fmt: skip
        rows_of(w, "dp=4")


def test_link_at_factor_one_is_the_baseline_and_a_slow_link_scales_the_bandwidth_term():
    base, same, slow = rows_of(one_rank(), "link=1:1", "link=1:3")
    assert same.step_ns == base.step_ns
    # no dp: the ratio is to the recorded network, not to a data-parallel degree
    assert same.model == slow.model == f"comm:{NET}/auto relative to the recording"
    model = collective_time(int(CommType.ALL_REDUCE), MIB, 2, preset(NET))
    ratio = model.with_bandwidth_scaled(3.0).time_ns / model.time_ns
    assert slow.step_ns == 1000 + 300 + round(500 * ratio) + 100


def test_a_link_scenario_records_its_factors_in_the_row_and_the_edit():
    """``link=1:3`` (alone and with ``dp=4``): the row's config holds each rank's factor, the
    edit names what the network model re-timed (the one all-reduce)."""
    scenarios = [parse_scenario(["link=1:3"]), parse_scenario(["dp=4", "link=1:3"])]
    _, slow, both = estimate(one_rank(), scenarios, comm_model=comm_model_for(NET)).rows
    assert slow.to_dict()["config"] == {"link": {"1": 3.0}, "label": "link=1:3"}
    (edit,) = slow.edits
    assert (edit["edit"], edit["tasks_retimed"]) == ("communication re-timed (link 1:3)", 1)
    # the one all-reduce's factor is the model's t(link x3) / t(recorded), as in the test above
    model = collective_time(int(CommType.ALL_REDUCE), MIB, 2, preset(NET))
    f = model.with_bandwidth_scaled(3.0).time_ns / model.time_ns
    assert edit["detail"] == (
        f"1 collectives (all_reduce 1) x{f:.3f}-x{f:.3f}; transfer = recorded transfer x "
        "t(new) / t(recorded) of the network model, waiting for peers as recorded"
    )
    assert both.to_dict()["config"] == {"dp": 4, "link": {"1": 3.0}, "label": "dp=4 link=1:3"}
    assert both.edits[0]["edit"] == "communication re-timed (dp 2 -> 4, link 1:3)"


# -- real traces ------------------------------------------------------------------------------


def test_nccl_data_dp_sweep(tmp_path):
    """HTA's nccl_data (rank 0 of 2) gave 222.368 ms for every dp with empty edits, and dp=2,
    its recorded degree, showed 1.259 ms of exposed communication against the baseline's
    39.191 (the absolute model dropped the waiting, and the breakdown summed 3 steps)."""
    out = tmp_path / "e"
    assert main(["estimate", str(trace("nccl_a100")), "--sweep", "dp=2,4,16,64",
                 "--topology", NET, "-o", str(out)]) == 0  # fmt: skip
    rows = json.loads((out / "estimate.json").read_text())["rows"]
    base, same, *more = rows
    assert (same["step_ns"], same["breakdown"], same["ranks"]) == (
        base["step_ns"], base["breakdown"], base["ranks"])  # fmt: skip
    # per step, like step_ns: the parts add up to the mean step and a third of the gaps
    # between the 3 steps (the window runs from the first's start to the last one's end:
    # 40,206 ns more than the mean step on 2026-12 replays; it was 444,857,512 when the
    # breakdown summed the steps)
    assert 0 <= sum(base["breakdown"].values()) - base["step_ns"] < 50_000
    exposed = [r["breakdown"]["exposed_comm_ns"] for r in (same, *more)]
    assert exposed == sorted(exposed) and exposed[-1] > exposed[0]
    # 15 gradient all-reduces (8.2 to 31.5 MB) and 6 buffer broadcasts, re-timed by the ratio
    details = [r["edits"][0]["detail"].split(";")[0] for r in (same, *more)]
    assert details == [
        "21 collectives (all_reduce 15, broadcast 6) x1.000-x1.000",
        "21 collectives (all_reduce 15, broadcast 6) x1.523-x2.996",
        "21 collectives (all_reduce 15, broadcast 6) x3.535-x74.852",
        "21 collectives (all_reduce 15, broadcast 6) x7.257-x314.373",
    ]
    big = t(CommType.ALL_REDUCE, 31502336, 4) / t(CommType.ALL_REDUCE, 31502336, 2)
    assert f"{big:.3f}" == "1.523"


def test_the_8_dlrm_ranks_at_their_degree_replay_and_the_sweep_grows(tmp_path):
    out = tmp_path / "e"
    assert main(["estimate", str(trace("dlrm_kineto_8rank")), "--sweep", "dp=8,16,32,64",
                 "--topology", NET, "-o", str(out), "--workers", "1"]) == 0  # fmt: skip
    rows = json.loads((out / "estimate.json").read_text())["rows"]
    assert [r["config"]["label"] for r in rows] == ["baseline", "dp=8", "dp=16", "dp=32", "dp=64"]
    base, same, *more = rows
    assert (same["step_ns"], same["breakdown"], same["ranks"]) == (
        base["step_ns"], base["breakdown"], base["ranks"])  # fmt: skip
    exposed = [r["breakdown"]["exposed_comm_ns"] for r in (same, *more)]
    assert exposed == sorted(exposed) and exposed[-1] > exposed[0]
    # 3 all-reduces per rank (the all-to-alls are not the data-parallel group's)
    assert [r["edits"][0]["detail"].split(" x")[0] for r in (same, *more)] == [
        "24 collectives (all_reduce 24)"] * 4  # fmt: skip


def test_collectives_without_sizes_refuse_a_dp_what_if():
    path = str(trace("v100_stream_wait_event"))
    with pytest.raises(ConfigError, match=r"^dp=4: its 2020 collectives of the data-parallel "
                       r"group \(2 ranks\) have no recorded size, which the network model needs$"):  # fmt: skip
        from lumos.replay import build_workload

        w, _ = build_workload([path], workers=1)
        rows_of(w, "dp=4")


def test_a_rows_breakdown_is_per_step_like_its_step_time():
    """Three steps of 1900 ns: the breakdown of every row adds up to one step (it summed the
    three: a row's parts were three times its step_ns)."""
    b = GraphBuilder(rank=0, world_size=2)
    st = b.stream(7)
    pg = b.process_group("0", (0, 1))
    for s in range(3):
        first = b.task(st, "gemm", 1000)
        c = b.comm(CommType.ALL_REDUCE, MIB, pg, seq_id=s, wait_ns=300)
        b.task(st, "ncclAllReduce", 800, TaskKind.COMM, comm=c)
        last = b.task(st, "gemm2", 100)
        b.annotate(f"ProfilerStep#{s}", st, first, last, ts_ns=1900 * s, dur_ns=1900)
    base, same, more = rows_of(Workload((b.build().validate(),)), "dp=2", "dp=8")
    assert base.breakdown == same.breakdown == {
        "exposed_compute_ns": 1100, "overlapped_ns": 0, "exposed_comm_ns": 800, "other_ns": 0}  # fmt: skip
    transfer = round(500 * t(CommType.ALL_REDUCE, MIB, 8) / t(CommType.ALL_REDUCE, MIB, 2))
    assert more.breakdown["exposed_comm_ns"] == 300 + transfer
    assert sum(more.breakdown.values()) == more.step_ns == 1400 + transfer
