"""Which stream a ``cudaStreamSynchronize`` waits for when the trace does not say
(:mod:`lumos.graph.build_sync`): no ``cuda_sync`` event and no stream argument on the call.

Tiny documents written here: one thread launches one kernel on each of streams 7 and 8, then
synchronizes. The stream is inferred as the one whose work (launched before the call) ended
last *inside* the call (within 1 us of its return); when none did, the stream the thread
launched on last.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from lumos.graph.build import build_graph
from lumos.graph.build_blocking import blocking_copies
from lumos.graph.build_links import find_launches
from lumos.graph.build_tasks import lay_out_tasks
from lumos.graph.model import DepKind, WaitKind
from lumos.ingest.kineto import trace_from_bytes
from lumos.sim import simulate


def _call(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, "args": {"correlation": corr}}  # fmt: skip


def _kernel(name: str, stream: int, ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
            "dur": dur, "args": {"correlation": corr, "stream": stream, "device": 0}}  # fmt: skip


def _graph(first: tuple[int, float], second: tuple[int, float], sync_at: float):
    """Launches at 0 and 6 us (5 us each) of a kernel on stream ``first[0]`` from 10 us to
    ``first[1]`` and one on stream ``second[0]`` from 12 us to ``second[1]``; a 20 us sync at
    ``sync_at``."""
    doc = {"traceEvents": [
        _call("cudaLaunchKernel", 0, 5, 1), _kernel("k1", first[0], 10, first[1] - 10, 1),
        _call("cudaLaunchKernel", 6, 5, 2), _kernel("k2", second[0], 12, second[1] - 12, 2),
        _call("cudaStreamSynchronize", sync_at, 20, 3),
    ]}  # fmt: skip
    return build_graph(trace_from_bytes(json.dumps(doc).encode(), "t.json"))


@pytest.mark.parametrize(
    ("first", "second", "sync_at", "waited", "own_ns"),
    [
        # stream 7's kernel ends at 30 us inside the 12-32 us call; stream 8's runs on to 212
        ((7, 30), (8, 212), 12, 7, 2_000),
        # the same with the streams swapped: the kernel that ends inside the call decides
        ((7, 212), (8, 30), 12, 8, 2_000),
        # a call at 300-320 us, after both ended: the stream launched on last (7), not the
        # stream whose work ended last (8, at 212 us)
        ((8, 212), (7, 30), 300, 7, 20_000),
    ],
    ids=["ends-inside-on-7", "ends-inside-on-8", "none-inside-last-launched"],
)
def test_a_sync_without_its_stream_waits_for_the_stream_that_ended_inside_it(
    first, second, sync_at, waited, own_ns
):
    """The wait targets the inferred stream; the call keeps as its own cost the time from the
    end of that stream's work to its return (32 - 30 us; all 20 us when that work ended before
    the call), so a replay of the recording returns the call where it returned."""
    g = _graph(first, second, sync_at)
    assert g.diagnostics.count("sync_target_unknown") == 0
    w = g.waits
    assert w.kind.tolist() == [WaitKind.STREAM]
    assert int(g.processors.tid[w.target_processor_idx[0]]) == waited
    sync = int(w.task_idx[0])
    assert g.names[g.tasks.name_idx[sync]] == "cudaStreamSynchronize"
    assert int(g.tasks.dur_ns[sync]) == own_ns
    assert int(simulate(g).end_ns[sync]) == int(sync_at * 1_000) + 20_000


def _build(events: list[dict[str, Any]]):
    return build_graph(trace_from_bytes(json.dumps({"traceEvents": events}).encode(), "t.json"))


def _names(g, tasks) -> list[str]:
    return [g.names[g.tasks.name_idx[t]] for t in tasks]


def _inter_stream(g) -> list[tuple[str, str]]:
    e = g.edges
    sel = np.flatnonzero(e.kind == int(DepKind.INTER_STREAM))
    return list(zip(_names(g, e.src[sel]), _names(g, e.dst[sel]), strict=True))


@pytest.mark.parametrize(("k1_end", "k2_end"), [(100, 60), (60, 100)], ids=["7-last", "8-last"])
def test_a_device_sync_waits_for_the_work_that_ends_last_on_any_stream(k1_end, k2_end):
    """Launches at 0 and 6 us of ``k1`` on stream 7 (10 us to ``k1_end``) and ``k2`` on stream 8
    (12 us to ``k2_end``); a ``cudaDeviceSynchronize`` from 20 to 105 us. It waits for the whole
    device, whose work ends at 100 us whichever stream ran it last: the call keeps 105 - 100 =
    5 us of its own, and a replay of the recording returns it at 105 us."""
    g = _build([
        _call("cudaLaunchKernel", 0, 5, 1), _kernel("k1", 7, 10, k1_end - 10, 1),
        _call("cudaLaunchKernel", 6, 5, 2), _kernel("k2", 8, 12, k2_end - 12, 2),
        _call("cudaDeviceSynchronize", 20, 85, 3),
    ])  # fmt: skip
    w = g.waits
    assert w.kind.tolist() == [WaitKind.DEVICE] and w.device.tolist() == [0]
    sync = int(w.task_idx[0])
    assert _names(g, [sync]) == ["cudaDeviceSynchronize"]
    assert int(g.tasks.dur_ns[sync]) == 5_000
    assert int(simulate(g).end_ns[sync]) == 105_000


def _wait_pair(launch_at: float, wait_at: float, corr: int, k_at: tuple[float, float], tag: str):
    """A launch onto stream 7 at ``launch_at``, a ``cudaStreamWaitEvent`` at ``wait_at`` (no
    ``cudaEventRecord`` traced) and a launch onto stream 8 2 us later; the kernels (5 us each)
    start at ``k_at``."""
    return [
        _call("cudaLaunchKernel", launch_at, 1, corr), _kernel(f"a{tag}", 7, k_at[0], 5, corr),
        _call("cudaStreamWaitEvent", wait_at, 1, corr + 1),
        _call("cudaLaunchKernel", wait_at + 2, 1, corr + 2),
        _kernel(f"b{tag}", 8, k_at[1], 5, corr + 2),
    ]  # fmt: skip


def test_stream_waits_without_a_record_are_counted_once_with_the_first_as_example():
    """Two ``cudaStreamWaitEvent`` calls (at 8 and 25 us) and no ``cudaEventRecord``: each wait
    stands in for its record, so stream 8's next kernel waits for stream 7's kernel launched
    before it (a1 -> b1, a2 -> b2). The degradation is warned once for both calls (count 2),
    with the first call, at 8 us = 8,000 ns, as its example."""
    g = _build(_wait_pair(0, 8, 1, (10, 40), "1") + _wait_pair(20, 25, 4, (50, 60), "2"))
    assert _inter_stream(g) == [("a1", "b1"), ("a2", "b2")]
    d = g.diagnostics
    assert d.count("stream_wait_without_record") == 2
    assert d.example("stream_wait_without_record") == "call at 8000 ns"


def test_a_lone_stream_wait_without_a_record_is_warned_with_its_call():
    """One ``cudaStreamWaitEvent`` at 8 us without a record: one warning, its example that call."""
    g = _build(_wait_pair(0, 8, 1, (10, 40), "1"))
    assert _inter_stream(g) == [("a1", "b1")]
    d = g.diagnostics
    assert d.count("stream_wait_without_record") == 1
    assert d.example("stream_wait_without_record") == "call at 8000 ns"


def _recorded_stream_wait(stream: int | None, *before_record: dict[str, Any]):
    """Launch of ``k1`` on stream 7 at 0 us (call 0-2, kernel 10-30), ``before_record``,
    ``cudaEventRecord`` at 6 (correlation 2), ``cudaStreamWaitEvent`` at 8 (correlation 3)
    with its "Stream Wait Event" record (``wait_on_stream`` 7, the waiting ``stream`` unless
    None), then the launch of ``k2`` on stream 8 at 12 (kernel 40-50)."""
    args: dict[str, Any] = {"cuda_sync_kind": "Stream Wait Event", "wait_on_stream": 7,
                            "wait_on_cuda_event_record_corr_id": 2, "correlation": 3,
                            "device": 0}  # fmt: skip
    if stream is not None:
        args["stream"] = stream
    return [
        _call("cudaLaunchKernel", 0, 2, 1), _kernel("k1", 7, 10, 20, 1),
        *before_record,
        _call("cudaEventRecord", 6, 1, 2),
        _call("cudaStreamWaitEvent", 8, 1, 3),
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 8,
         "ts": 8.5, "dur": 0.01, "args": args},
        _call("cudaLaunchKernel", 12, 5, 4), _kernel("k2", 8, 40, 10, 4),
    ]  # fmt: skip


@pytest.mark.parametrize("stream", [8, None], ids=["names-8", "names-none"])
def test_a_stream_wait_record_without_its_stream_waits_on_the_threads_next_launch(stream):
    """A ``cuda_sync`` "Stream Wait Event" record names the recording stream (``wait_on_stream``
    7) and the record call (correlation 2), and the waiting stream in ``stream``. Launch of
    ``k1`` on stream 7 at 0 us (kernel 10-30 us), ``cudaEventRecord`` at 6, the wait at 8, the
    launch of ``k2`` on stream 8 at 12 (kernel 40-50). With ``stream`` 8 the edge is k1 -> k2;
    a record that leaves ``stream`` out (-1) says nothing about the waiting stream, which is
    then the thread's next launch after the wait: stream 8, the same edge (never the
    recording stream 7 itself, which would make no edge)."""
    g = _build(_recorded_stream_wait(stream))
    assert _inter_stream(g) == [("k1", "k2")]
    assert g.diagnostics.count("stream_wait_without_record") == 0


def test_kernels_launched_together_keep_their_stream_order_among_later_work():
    """Stream 7 runs ``k0`` (launched at 50 us), ``lost`` (its launch is not in the trace,
    recorded at 1000 us on the GPU) and nine kernels ``g0``..``g8`` that one
    ``cudaGraphLaunch`` at 200 us launched (one correlation id; 1100 + 10 i us, 5 us each).
    By launch time the stream's order is k0 (50), g0..g8 (200, all tied: they keep their order
    on the stream), then ``lost`` at its recorded 1000 us. A ``cudaStreamSynchronize`` from 300
    to 1186 us (no ``cuda_sync`` record) waits for the work launched on stream 7 before it:
    the last of that is g8, which ends at 1185 us inside the call, so the call keeps 1 us of
    its own and a replay returns it where it returned."""
    graph = [_kernel(f"g{i}", 7, 1100 + 10 * i, 5, 2) for i in range(9)]
    doc = {"traceEvents": [
        _call("cudaLaunchKernel", 50, 5, 1), _kernel("k0", 7, 60, 5, 1),
        _kernel("lost", 7, 1000, 5, 99),
        _call("cudaGraphLaunch", 200, 10, 2), *graph,
        _call("cudaStreamSynchronize", 300, 886, 3),
    ]}  # fmt: skip
    trace = trace_from_bytes(json.dumps(doc).encode(), "t.json")
    layout = lay_out_tasks(trace, blocking_copies(trace))
    launches = find_launches(trace, layout)
    (gp,) = launches.stream_order
    times, tasks = launches.stream_order[gp]
    order = ["k0", *(f"g{i}" for i in range(9)), "lost"]
    assert [trace.name_of(int(e)) for e in layout.event_idx[tasks]] == order
    assert times.tolist() == [50_000] + [200_000] * 9 + [1_000_000]
    g = build_graph(trace)
    (sync,) = g.waits.task_idx.tolist()
    assert _names(g, [sync]) == ["cudaStreamSynchronize"]
    assert int(g.tasks.dur_ns[sync]) == 1_000
    # a replay of the recording returns it at 1186 us, 1136 us after the first launch (time 0)
    assert int(simulate(g).end_ns[sync]) == 1_136_000


def _sync_on(call_args: dict[str, Any], extra: list[dict[str, Any]]):
    """``_graph((7, 30), (8, 20), 12)``, the sync call's args extended by ``call_args`` and
    the trace by ``extra``: by inference the call waits for stream 7 (its kernel ends at 30 us
    inside the 12-32 us call, after stream 8's at 20 us)."""
    sync = _call("cudaStreamSynchronize", 12, 20, 3)
    sync["args"].update(call_args)
    return _build([
        _call("cudaLaunchKernel", 0, 5, 1), _kernel("k1", 7, 10, 20, 1),
        _call("cudaLaunchKernel", 6, 5, 2), _kernel("k2", 8, 12, 8, 2),
        sync, *extra,
    ])  # fmt: skip


def _waited_tid(g) -> list[int]:
    assert g.waits.kind.tolist() == [WaitKind.STREAM]
    return [int(g.processors.tid[p]) for p in g.waits.target_processor_idx.tolist()]


def test_a_sync_waits_for_the_stream_its_trace_names_over_the_one_inference_would_pick():
    """A ``cuda_sync`` "Stream Sync" event of the call's correlation (3) naming stream 8, or a
    HIP-style stream argument 8 on the call, says the call waited for stream 8, though stream
    7's work ended inside it; a stream argument the trace has no stream for (99), or the null
    stream (0), says nothing: inference, stream 7."""
    named = {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 8, "ts": 31,
             "dur": 0.01, "args": {"cuda_sync_kind": "Stream Sync", "stream": 8,
                                   "correlation": 3, "device": 0}}  # fmt: skip
    assert _waited_tid(_sync_on({}, [named])) == [8]
    assert _waited_tid(_sync_on({"stream": 8}, [])) == [8]
    assert _waited_tid(_sync_on({"stream": 99}, [])) == [7]
    assert _waited_tid(_sync_on({"stream": 0}, [])) == [7]
    assert _waited_tid(_sync_on({}, [])) == [7]


def test_a_sync_no_stream_can_be_found_for_is_warned_with_its_call_and_makes_no_wait():
    """A ``cudaStreamSynchronize`` at 2-3 us, before the thread's only launch (at 5 us, of a
    kernel on stream 7 at 10-20 us): no stream named, none launched before it, none whose work
    ended inside it. One ``sync_target_unknown`` naming the call and its start, no wait."""
    g = _build([
        _call("cudaStreamSynchronize", 2, 1, 1),
        _call("cudaLaunchKernel", 5, 5, 2), _kernel("k1", 7, 10, 10, 2),
    ])  # fmt: skip
    assert g.diagnostics.count("sync_target_unknown") == 1
    assert g.diagnostics.example("sync_target_unknown") == "cudaStreamSynchronize at 2000 ns"
    assert len(g.waits) == 0


def test_a_stream_wait_waits_for_the_recording_stream_its_record_names_not_the_last_launched():
    """As above (with ``stream`` 8), plus a launch at 3 us of ``k0`` on stream 9 (kernel
    14-16 us): the record call at 6 us follows that launch, but its ``cuda_sync`` record
    names stream 7 as the recording stream (``wait_on_stream``), so stream 8 waits for k1, the
    last work launched on stream 7 before the record, not for k0."""
    g = _build(_recorded_stream_wait(
        8, _call("cudaLaunchKernel", 3, 2, 5), _kernel("k0", 9, 14, 2, 5)
    ))  # fmt: skip
    assert _inter_stream(g) == [("k1", "k2")]
    assert g.diagnostics.count("stream_wait_without_record") == 0


def test_work_queued_before_the_window_opened_is_launched_just_before_it():
    """Stream 7 runs ``queued`` at 10 us (its launch is not in the trace) before ``k0``, the
    stream's first launched task (launched at 20 us, runs 30-35 us), and ``lost`` at 50 us
    (no launch either, but after a launched task). The window opens at 10 us, the earliest
    start: ``queued`` was launched before anything in it, at 10 us - 1 ns, the latest time
    outside it; ``lost`` keeps its recorded start; so the order is queued, k0, lost."""
    doc = {"traceEvents": [
        _kernel("queued", 7, 10, 5, 98),
        _call("cudaLaunchKernel", 20, 5, 1), _kernel("k0", 7, 30, 5, 1),
        _kernel("lost", 7, 50, 5, 99),
    ]}  # fmt: skip
    trace = trace_from_bytes(json.dumps(doc).encode(), "t.json")
    layout = lay_out_tasks(trace, blocking_copies(trace))
    assert layout.origin_ns == 10_000
    order = find_launches(trace, layout).stream_order
    (gp,) = order
    times, tasks = order[gp]
    assert [trace.name_of(int(e)) for e in layout.event_idx[tasks]] == ["queued", "k0", "lost"]
    assert times.tolist() == [9_999, 20_000, 50_000]
