"""Calibration recovers a known latency and bandwidth from noisy points and from a graph."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.cost.calibrate import AlphaBetaFit, calibrate_from_graph, fit_alpha_beta
from lumos.errors import ConfigError
from lumos.graph.kinds import CommType, TaskKind
from lumos.graph.synthetic import GraphBuilder

ALPHA_NS, BW = 8_000.0, 40e9


def _times(sizes, rng):
    exact = ALPHA_NS + np.asarray(sizes, dtype=float) / BW * 1e9
    return exact * (1 + rng.normal(0, 0.01, len(exact)))  # 1 % noise


def test_fit_recovers_alpha_beta_within_5_percent():
    rng = np.random.default_rng(0)
    sizes = np.repeat(2 ** np.arange(10, 27), 3)
    fit = fit_alpha_beta(sizes, _times(sizes, rng))
    assert fit.latency_ns == pytest.approx(ALPHA_NS, rel=0.05)
    assert fit.bw_bytes_per_s == pytest.approx(BW, rel=0.05)
    assert fit.r2 > 0.99 and fit.rel_rms < 0.05 and fit.n == len(sizes)


def test_fit_needs_two_sizes():
    with pytest.raises(ConfigError, match="two distinct sizes"):
        fit_alpha_beta([1024, 1024], [5.0, 6.0])


def test_calibrate_from_graph_per_kind_and_group_size():
    rng = np.random.default_rng(1)
    b = GraphBuilder(rank=0, world_size=4)
    st = b.stream(20)
    pg = b.process_group("0", (0, 1, 2, 3))
    sizes = [1 << k for k in range(12, 24)]
    for size, t in zip(sizes, _times(sizes, rng), strict=True):
        c = b.comm(CommType.ALL_REDUCE, size, pg, wait_ns=5000)  # waiting is not transfer
        b.task(st, "ncclAllReduce", round(t) + 5000, TaskKind.COMM, comm=c)
    c = b.comm(CommType.ALL_GATHER, 4096, pg)
    b.task(st, "ncclAllGather", 900, TaskKind.COMM, comm=c)
    c = b.comm(CommType.UNKNOWN, 4096, pg)
    b.task(st, "nccl?", 900, TaskKind.COMM, comm=c)
    rows = calibrate_from_graph(b.build())
    assert [(r.kind, r.group_size, r.samples) for r in rows] == [
        ("all_gather", 4, 1),
        ("all_reduce", 4, len(sizes)),
    ]
    assert rows[0].fit is None and "one size" in rows[0].note
    fit = rows[1].fit
    assert fit.latency_ns == pytest.approx(ALPHA_NS, rel=0.05)
    assert fit.bw_bytes_per_s == pytest.approx(BW, rel=0.05)


def test_gloo_collectives_are_calibrated_as_nccl_ones():
    """The bundled gloo demo's gradient all-reduces are host-side spans (CPU_COMM): they are
    samples too (they once were left out, and a gloo run calibrated nothing)."""
    from lumos.examples_data import example_run_dir
    from lumos.replay import build_workload

    w, _ = build_workload([example_run_dir()], workers=1)
    rows = calibrate_from_graph(w)
    assert [(r.kind, r.group_size) for r in rows] == [("all_reduce", 2)]
    assert rows[0].samples == 12


def test_fit_by_hand():
    """Three points worked by hand: slope 26,000 / 2e6 = 0.013 ns per byte, intercept
    22 - 13 = 9 ns, residuals (1, -2, 1): r2 = 1 - 6/344, rel_rms = sqrt(6/3) / 22."""
    fit = fit_alpha_beta([0, 1000, 2000], [10, 20, 36])
    assert fit.latency_ns == pytest.approx(9.0, abs=1e-9)
    assert fit.bw_bytes_per_s == pytest.approx(1e9 / 0.013, rel=1e-12)
    assert fit.r2 == pytest.approx(1 - 6 / 344, rel=1e-12)
    assert fit.rel_rms == pytest.approx(np.sqrt(2.0) / 22, rel=1e-12)
    assert fit.n == 3
    assert fit.predict_ns(1000) == pytest.approx(22.0, rel=1e-12)
    assert fit.predict_ns(0) == pytest.approx(9.0, abs=1e-9)


def test_r2_of_times_that_vary_by_less_than_a_nanosecond():
    """Times 1000, 1000, 1001 ns at 1, 2, 3 kB (averages can differ by a fraction of a ns):
    their squared deviations sum to ss_tot = 1/9 + 1/9 + 4/9 = 2/3 (below 1). The fitted line
    has slope 0.5 ns per kB and intercept 1000 1/3 - 1 = 999 1/3 ns, residuals (1/6, -1/3,
    1/6): ss_res = 1/6, so r2 = 1 - (1/6) / (2/3) = 0.75 and rel_rms = sqrt(1/18) / 1000 1/3."""
    fit = fit_alpha_beta([1000, 2000, 3000], [1000.0, 1000.0, 1001.0])
    assert fit.r2 == pytest.approx(0.75, rel=1e-9)
    assert fit.latency_ns == pytest.approx(999 + 1 / 3, rel=1e-12)
    assert fit.bw_bytes_per_s == pytest.approx(2e12, rel=1e-9)
    assert fit.rel_rms == pytest.approx(np.sqrt(1 / 18) / (1000 + 1 / 3), rel=1e-9)


def test_fit_edge_cases():
    # a line through the points: r2 exactly 1, no residual
    exact = fit_alpha_beta([100, 300], [1100.0, 1300.0])
    assert exact.r2 == pytest.approx(1.0, abs=1e-12) and exact.rel_rms == pytest.approx(
        0, abs=1e-12
    )
    assert exact.latency_ns == pytest.approx(1000.0) and exact.bw_bytes_per_s == pytest.approx(1e9)
    # time falling with size: no finite bandwidth, a negative latency is kept as fitted
    falling = fit_alpha_beta([0, 10], [50.0, 40.0])
    assert falling.bw_bytes_per_s == float("inf") and falling.latency_ns == pytest.approx(50.0)
    rising = fit_alpha_beta([10, 20], [0.0, 100.0])
    assert rising.latency_ns == pytest.approx(-100.0)
    # every time the same: a flat line fits exactly; all zero: rel_rms 0 (no division by 0)
    flat = fit_alpha_beta([1, 2, 3], [7.0, 7.0, 7.0])
    assert (flat.r2, flat.bw_bytes_per_s) == (1.0, float("inf"))
    assert fit_alpha_beta([1, 2], [0.0, 0.0]).rel_rms == 0.0
    with pytest.raises(ConfigError, match="same length"):
        fit_alpha_beta([1, 2, 3], [1.0, 2.0])
    with pytest.raises(ConfigError, match="same length"):
        fit_alpha_beta([[1, 2]], [[1.0, 2.0]])


def test_rows_as_dicts_and_group_sizes():
    from lumos.cost.calibrate import CalibrationRow, calibrate_samples, group_size_of

    rows = calibrate_samples([("all_reduce", 2, 0, 10), ("all_reduce", 2, 1000, 20),
                              ("all_reduce", 2, 2000, 36), ("broadcast", 4, 64, 5),
                              ("all_gather", 2, 8, 3)])  # fmt: skip
    assert [(r.kind, r.group_size, r.samples, r.distinct_sizes) for r in rows] == [
        ("all_gather", 2, 1, 1), ("all_reduce", 2, 3, 3), ("broadcast", 4, 1, 1)]  # fmt: skip
    d = rows[1].to_dict()
    assert d == {"kind": "all_reduce", "group_size": 2, "samples": 3, "distinct_sizes": 3,
                 "latency_ns": pytest.approx(9.0), "bw_bytes_per_s": pytest.approx(1e9 / 0.013),
                 "r2": pytest.approx(1 - 6 / 344), "rel_rms": pytest.approx(np.sqrt(2) / 22),
                 "note": ""}  # fmt: skip
    assert CalibrationRow("send", 2, 1, 1, None, "why").to_dict() == {
        "kind": "send", "group_size": 2, "samples": 1, "distinct_sizes": 1, "latency_ns": None,
        "bw_bytes_per_s": None, "r2": None, "rel_rms": None, "note": "why"}  # fmt: skip
    assert rows[0].note == "one size only: latency and bandwidth not separable"
    # exactly two distinct sizes are enough for a line: 1100 ns at 100 bytes and 1300 ns at 300
    # give slope 1 ns per byte (1e9 bytes/s) and intercept 1000 ns, through both points
    (two,) = calibrate_samples([("reduce_scatter", 2, 100, 1100), ("reduce_scatter", 2, 300, 1300),
                                ("reduce_scatter", 2, 300, 1300)])  # fmt: skip
    assert (two.samples, two.distinct_sizes, two.note) == (3, 2, "")
    assert two.fit is not None and two.fit.n == 3
    assert two.fit.latency_ns == pytest.approx(1000.0, rel=1e-12)
    assert two.fit.bw_bytes_per_s == pytest.approx(1e9, rel=1e-12)
    assert two.fit.r2 == pytest.approx(1.0, abs=1e-12)

    b = GraphBuilder(rank=0, world_size=8)
    four = b.process_group("0", (0, 1, 2, 3))
    empty = b.process_group("1", ())
    g = b.build()
    assert [group_size_of(g, p) for p in (four, empty, -1, 2)] == [4, 8, 8, 8]


def test_samples_are_transfer_time_never_negative():
    from lumos.cost.calibrate import graph_samples

    b = GraphBuilder(rank=0, world_size=2)
    st = b.stream(20)
    pg = b.process_group("0", (0, 1))
    for size, dur, wait in ((4096, 9000, 5000), (8192, 3000, 5000), (0, 900, 0)):
        b.task(st, "ncclAllReduce", dur, TaskKind.COMM,
               comm=b.comm(CommType.ALL_REDUCE, size, pg, wait_ns=wait))  # fmt: skip
    assert graph_samples(b.build()) == [("all_reduce", 2, 4096, 4000), ("all_reduce", 2, 8192, 0)]


@pytest.mark.parametrize("time_ns", [7.0, 0.1, 123_456_789.123, 1e15])
@pytest.mark.parametrize("sizes", [[1, 2, 3], [0, 1000, 2000]])
def test_times_that_do_not_vary_are_exactly_a_flat_line(sizes, time_ns):
    """Equal times are fitted by the flat line through them: latency that time, no growth with
    size (bandwidth inf), r2 1.0 and no error, whatever the value. (A least-squares solve left a
    rounding residual: 0.1 ns gave r2 -0.67, 123,456,789.123 ns r2 -3.67 and 3.96e19 bytes/s,
    1e15 ns r2 0.0, because the mean of three equal floats need not be that float.)"""
    fit = fit_alpha_beta(sizes, [time_ns] * 3)
    assert fit == AlphaBetaFit(time_ns, float("inf"), 1.0, 0.0, 3)


def test_small_times_have_an_error_relative_to_their_mean():
    """Times 0, 1, 1 ns at 0, 1, 2 bytes (a mean of 2/3 ns, below 1): slope 1/2 ns per byte
    (bandwidth 2e9 bytes/s), intercept 2/3 - 1/2 = 1/6 ns, residuals (-1/6, 1/3, -1/6), so
    ss_res = 1/6, ss_tot = 4/9 + 1/9 + 1/9 = 2/3, r2 = 1 - 1/4 = 0.75 and rel_rms =
    sqrt(1/18) / (2/3) = sqrt(2) / 4."""
    fit = fit_alpha_beta([0, 1, 2], [0, 1, 1])
    assert fit.latency_ns == pytest.approx(1 / 6, rel=1e-12)
    assert fit.bw_bytes_per_s == pytest.approx(2e9, rel=1e-12)
    assert fit.r2 == pytest.approx(0.75, rel=1e-12)
    assert fit.rel_rms == pytest.approx(np.sqrt(2) / 4, rel=1e-12)
    assert fit.n == 3


def test_half_precision_inputs_are_fitted_in_float64():
    """Sizes and times given as float16 arrays (numpy's least squares refuses float16) are the
    module docstring's example: 10 ns per kB, so 1e11 bytes/s, and 1000 ns of latency, exactly
    on the line."""
    fit = fit_alpha_beta(np.array([1000, 2000, 4000], np.float16),
                         np.array([1010, 1020, 1040], np.float16))  # fmt: skip
    assert fit.latency_ns == pytest.approx(1000.0, rel=1e-12)
    assert fit.bw_bytes_per_s == pytest.approx(1e11, rel=1e-9)
    assert (fit.r2, fit.n) == (pytest.approx(1.0, abs=1e-12), 3)


@pytest.mark.parametrize(("sizes", "times", "message"), [
    ([1, 2, 3], [1.0, 2.0], "sizes and times must be two sequences of the same length"),
    ([1024, 1024], [5.0, 6.0], "fitting latency and bandwidth needs at least two distinct sizes"),
    # 2^53 and 2^53 + 1 are the same float64: one size, as the fit's arithmetic sees it
    ([2**53, 2**53 + 1], [5.0, 6.0], "fitting latency and bandwidth needs at least two distinct "
     "sizes"),
])  # fmt: skip
def test_unfittable_inputs_are_refused_with_exactly_this_text(sizes, times, message):
    """Sizes and times of different lengths, or fewer than two sizes that differ as float64s:
    one ConfigError with exactly this text."""
    with pytest.raises(ConfigError) as err:
        fit_alpha_beta(sizes, times)
    assert str(err.value) == message


def test_samples_are_every_known_communication_task_of_every_graph_in_order():
    """Rank 0 of 4 lists, in order: an UNKNOWN collective (skipped, and the tasks after it are
    still read), a GEMM kernel that names a collective row (not communication: skipped), a
    collective kernel of size 0 (skipped), one of 1 byte (the smallest known size: 300 ns less
    its 100 ns of waiting), a COMM task with no collective row (skipped) and a gloo broadcast
    (CPU_COMM) naming no process group (the world, 4 ranks). Rank 1 follows with its own
    all-gather over the pair (1, 2). Samples are (kind, group size, size, duration - wait)."""
    from lumos.cost.calibrate import graph_samples
    from lumos.graph.model import Workload

    b = GraphBuilder(rank=0, world_size=4)
    st, th = b.stream(20), b.thread(1)
    pair = b.process_group("0", (0, 1))
    b.task(st, "nccl?", 900, TaskKind.COMM, comm=b.comm(CommType.UNKNOWN, 4096, pair))
    b.task(st, "gemm", 500, TaskKind.KERNEL, comm=b.comm(CommType.ALL_REDUCE, 2048, pair))
    b.task(st, "ncclAllReduce", 800, TaskKind.COMM, comm=b.comm(CommType.ALL_REDUCE, 0, pair))
    b.task(st, "ncclAllReduce", 300, TaskKind.COMM,
           comm=b.comm(CommType.ALL_REDUCE, 1, pair, wait_ns=100))  # fmt: skip
    b.task(st, "ncclKernel", 700, TaskKind.COMM)
    b.task(th, "gloo:broadcast", 5000, TaskKind.CPU_COMM, comm=b.comm(CommType.BROADCAST, 64))
    c = GraphBuilder(rank=1, world_size=4)
    st1 = c.stream(20)
    c.task(st1, "ncclAllGather", 1200, TaskKind.COMM,
           comm=c.comm(CommType.ALL_GATHER, 8192, c.process_group("1", (1, 2)), wait_ns=200))  # fmt: skip
    w = Workload((b.build(), c.build()))
    assert graph_samples(w) == [
        ("all_reduce", 2, 1, 200),
        ("broadcast", 4, 64, 5000),
        ("all_gather", 2, 8192, 1000),
    ]
    assert graph_samples(w.graphs[1]) == [("all_gather", 2, 8192, 1000)]


def _not_json(name: str) -> None:
    """``json.loads``' hook for ``Infinity``/``NaN``, which strict JSON has not."""
    raise AssertionError(f"not strict JSON: {name}")


def test_rows_without_a_finite_bandwidth_say_why_and_write_strict_json():
    """Times that fall as sizes grow (100 us at 1 kB, 50 us at 2 kB: slope -50 ns per byte) fit
    a line with no bandwidth: the row keeps the fit (latency 150 us, r2 1) with the note that
    says so; equal times at two sizes fit a flat line, noted as latency only. As dicts their
    bandwidth is None, so the JSON holds no ``Infinity`` (which strict JSON readers refuse)."""
    import json

    from lumos.cost.calibrate import FALLING, FLAT, calibrate_samples

    falling, flat, rising = calibrate_samples([
        ("all_reduce", 2, 1000, 100_000), ("all_reduce", 2, 2000, 50_000),
        ("broadcast", 2, 1000, 7), ("broadcast", 2, 2000, 7),
        ("send", 2, 1000, 1_000), ("send", 2, 2000, 2_000),
    ])  # fmt: skip
    assert falling.fit is not None and falling.fit.latency_ns == pytest.approx(150_000.0)
    assert falling.fit.r2 == pytest.approx(1.0) and falling.note == FALLING
    assert flat.note == FLAT and rising.note == ""
    assert FALLING.startswith("time falls as size grows") and FLAT.startswith("the same time")
    assert [r.to_dict()["bw_bytes_per_s"] for r in (falling, flat)] == [None, None]
    assert rising.to_dict()["bw_bytes_per_s"] == pytest.approx(1e9)

    text = json.dumps([r.to_dict() for r in (falling, flat, rising)])
    assert [r["note"] for r in json.loads(text, parse_constant=_not_json)] == [FALLING, FLAT, ""]


def test_the_calibration_table_prints_a_dash_and_the_note_for_no_bandwidth(tmp_path, capsys):
    """``lumos comm --calibrate`` on a comms-only bench whose all-reduce times fall with size:
    the bandwidth column holds ``-`` and the row ends with the note; ``--json`` is strict."""
    import json

    from lumos.cli.main import main
    from lumos.cost.calibrate import FALLING

    bench = {"format": "lumos.bench", "version": 1, "comms_only": True,
             "comms": {"samples": [
                 {"kind": "all_reduce", "group_size": 2, "size_bytes": 1000, "time_ns": 100_000},
                 {"kind": "all_reduce", "group_size": 2, "size_bytes": 2000, "time_ns": 50_000}]}}  # fmt: skip
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    assert main(["comm", "--calibrate", str(tmp_path)]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:6] == ["all_reduce", "2", "2", "2", "150.00", "-"]
    assert " ".join(row[8:]) == FALLING
    assert main(["comm", "--calibrate", str(tmp_path), "--json"]) == 0
    (got,) = json.loads(capsys.readouterr().out, parse_constant=_not_json)["rows"]
    assert (got["bw_bytes_per_s"], got["note"]) == (None, FALLING)
