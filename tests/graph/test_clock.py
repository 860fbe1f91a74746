"""The GPU clock is put on the CPU clock from hard bounds only (``lumos.graph.build_clock``).

Launches bound the offset from below (a GPU task never starts before its launch call began),
synchronizations from above (a synchronize never returns before the work it waited for ended).
Expected offsets are worked out from the bounds by hand; the real traces' bounds are read from
their events here, independently of the module.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from tests.realdata import needs_realdata, trace

from lumos.diagnostics import Diagnostics
from lumos.graph.build import build_graph
from lumos.graph.build_blocking import blocking_copies
from lumos.graph.build_clock import (
    NOMINAL_LATENCY_NS,
    NOMINAL_REACTION_NS,
    ClockBounds,
    ClockFit,
    clock_bounds,
    fit_clock,
)
from lumos.graph.build_links import find_launches
from lumos.graph.build_tasks import lay_out_tasks
from lumos.graph.model import DepKind
from lumos.ingest.kineto import read_kineto


def _bounds(lower, upper, t_lower=None, t_upper=None, floor=None, blocked=()) -> ClockBounds:
    lower, upper = np.asarray(lower, np.int64), np.asarray(upper, np.int64)
    tl = np.arange(lower.size, dtype=np.float64) if t_lower is None else np.asarray(t_lower, float)
    tu = np.arange(upper.size, dtype=np.float64) if t_upper is None else np.asarray(t_upper, float)
    return ClockBounds(tl, lower, tu, upper, floor, np.asarray(blocked, np.int64))


def test_clocks_that_agree_are_left_alone_however_slow_the_launches():
    """Every launch took >= 60 us (a deep queue, or slow launches) but a synchronize that
    blocked returned 3 us after its work ended: the clocks agree, nothing moves (the old
    estimate moved the GPU clock 55 us back and turned launches around)."""
    d = Diagnostics()
    b = _bounds([-60_000, -80_000, -61_000], [3_000, 9_000], floor=60_000, blocked=[3_000])
    fit = fit_clock(b, d)
    assert (fit.offset_ns, fit.drift, fit.lower_ns, fit.upper_ns) == (0, 0.0, -60_000, 3_000)
    assert not d


def test_a_blocked_synchronize_shows_a_lag_that_a_deep_queue_hides():
    """Kernels start >= 1.2 ms after their launches (a deep queue) and the closing device sync,
    which blocked, returned 20 ms after its work ended as recorded: the GPU clock lags 20 ms."""
    b = _bounds([-1_206_664], [20_005_773], blocked=[20_005_773])
    assert fit_clock(b, Diagnostics()).offset_ns == 20_005_773 - NOMINAL_REACTION_NS
    # the same deep queue with the sync 5.8 us after its work: the clocks agree
    b = _bounds([-21_206_664], [5_773], blocked=[5_773])
    assert fit_clock(b, Diagnostics()).offset_ns == 0


def test_a_lagging_gpu_clock_moves_forward_by_the_bounds():
    """No nearly tight fact (no blocked synchronize, no idle-launch floor): the offset is the
    smallest move past the violated lower bound plus a nominal launch latency, 2.4 + 0.005 ms,
    no drift, the interval [2.4, 2.5] ms recorded, nothing contradicted or warned."""
    d = Diagnostics()
    fit = fit_clock(_bounds([2_400_000, -5_000], [2_500_000]), d)
    assert fit == ClockFit(2_400_000 + NOMINAL_LATENCY_NS, 0.0, 2_400_000, 2_500_000)
    # with a tight interval, the middle of it (half its 2 us room is less than the latency)
    fit = fit_clock(_bounds([2_400_000], [2_402_000]), d)
    assert fit == ClockFit(2_401_000, 0.0, 2_400_000, 2_402_000)
    assert not d


def test_a_leading_gpu_clock_moves_back_by_the_bounds():
    """The upper bound is violated: a nominal reaction below it."""
    fit = fit_clock(_bounds([-30_000_000], [-20_000_000]), Diagnostics())
    assert fit == ClockFit(-20_000_000 - NOMINAL_REACTION_NS, 0.0, -30_000_000, -20_000_000)


def test_idle_launches_place_the_offset_inside_the_interval():
    # launches onto idle streams start 20.003 ms after their calls: a 5 us launch once moved
    d = Diagnostics()
    fit = fit_clock(_bounds([-20_010_000], [-19_600_000], floor=20_003_000), d)
    assert fit == ClockFit(NOMINAL_LATENCY_NS - 20_003_000, 0.0, -20_010_000, -19_600_000)
    # ... but never outside the interval the hard bounds leave
    fit = fit_clock(_bounds([-20_010_000], [-19_600_000], floor=10_000_000), d)
    assert fit == ClockFit(-19_600_000, 0.0, -20_010_000, -19_600_000)
    assert not d  # a synchronize bounds the clock: nothing to say


def test_a_drifting_clock_is_fitted_with_a_slope():
    """Launch bounds at 0.5 ms + 1 % of elapsed time, sync bounds 3 us above that line: no
    constant fits, the line does."""
    t = np.arange(0, 100_000_000, 1_000_000, dtype=np.float64)
    lower = (500_000 + 0.01 * t).astype(np.int64)
    upper = lower + 3_000
    fit = fit_clock(_bounds(lower, upper, t, t), Diagnostics())
    assert fit.drift == pytest.approx(0.01, abs=1e-6)
    assert 500_000 <= fit.offset_ns <= 503_000


def test_an_unpinned_drift_is_the_gentlest_slope_leaving_two_launch_latencies_of_room():
    """One launch bound, offset >= 0 at the origin, and one sync bound, offset <= -3 us at
    100 ms: no constant fits (0 > -3 us + 1 us), and the room a slope b leaves, -3 us - b*100 ms
    - 0, grows without end as b falls, so the steepest allowed slope (-5 %) is not taken: the
    gentlest one leaving 2 * 5 us of room is, -3 us - b * 1e8 = 10 us, b = -1.3e-4. The interval
    at the origin is then [0, 10 us], the offset its middle, over the bounds' span [0, 100 ms]."""
    fit = fit_clock(_bounds([0], [-3_000], [0.0], [1e8]), Diagnostics())
    assert fit.drift == pytest.approx(-1.3e-4, rel=1e-9)
    assert (fit.offset_ns, fit.lower_ns, fit.upper_ns, fit.span_ns) == (
        5_000,
        0,
        10_000,
        (0, 100_000_000),
    )
    assert fit.contradicted == 0


def test_bounds_no_line_satisfies_are_counted_not_hidden():
    d = Diagnostics()
    fit = fit_clock(_bounds([0, 0, 5_000_000], [1_000, 1_000, 1_000], [0, 1, 2], [0, 1, 2]), d)
    assert fit.contradicted == 1
    assert fit.offset_ns in (0, 1_000)
    assert d.count("gpu_clock_inconsistent") == 1


def test_without_synchronize_only_launches_onto_idle_streams_can_show_a_lead_and_it_is_said():
    d = Diagnostics()
    fit = fit_clock(_bounds([-20_070_000, -20_500_000], [], floor=20_070_000), d)
    assert fit.offset_ns == NOMINAL_LATENCY_NS - 20_070_000
    assert d.count("gpu_clock_from_launches") == 1
    # never against a hard bound
    fit = fit_clock(_bounds([-70_000], [], floor=90_000), Diagnostics())
    assert fit.offset_ns == -70_000
    # launches as fast as launches are: nothing to move, nothing said
    d = Diagnostics()
    assert fit_clock(_bounds([-9_000], [], floor=9_000), d).offset_ns == 0
    assert not d


def test_a_synchronize_that_is_the_traces_first_event_bounds_the_clock_like_any_other(tmp_path):
    """Thread 2 launches kernel ``k`` at 0 us (call 0-5 us); ``k`` is recorded at 30-130 us on
    stream 7. Thread 1's only event, and so the trace's first (events sort by thread, then
    time), is a ``cudaDeviceSynchronize`` from 60 to 114 us: it returned 16 us before ``k``
    was recorded to end, so the GPU clock leads. Bounds: ``off >= 0 - 30 = -30 us`` (the
    launch), ``off <= 114 - 130 = -16 us`` (the synchronize, blocked 54 us > 50 us: nearly
    tight). The two tight facts lie 14 us apart, so the offset is half way, -23 us, and ``k``
    moves to 7-107 us."""
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1,
         "ts": 60, "dur": 54, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2,
         "ts": 0, "dur": 5, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 30, "dur": 100,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
    ]  # fmt: skip
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    tr = read_kineto(p)
    assert tr.names[int(tr.events.name_idx[0])] == "cudaDeviceSynchronize"
    g = build_graph(tr)
    cal = {k: v for k, v in g.calibration.items() if k.startswith("gpu_clock")}
    assert cal == {"gpu_clock_offset_ns": -23_000, "gpu_clock_lower_bound_ns": -30_000,
                   "gpu_clock_upper_bound_ns": -16_000}  # fmt: skip
    k = [g.names[int(i)] for i in g.tasks.name_idx].index("k")
    assert (int(g.tasks.ts_ns[k]), int(g.tasks.dur_ns[k])) == (7_000, 100_000)


def test_the_bounds_of_launches_syncs_and_blocking_copies_are_times_from_the_origin(tmp_path):
    """One thread, times in us from 1,000 (the origin: the trace's first event): launch 0-5
    (kernel ``k`` 10-60 on stream 7); a blocking ``cudaMemcpy`` 70-100 whose copy runs 75-95
    on stream 7; ``cudaDeviceSynchronize`` 110-180.

    Lower bounds (call start - task start, at the call's start): ``k`` -10 at 0, the copy -5
    at 70. Upper bounds (return - end of the last work launched before, at the return): the
    device sync waited for the copy, 180 - 95 = 85 at 180 (it blocked 70 > 50 us on work it
    certainly waited for: nearly tight); the blocking copy's call returned 100 - 95 = 5 after
    its copy, at 100 (nearly tight too). Two launches are too few for an idle-launch floor."""

    def x(cat, name, ts, dur, tid=1, **args):
        pid = 0 if cat in ("kernel", "gpu_memcpy") else 1
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
                "dur": dur, "args": args}  # fmt: skip

    gpu = {"tid": 7, "device": 0, "stream": 7}
    events = [
        x("cuda_runtime", "cudaLaunchKernel", 1000, 5, correlation=1),
        x("kernel", "k", 1010, 50, correlation=1, **gpu),
        x("cuda_runtime", "cudaMemcpy", 1070, 30, correlation=2),
        x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 1075, 20, correlation=2, **gpu),
        x("cuda_runtime", "cudaDeviceSynchronize", 1110, 70, correlation=3),
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    t = read_kineto(p)
    layout = lay_out_tasks(t, blocking_copies(t))
    assert layout.origin_ns == 1_000_000
    b = clock_bounds(t, layout, find_launches(t, layout))
    assert b.t_lower.tolist() == [0.0, 70_000.0]
    assert b.lower.tolist() == [-10_000, -5_000]
    assert b.t_upper.tolist() == [180_000.0, 100_000.0]
    assert b.upper.tolist() == [85_000, 5_000]
    assert b.blocked_upper is not None and b.blocked_upper.tolist() == [85_000, 5_000]
    assert b.idle_launch_floor_ns is None


_DEVICE_SYNC = re.compile(r"^(cuda|hip)DeviceSynchronize$")


@needs_realdata
def test_mi300_deep_queue_is_not_a_clock_offset():
    """The MI300X trace's kernels start >= 21 ms after their launches, and its closing
    hipDeviceSynchronize lasts 37.9 ms and returns 5.8 us after the last kernel ends: the GPU
    ran 21 ms behind a CPU that queued ahead, on the CPU's clock. (The GPU clock was moved
    21.4 ms back before, and 68 kernels started before their launch calls.)"""
    t = read_kineto(trace("rccl_mi300"))
    g = build_graph(t)
    assert g.calibration["gpu_clock_offset_ns"] == 0
    ev = t.events
    sync = [i for i in range(len(ev)) if _DEVICE_SYNC.match(t.names[int(ev.name_idx[i])])]
    assert len(sync) == 1 and int(ev.dur_ns[sync[0]]) > 30_000_000
    assert g.calibration["gpu_clock_upper_bound_ns"] == 5_773


@needs_realdata
@pytest.mark.parametrize("name", ["rccl_mi300", "nccl_a100", "gpu_bound_v100", "alltoall_4streams",
                                  "legacy_2021_v100", "hip_mi250", "allgather_b200"])  # fmt: skip
def test_no_gpu_task_starts_before_its_launch_call(name):
    """On the CPU clock the build chose, every launched task starts at or after its call."""
    g = build_graph(read_kineto(trace(name)))
    e = g.edges
    launch = e.kind == int(DepKind.LAUNCH)
    early = g.tasks.ts_ns[e.dst[launch]] - g.tasks.ts_ns[e.src[launch]]
    assert early.min() >= -1_000  # the recording's 1 us resolution


@needs_realdata
def test_a_drift_is_not_extrapolated_and_whole_microseconds_stay_whole():
    from lumos.graph.build_clock import ClockFit, shift_gpu_clock

    t = read_kineto(trace("legacy_2021_v100"))  # whole microseconds
    gpu = np.isin(t.events.cat, [5, 6, 7])  # kernels, copies, sets
    assert not (t.events.ts_ns[gpu] % 1_000).any()
    origin = int(t.events.ts_ns.min())
    # 1 % drift fitted over the first 10 ms: an event later than that moves as at 10 ms
    fit = ClockFit(2_000, 0.01, span_ns=(0, 10_000_000))
    moved = shift_gpu_clock(t, fit, origin).events.ts_ns
    since = np.clip(t.events.ts_ns - origin, 0, 10_000_000)
    shift = np.rint((2_000 + 0.01 * since) / 1_000).astype(np.int64) * 1_000  # on the us grid
    assert (moved[gpu] == t.events.ts_ns[gpu] + shift[gpu]).all()
    assert moved[gpu].max() - t.events.ts_ns[gpu].max() == 102_000  # 2 us + 1 % of 10 ms
    assert (moved[~gpu] == t.events.ts_ns[~gpu]).all()
