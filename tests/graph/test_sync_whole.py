"""``lumos.graph.build_sync`` whole: every rule of the sync pass on tiny hand-written traces.

Each test writes a few Kineto events (times in us, as Kineto writes them; the layout keeps
them in ns, absolute), lays them out as ``build_graph`` does (``lay_out_tasks``,
``find_launches``) and calls the module's functions directly, without the clock fit. Expected
values follow from the module's rules, worked out in each docstring: a device sync waits for
the last work launched before it on every stream of the device its thread last launched on
(else the trace's lowest device); a stream or event sync for the stream its ``cuda_sync``
record or HIP stream argument names, else the stream whose work (launched before the call)
ended last inside the call (within 1 us after its return), else the stream its thread last
launched on; an event sync whose record call is known waits for what was launched on that
stream before the record.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from lumos.diagnostics import Diagnostics
from lumos.graph.build_blocking import blocking_copies
from lumos.graph.build_links import Launches, find_launches
from lumos.graph.build_stream_waits import StreamWaits
from lumos.graph.build_sync import (
    SyncPlan,
    _first_warnings,
    _infer_waited_stream,
    cuda_sync_by_correlation,
    device_of_call,
    end_of_last,
    known_stream,
    plan_syncs,
    streams_of_device,
)
from lumos.graph.build_tasks import lay_out_tasks
from lumos.graph.model import WaitKind
from lumos.ingest.kineto import KinetoTrace, trace_from_bytes

DEVICE, STREAM, EVENT = int(WaitKind.DEVICE), int(WaitKind.STREAM), int(WaitKind.EVENT)


def _call(name: str, ts: float, dur: float, corr: int | None, tid: int = 1, **args: Any):
    a = dict(args)
    if corr is not None:
        a["correlation"] = corr
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": tid, "ts": ts,
            "dur": dur, "args": a}  # fmt: skip


def _kernel(name: str, stream: int, ts: float, dur: float, corr: int, device: int = 0):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts,
            "dur": dur, "args": {"correlation": corr, "stream": stream, "device": device}}  # fmt: skip


def _sync_rec(kind: str, ts: float, corr: int, row: int = 7, **args: Any):
    """A ``cuda_sync`` record of call ``corr`` (drawn on stream ``row``'s row)."""
    a = {"cuda_sync_kind": kind, "correlation": corr, "device": 0, **args}
    return {"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": row, "ts": ts,
            "dur": 0.01, "args": a}  # fmt: skip


class _Run:
    """A trace laid out: ``plan`` and ``diag`` of :func:`plan_syncs`, names by task."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.trace = trace_from_bytes(json.dumps({"traceEvents": events}).encode(), "t.json")
        self.layout = lay_out_tasks(self.trace, blocking_copies(self.trace))
        self.launches = find_launches(self.trace, self.layout)
        self.diag = Diagnostics()
        self.plan = plan_syncs(self.trace, self.layout, self.launches, self.diag)

    def name(self, t: int) -> str:
        return self.trace.name_of(int(self.layout.event_idx[t]))

    def names(self, tasks: list[int]) -> list[str]:
        return [self.name(t) for t in tasks]

    def task(self, name: str) -> int:
        (t,) = [t for t in range(len(self.layout)) if self.layout.event_idx[t] >= 0
                and self.name(t) == name and not self.layout.is_wait[t]]  # fmt: skip
        return t

    def stream(self, device: int, tid: int) -> int:
        """The graph processor of GPU stream ``tid`` of ``device``."""
        procs = self.trace.processors
        (gp,) = [gp for gp, p in enumerate(self.layout.processors.tolist())
                 if procs.kind[p] == 1 and procs.device[p] == device and procs.tid[p] == tid]  # fmt: skip
        return gp

    def waits(self) -> list[tuple[str, int, int, int, str | int, int]]:
        """Per wait: (call, kind, stream, device, record call or -1, waited end)."""
        p = self.plan
        return [
            (self.name(t), k, s, d, self.name(r) if r >= 0 else r, p.waited_end_ns[t])
            for t, k, s, d, r in zip(p.wait_task, p.wait_kind, p.wait_stream, p.wait_device,
                                     p.wait_record, strict=True)
        ]  # fmt: skip


# --- device syncs -------------------------------------------------------------------------


def test_a_device_sync_waits_for_the_device_its_thread_last_launched_on():
    """Thread 1 launches ``a`` onto device 0 stream 7 (call 0-5 us, kernel 10-30 us), then
    ``b`` onto device 1 stream 7 (call 6-8, kernel 12-50) and ``c`` onto device 1 stream 9
    (call 8-9, kernel 14-40); its ``cudaDeviceSynchronize`` at 60-70 us refers to device 1,
    the last launched on, whose streams' last work ends at max(50, 40) = 50 us: 50,000 ns.
    Thread 2 never launched: its ``hipDeviceSynchronize`` at 61 us refers to the lowest
    device, 0, whose work ends at 30,000 ns. A ``cudaCtxSynchronize`` of thread 1 at 20-25 us
    (after both launches onto device 1, before any kernel ended) waits for b (launched at 6
    us, ends 50) and c (launched at 8, ends 40): 50,000 ns; a ``cuCtxSynchronize`` of thread
    1 at 7 us (after b's launch at 6, before c's at 8) waits on device 1 for b only, stream 9
    having nothing launched before it (-1): 50,000 ns. Every device wait names no stream
    (-1) and no record (-1)."""
    r = _Run([
        _call("cudaLaunchKernel", 0, 5, 1), _kernel("a", 7, 10, 20, 1),
        _call("cudaLaunchKernel", 6, 0.5, 2), _kernel("b", 7, 12, 38, 2, device=1),
        _call("cuCtxSynchronize", 7, 0.5, 5),
        _call("cudaLaunchKernel", 8, 1, 3), _kernel("c", 9, 14, 26, 3, device=1),
        _call("cudaCtxSynchronize", 20, 5, 6),
        _call("cudaDeviceSynchronize", 60, 10, 4),
        _call("hipDeviceSynchronize", 61, 1, None, tid=2),
    ])  # fmt: skip
    assert streams_of_device(r.layout, r.launches, r.trace) == {
        0: [r.stream(0, 7)],
        1: [r.stream(1, 7), r.stream(1, 9)],
    }
    assert r.waits() == [
        ("cuCtxSynchronize", DEVICE, -1, 1, -1, 50_000),
        ("cudaCtxSynchronize", DEVICE, -1, 1, -1, 50_000),
        ("cudaDeviceSynchronize", DEVICE, -1, 1, -1, 50_000),
        ("hipDeviceSynchronize", DEVICE, -1, 0, -1, 30_000),
    ]
    assert r.plan.stream_src == [] and r.plan.stream_dst == []
    assert r.diag.to_dict() == {}


def test_a_device_sync_where_nothing_was_launched_waits_for_nothing():
    """A ``cudaThreadSynchronize`` (1-2 us) in a trace without GPU work: device 0 (no device
    has launched work), no stream to wait for, so its waited end is -1; before any launch
    of its trace, a ``cudaDeviceSynchronize`` (0-0.5 us) waits for nothing either."""
    r = _Run([_call("cudaThreadSynchronize", 1, 1, 1)])
    assert r.waits() == [("cudaThreadSynchronize", DEVICE, -1, 0, -1, -1)]
    r = _Run([
        _call("cudaDeviceSynchronize", 0, 0.5, 1),
        _call("cudaLaunchKernel", 1, 1, 2), _kernel("a", 7, 3, 2, 2),
    ])  # fmt: skip
    assert r.waits() == [("cudaDeviceSynchronize", DEVICE, -1, 0, -1, -1)]


# --- stream and event syncs ---------------------------------------------------------------


def _two_streams(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    """``a`` onto stream 7 (call 0-2 us, kernel 10-30), ``b`` onto stream 8 (call 3-4, kernel
    12-20), ``a2`` onto stream 7 (call 8-9, kernel 31-40), and ``extra``."""
    return [
        _call("cudaLaunchKernel", 0, 2, 1), _kernel("a", 7, 10, 20, 1),
        _call("cudaLaunchKernel", 3, 1, 2), _kernel("b", 8, 12, 8, 2),
        _call("cudaLaunchKernel", 8, 1, 4), _kernel("a2", 7, 31, 9, 4),
        *extra,
    ]  # fmt: skip


def test_a_stream_sync_waits_for_what_was_launched_on_its_stream_before_it():
    """A ``cudaStreamSynchronize`` (corr 10, 21-41.5 us) whose ``cuda_sync`` "Stream Sync"
    record names stream 8 waits for b (ends 20 us), though a2 on stream 7 ended inside it;
    a ``hipStreamSynchronize`` (corr 11, 50-51) with no record and no argument: no work ended
    inside it, so the stream the thread launched on last, 7, whose last work a2 ends at
    40 us. Both on device 0, with no record."""
    r = _Run(_two_streams(
        _call("cudaStreamSynchronize", 21, 20.5, 10), _sync_rec("Stream Sync", 41, 10, 8,
                                                                stream=8),
        _call("hipStreamSynchronize", 50, 1, 11),
    ))  # fmt: skip
    s7, s8 = r.stream(0, 7), r.stream(0, 8)
    assert r.waits() == [
        ("cudaStreamSynchronize", STREAM, s8, 0, -1, 20_000),
        ("hipStreamSynchronize", STREAM, s7, 0, -1, 40_000),
    ]
    assert r.diag.to_dict() == {}


def test_a_stream_sync_naming_a_stream_id_two_devices_share_takes_the_callers_device():
    """One process drives two GPUs, each with a stream 7: ``a`` onto device 0 stream 7 (call
    0-2 us, kernel 10-30), ``b`` onto device 1 stream 7 (call 3-4, kernel 12-50). The
    thread's ``cudaStreamSynchronize`` (corr 10, 60-61 us) whose record names stream 7 refers
    to device 1, the one it launched on last: it waits for b (ends 50 us), not for device 0's
    stream 7 (a, 30 us)."""
    r = _Run([
        _call("cudaLaunchKernel", 0, 2, 1), _kernel("a", 7, 10, 20, 1),
        _call("cudaLaunchKernel", 3, 1, 2), _kernel("b", 7, 12, 38, 2, device=1),
        _call("cudaStreamSynchronize", 60, 1, 10),
        _sync_rec("Stream Sync", 60.5, 10, 7, stream=7),
    ])  # fmt: skip
    assert r.waits() == [("cudaStreamSynchronize", STREAM, r.stream(1, 7), 1, -1, 50_000)]
    assert r.diag.to_dict() == {}


def test_an_event_sync_waits_for_the_work_launched_before_its_record():
    """``cudaEventRecord`` (corr 5) at 5 us, after a's launch (0 us) and before a2's (8 us),
    both on stream 7. A ``cudaEventSynchronize`` (corr 10, 21-41) whose "Event Sync" record
    names the recording stream 7 (``wait_on_stream``) and record call 5 waits for the event:
    an EVENT wait whose waited end is a's, 30,000 ns (not a2's 40,000, the last launched
    before the sync). A ``hipEventSynchronize`` (corr 11, 50-51) whose record names an
    unknown record call (99) waits, as a plain stream wait, for the last launched on stream
    7 before it: a2, 40,000 ns."""
    r = _Run(_two_streams(
        _call("cudaEventRecord", 5, 0.5, 5),
        _call("cudaEventSynchronize", 21, 20, 10),
        _sync_rec("Event Sync", 40, 10, wait_on_stream=7, wait_on_cuda_event_record_corr_id=5),
        _call("hipEventSynchronize", 50, 1, 11),
        _sync_rec("Event Sync", 50.5, 11, wait_on_stream=7, wait_on_cuda_event_record_corr_id=99),
    ))  # fmt: skip
    s7 = r.stream(0, 7)
    assert r.waits() == [
        ("cudaEventSynchronize", EVENT, s7, 0, "cudaEventRecord", 30_000),
        ("hipEventSynchronize", STREAM, s7, 0, -1, 40_000),
    ]


def test_only_an_event_sync_takes_a_record_and_a_record_call_needs_its_correlation():
    """Records ``hipEventRecord`` (corr 0, at 5 us) and ``cudaEventRecordWithFlags`` (no
    correlation, at 6 us), both between a's and a2's launches on stream 7. A
    ``cuEventSynchronize`` (corr 10, 21-41) whose "Event Sync" record names record
    correlation 0 waits for that record: a's end, 30,000 ns (correlation 0 is a correlation).
    A ``cudaStreamSynchronize`` (corr 11, 42-43) whose "Stream Sync" record names stream 7
    and record correlation 0 is no event sync: a plain wait for a2, 40,000 ns. A
    ``cudaEventSynchronize`` (corr 12, 44-45) whose record names no record call (-1) finds
    none (the uncorrelated record call is not "-1"): a2, 40,000 ns."""
    r = _Run(_two_streams(
        _call("hipEventRecord", 5, 0.5, 0), _call("cudaEventRecordWithFlags", 6, 0.5, None),
        _call("cuEventSynchronize", 21, 20, 10),
        _sync_rec("Event Sync", 40, 10, wait_on_stream=7, wait_on_cuda_event_record_corr_id=0),
        _call("cudaStreamSynchronize", 42, 1, 11),
        _sync_rec("Stream Sync", 42.5, 11, stream=7, wait_on_cuda_event_record_corr_id=0),
        _call("cudaEventSynchronize", 44, 1, 12),
        _sync_rec("Event Sync", 44.5, 12, wait_on_stream=7),
    ))  # fmt: skip
    s7 = r.stream(0, 7)
    assert r.waits() == [
        ("cuEventSynchronize", EVENT, s7, 0, "hipEventRecord", 30_000),
        ("cudaStreamSynchronize", STREAM, s7, 0, -1, 40_000),
        ("cudaEventSynchronize", STREAM, s7, 0, -1, 40_000),
    ]


def test_an_event_sync_whose_record_came_before_any_launch_waits_for_nothing():
    """``cudaEventRecord`` (corr 5) at 0 us, before the only launch (``a`` onto stream 7 at
    1 us, kernel 3-5): the event captured no work, so the ``cudaEventSynchronize`` (corr 10,
    4-6) that names it waits for nothing (-1), still an EVENT wait on stream 7."""
    r = _Run([
        _call("cudaEventRecord", 0, 0.5, 5),
        _call("cudaLaunchKernel", 1, 1, 1), _kernel("a", 7, 3, 2, 1),
        _call("cudaEventSynchronize", 4, 2, 10),
        _sync_rec("Event Sync", 5, 10, wait_on_stream=7, wait_on_cuda_event_record_corr_id=5),
    ])  # fmt: skip
    assert r.waits() == [("cudaEventSynchronize", EVENT, r.stream(0, 7), 0, "cudaEventRecord", -1)]


def test_a_stream_sync_with_no_stream_to_find_is_warned_and_other_calls_are_not_syncs():
    """Before any launch, a ``cudaStreamSynchronize`` at 1-1.5 us and a ``hipEventSynchronize``
    at 2-2.5 us name no stream and find none: each is warned as ``sync_target_unknown``
    (count 2, the first as example) and makes no wait. ``cudaLaunchKernel`` and a
    ``cudaStreamQuery`` are no syncs; a CPU op named ``cudaStreamSynchronize`` is no runtime
    call."""
    r = _Run([
        _call("cudaStreamSynchronize", 1, 0.5, 1),
        _call("hipEventSynchronize", 2, 0.5, 2),
        _call("cudaStreamQuery", 2.6, 0.1, 3),
        {"ph": "X", "cat": "cpu_op", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1,
         "ts": 2.8, "dur": 0.1, "args": {}},
        _call("cudaLaunchKernel", 3, 1, 4), _kernel("a", 7, 5, 1, 4),
    ])  # fmt: skip
    assert r.waits() == []
    assert r.diag.to_dict() == {
        "sync_target_unknown": {"count": 2, "example": "cudaStreamSynchronize at 1000 ns"}
    }


def test_a_sync_that_launched_a_copy_is_one_wait():
    """A ``cudaStreamSynchronize`` (corr 2, 10-40 us) whose correlation a pageable
    ``Memcpy DtoH`` (stream 7, 20-30 us) shares is a blocking call: the layout splits it into
    the call and its ``[wait]`` task. It is one sync, waiting for stream 7 (the copy ends
    inside it): the last work launched on 7 before it is ``a`` (call 0-1, kernel 2-5 us),
    5,000 ns."""
    r = _Run([
        _call("cudaLaunchKernel", 0, 1, 1), _kernel("a", 7, 2, 3, 1),
        _call("cudaStreamSynchronize", 10, 30, 2),
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0,
         "tid": 7, "ts": 20, "dur": 10, "args": {"correlation": 2, "stream": 7, "device": 0}},
    ])  # fmt: skip
    assert int(r.layout.is_wait.sum()) == 1
    assert r.waits() == [("cudaStreamSynchronize", STREAM, r.stream(0, 7), 0, -1, 5_000)]


# --- stream waits inside the sync pass ------------------------------------------------------


def _wait(
    at: float, corr: int, k_at: tuple[float, float], tag: str, rec_at: float | None, tid: int = 1
):
    """Launch ``a<tag>`` onto stream 7 at ``at`` (kernel ``k_at[0]``, 5 us), optionally a
    ``cudaEventRecord`` 1 us later, ``cudaStreamWaitEvent`` 2 us later, and the launch of
    ``b<tag>`` onto stream 8 4 us later (kernel ``k_at[1]``, 5 us), all from thread ``tid``."""
    out = [_call("cudaLaunchKernel", at, 0.5, corr, tid),
           _kernel(f"a{tag}", 7, k_at[0], 5, corr)]  # fmt: skip
    if rec_at is not None:
        out.append(_call("cudaEventRecord", at + rec_at, 0.5, corr + 1, tid))
    return [*out, _call("cudaStreamWaitEvent", at + 2, 0.5, corr + 2, tid),
            _call("cudaLaunchKernel", at + 4, 0.5, corr + 3, tid),
            _kernel(f"b{tag}", 8, k_at[1], 5, corr + 3)]  # fmt: skip


def test_stream_wait_warnings_come_where_their_first_call_is_among_the_other_syncs():
    """Three stream waits: at 2 us (with its record, a1 10-15 -> b1 20-25 us: an edge), at
    102 (with a record, a2 110-115 -> b2 112-117: a2 ends 3 us after b2 starts, beyond the
    1 us tolerance: contradicted, no edge), both from thread 1, and at 202 from thread 3 (no
    record on that thread: the wait stands in, a3
    210-215 -> b3 220-225: an edge). Between them, an unknown ``cudaStreamSynchronize`` at
    50 us on thread 2 (never launched, no work inside) and another at 150 us. The
    warnings are made in call order, each stream-wait warning at its first call:
    ``sync_target_unknown`` (50 us; count 2), ``inter_stream_edge_contradicted`` (one, task
    a2 -> b2), ``stream_wait_without_record`` (one, the call at 202 us)."""
    r = _Run([
        *_wait(0, 1, (10, 20), "1", 1),
        _call("cudaStreamSynchronize", 50, 0.5, 50, tid=2),
        *_wait(100, 11, (110, 112), "2", 1),
        _call("cudaStreamSynchronize", 150, 0.5, 51, tid=2),
        *_wait(200, 21, (210, 220), "3", None, tid=3),
    ])  # fmt: skip
    p = r.plan
    assert r.names(p.stream_src) == ["a1", "a3"] and r.names(p.stream_dst) == ["b1", "b3"]
    a2, b2 = r.task("a2"), r.task("b2")
    assert r.diag.to_dict() == {
        "sync_target_unknown": {"count": 2, "example": "cudaStreamSynchronize at 50000 ns"},
        "inter_stream_edge_contradicted": {"count": 1, "example": f"task {a2} -> {b2}"},
        "stream_wait_without_record": {"count": 1, "example": "call at 202000 ns"},
    }
    assert p.wait_task == []


def test_a_stream_wait_named_by_its_record_uses_the_record_and_wait_on_stream():
    """A ``cudaStreamWaitEvent`` (corr 3, at 2 us) whose "Stream Wait Event" record names the
    waiting stream 8, the recording stream 7 and record call 2 (``cudaEventRecord`` at 1 us,
    after a1's launch at 0): edge a1 -> b1, no warning. The first ``cuda_sync`` record of a
    correlation gives the recording stream; a second one (``wait_on_stream`` 9, a stream
    without work) changes nothing."""
    r = _Run([
        *_wait(0, 1, (10, 20), "1", 1),
        _sync_rec("Stream Wait Event", 2.1, 3, 8, stream=8, wait_on_stream=7,
                  wait_on_cuda_event_record_corr_id=2),
        _sync_rec("Stream Wait Event", 2.2, 3, 8, stream=8, wait_on_stream=9,
                  wait_on_cuda_event_record_corr_id=2),
    ])  # fmt: skip
    assert r.names(r.plan.stream_src) == ["a1"] and r.names(r.plan.stream_dst) == ["b1"]
    assert r.diag.to_dict() == {}


def test_first_warnings_put_both_warnings_of_a_call_on_its_row():
    """Rows 0..3 of hand-made waits: rows 1 and 3 without a record, rows 1 and 2
    contradicted (edge 5 -> 6 on row 1): row 1 carries both, without-record first, each
    counted over all rows (2 and 2) with row 1's start (7 ns) and edge as examples."""
    w = StreamWaits(
        ts_ns=np.array([3, 7, 9, 11], dtype=np.int64),
        src=np.array([-1, 5, 8, -1], dtype=np.int64),
        dst=np.array([-1, 6, 9, -1], dtype=np.int64),
        contradicted=np.array([False, True, True, False]),
        without_record=np.array([False, True, False, True]),
    )
    assert _first_warnings(w) == {1: [("stream_wait_without_record", 2, "call at 7 ns"),
                                      ("inter_stream_edge_contradicted", 2, "task 5 -> 6")]}  # fmt: skip
    w = StreamWaits(w.ts_ns, w.src, w.dst, np.array([True, False, False, False]),
                    np.array([False, False, False, True]))  # fmt: skip
    assert _first_warnings(w) == {3: [("stream_wait_without_record", 1, "call at 11 ns")],
                                  0: [("inter_stream_edge_contradicted", 1, "task -1 -> -1")]}  # fmt: skip
    none = np.zeros(4, dtype=bool)
    assert _first_warnings(StreamWaits(w.ts_ns, w.src, w.dst, none, none)) == {}


# --- the lookups, by hand ---------------------------------------------------------------------


def _launches(streams: dict[int, list[tuple[int, int]]], threads: dict[int, list[tuple[int, int]]]):
    """Streams ``gp -> [(launch ts, task)]`` and threads ``p -> [(call ts, stream gp)]``."""

    def group(d: dict[int, list[tuple[int, int]]]):
        return {k: (np.array([a for a, _ in v], dtype=np.int64),
                    np.array([b for _, b in v], dtype=np.int64)) for k, v in d.items()}  # fmt: skip

    return Launches(np.zeros(0, np.int64), np.zeros(0, np.int64), group(streams), group(threads))


def test_end_of_last_is_the_end_of_the_task_launched_strictly_before():
    """Stream 3 launched task 1 at 100 ns and task 2 at 200 ns (ends 150 and 260): before
    200 the last launched is task 1 (150), before 201 task 2 (260), before 100 none (-1);
    a stream without launches: -1."""
    launches = _launches({3: [(100, 1), (200, 2)]}, {})
    end = np.array([0, 150, 260], dtype=np.int64)
    assert [end_of_last(launches, end, 3, t) for t in (200, 201, 100)] == [150, 260, -1]
    assert end_of_last(launches, end, 4, 500) == -1
    # task 0 is a task like any other here
    assert end_of_last(_launches({3: [(100, 0)]}, {}), end, 3, 101) == 0


def test_the_inferred_stream_ended_last_inside_the_call_within_a_microsecond():
    """A call from s = 1,000 to f = 2,000 ns. Streams 3, 4, 5 whose last work launched before
    it ends at the given times: an end at s itself is not inside (none: -1); an end at
    f + 1,000 is (3,000), at f + 1,001 not; of two ends inside the later wins, and of two
    equal ends the stream listed first."""

    def pick(ends: list[int], streams: list[int] | None = None, s: int = 1_000) -> int:
        launches = _launches({gp: [(s - 1, k + 1)] for k, gp in enumerate((3, 4, 5))}, {})
        end = np.array([0, *ends], dtype=np.int64)
        return _infer_waited_stream(launches, end, [3, 4, 5] if streams is None else streams,
                                    s, 2_000)  # fmt: skip

    assert pick([1_000, 900, 0]) == -1
    assert pick([1_001, 900, 0]) == 3
    assert pick([3_000, 3_001, 0]) == 3
    assert pick([3_001, 3_002, 0]) == -1
    assert pick([1_500, 1_600, 1_550]) == 4
    assert pick([1_500, 1_600, 1_600]) == 4
    assert pick([1_500, 1_600, 1_600], [5, 4, 3]) == 5
    assert pick([1_500, 1_600, 1_600], []) == -1
    # a call from 0 ns: an end at 1 ns is inside it
    assert pick([1, 0, 0], s=0) == 3
    # a call from -5 ns: stream 6 has nothing launched before it (-1, "no end"), not an end
    # inside the call
    assert _infer_waited_stream(_launches({}, {}), np.zeros(1, np.int64), [6], -5, 0) == -1


def _trace(device: list[int], stream: list[int] | None = None) -> KinetoTrace:
    """A stand-in trace: processor rows' devices, events' HIP stream arguments."""
    ns = SimpleNamespace(processors=SimpleNamespace(device=np.array(device, dtype=np.int64)),
                         events=SimpleNamespace(stream=np.array(stream or [], dtype=np.int64)))  # fmt: skip
    return ns  # type: ignore[return-value]


def test_the_device_of_a_call_is_its_threads_last_launch_else_the_lowest():
    """Graph processors 0 (thread), 1 and 2 (streams) are trace rows 0, 2 and 1; rows 1 and 2
    are on devices 5 and 3. Thread 0 launched onto gp 1 (row 2, device 3) at 100 ns: a call
    at 101 refers to device 3; at 100 (nothing launched strictly before) to the lowest
    device with streams, 3 of {5, 3}; with no device holding streams, device 0."""
    layout = SimpleNamespace(processors=np.array([0, 2, 1], dtype=np.int32))
    trace = _trace([0, 5, 3])
    launches = _launches({}, {0: [(100, 1)]})
    by_device = {5: [2], 3: [1]}
    assert device_of_call(trace, layout, launches, by_device, 0, 101) == 3  # type: ignore[arg-type]
    assert device_of_call(trace, layout, launches, {5: [2], 4: [1]}, 0, 100) == 4  # type: ignore[arg-type]
    assert device_of_call(trace, layout, launches, {}, 0, 100) == 0  # type: ignore[arg-type]
    assert device_of_call(trace, layout, launches, {}, 0, 101) == 3  # type: ignore[arg-type]
    # a launch onto graph processor 0 (trace row 0, device 0) is a launch like any other
    launches = _launches({}, {1: [(100, 0)]})
    assert device_of_call(trace, layout, launches, by_device, 1, 101) == 0  # type: ignore[arg-type]


def test_streams_of_a_device_keep_the_launch_order_of_streams():
    """Streams gp 4, 2, 3 (in ``stream_order``'s order) on trace rows 1, 2, 0 of devices 1, 0,
    1: device 1 holds 4 and 3, device 0 holds 2."""
    layout = SimpleNamespace(processors=np.array([9, 9, 2, 0, 1], dtype=np.int32))
    launches = _launches({4: [], 2: [], 3: []}, {})
    got = streams_of_device(layout, launches, _trace([1, 1, 0]))  # type: ignore[arg-type]
    assert got == {1: [4, 3], 0: [2]}
    assert list(got) == [1, 0]


def test_a_known_stream_is_named_by_a_record_or_a_hip_argument_on_the_lowest_device():
    """Streams (device, id) -> gp: (2, 7) -> 5, (1, 7) -> 6, (1, 8) -> 4; the lowest device is
    1. A record naming stream 7 (correlation 3): gp 6; naming stream 9: -1 (no such stream);
    naming none (-1): the call's HIP stream argument decides, 8 -> gp 4; argument 0 (the null
    stream) or -1: -1; argument 1 with stream 1 unknown: -1; without any stream gp: device 0."""
    gp = {(2, 7): 5, (1, 7): 6, (1, 8): 4}
    trace = _trace([], [8, 0, -1, 1])
    sync = {3: (0, 7, -1), 4: (0, 9, -1), 5: (1, -1, 2)}
    assert known_stream(0, 3, trace, sync, gp) == 6
    assert known_stream(1, 3, trace, sync, gp) == 6
    assert known_stream(1, 4, trace, sync, gp) == -1
    assert known_stream(0, 5, trace, sync, gp) == 4
    assert [known_stream(e, 6, trace, sync, gp) for e in range(4)] == [4, -1, -1, -1]
    assert known_stream(3, 6, trace, sync, {(1, 1): 2, (0, 9): 1}) == -1
    assert known_stream(3, 6, trace, sync, {(0, 1): 2}) == 2


def test_a_known_stream_id_is_looked_up_on_the_device_the_call_refers_to():
    """One process, two GPUs, each with a stream 7: (2, 7) -> gp 5, (1, 7) -> gp 6, and
    (1, 8) -> gp 4 on device 1 only. A sync naming stream 7 from a thread that last launched
    on device 2 is device 2's (gp 5), on device 1 device 1's (gp 6); stream 8 named for
    device 2, which has none, falls back to the lowest device (gp 4); a device with no streams
    at all (3) likewise (gp 6); the HIP argument path the same (8 on device 1: gp 4)."""
    gp = {(2, 7): 5, (1, 7): 6, (1, 8): 4}
    trace = _trace([], [8, 0, -1, 1])
    sync = {3: (0, 7, -1), 4: (0, 8, -1)}
    assert [known_stream(0, 3, trace, sync, gp, d) for d in (2, 1, 3)] == [5, 6, 6]
    assert known_stream(0, 4, trace, sync, gp, 2) == 4
    assert known_stream(0, 6, trace, sync, gp, 1) == 4
    assert known_stream(1, 6, trace, sync, gp, 2) == -1
    assert known_stream(0, 6, trace, sync, {}) == -1
    assert known_stream(0, 3, trace, sync, {(0, 7): 8}) == 8
    # stream id 0: named by a record it is known; as a HIP argument it is the null stream
    with_0 = {(1, 0): 3, (1, 8): 4}
    assert known_stream(0, 8, trace, {8: (0, 0, -1)}, with_0) == 3
    assert known_stream(1, 6, trace, sync, with_0) == -1


def test_cuda_sync_records_by_correlation_take_the_stream_each_kind_names():
    """``cuda_sync`` records (stream, wait_on_stream, record correlation): corr 1 a Stream
    Sync (7, 9, -): its stream 7; corr 2 an Event Sync (7, 9, 4): the recording stream 9;
    corr 3 a Stream Wait Event (8, 7, 2): the waiting stream 8; corr 4 a Context Sync
    (-1, 6, -): stream unset, so wait_on_stream 6; corr 5 an unknown kind "Other" (5, -1, -):
    5; corr 6 a Stream Wait Event without a stream (-1, 7, -): -1 (kind 3 takes ``stream``
    as it is); corr 7 twice, an Event Sync (7, 9, -) then a Stream Sync (8, 10, -): the last
    decides (0, 8, -1), the first's wait_on_stream 9 is kept apart; corr 8 a Stream Sync
    (0, 9, -): stream 0 is a stream, 0; corr 0 (a correlation like any other) a Stream Sync
    (7, 10, -): 7; a record without correlation is left out."""
    r = _Run([
        _call("cudaLaunchKernel", 0, 1, 100), _kernel("a", 7, 2, 1, 100),
        _sync_rec("Stream Sync", 3, 1, stream=7, wait_on_stream=9),
        _sync_rec("Event Sync", 4, 2, stream=7, wait_on_stream=9,
                  wait_on_cuda_event_record_corr_id=4),
        _sync_rec("Stream Wait Event", 5, 3, stream=8, wait_on_stream=7,
                  wait_on_cuda_event_record_corr_id=2),
        _sync_rec("Context Sync", 6, 4, wait_on_stream=6),
        _sync_rec("Other", 7, 5, stream=5),
        _sync_rec("Stream Wait Event", 8, 6, wait_on_stream=7),
        _sync_rec("Event Sync", 9, 7, stream=7, wait_on_stream=9),
        _sync_rec("Stream Sync", 10, 7, stream=8, wait_on_stream=10),
        _sync_rec("Stream Sync", 10.5, 8, stream=0, wait_on_stream=9),
        _sync_rec("Stream Sync", 10.6, 0, stream=7, wait_on_stream=10),
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 11,
         "dur": 0.01, "args": {"cuda_sync_kind": "Stream Sync", "stream": 7, "device": 0,
                               "wait_on_stream": 12}},
    ])  # fmt: skip
    out, first = cuda_sync_by_correlation(r.trace)
    assert out == {1: (0, 7, -1), 2: (1, 9, 4), 3: (3, 8, 2), 4: (2, 6, -1), 5: (4, 5, -1),
                   6: (3, -1, -1), 7: (0, 8, -1), 8: (0, 0, -1), 0: (0, 7, -1)}  # fmt: skip
    assert first == {1: 9, 2: 9, 3: 7, 4: 6, 5: -1, 6: 7, 7: 9, 8: 9, 0: 10}
    assert all(type(k) is int and all(type(x) is int for x in v) for k, v in out.items())
    assert all(type(k) is int and type(v) is int for k, v in first.items())


def test_a_sync_plan_starts_empty():
    """A fresh plan holds nothing (each list and the dict its own)."""
    a, b = SyncPlan(), SyncPlan()
    a.wait_task.append(1)
    assert b.wait_task == [] and b.waited_end_ns == {}


@pytest.mark.parametrize("name", ["cudaStreamSynchronize", "cudaEventSynchronize"])
def test_a_stream_sync_takes_the_device_its_thread_launched_on(name):
    """Thread 1 launches ``a`` onto device 1 stream 7 (call 0-1 us, kernel 2-5); a ``name``
    call at 10-11 us (no work inside it) waits for that stream, the one launched on last, on
    device 1, waited end 5,000 ns. Thread 2 never launched: its ``name`` call at 4-4.5 us (a
    ends at 5 us, inside it within 1 us) waits for stream 7 too, on the trace's lowest device,
    1."""
    r = _Run([
        _call("cudaLaunchKernel", 0, 1, 1), _kernel("a", 7, 2, 3, 1, device=1),
        _call(name, 4, 0.5, 3, tid=2),
        _call(name, 10, 1, 2),
    ])  # fmt: skip
    s7 = r.stream(1, 7)
    assert r.waits() == [(name, STREAM, s7, 1, -1, 5_000), (name, STREAM, s7, 1, -1, 5_000)]
