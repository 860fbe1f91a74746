"""GPU->CPU synchronisation and GPU->GPU (inter-stream) dependencies of a Kineto trace.

Synchronisation calls become runtime :class:`~lumos.graph.model.Waits`: the simulator decides
what they wait for (the last task launched on the stream by then). The graph keeps only each
call's *intrinsic* cost: for a call that blocked, the time from the end of the GPU work it waited
for to its return; the wait itself comes out of the simulation.

Inter-stream edges come from ``cuda_sync`` "Stream Wait Event" records when the trace has them,
otherwise from ``cudaEventRecord`` / ``cudaStreamWaitEvent`` calls and the launch order on the
calling thread (see :mod:`lumos.graph.build_links`). An inferred edge that the recording
contradicts (its source ended after its destination started) is dropped and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_links import Launches
from lumos.graph.build_stream_waits import StreamWaits, plan_stream_waits
from lumos.graph.build_tasks import TaskLayout
from lumos.graph.model import WaitKind
from lumos.ingest.kineto import KinetoTrace

__all__ = [
    "DEVICE_SYNC",
    "EVENT_SYNC",
    "STREAM_SYNC",
    "SyncPlan",
    "cuda_sync_by_correlation",
    "device_of_call",
    "end_of_last",
    "known_stream",
    "plan_syncs",
    "streams_of_device",
]

_TOLERANCE_NS = 1_000
STREAM_SYNC = re.compile(r"^(cuda|hip)StreamSynchronize$")
DEVICE_SYNC = re.compile(r"^(cuda|hip)(Device|Ctx|Thread)Synchronize$|^cuCtxSynchronize$")
EVENT_SYNC = re.compile(r"^(cuda|hip)EventSynchronize$|^cuEventSynchronize$")
_EVENT_RECORD = re.compile(r"^(cuda|hip)EventRecord(WithFlags)?$|^cuEventRecord")
_STREAM_WAIT = re.compile(r"^(cuda|hip)StreamWaitEvent$|^cuStreamWaitEvent$")


@dataclass
class SyncPlan:
    """What the sync pass decided: waits, inter-stream edges, durations to shorten."""

    wait_task: list[int] = field(default_factory=list)
    wait_kind: list[int] = field(default_factory=list)
    wait_stream: list[int] = field(default_factory=list)
    wait_device: list[int] = field(default_factory=list)
    wait_record: list[int] = field(default_factory=list)
    waited_end_ns: dict[int, int] = field(default_factory=dict)  # task -> recorded GPU end
    stream_src: list[int] = field(default_factory=list)
    stream_dst: list[int] = field(default_factory=list)


def streams_of_device(
    layout: TaskLayout, launches: Launches, trace: KinetoTrace
) -> dict[int, list[int]]:
    """Device id -> its streams (graph processors) that hold launched work."""
    out: dict[int, list[int]] = {}
    for gp in launches.stream_order:
        dev = int(trace.processors.device[int(layout.processors[gp])])
        out.setdefault(dev, []).append(gp)
    return out


def plan_syncs(
    trace: KinetoTrace, layout: TaskLayout, launches: Launches, diag: Diagnostics
) -> SyncPlan:
    """Find every sync call and stream-wait, and what each one refers to."""
    ev = trace.events
    names = trace.names
    plan = SyncPlan()
    end = layout.ts_ns + layout.dur_ns
    by_device = streams_of_device(layout, launches, trace)
    all_streams = sorted(launches.stream_order)
    gp_of_trace = {int(p): gp for gp, p in enumerate(layout.processors.tolist())}
    stream_gp = {
        (int(trace.processors.device[p]), int(trace.processors.tid[p])): gp_of_trace[int(p)]
        for p in layout.processors.tolist()
        if trace.processors.kind[p] == 1
    }
    sync_by_corr, wait_on_first = cuda_sync_by_correlation(trace)
    record_task_by_corr: dict[int, int] = {}
    # classify names once, then visit only the calls that matter (not every runtime call)
    is_record = np.array([bool(_EVENT_RECORD.match(n)) for n in names], dtype=bool)
    is_wait = np.array([bool(_STREAM_WAIT.match(n)) for n in names], dtype=bool)
    is_sync = is_wait | np.array(
        [bool(DEVICE_SYNC.match(n) or STREAM_SYNC.match(n) or EVENT_SYNC.match(n))
         for n in names], dtype=bool,
    )  # fmt: skip
    rt_tasks = np.flatnonzero((layout.kind == 1) & (layout.event_idx >= 0) & ~layout.is_wait)
    rt_names = ev.name_idx[layout.event_idx[rt_tasks]]
    record_tasks = rt_tasks[is_record[rt_names]]
    for t in record_tasks.tolist():
        c = int(ev.correlation_id[layout.event_idx[t]])
        if c >= 0:
            record_task_by_corr[c] = t
    rec_thread = layout.processor_idx[record_tasks]
    records_by_thread = {}
    for p in np.unique(rec_thread).tolist():
        tasks = record_tasks[rec_thread == p]
        records_by_thread[int(p)] = (layout.ts_ns[tasks], tasks)
    sync_tasks = rt_tasks[is_sync[rt_names]]
    sync_names = rt_names[is_sync[rt_names]]
    wait_tasks = sync_tasks[is_wait[sync_names]]
    waits = plan_stream_waits(wait_tasks, layout, launches, sync_by_corr, wait_on_first,
                              stream_gp, record_task_by_corr, records_by_thread,
                              ev.correlation_id[layout.event_idx[wait_tasks]])  # fmt: skip
    edge = (waits.src >= 0) & ~waits.contradicted
    plan.stream_src.extend(waits.src[edge].tolist())
    plan.stream_dst.extend(waits.dst[edge].tolist())
    # each stream-wait warning is warned, all its calls at once, where its first call is met:
    # the codes keep the order of their first calls among the other syncs' warnings
    firsts = _first_warnings(waits)
    k = -1  # the row of waits of the current stream wait
    for t, name_idx in zip(sync_tasks.tolist(), sync_names.tolist(), strict=True):
        if is_wait[name_idx]:
            k += 1
            for code, count, example in firsts.get(k, ()):
                diag.warn(code, example, count)
            continue
        e = int(layout.event_idx[t])
        name = names[name_idx]
        thread = int(layout.processor_idx[t])
        s, f = int(layout.ts_ns[t]), int(end[t])
        corr = int(ev.correlation_id[e])
        kind: WaitKind | None = None
        if DEVICE_SYNC.match(name):
            kind = WaitKind.DEVICE
        elif STREAM_SYNC.match(name) or EVENT_SYNC.match(name):
            kind = WaitKind.STREAM
        if kind is None:
            continue
        dev = device_of_call(trace, layout, launches, by_device, thread, s)
        if kind == WaitKind.DEVICE:
            streams = by_device.get(dev, all_streams)
            ends = [end_of_last(launches, end, gp, s) for gp in streams]
            plan.wait_task.append(t)
            plan.wait_kind.append(int(WaitKind.DEVICE))
            plan.wait_stream.append(-1)
            plan.wait_device.append(dev)
            plan.wait_record.append(-1)
            plan.waited_end_ns[t] = max(ends, default=-1)
            continue
        stream = known_stream(e, corr, trace, sync_by_corr, stream_gp, dev)
        if stream < 0:
            stream = _infer_waited_stream(launches, end, all_streams, s, f)
        if stream < 0:
            stream = launches.stream_of_previous_launch(thread, s)
        if stream < 0:
            diag.warn("sync_target_unknown", f"{name} at {s} ns")
            continue
        record = -1
        info = sync_by_corr.get(corr)
        if info is not None and info[0] == 1 and info[2] in record_task_by_corr:
            record = record_task_by_corr[info[2]]
        plan.wait_task.append(t)
        plan.wait_kind.append(int(WaitKind.EVENT if record >= 0 else WaitKind.STREAM))
        plan.wait_stream.append(stream)
        plan.wait_device.append(dev)
        plan.wait_record.append(record)
        if record >= 0:
            g = launches.last_launched_before(stream, int(layout.ts_ns[record]))
            plan.waited_end_ns[t] = int(end[g]) if g >= 0 else -1
        else:
            plan.waited_end_ns[t] = end_of_last(launches, end, stream, s)
    return plan


def device_of_call(
    trace: KinetoTrace,
    layout: TaskLayout,
    launches: Launches,
    by_device: dict[int, list[int]],
    thread: int,
    ts_ns: int,
) -> int:
    """The device a sync call refers to: the one its thread last launched work on (a process
    driving several GPUs switches device per call), else the lowest device of the trace."""
    stream = launches.stream_of_previous_launch(thread, ts_ns)
    if stream >= 0:
        return int(trace.processors.device[int(layout.processors[stream])])
    return min(by_device) if by_device else 0


def end_of_last(launches: Launches, end: NDArray[np.int64], stream: int, ts_ns: int) -> int:
    """End of the task last launched on ``stream`` before ``ts_ns`` (-1 if none)."""
    g = launches.last_launched_before(stream, ts_ns)
    return int(end[g]) if g >= 0 else -1


def _infer_waited_stream(
    launches: Launches, end: NDArray[np.int64], streams: list[int], s: int, f: int
) -> int:
    """The stream whose work (launched before the call) finished last inside the call."""
    best, best_end = -1, -1
    for gp in streams:
        g_end = end_of_last(launches, end, gp, s)
        if s < g_end <= f + _TOLERANCE_NS and g_end > best_end:
            best, best_end = gp, g_end
    return best


def cuda_sync_by_correlation(
    trace: KinetoTrace,
) -> tuple[dict[int, tuple[int, int, int]], dict[int, int]]:
    """From ``cuda_sync`` events: correlation -> (sync kind, stream, record correlation) of its
    last event, and correlation -> ``wait_on_stream`` of its first (a stream wait's recording
    stream)."""
    se = trace.sync_events
    ev = trace.events
    out: dict[int, tuple[int, int, int]] = {}
    wait_on_first: dict[int, int] = {}
    for k in range(len(se)):
        corr = int(ev.correlation_id[se.event_idx[k]])
        if corr < 0:
            continue
        wait_on_first.setdefault(corr, int(se.wait_on_stream[k]))
        stream = int(se.stream[k]) if se.stream[k] >= 0 else int(se.wait_on_stream[k])
        if se.kind[k] in (1, 3):
            stream = int(se.wait_on_stream[k]) if se.kind[k] == 1 else int(se.stream[k])
        out[corr] = (int(se.kind[k]), stream, int(se.record_correlation_id[k]))
    return out, wait_on_first


def known_stream(
    e: int,
    corr: int,
    trace: KinetoTrace,
    sync_by_corr: dict[int, tuple[int, int, int]],
    stream_gp: dict[tuple[int, int], int],
    device: int | None = None,
) -> int:
    """The stream a sync call names (its ``cuda_sync`` event, or a HIP stream argument), as a
    graph processor; -1 when the trace does not say. Stream ids repeat across the devices of
    a process (each GPU's default stream is 7): the id is looked up on ``device`` (the one
    the call refers to, :func:`device_of_call`) when that device has such a stream, else on
    the trace's lowest device."""
    info = sync_by_corr.get(corr)
    if info is not None and info[1] >= 0:
        sid = info[1]
    else:
        sid = int(trace.events.stream[e])
        if sid <= 0:  # HIP writes the stream handle; 0 is the null stream, not an id we know
            return -1
    if device is not None and (device, sid) in stream_gp:
        return stream_gp[(device, sid)]
    devices = sorted({d for d, _ in stream_gp})
    return stream_gp.get((devices[0] if devices else 0, sid), -1)


def _first_warnings(waits: StreamWaits) -> dict[int, list[tuple[str, int, str]]]:
    """Row of ``waits`` -> the (code, count, example) warnings whose first call it is."""
    out: dict[int, list[tuple[str, int, str]]] = {}
    without = np.flatnonzero(waits.without_record)
    if without.size:
        k = int(without[0])
        # some Kineto versions do not trace cudaEventRecord: PyTorch records right before it
        # waits, so the event holds the thread's latest launch
        out.setdefault(k, []).append(("stream_wait_without_record", int(without.size),
                                      f"call at {int(waits.ts_ns[k])} ns"))  # fmt: skip
    bad = np.flatnonzero(waits.contradicted)
    if bad.size:
        k = int(bad[0])
        out.setdefault(k, []).append(("inter_stream_edge_contradicted", int(bad.size),
                                      f"task {int(waits.src[k])} -> {int(waits.dst[k])}"))  # fmt: skip
    return out
