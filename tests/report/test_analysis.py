"""The analysis tables (``lumos analyze``, ``replay --analysis``) on real traces, exact values.

Expected numbers were read off the traces by the definitions in ``lumos.report.analysis`` and
cross-checked against the breakdown (``lumos replay``), which computes the same quantities by
another route: the exposed time of the kernels of one class, summed, is the breakdown's exposed
time of that class when each class runs on one stream.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from tests.realdata import realdata, trace

from lumos.cli.main import main
from lumos.cli.replay import format_replay
from lumos.replay import build_workload, replay
from lumos.report.analysis_ranks import TABLES
from lumos.report.table import write_tables


@pytest.fixture(scope="module")
def nccl():
    w, _ = build_workload([trace("nccl_a100")], workers=1)
    rep = replay(w)
    return rep, rep.analysis()


def _rows(tables, name, **match):
    return [r for r in tables[name].to_dicts() if all(r[k] == v for k, v in match.items())]


def test_kernels_top_and_exposed_agree_with_the_breakdown(nccl):
    rep, t = nccl
    top = _rows(t, "kernels", view="measured")[0]
    assert top["kernel"].startswith("ncclKernel_AllReduce_RING_LL_Sum_float")
    assert (top["class"], top["count"], top["total_ns"], top["exposed_ns"]) == (
        "comm", 15, 46762159, 39076335)  # fmt: skip
    for view in ("measured", "predicted"):
        rows = _rows(t, "kernels", view=view)
        comm = sum(r["exposed_ns"] for r in rows if r["class"] == "comm")
        compute = sum(r["exposed_ns"] for r in rows if r["class"] != "comm")
        b = rep.summaries[0]["breakdown"][view]
        assert (comm, compute) == (b["exposed_comm_ns"], b["exposed_compute_ns"])
        assert (comm, compute) == (39190669, 110623521)
        assert sum(r["share"] for r in rows) == pytest.approx(1.0, abs=1e-3)


def test_ops_count_calls_and_the_kernels_they_launched(nccl):
    _, t = nccl
    ops = {r["op"]: r for r in _rows(t, "ops", view="measured")}
    assert ops["nccl:all_reduce"]["calls"] == 15
    conv = ops["aten::convolution_backward"]
    assert (conv["calls"], conv["kernels"], conv["gpu_ns"]) == (159, 1005, 39529069)
    assert list(ops)[:2] == ["nccl:all_reduce", "aten::convolution_backward"]


def test_stream_idle_split(nccl):
    _, t = nccl
    s = {r["stream"]: r for r in _rows(t, "streams", view="measured")}
    compute, comm = s["GPU 0 stream 7"], s["GPU 0 stream 40"]
    for r in (compute, comm):
        assert r["busy_ns"] + r["idle_ns"] == r["window_ns"] == 667225958
        parts = ("host_bound_ns", "other_stream_ns", "comm_wait_ns", "other_ns")
        assert sum(r[k] for k in parts) == r["idle_ns"]
    # the compute stream waits for its launches; the NCCL stream also waits for the gradients
    assert (compute["host_bound_ns"], compute["other_stream_ns"]) == (540987177, 0)
    assert (comm["host_bound_ns"], comm["other_stream_ns"]) == (467712090, 116212166)


def test_collectives_overlap_and_bandwidth(nccl):
    _, t = nccl
    rows = _rows(t, "collectives", view="measured")
    assert [r["collective"] for r in rows].count("all_reduce") == 15
    r = rows[2]
    assert (r["collective"], r["size_bytes"], r["dur_ns"], r["overlapped_ns"]) == (
        "all_reduce", 8196000, 3306963, 457660)  # fmt: skip
    assert r["exposed_ns"] == r["dur_ns"] - r["overlapped_ns"]
    assert r["algbw_gb_per_s"] == pytest.approx(8196000 / 3306963, rel=1e-5)


def test_critical_path_ops_sum_to_the_path(nccl):
    rep, t = nccl
    rows = _rows(t, "critical_path_ops", rank=0)
    assert rows[0]["op"] == "aten::empty"
    assert sum(r["share"] for r in rows) == pytest.approx(1.0, abs=1e-3)
    assert rep.summaries[0]["critical_path_ops"][0]["op"] == "aten::empty"


def test_critical_path_kernels_add_up_to_its_gpu_time(nccl, dlrm):
    """Issue 14: top kernels on the critical path, per rank. Their task time, summed over every
    kernel, is the path's GPU time by kind (counted by another route, ``critical_path_ns``)."""
    from lumos.report.metrics import critical_path, critical_path_by_kernel

    gpu = ("kernel", "comm", "memcpy", "memset")
    for rep, multi in ((nccl[0], False), (dlrm[0], True)):
        for gi, summary in enumerate(rep.summaries):
            cp = critical_path(rep.result, gi if multi else None)
            rows = critical_path_by_kernel(rep.result, cp, gi)
            assert sum(r["task_ns"] for r in rows) == sum(summary["critical_path_ns"][k]
                                                          for k in gpu)  # fmt: skip
            assert summary["critical_path_kernels"] == rows[:10]
    top = nccl[0].summaries[0]["critical_path_kernels"][0]
    assert top["kernel"].startswith("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float")
    assert (top["tasks"], top["task_ns"], top["delay_ns"]) == (6, 1488811, 7276)
    text = format_replay(nccl[0].to_dict())
    assert "top kernels on the critical path" in text and "  void cudnn::bn_fw_tr_1C11" in text


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_analyze_cli_writes_csv_and_scale_leaves_measured_alone(tmp_path, capsys):
    """df_index_resolver: the CSV tables; a what-if changes the predicted rows only."""
    out = tmp_path / "a"
    src = str(trace("v100_stream_wait_event"))
    assert main(["analyze", src, "-o", str(out), "--scale", "nccl=0.5"]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"kernels.csv", "ops.csv", "streams.csv", "collectives.csv", "stragglers.csv",
            "rank_lateness.csv", "steps.csv", "critical_path_ops.csv"} <= names  # fmt: skip
    k = _csv(out / "kernels.csv")
    nccl = [r for r in k if r["kernel"].startswith("ncclKernel_AllReduce")]
    meas = next(r for r in nccl if r["view"] == "measured")
    pred = next(r for r in nccl if r["view"] == "predicted")
    assert (meas["count"], meas["total_ns"]) == ("2020", "357343000")
    assert int(pred["total_ns"]) < 357343000
    s = {(r["view"], r["stream"]): r for r in _csv(out / "streams.csv")}
    assert s["measured", "GPU 1 stream 7"]["comm_wait_ns"] == "374445000"
    assert s["measured", "GPU 1 stream 14"]["other_stream_ns"] == "913635000"
    printed = capsys.readouterr().out
    assert "top kernels" in printed and "stream idle ms" in printed


@pytest.fixture(scope="module")
def dlrm():
    w, _ = build_workload([trace("dlrm_kineto_8rank")], workers=1)
    rep = replay(w)
    return rep, rep.analysis()


def test_stragglers_on_the_8_rank_dlrm(dlrm, tmp_path):
    _, t = dlrm
    written = write_tables(t, tmp_path, "csv")
    late = [r for r in _csv(tmp_path / "rank_lateness.csv") if r["view"] == "measured"]
    assert len(written) == 9  # the TABLES, memory included (empty here)
    assert late[0] == {"view": "measured", "rank": "7", "collectives": "8", "times_last": "5",
                       "late_ns": "9710000", "max_late_ns": "7624000",
                       "mean_late_ns": "1213750.0"}  # fmt: skip
    st = _rows(t, "stragglers", view="measured")
    assert len(st) == 8 * 8
    for c in range(8):
        members = [r for r in st if r["collective"] == c]
        assert sorted(r["rank"] for r in members) == list(range(8))
        assert sum(r["last"] for r in members) == 1
        assert min(r["late_ns"] for r in members) == 0
    assert sum(r["times_last"] for r in _rows(t, "rank_lateness", view="measured")) == 8


def test_the_recorded_gloo_straggler_is_found_in_both_views():
    """lumos's own 2-rank gloo recording, where rank 1 straggles (tests/data, PROVENANCE.md):
    rank 1 arrives last at every all-reduce, 173.5 ms late in total; the replay keeps it."""
    from pathlib import Path

    run = Path(__file__).parents[1] / "data" / "gloo_ddp_2rank_straggler"
    w, _ = build_workload([run], workers=1)
    late = replay(w).analysis()["rank_lateness"].to_dicts()
    for view in ("measured", "predicted"):
        r = {x["rank"]: x for x in late if x["view"] == view}
        assert (r[1]["times_last"], r[1]["late_ns"], r[1]["max_late_ns"]) == (
            8,
            173461026,
            48756024,
        )
        assert (r[0]["times_last"], r[0]["late_ns"]) == (0, 0)


def test_replay_table_has_critical_path_ops_cross_rank_summary_and_words(dlrm):
    rep, _ = dlrm
    text = format_replay(rep.to_dict())
    assert text.count("top ops on the critical path") == 8
    assert "measured   slowest rank 1 19.901 ms, fastest rank 7 12.509 ms, spread 7.392 ms" in text
    # every rank's path starts by waiting for rank 7, whose step begins 7.5 ms late
    assert "(before ProfilerStep#10) (rank 7)" in text
    # rank 0: 3.289 ms exposed comm recorded, 0.180 ms replayed; the step time matches
    assert text.count("note: step time matches but exposed comm differs") == 8
    for word in ("exposed", "overlapped", "other =", "delay ="):
        assert word in text.split("words:")[1]


def test_achieved_tflops_and_bandwidth_from_recorded_shapes():
    """control.json records shapes: aten::mm asked for 1.28 TFLOP over 42.14 ms of kernels
    (30.4 TFLOPS on the A100's TF32 tensor cores); halving GEMM kernels raises the rate."""
    w, _ = build_workload([trace("alltoall_4streams")], workers=1)
    ops = replay(w, scale=(("gemm", 0.5),)).analysis()
    mm = {r["view"]: r for r in _rows(ops, "ops", op="aten::mm")}
    assert (mm["measured"]["flops"], mm["measured"]["gpu_ns"]) == (1280556687360, 42140000)
    assert mm["measured"]["tflops"] == pytest.approx(1280556687360 / 42140000 / 1e3, rel=1e-5)
    assert mm["predicted"]["tflops"] == pytest.approx(1280556687360 / 22779500 / 1e3, rel=1e-5)
    copy = _rows(ops, "ops", op="aten::copy_", view="measured")[0]
    assert (copy["flops"], copy["tflops"], copy["bytes"]) == (0, None, 6913773200)
    assert copy["gb_per_s"] == pytest.approx(6913773200 / 58771000, rel=1e-5)
    # ops without shapes leave the rates empty
    assert all(r["tflops"] is None for r in _rows(ops, "ops", op="aten::add_"))


def test_diff_lists_gemm_first_after_halving_gemms(tmp_path, capsys):
    """The acceptance of issue 14: control against its replay with ``--scale gemm=0.5``."""
    src = str(trace("alltoall_4streams"))
    rdir = tmp_path / "r"
    assert main(["replay", src, "--scale", "gemm=0.5", "--analysis", "-o", str(rdir)]) == 0
    capsys.readouterr()
    out = tmp_path / "d"
    assert main(["diff", src, str(rdir), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    classes = _csv(out / "kernel_classes.csv")
    assert classes[0]["class"] == "gemm"
    # the README quotes these: 82.692 -> 43.971 ms (-46.8 %)
    assert (classes[0]["a_ns"], classes[0]["b_ns"], classes[0]["change"]) == (
        "82692000", "43971000", "-0.468256")  # fmt: skip
    kernels = _csv(out / "kernels.csv")
    assert [r["class"] for r in kernels[:3]] == ["gemm"] * 3
    # one naming style: the side first in every per-side column (a_ns, a_count, a_calls)
    assert list(kernels[0])[-4:] == ["delta_ns", "change", "a_count", "b_count"]
    assert list(_csv(out / "ops.csv")[0])[-2:] == ["a_calls", "b_calls"]
    assert float(kernels[0]["change"]) == pytest.approx(-0.5, abs=1e-4)
    comm = next(r for r in classes if r["class"] == "comm")
    assert comm["delta_ns"] == "0"
    lines = printed.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("kernel classes"))
    assert lines[at + 2].split()[0] == "gemm"


def test_analyze_a_foreign_chakra_et(tmp_path, capsys):
    """Upstream's chakra.0.et: no op spans, no shapes; every table still comes out."""
    out = tmp_path / "a"
    assert main(["analyze", str(trace("chakra_pytorch_converted")), "-o", str(out)]) == 0
    assert len(list(out.glob("*.csv"))) == 9  # the TABLES, memory included
    ops = _csv(out / "ops.csv")
    assert ops and all(r["tflops"] == "" for r in ops)
    kernels = _csv(out / "kernels.csv")
    assert sum(int(r["count"]) for r in kernels if r["view"] == "measured") > 0


@pytest.mark.parametrize(
    ("name", "ranks", "first_op"),
    [
        ("v100_stream_wait_event", 1, "record_param_comms"),  # df_index_resolver
        ("nccl_a100", 1, "aten::empty"),  # nccl_data
        ("dlrm_kineto_8rank", 8, "(before ProfilerStep#10) (rank 7)"),
    ],
)
def test_acceptance_on_the_three_traces_as_a_user_runs_it(name, ranks, first_op, tmp_path, capsys):
    """Issue 14's acceptance, by the CLI on its three traces: ``lumos replay --analysis
    --all-ranks`` prints the top ops on the critical path of every rank and writes the HTA-style tables as CSV;
    ``lumos analyze --format json`` writes the same tables, rows and columns, as one document."""
    src = str(trace(name))
    out = tmp_path / "r"
    assert main(["replay", src, "--analysis", "-o", str(out), "--workers", "1", "--all-ranks"]) == 0
    text = capsys.readouterr().out
    assert text.count("top ops on the critical path") == ranks
    assert text.split("top ops on the critical path")[1].splitlines()[1].strip().startswith(
        first_op)  # fmt: skip
    tables = {p.stem: _csv(p) for p in (out / "analysis").glob("*.csv")}
    assert set(tables) == set(TABLES)
    assert len(tables["steps"]) == 2 * sum(1 for r in tables["steps"] if r["view"] == "measured")
    assert main(["analyze", src, "--format", "json", "-o", str(tmp_path / "j"),
                 "--workers", "1"]) == 0  # fmt: skip
    doc = json.loads((tmp_path / "j" / "analysis.json").read_text())
    assert list(doc) == list(TABLES)
    for table, rows in tables.items():
        assert len(doc[table]) == len(rows), table
        assert not rows or list(doc[table][0]) == list(rows[0]), table


def _gemm_half_diff(src: str, tmp_path: Path) -> Path:
    """``lumos replay SRC --scale gemm=0.5 --analysis``, then ``lumos diff SRC`` against it;
    returns the folder of the diff's tables."""
    rdir, out = tmp_path / "r", tmp_path / "d"
    assert main(["replay", src, "--scale", "gemm=0.5", "--analysis", "-o", str(rdir)]) == 0
    assert main(["diff", src, str(rdir), "-o", str(out)]) == 0
    return out


def test_diff_of_a_recording_and_a_what_if_keeps_the_replay_s_own_change_apart(tmp_path, capsys):
    """B is a what-if (predicted): it is compared with A's own unchanged replay, so only the
    what-if's change shows; what the replay differs from the recording is printed apart and
    written as replay_* tables (here nothing: this single-rank trace replays to the ns)."""
    out = _gemm_half_diff(str(trace("alltoall_4streams")), tmp_path)
    printed = capsys.readouterr().out
    assert "replayed unchanged (predicted)" in printed
    assert "not the what-if: A's replay against A's recording" in printed
    replayed = _csv(out / "replay_kernel_classes.csv")
    assert {r["delta_ns"] for r in replayed} == {"0"}
    steps = _csv(out / "replay_steps.csv")
    assert steps and all(r["delta_ns"] == "0" for r in steps)


def test_dlrm_what_if_diff_shows_gemm_not_the_waits_the_replay_removed(tmp_path, capsys):
    """Issue 32: after ``--scale gemm=0.5`` on the 8-rank DLRM job, the diff against the
    recording put "comm -96.5 %" first: the gloo/NCCL waits the replay removes, not the
    what-if. Against A's replay the what-if is gemm; the removed waits are listed apart."""
    out = _gemm_half_diff(
        str(realdata("param/et_replay/tests/inputs/dlrm_kineto.tar.gz")), tmp_path
    )
    classes = _csv(out / "kernel_classes.csv")
    assert classes[0]["class"] == "gemm"
    assert next(r for r in classes if r["class"] == "comm")["delta_ns"] == "0"
    removed = _csv(out / "replay_kernel_classes.csv")
    assert removed[0]["class"] == "comm"
    assert float(removed[0]["change"]) == pytest.approx(-0.965, abs=0.005)
