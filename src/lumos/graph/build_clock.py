"""The GPU clock, put on the CPU clock from what the recording proves.

Kineto writes CPU events on the host clock and GPU activities on a clock CUPTI (or roctracer)
converts to it. The conversion can be off by microseconds to milliseconds, and can drift within a
trace. A wrong offset turns launches around (a kernel that starts before the call that launched
it) and makes every dependency inferred from timing wrong; a right one is proven by two kinds of
facts, each a hard bound on the offset ``off`` (added to GPU timestamps):

=============================  =================================================================
fact                           bound
=============================  =================================================================
a GPU task starts no earlier   ``off >= call start - task start`` (every launch: kernels, copies
than its launch call began     and sets, the kernels of a ``cudaGraphLaunch``)
a synchronize returns no       ``off <= call end - end of the last task launched before the
earlier than the work it       call`` on each stream it waits for: every stream of the device
waited for ended               (device sync), the stream the trace names (stream sync with a
                               ``cuda_sync`` event or a HIP stream argument), the stream whose
                               work ended first (stream sync without a named stream: it waited
                               for one of them), the copy of a blocking ``cudaMemcpy``
=============================  =================================================================

The bounds give an interval ``[lower, upper]`` the offset must lie in. Where in it is judged
from facts that are nearly tight. A synchronize that blocked (longer than a call takes, or the
work ended inside it as recorded; on work it certainly waited for: a device sync, a stream sync
naming its stream, a blocking copy) returns a few microseconds after that work ended: its bound
is the offset plus a reaction. The fastest launch starts a launch latency after its call: the
lower bound is the offset less a latency. When both are there and within 100 us of each other
(a launch queue that never emptied leaves the launches no evidence), the offset is half way
between the fastest launch and the fastest blocked synchronize, which is right whatever the
clocks did (a shifted clock shifts both; reaction and latency, both a few microseconds, cancel
to half their difference); with blocked synchronizes alone it is the fastest one less a nominal
reaction; with neither, launches onto idle streams start a launch latency after their calls, so
when even their 5th percentile is slower than a launch can be (or negative), that percentile
less a nominal latency is the offset. The estimate is kept inside the interval, and an estimate
within 50 us of 0 with 0 inside the interval is no evidence: nothing moves (a recording whose
clocks agree is left as it is; a deep launch queue is no offset). Without any estimate, 0 when
the interval holds it, else the smallest move that respects the violated bound plus a nominal
latency or reaction. A trace with no synchronize proves no upper bound: a move it makes on
launches alone is said (``gpu_clock_from_launches``).

An interval that is empty for any constant offset is a clock
that drifts: the offset becomes ``a + b * (t - origin)``, ``a`` the middle of the interval
the slope leaves. The interval's width is a concave function of ``b``: where bounds on both
sides over the trace make it peak, ``b`` is the peak (the line half way between the lower and
the upper bounds); where it only grows toward the edge of the search (+-5 %: bounds on one side
at one end of the trace), ``b`` is the gentlest slope that leaves two nominal launch latencies,
or as wide an interval as any slope leaves. Where even that contradicts
some bounds, the constant that contradicts the fewest is taken and the contradicted ones are
counted (``gpu_clock_inconsistent``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_links import Launches
from lumos.graph.build_sync import (
    DEVICE_SYNC,
    STREAM_SYNC,
    cuda_sync_by_correlation,
    device_of_call,
    end_of_last,
    known_stream,
    streams_of_device,
)
from lumos.graph.build_tasks import TaskLayout
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_schema import Category

__all__ = ["ClockBounds", "ClockFit", "clock_bounds", "fit_clock", "shift_gpu_clock"]

#: Recorded times closer than this are equal (Kineto rounds to microseconds).
RESOLUTION_NS = 1_000
#: The launch latency (call start to task start) assumed where a lag is removed.
NOMINAL_LATENCY_NS = 5_000
#: How soon a synchronize returns after its work ended, assumed where a lead is removed.
NOMINAL_REACTION_NS = 2_000
#: Launches onto idle streams that take longer than this (5th percentile) are suspicious.
SLOW_LAUNCH_NS = 50_000
#: A synchronize that lasted longer than this blocked on the GPU.
BLOCKED_SYNC_NS = 50_000
#: An estimated offset this close to 0, with 0 inside the bounds, is no evidence of one.
AGREE_NS = 50_000
#: The largest drift searched for, as a share of elapsed time.
MAX_DRIFT = 0.05
_GPU_CATEGORIES = (Category.KERNEL, Category.MEMCPY, Category.MEMSET, Category.GPU_USER_ANNOTATION)


@dataclass(frozen=True, eq=False)
class ClockBounds:
    """Hard bounds on the offset: ``off(t_lower[i]) >= lower[i]``, ``off(t_upper[j]) <=
    upper[j]`` (times relative to the trace origin, ns)."""

    t_lower: NDArray[np.float64]
    lower: NDArray[np.int64]
    t_upper: NDArray[np.float64]
    upper: NDArray[np.int64]
    idle_launch_floor_ns: int | None = None
    #: The upper bounds of synchronizes that blocked, on work they certainly waited for
    #: (a device sync, a stream sync naming its stream, a blocking copy): nearly tight.
    blocked_upper: NDArray[np.int64] | None = None


@dataclass(frozen=True)
class ClockFit:
    """``offset_ns + drift * (t - origin)`` is added to every GPU timestamp ``t``.

    ``lower_ns``/``upper_ns``: the interval the bounds left at the origin (None: unbounded);
    ``contradicted``: bounds the chosen offset breaks (0 for a consistent recording).
    """

    offset_ns: int = 0
    drift: float = 0.0
    lower_ns: int | None = None
    upper_ns: int | None = None
    contradicted: int = 0
    #: The times (from the origin) the bounds cover: a drift is not extrapolated past them.
    span_ns: tuple[int, int] = (0, 0)

    @property
    def moves(self) -> bool:
        return self.offset_ns != 0 or self.drift != 0.0

    def calibration(self) -> dict[str, int]:
        """What the graph records of the fit (``Mapping[str, int]``, drift in parts per 1e9)."""
        out = {"gpu_clock_offset_ns": self.offset_ns}
        if self.drift:
            out["gpu_clock_drift_ppb"] = round(self.drift * 1e9)
        if self.lower_ns is not None:
            out["gpu_clock_lower_bound_ns"] = self.lower_ns
        if self.upper_ns is not None:
            out["gpu_clock_upper_bound_ns"] = self.upper_ns
        return out


def clock_bounds(trace: KinetoTrace, layout: TaskLayout, launches: Launches) -> ClockBounds:
    """Every hard bound the trace holds on the GPU clock offset (see the module docstring)."""
    ts, end = layout.ts_ns, layout.ts_ns + layout.dur_ns
    origin = layout.origin_ns
    g = np.flatnonzero(launches.launcher >= 0)
    call = launches.launcher[g]
    t_lower = (ts[call] - origin).astype(np.float64)
    lower = ts[call] - ts[g]
    t_up: list[int] = []
    up: list[int] = []
    tight: list[int] = []
    ev = trace.events
    names = trace.names
    by_device = streams_of_device(layout, launches, trace)
    stream_gp = _stream_processors(trace, layout)
    sync_by_corr, _ = cuda_sync_by_correlation(trace)
    rt = np.flatnonzero((layout.kind == 1) & (layout.event_idx >= 0) & ~layout.is_wait)
    rt_name = ev.name_idx[layout.event_idx[rt]]
    is_dev = np.array([bool(DEVICE_SYNC.match(n)) for n in names], dtype=bool)
    is_stream = np.array([bool(STREAM_SYNC.match(n)) for n in names], dtype=bool)
    for t in rt[is_dev[rt_name] | is_stream[rt_name]].tolist():
        e = int(layout.event_idx[t])
        s, f = int(ts[t]), int(end[t])
        dev = device_of_call(trace, layout, launches, by_device, int(layout.processor_idx[t]), s)
        streams = by_device.get(dev, [])
        ends = [end_of_last(launches, end, gp, s) for gp in streams]
        ends = [x for x in ends if x >= 0]
        certain = True
        if is_dev[ev.name_idx[e]]:
            waited = max(ends, default=-1)
        else:
            corr = int(ev.correlation_id[e])
            stream = known_stream(e, corr, trace, sync_by_corr, stream_gp, dev)
            certain = stream >= 0
            waited = end_of_last(launches, end, stream, s) if certain else min(ends, default=-1)
        if waited >= 0:
            t_up.append(f - origin)
            up.append(f - waited)
            if certain and (f - s > BLOCKED_SYNC_NS or s <= waited <= f):
                tight.append(f - waited)
    # a blocking copy's call returned right after its copy ended
    copy_of_call = {int(c): int(k) for k, c in zip(g.tolist(), call.tolist(), strict=True)}
    for w in np.flatnonzero(layout.is_wait).tolist():
        k = copy_of_call.get(w - 1)
        if k is not None:
            t_up.append(int(end[w - 1]) - origin)
            up.append(int(end[w - 1]) - int(end[k]))
            tight.append(up[-1])
    return ClockBounds(
        t_lower=t_lower,
        lower=lower.astype(np.int64),
        t_upper=np.asarray(t_up, dtype=np.float64),
        upper=np.asarray(up, dtype=np.int64),
        idle_launch_floor_ns=_idle_launch_floor(layout, launches),
        blocked_upper=np.asarray(tight, dtype=np.int64),
    )


def fit_clock(bounds: ClockBounds, diag: Diagnostics) -> ClockFit:
    """The offset (and drift) the bounds allow, preferring none (see the module docstring)."""
    lo = int(bounds.lower.max()) if bounds.lower.size else None
    hi = int(bounds.upper.min()) if bounds.upper.size else None
    if lo is None or hi is None or lo <= hi + RESOLUTION_NS:
        est, how = _estimate(bounds)
        if est is None:
            return ClockFit(_pick(lo, hi), 0.0, lo, hi)
        off = int(min(max(est, -(2**62) if lo is None else lo), 2**62 if hi is None else hi))
        if _holds_zero(lo, hi) and abs(off) <= AGREE_NS:
            return ClockFit(0, 0.0, lo, hi)
        if hi is None:
            diag.warn("gpu_clock_from_launches", f"no synchronize bounds the GPU clock and {how}: "
                      f"GPU clock moved {off / 1e3:+.1f} us")  # fmt: skip
        return ClockFit(off, 0.0, lo, hi)
    drift, a_lo, a_hi = _best_drift(bounds)
    if a_lo <= a_hi + RESOLUTION_NS:
        t = np.concatenate([bounds.t_lower, bounds.t_upper])
        span = (int(t.min()), int(t.max()))
        return ClockFit((a_lo + a_hi) // 2, drift, a_lo, a_hi, span_ns=span)
    offset, broken = _fewest_contradictions(bounds)
    diag.warn("gpu_clock_inconsistent", f"no GPU clock offset agrees with all launches and "
              f"synchronizes: {broken} contradict {offset / 1e3:+.1f} us", broken)  # fmt: skip
    return ClockFit(offset, 0.0, lo, hi, broken)


def _estimate(bounds: ClockBounds) -> tuple[int | None, str]:
    """Where in the interval the offset lies, from the nearly tight facts (see the module
    docstring): the fastest return of a synchronize that blocked, and the fastest launch."""
    tight = bounds.blocked_upper
    lo = int(bounds.lower.max()) if bounds.lower.size else None
    if tight is not None and tight.size:
        hi = int(tight.min())
        if lo is not None and 0 <= hi - lo <= 2 * SLOW_LAUNCH_NS:
            return (lo + hi) // 2, "the fastest launch and the fastest blocked synchronize"
        return hi - NOMINAL_REACTION_NS, "the fastest synchronize that blocked"
    floor = bounds.idle_launch_floor_ns
    if floor is not None and (floor > SLOW_LAUNCH_NS or floor < 0):
        how = f"launches onto idle streams start {floor / 1e3:.1f} us after their calls"
        return NOMINAL_LATENCY_NS - floor, how
    return None, ""


def _holds_zero(lo: int | None, hi: int | None) -> bool:
    return (lo is None or lo <= RESOLUTION_NS) and (hi is None or hi >= -RESOLUTION_NS)


def shift_gpu_clock(trace: KinetoTrace, fit: ClockFit, origin_ns: int) -> KinetoTrace:
    """The trace with every GPU activity moved onto the CPU clock by ``fit``."""
    ev = trace.events
    gpu = np.isin(ev.cat, [int(c) for c in _GPU_CATEGORIES])
    shift = np.full(len(ev), fit.offset_ns, dtype=np.int64)
    if fit.drift:
        since = np.clip(ev.ts_ns - origin_ns, *fit.span_ns)  # a stray timestamp hours away
        shift += np.rint(fit.drift * since).astype(np.int64)
    if gpu.any() and not (ev.ts_ns[gpu] % RESOLUTION_NS).any():
        # whole microseconds (older recorders): moved on the grid they were written on, so that
        # work that ended as the next began, as written, still does
        shift = np.rint(shift / RESOLUTION_NS).astype(np.int64) * RESOLUTION_NS
    ts = np.where(gpu, ev.ts_ns + shift, ev.ts_ns)
    return dataclasses.replace(trace, events=dataclasses.replace(ev, ts_ns=ts))


def _pick(lo: int | None, hi: int | None, *, prefer_zero: bool = True) -> int:
    """A point of ``[lo, hi]``: 0 when allowed, else next to the violated side."""
    if prefer_zero and _holds_zero(lo, hi):
        return 0
    if lo is not None and (not prefer_zero or lo > RESOLUTION_NS):
        room = NOMINAL_LATENCY_NS if hi is None else max(hi - lo, 0) // 2
        return lo + min(NOMINAL_LATENCY_NS, room)
    assert hi is not None
    room = NOMINAL_REACTION_NS if lo is None else max(hi - lo, 0) // 2
    return hi - min(NOMINAL_REACTION_NS, room)


def _best_drift(bounds: ClockBounds) -> tuple[float, int, int]:
    """The slope that leaves the offset the most room, when the bounds pin it (bounds on both
    sides over the trace); else (the room grows without end, toward one side's bounds) the
    gentlest slope that leaves two nominal launch latencies of room, or as much as any slope
    leaves. And the interval it leaves for the offset at the origin."""
    tl, lw = bounds.t_lower, bounds.lower.astype(np.float64)
    tu, uw = bounds.t_upper, bounds.upper.astype(np.float64)

    def interval(b: float) -> tuple[float, float]:
        return float((lw - b * tl).max()), float((uw - b * tu).min())

    def room(b: float) -> float:
        lo, hi = interval(b)
        return hi - lo

    a, c = -MAX_DRIFT, MAX_DRIFT
    for _ in range(200):  # the room is concave in the slope: ternary search for its top
        m1, m2 = a + (c - a) / 3, c - (c - a) / 3
        if room(m1) < room(m2):
            a = m1
        else:
            c = m2
    top = (a + c) / 2
    if abs(top) < 0.99 * MAX_DRIFT:
        lo, hi = interval(top)  # bounds on both sides over time pin the slope: the center line
        return top, int(np.ceil(lo)), int(np.floor(hi))
    want = min(room(top), 2.0 * NOMINAL_LATENCY_NS)
    near, far = 0.0, top  # room(near) < want <= room(far): bisect for the gentlest slope
    for _ in range(200):
        mid = (near + far) / 2
        if room(mid) >= want:
            far = mid
        else:
            near = mid
    lo, hi = interval(far)
    return far, int(np.ceil(lo)), int(np.floor(hi))


def _fewest_contradictions(bounds: ClockBounds) -> tuple[int, int]:
    """The constant offset that breaks the fewest bounds (ties: nearest 0), and how many."""
    lw = np.sort(bounds.lower)
    uw = np.sort(bounds.upper)
    cand = np.unique(np.concatenate([lw, uw, [0]]))
    broken = (lw.size - np.searchsorted(lw, cand + RESOLUTION_NS, side="right")) + np.searchsorted(
        uw, cand - RESOLUTION_NS, side="left"
    )
    best = np.flatnonzero(broken == broken.min())
    k = int(best[np.argmin(np.abs(cand[best]))])
    return int(cand[k]), int(broken[k])


def _idle_launch_floor(layout: TaskLayout, launches: Launches) -> int | None:
    """5th percentile of call start -> task start over launches onto an idle stream (None when
    fewer than 8)."""
    ts, end = layout.ts_ns, layout.ts_ns + layout.dur_ns
    launcher = launches.launcher
    prev_end = np.full(len(layout), np.iinfo(np.int64).min, dtype=np.int64)
    same = layout.processor_idx[1:] == layout.processor_idx[:-1]
    prev_end[1:][same] = end[:-1][same]
    idle = np.flatnonzero((launcher >= 0) & (ts > prev_end + RESOLUTION_NS))
    if idle.size < 8:
        return None
    return int(np.percentile(ts[idle] - ts[launcher[idle]], 5))


def _stream_processors(trace: KinetoTrace, layout: TaskLayout) -> dict[tuple[int, int], int]:
    return {
        (int(trace.processors.device[p]), int(trace.processors.tid[p])): gp
        for gp, p in enumerate(layout.processors.tolist())
        if trace.processors.kind[p] == 1
    }
