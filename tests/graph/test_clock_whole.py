"""Every branch of ``lumos.graph.build_clock``, on bounds and traces small enough to work out by hand.

``fit_clock`` is fed hand-made ``ClockBounds`` (times from the origin, ns); ``clock_bounds`` and
``shift_gpu_clock`` run on tiny Kineto traces written here, every timestamp chosen so that each
bound, each nearly tight fact and each moved timestamp follows from the module docstring's
rules by arithmetic stated in the test's docstring.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from lumos.diagnostics import Diagnostics
from lumos.graph.build_blocking import blocking_copies
from lumos.graph.build_clock import ClockBounds, ClockFit, clock_bounds, fit_clock, shift_gpu_clock
from lumos.graph.build_links import find_launches
from lumos.graph.build_tasks import lay_out_tasks
from lumos.ingest.kineto import read_kineto


def _bounds(lower, upper, t_lower=None, t_upper=None, floor=None, blocked=()) -> ClockBounds:
    lower, upper = np.asarray(lower, np.int64), np.asarray(upper, np.int64)
    tl = np.zeros(lower.size) if t_lower is None else np.asarray(t_lower, np.float64)
    tu = np.zeros(upper.size) if t_upper is None else np.asarray(t_upper, np.float64)
    return ClockBounds(tl, lower, tu, upper, floor, np.asarray(blocked, np.int64))


# ---------------------------------------------------------------- fit_clock: a constant offset


@pytest.mark.parametrize(
    "lower, upper, blocked, floor, expected",
    [
        # lo = 1 us exactly, hi = 50 us: 0 lies inside (lo <= 1 us resolution): no move
        ([1_000], [50_000], (), None, ClockFit(0, 0.0, 1_000, 50_000)),
        # hi = -1 us exactly, lo = -50 us: 0 inside (hi >= -1 us): no move
        ([-50_000], [-1_000], (), None, ClockFit(0, 0.0, -50_000, -1_000)),
        # lo = hi + 1 us exactly (2 us > 1 us: no constant fits exactly, but within the
        # resolution): a constant, and 0 is inside [lo - 1 us, hi + 1 us]
        ([1_000], [0], (), None, ClockFit(0, 0.0, 1_000, 0)),
        ([500], [0], (), None, ClockFit(0, 0.0, 500, 0)),
        # hi - lo = 1,001 ns, the violated side is the lower: half the room (500), less
        # than a nominal 5 us latency, above lo
        ([2_400_000], [2_401_001], (), None, ClockFit(2_400_500, 0.0, 2_400_000, 2_401_001)),
        # the violated side is the upper: half the room (500), less than a 2 us reaction,
        # below hi; a room of 8 us leaves the full 2 us reaction
        ([-20_001_001], [-20_000_000], (), None,
         ClockFit(-20_000_500, 0.0, -20_001_001, -20_000_000)),
        ([-20_008_000], [-20_000_000], (), None,
         ClockFit(-20_002_000, 0.0, -20_008_000, -20_000_000)),
        # no launch at all: only upper bounds; hi = -5 us is violated, a 2 us reaction below
        ([], [-5_000], (), None, ClockFit(-7_000, 0.0, None, -5_000)),
        ([], [3_000], (), None, ClockFit(0, 0.0, None, 3_000)),
        # a fastest blocked synchronize 100 us (exactly 2 x 50 us) above the fastest launch:
        # half way, 250 us (0 is not inside: lo = 200 us)
        ([200_000], [300_000], [300_000], None, ClockFit(250_000, 0.0, 200_000, 300_000)),
        # 120 us apart (> 100 us): the launches say nothing, the sync less a 2 us reaction
        ([200_000], [320_000], [320_000], None, ClockFit(318_000, 0.0, 200_000, 320_000)),
        # half way between -20.001 and -10 us rounds down: -30,001 // 2 = -15,001 ns
        ([-20_001], [-10_000], [-10_000], None, ClockFit(-15_001, 0.0, -20_001, -10_000)),
        # 6 us is no evidence... only when 0 is inside: lo = 2 us is not, so 6 us it is
        ([2_000], [100_000], [10_000], None, ClockFit(6_000, 0.0, 2_000, 100_000)),
        # an estimate of exactly 50 us (52 us sync less 2 us) with 0 inside: no evidence
        ([-100_000], [60_000], [52_000], None, ClockFit(0, 0.0, -100_000, 60_000)),
        # no launch bound: the sync less a reaction, 30 ms ahead and 30 ms behind
        ([], [30_000_000], [30_000_000], None, ClockFit(29_998_000, 0.0, None, 30_000_000)),
        ([], [-30_000_000], [-30_000_000], None,
         ClockFit(-30_002_000, 0.0, None, -30_000_000)),
        # an idle-launch floor of exactly 50 us is not slower than a launch can be: no
        # estimate; hi = -60 us violated: a reaction below it
        ([-100_000], [-60_000], (), 50_000, ClockFit(-62_000, 0.0, -100_000, -60_000)),
    ],
)  # fmt: skip
def test_a_constant_offset_follows_the_rules_of_the_module_docstring(
    lower, upper, blocked, floor, expected
):
    """Each case's expected fit is worked out in its comment from the docstring's rules: the
    interval [max lower, min upper]; the nearly tight facts; 0 when it is inside and the
    estimate is within 50 us of it; else the smallest move past the violated bound plus a
    nominal latency (5 us) or reaction (2 us), at most half the room. Nothing is warned (a
    synchronize bounds the clock)."""
    d = Diagnostics()
    fit = fit_clock(_bounds(lower, upper, blocked=blocked, floor=floor), d)
    assert fit == expected
    assert type(fit.offset_ns) is int
    assert not d


def test_without_synchronize_a_move_made_on_launches_alone_is_said_in_us():
    """No upper bound. Kernels on idle streams start 200 us *before* their calls (the 5th
    percentile is -200 us, negative: impossible on one clock), and the earliest starts 200 us
    before: the GPU clock moves 5 us (a launch latency) past the floor, +205 us, inside
    [200 us, oo). The warning names the reason and the move, in us."""
    d = Diagnostics()
    fit = fit_clock(_bounds([200_000, -3_000], [], floor=-200_000), d)
    assert fit == ClockFit(205_000, 0.0, 200_000, None)
    assert d.count("gpu_clock_from_launches") == 1
    assert d.example("gpu_clock_from_launches") == (
        "no synchronize bounds the GPU clock and launches onto idle streams start -200.0 us "
        "after their calls: GPU clock moved +205.0 us"
    )


def test_a_floor_of_zero_is_no_evidence_and_a_violated_launch_bound_moves_by_a_latency():
    """Launches onto idle streams start 0 us after their calls (the 5th percentile): fast, not
    negative, so no estimate. The launch bound lo = 2 us (a kernel began 2 us before its
    call) is violated at 0, so the clock moves a nominal 5 us latency past it, to 7 us,
    without a word (that is no estimate from launches, only the hard bound)."""
    d = Diagnostics()
    assert fit_clock(_bounds([2_000], [], floor=0), d) == ClockFit(7_000, 0.0, 2_000, None)
    assert fit_clock(_bounds([2_000], [], floor=50_000), d) == ClockFit(7_000, 0.0, 2_000, None)
    assert not d


# ------------------------------------------------------- fit_clock: bounds no constant meets


def test_the_offset_that_breaks_fewest_bounds_is_the_one_nearest_zero():
    """All bounds at the origin (no slope can help). Lower bounds 0.5, 0.5, 900 us; upper
    -0.5, -0.5, -900 us. A candidate c breaks a lower bound above c + 1 us and an upper one
    below c - 1 us: c = -900 us breaks 3 (the 3 lower ones), -0.5 us breaks 2 (900 us and
    -900 us), 0 breaks 2, 0.5 us breaks 2, 900 us breaks 3 (the upper ones). Of the three
    that break 2, 0 is nearest 0 (0 itself is a candidate though no bound says 0)."""
    d = Diagnostics()
    b = _bounds([500, 500, 900_000], [-500, -500, -900_000])
    fit = fit_clock(b, d)
    assert fit == ClockFit(0, 0.0, 900_000, -900_000, 2)
    assert d.count("gpu_clock_inconsistent") == 2
    assert d.example("gpu_clock_inconsistent") == (
        "no GPU clock offset agrees with all launches and synchronizes: 2 contradict +0.0 us"
    )


def test_a_lower_bound_one_resolution_above_the_offset_is_not_broken():
    """Lower bounds 501, 501 us; upper 500, 500, -900,000 us, all at the origin. 500 us
    breaks only the -900,000 us bound (the lower ones lie exactly 1 us, the resolution,
    above it: kept); 501 us breaks it too and nothing else; 0 breaks 3, -900,000 us the 2
    lower ones. Of 500 and 501 us, 500 us is nearer 0."""
    d = Diagnostics()
    b = _bounds([501_000, 501_000], [500_000, 500_000, -900_000_000])
    assert fit_clock(b, d) == ClockFit(500_000, 0.0, 501_000, -900_000_000, 1)
    assert d.count("gpu_clock_inconsistent") == 1
    assert d.example("gpu_clock_inconsistent") == (
        "no GPU clock offset agrees with all launches and synchronizes: 1 contradict +500.0 us"
    )


def test_an_upper_bound_one_resolution_below_the_offset_is_not_broken():
    """The mirror: upper bounds -501, -501 us; lower -500, -500, +900,000 us. -500 us breaks
    only the 900,000 us bound (the upper ones lie exactly 1 us below it: kept), as -501 us
    does; -500 us is nearer 0."""
    d = Diagnostics()
    b = _bounds([-500_000, -500_000, 900_000_000], [-501_000, -501_000])
    assert fit_clock(b, d) == ClockFit(-500_000, 0.0, 900_000_000, -501_000, 1)
    assert d.example("gpu_clock_inconsistent") == (
        "no GPU clock offset agrees with all launches and synchronizes: 1 contradict -500.0 us"
    )


# ------------------------------------------------------------------------ fit_clock: a drift


def test_a_lead_that_grows_is_the_gentlest_rising_slope_leaving_two_launch_latencies():
    """The mirror of ``test_clock.py``'s unpinned drift: a launch bound of +3 us at 100 ms
    and a sync bound of 0 at the origin. No constant fits (3 us > 0 + 1 us). The room a
    slope b leaves, 0 - (3 us - b * 100 ms), grows without end as b rises, so the steepest
    slope searched (+5 %) is not taken but the gentlest leaving 10 us (2 latencies):
    b * 1e8 = 13 us, b = 1.3e-4. At the origin the interval is [3 us - 13 us, 0] =
    [-10 us, 0], the offset its middle, -5 us, an int."""
    d = Diagnostics()
    fit = fit_clock(_bounds([3_000], [0], [1e8], [0.0]), d)
    assert fit.drift == pytest.approx(1.3e-4, rel=1e-9)
    assert (fit.offset_ns, fit.lower_ns, fit.upper_ns, fit.span_ns) == (
        -5_000,
        -10_000,
        0,
        (0, 100_000_000),
    )
    assert type(fit.offset_ns) is int and fit.contradicted == 0
    assert not d


def test_a_drift_is_fitted_even_when_its_best_room_is_under_the_resolution():
    """Launch bounds 0 at the origin and 1 ms at 100 ms, sync bounds 0.5 us at the origin and
    1.0005 ms at 100 ms: the line 0.01 * t leaves 0.5 us of room (less than the 1 us
    resolution, but not negative): a drift of 1 %, no bound contradicted, nothing warned."""
    d = Diagnostics()
    fit = fit_clock(_bounds([0, 1_000_000], [500, 1_000_500], [0, 1e8], [0, 1e8]), d)
    assert fit.drift == pytest.approx(0.01, abs=1e-9)
    assert 0 <= fit.lower_ns <= fit.offset_ns <= fit.upper_ns <= 500
    assert fit.contradicted == 0 and not d


def test_of_slopes_that_leave_the_same_widest_room_the_smallest_is_taken():
    """Launch bounds 0 at the origin and 1 ms at 100 ms; sync bounds 3 us at the origin and
    1.004 ms at 100 ms. For b in [1 %, 1.001 %] the room is 3 us (between the origin's two
    bounds); below 1 % the 100 ms launch bound, above 1.001 % the 100 ms sync bound narrows
    it. The slope is the plateau's low end, 1 %; at the origin the interval is [0, 3 us]
    (the ceiling of a value within 1e-6 ns of 0 may be 1), the offset 1.5 us."""
    fit = fit_clock(_bounds([0, 1_000_000], [3_000, 1_004_000], [0, 1e8], [0, 1e8]), Diagnostics())
    assert fit.drift == pytest.approx(0.01, abs=1e-9)
    assert fit.offset_ns == 1_500 and fit.upper_ns == 3_000 and fit.lower_ns in (0, 1)


def test_of_steep_slopes_that_leave_the_same_room_the_gentlest_is_taken():
    """Launch bounds 0 at the origin and -2 ms at 100 ms; a sync bound of -1.995 ms at 100 ms.
    At b = 0 no constant fits (0 > -1.995 ms + 1 us). For b <= -2 % the room is 5 us (the
    100 ms launch and sync bounds, parallel); above -2 % the origin's launch bound narrows
    it. The search's widest room runs to its edge (-5 %), so the gentlest slope leaving
    min(5 us, 10 us) is taken: -2 %. The interval at the origin is [0, 5 us] (the ceiling of
    a value within 1e-6 ns of 0 may be 1), the offset 2.5 us."""
    fit = fit_clock(_bounds([0, -2_000_000], [-1_995_000], [0, 1e8], [1e8]), Diagnostics())
    assert fit.drift == pytest.approx(-0.02, abs=1e-9)
    assert fit.offset_ns == 2_500 and fit.upper_ns == 5_000 and fit.lower_ns in (0, 1)


def test_the_calibration_records_the_drift_in_whole_parts_per_billion():
    """1.0000000495 % is 10,000,000.495 ppb: 10,000,000 rounded; the bounds as given."""
    fit = ClockFit(1_500, 0.010000000495, -3_000, 4_000)
    assert fit.calibration() == {
        "gpu_clock_offset_ns": 1_500,
        "gpu_clock_drift_ppb": 10_000_000,
        "gpu_clock_lower_bound_ns": -3_000,
        "gpu_clock_upper_bound_ns": 4_000,
    }
    assert ClockFit(7).calibration() == {"gpu_clock_offset_ns": 7}


# -------------------------------------------------------------------------- shift_gpu_clock


def _trace(tmp_path, events):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return read_kineto(p)


def _x(cat, name, ts, dur, tid=1, **args):
    pid = 0 if cat in ("kernel", "gpu_memcpy", "gpu_memset") else 1
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def _kernel(name, ts, dur, corr, stream=7, device=0):
    return _x("kernel", name, ts, dur, tid=stream, device=device, stream=stream, correlation=corr)


def _moved(tr, fit, origin_ns):
    """(GPU ts before, after; CPU ts before, after) of ``shift_gpu_clock``."""
    out = shift_gpu_clock(tr, fit, origin_ns).events.ts_ns
    gpu = tr.events.cat == 5  # kernels
    return tr.events.ts_ns[gpu], out[gpu], tr.events.ts_ns[~gpu], out[~gpu], out


def test_a_drift_moves_each_gpu_timestamp_by_its_time_from_the_origin_clipped_to_the_span(
    tmp_path,
):
    """Kernels at 1.0005, 3.0005 and 9.0005 ms (not whole microseconds: moved to the ns),
    origin 1 ms (the first call). Fit: 2.5 us + 1 % of the time since the origin, over the
    span [0, 4 ms]: 2,500 + 0.01 * (0.5 us, 2.0005 ms, 4 ms clipped) = 2,505, 22,505 and
    42,500 ns (rint(5.0) = 5). CPU events stay; every column stays int64."""
    tr = _trace(tmp_path, [
        _x("cuda_runtime", "cudaLaunchKernel", 1000, 0.2, correlation=1),
        _x("cuda_runtime", "cudaLaunchKernel", 2000, 0.2, correlation=2),
        _x("cuda_runtime", "cudaLaunchKernel", 3000, 0.2, correlation=3),
        _kernel("a", 1000.5, 1, 1), _kernel("b", 3000.5, 1, 2), _kernel("c", 9000.5, 1, 3),
    ])  # fmt: skip
    g0, g1, c0, c1, out = _moved(tr, ClockFit(2_500, 0.01, span_ns=(0, 4_000_000)), 1_000_000)
    assert (g1 - g0).tolist() == [2_505, 22_505, 42_500]
    assert (c1 == c0).all() and out.dtype == np.int64


def test_a_constant_shift_keeps_the_ns_of_a_ns_trace_and_the_grid_of_a_whole_us_one(tmp_path):
    """+2.5 us, no drift. A trace with a kernel at 1,000.5 us moves by 2,500 ns exactly; a
    trace whose GPU times are whole microseconds moves on its grid, rint(2.5) us = 2 us (to
    the even), so work that touched still touches. The CPU call never moves."""
    ns = _trace(tmp_path, [_x("cuda_runtime", "cudaLaunchKernel", 1000, 1, correlation=1),
                           _kernel("a", 1000.5, 1, 1)])  # fmt: skip
    g0, g1, c0, c1, out = _moved(ns, ClockFit(2_500), 1_000_000)
    assert (g1 - g0).tolist() == [2_500] and (c1 == c0).all() and out.dtype == np.int64
    us = _trace(tmp_path, [_x("cuda_runtime", "cudaLaunchKernel", 1000, 1, correlation=1),
                           _kernel("a", 1001, 1, 1), _kernel("b", 1002, 3, 1)])  # fmt: skip
    g0, g1, c0, c1, out = _moved(us, ClockFit(2_500), 1_000_000)
    assert (g1 - g0).tolist() == [2_000, 2_000] and (c1 == c0).all() and out.dtype == np.int64
    # -3.5 us on the grid: rint(-3.5) = -4 us
    g0, g1, *_ = _moved(us, ClockFit(-3_500), 1_000_000)
    assert (g1 - g0).tolist() == [-4_000, -4_000]


# ----------------------------------------------------------------------------- clock_bounds


def _bounds_of(tr) -> ClockBounds:
    layout = lay_out_tasks(tr, blocking_copies(tr))
    return clock_bounds(tr, layout, find_launches(tr, layout))


def test_each_kind_of_synchronize_bounds_the_clock_by_the_work_it_waited_for(tmp_path):
    """Times in us; origin 1,000 (the first event). Device 1 has streams 7 and 8, device 2
    stream 9. Thread 1:

    - 1,000-1,001 ``cudaStreamSynchronize`` naming no stream, and 1,002-1,003
      ``cudaDeviceSynchronize``: nothing was launched before them: no bound;
    - launches at 1,004 (``k1`` on stream 7, 1,010-1,060) and 1,006 (``k2`` on stream 8,
      1,020-1,040): lower bounds -6 at 4 and -14 at 6;
    - 1,070-1,080 ``cudaStreamSynchronize`` naming stream 7 (a HIP stream argument): waited
      for ``k1``: bound 1,080 - 1,060 = 20 at 80; 10 us, and ``k1`` ended before it: not
      tight;
    - 1,100-1,150 the same, exactly 50 us long: 150 - 60 = 90 at 150; not tight (50 us is
      not longer than 50 us);
    - 1,160-1,220 ``cudaStreamSynchronize`` naming no stream: it waited for one of the
      device's streams, at least the one whose work ended first (``k2``): 220 - 40 = 180 at
      220; never tight, though it blocked 60 us (it is not certain which work it waited for);
    - 1,230-1,260 a blocking ``cudaMemcpy`` whose copy runs 1,235-1,255 on stream 7: lower
      bound -5 at 230; upper 260 - 255 = 5 at 260, tight;
    - 1,270 a launch of ``k3`` on stream 9 (device 2), 1,275-1,285: lower -5 at 270;
    - 1,290-1,300 ``cudaDeviceSynchronize``: the thread last launched on device 2, so it
      waited for stream 9: 300 - 285 = 15 at 300; the work ended before it and it took 10
      us: not tight.

    Thread 2 (no launch: its device is the lowest, 1): 1,040-1,045
    ``cudaStreamSynchronize`` on stream 8, which started as ``k2`` ended: 45 - 40 = 5 at 45,
    tight. Thread 3: 1,030-1,040 the same, which returned as ``k2`` ended: 0 at 40, tight.
    Thread 4: a CPU op named ``cudaDeviceSynchronize``, 1,300-1,400, is no synchronize.
    Thread 5 (no launch: device 1): 1,065-1,068 ``cudaDeviceSynchronize`` waited for the last
    work launched before it on streams 7 and 8, ``k1``: 68 - 60 = 8 at 68, not tight. Thread
    6: 1,050-1,052 ``cudaStreamSynchronize`` that a ``cuda_sync`` event of its correlation
    names stream 7: 52 - 60 = -8 at 52 (it returned before ``k1`` ended as recorded).
    Four launches are too few for an idle-launch floor. Lower bounds come stream by stream
    (7: ``k1``, the copy; 8; 9), upper bounds thread by thread in time order, then the
    blocking copies."""
    ev = [
        _x("cuda_runtime", "cudaStreamSynchronize", 1000, 1, correlation=1),
        _x("cuda_runtime", "cudaDeviceSynchronize", 1002, 1, correlation=2),
        _x("cuda_runtime", "cudaLaunchKernel", 1004, 1, correlation=3),
        _x("cuda_runtime", "cudaLaunchKernel", 1006, 1, correlation=4),
        _x("cuda_runtime", "cudaStreamSynchronize", 1070, 10, correlation=5, stream=7),
        _x("cuda_runtime", "cudaStreamSynchronize", 1100, 50, correlation=6, stream=7),
        _x("cuda_runtime", "cudaStreamSynchronize", 1160, 60, correlation=7),
        _x("cuda_runtime", "cudaMemcpy", 1230, 30, correlation=8),
        _x("cuda_runtime", "cudaLaunchKernel", 1270, 1, correlation=9),
        _x("cuda_runtime", "cudaDeviceSynchronize", 1290, 10, correlation=10),
        _x("cuda_runtime", "cudaStreamSynchronize", 1040, 5, tid=2, correlation=11, stream=8),
        _x("cuda_runtime", "cudaStreamSynchronize", 1030, 10, tid=3, correlation=12, stream=8),
        _x("cpu_op", "cudaDeviceSynchronize", 1300, 100, tid=4),
        _x("cuda_runtime", "cudaDeviceSynchronize", 1065, 3, tid=5, correlation=14),
        _x("cuda_runtime", "cudaStreamSynchronize", 1050, 2, tid=6, correlation=15),
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 1051,
         "dur": 0.01, "args": {"cuda_sync_kind": "Stream Sync", "stream": 7,
                               "correlation": 15, "device": 1}},
        _kernel("k1", 1010, 50, 3, stream=7, device=1),
        _kernel("k2", 1020, 20, 4, stream=8, device=1),
        _x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 1235, 20, tid=7, device=1,
           stream=7, correlation=8),
        _kernel("k3", 1275, 10, 9, stream=9, device=2),
    ]  # fmt: skip
    b = _bounds_of(_trace(tmp_path, ev))
    assert b.t_lower.tolist() == [4_000.0, 230_000.0, 6_000.0, 270_000.0]
    assert b.lower.tolist() == [-6_000, -5_000, -14_000, -5_000]
    assert b.t_upper.tolist() == [80_000.0, 150_000.0, 220_000.0, 300_000.0, 45_000.0, 40_000.0,
                                  68_000.0, 52_000.0, 260_000.0]  # fmt: skip
    assert b.upper.tolist() == [20_000, 90_000, 180_000, 15_000, 5_000, 0, 8_000, -8_000, 5_000]
    assert b.blocked_upper is not None and b.blocked_upper.tolist() == [5_000, 0, 5_000]
    assert b.idle_launch_floor_ns is None
    # the declared dtypes (times float64, bounds int64)
    assert (b.t_lower.dtype, b.lower.dtype, b.t_upper.dtype, b.upper.dtype) == (
        np.float64, np.int64, np.float64, np.int64)  # fmt: skip
    assert b.blocked_upper.dtype == np.int64


def test_a_stream_sync_naming_an_id_two_devices_share_bounds_by_the_callers_device(tmp_path):
    """One process, two GPUs, each with a stream 7 (times in us, origin 1,000): ``a`` on
    device 1 stream 7 (launch 1,000-1,001, kernel 1,010-1,020) and ``b`` on device 2 stream 7
    (launch 1,002-1,003, kernel 1,012-1,062). The thread's ``cudaStreamSynchronize`` at
    1,070-1,075 names stream 7 (HIP argument): it refers to device 2, where the thread
    launched last, so it waited for ``b``: upper bound 75 - 62 = 13 us at 75 (by device 1's
    stream 7, ``a``, it would be 55)."""
    ev = [
        _x("cuda_runtime", "cudaLaunchKernel", 1000, 1, correlation=1),
        _x("cuda_runtime", "cudaLaunchKernel", 1002, 1, correlation=2),
        _x("cuda_runtime", "cudaStreamSynchronize", 1070, 5, correlation=3, stream=7),
        _kernel("a", 1010, 10, 1, stream=7, device=1),
        _kernel("b", 1012, 50, 2, stream=7, device=2),
    ]
    b = _bounds_of(_trace(tmp_path, ev))
    assert (b.t_upper.tolist(), b.upper.tolist()) == ([75_000.0], [13_000])


def test_a_synchronize_bounds_the_clock_even_by_work_that_ended_at_time_zero(tmp_path):
    """A trace whose clock starts at 0: a launch at 0-5 us of a kernel recorded at 0 for
    0 us (it ends at 0 ns), then a ``cudaDeviceSynchronize`` at 10-20 us: lower bound 0 at
    0; upper 20 us - 0 = 20 us at 20 us (not tight: 10 us, the work ended before it)."""
    ev = [
        _x("cuda_runtime", "cudaLaunchKernel", 0, 5, correlation=1),
        _x("cuda_runtime", "cudaDeviceSynchronize", 10, 10, correlation=2),
        _kernel("k", 0, 0, 1),
    ]
    b = _bounds_of(_trace(tmp_path, ev))
    assert (b.t_lower.tolist(), b.lower.tolist()) == ([0.0], [0])
    assert (b.t_upper.tolist(), b.upper.tolist()) == ([20_000.0], [20_000])
    assert b.blocked_upper is not None and b.blocked_upper.tolist() == []


def test_a_synchronize_in_a_trace_without_gpu_work_bounds_nothing(tmp_path):
    """Only a ``cudaDeviceSynchronize`` and a ``cudaStreamSynchronize``: no device has a
    stream, nothing was waited for, no bound of any kind."""
    ev = [
        _x("cuda_runtime", "cudaDeviceSynchronize", 0, 10, correlation=1),
        _x("cuda_runtime", "cudaStreamSynchronize", 20, 10, correlation=2),
    ]
    b = _bounds_of(_trace(tmp_path, ev))
    assert (b.lower.size, b.upper.size, b.blocked_upper.size) == (0, 0, 0)
    assert (b.t_lower.dtype, b.lower.dtype, b.t_upper.dtype, b.upper.dtype) == (
        np.float64, np.int64, np.float64, np.int64)  # fmt: skip
    assert b.blocked_upper.dtype == np.int64
    assert b.idle_launch_floor_ns is None


def test_the_idle_launch_floor_is_the_5th_percentile_of_launches_onto_an_idle_stream(tmp_path):
    """One thread, stream 7, times in us. Eight kernels start on an idle stream (more than
    1 us after the previous kernel ended), 3, 4.001, 6, 6, 7, 7, 8 and 9 us after their
    calls; three more are queued: ``q1`` starts exactly 1 us after the previous end (not
    more: not idle), ``q2`` 0.5 us after, ``q3`` as ``q2`` ends. The 5th percentile of the
    eight (numpy's linear rule: position 0.05 * 7 = 0.35) is 3,000 + 0.35 * 1,001 =
    3,350.35 ns, 3,350 as an int."""
    lags = [3, 4.001, 6, 6, 7, 7, 8, 9]
    ev = []
    for i, lag in enumerate(lags):
        c = 1000 + 20 * i
        ev += [_x("cuda_runtime", "cudaLaunchKernel", c, 1, correlation=i + 1),
               _kernel(f"k{i}", c + lag, 10, i + 1)]  # fmt: skip
    # the last idle kernel runs 1,149-1,159
    ev += [
        _x("cuda_runtime", "cudaLaunchKernel", 1150, 1, correlation=20),
        _kernel("q1", 1160, 10, 20),  # 1 us after 1,159: not idle; ends 1,170
        _x("cuda_runtime", "cudaLaunchKernel", 1152, 1, correlation=21),
        _kernel("q2", 1170.5, 9.5, 21),  # 0.5 us after: not idle; ends 1,180
        _x("cuda_runtime", "cudaLaunchKernel", 1154, 1, correlation=22),
        _kernel("q3", 1180, 10, 22),  # queued behind q2
    ]
    b = _bounds_of(_trace(tmp_path, ev))
    assert b.idle_launch_floor_ns == 3_350
    # seven idle launches are too few
    b = _bounds_of(_trace(tmp_path, ev[2:]))
    assert b.idle_launch_floor_ns is None


def test_an_estimate_beyond_2_62_ns_with_no_bound_on_that_side_is_clamped_there():
    """With no lower bound, launches onto idle streams starting 2**62 + 5,000,000 ns after
    their calls estimate the offset at 5,000 - (2**62 + 5,000,000) ns, below -2**62: the fit
    clamps it to -2**62 (a wider clamp would keep the estimate). With no upper bound, a
    blocked synchronize bounding the offset at 2**62 + 3,000,000 ns estimates that less the
    2,000 ns reaction, above 2**62: clamped to 2**62. Both are warned about (no
    synchronize bounds the clock); hand-made bounds, far beyond any recording (146 years)."""
    d = Diagnostics()
    low = fit_clock(_bounds([], [], floor=2**62 + 5_000_000), d)
    assert (low.offset_ns, low.drift, low.lower_ns, low.upper_ns) == (-(2**62), 0.0, None, None)
    high = fit_clock(_bounds([], [], blocked=[2**62 + 3_000_000]), d)
    assert high.offset_ns == 2**62 and (high.lower_ns, high.upper_ns) == (None, None)
    assert d.count("gpu_clock_from_launches") == 2
