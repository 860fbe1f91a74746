"""Blocking calls split into their own cost and a dependency (``lumos.graph.build_blocking``).

Hand-written Kineto traces of one thread (times in us as Kineto writes them); every expected
duration and delay below is worked out from the recorded times by the rules in the module's
docstring.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lumos.graph.build import build_graph
from lumos.graph.build_blocking import blocking_copies
from lumos.graph.model import DepKind, ExecGraph
from lumos.ingest.kineto import KinetoTrace, read_kineto

PAGEABLE = "Memcpy DtoH (Device -> Pageable)"
PINNED = "Memcpy DtoH (Device -> Pinned)"


def _call(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, "args": {"correlation": corr}}  # fmt: skip


def _gpu(cat: str, name: str, ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr}}  # fmt: skip


def _read(tmp_path: Path, events: list[dict[str, Any]]) -> KinetoTrace:
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return read_kineto(p)


def _tasks(g: ExecGraph) -> list[tuple[str, int, int]]:
    t = g.tasks
    return [(g.names[int(t.name_idx[i])], int(t.ts_ns[i]), int(t.dur_ns[i]))
            for i in range(g.num_tasks)]  # fmt: skip


def test_a_copy_call_blocks_when_its_api_is_synchronous_or_its_host_memory_pageable(tmp_path):
    """Four copies, each run inside its call: ``cudaMemcpy`` blocks; ``cudaMemcpyAsync`` blocks
    only into pageable memory (the runtime stages it synchronously), not into pinned memory; an
    async call that returned before its copy began did not wait for it. The blocking call keeps
    the time to its copy's start (10 us: the stream was idle) and its ``[wait]`` task the time
    from the copy's end to the call's return (150 - 140 = 10 us)."""
    trace = _read(tmp_path, [
        _call("cudaMemcpy", 100, 50, 1), _gpu("gpu_memcpy", PAGEABLE, 110, 30, 1),
        _call("cudaMemcpyAsync", 200, 50, 2), _gpu("gpu_memcpy", PINNED, 210, 30, 2),
        _call("cudaMemcpyAsync", 300, 50, 3), _gpu("gpu_memcpy", PAGEABLE, 310, 30, 3),
        _call("cudaMemcpyAsync", 400, 5, 4), _gpu("gpu_memcpy", PAGEABLE, 410, 30, 4),
    ])  # fmt: skip
    blocking = blocking_copies(trace)
    ev = trace.events
    calls = [i for i in range(len(ev)) if trace.names[int(ev.name_idx[i])].startswith("cuda")]
    assert [int(ev.ts_ns[i]) for i in calls] == [100_000, 200_000, 300_000, 400_000]
    assert [bool(blocking[i]) for i in calls] == [True, False, True, False]
    assert int(blocking.sum()) == 2  # the copies themselves are not calls
    tasks = _tasks(build_graph(trace))
    assert tasks[1:3] == [("cudaMemcpy", 100_000, 10_000), ("cudaMemcpy [wait]", 140_000, 10_000)]


@pytest.mark.parametrize(
    ("copy_us", "own_ns"), [(1.0, 11_000), (0.5, 10_500)], ids=["1us", "0.5us"]
)
def test_a_copy_first_on_its_stream_was_not_queued_whatever_the_clock_reads(
    tmp_path, copy_us, own_ns
):
    """A blocking copy keeps, as its own cost, the time to its copy's start when the stream was
    idle, and at most the nominal launch latency (5 us) when the copy queued behind earlier work
    on its stream. The first copy is its stream's first work: nothing queued it, so the call
    (recorded from -10 us) keeps the 11 us (and 10.5 us) to its copy's start at 1 us (0.5 us),
    however close to 0 those times are. The second copy starts as the kernel before it on its
    stream ends (56 us): queued, so its call keeps 5 us of its 16 us to the copy, and the
    ``[wait]`` runs from the copy's end (61 us) to the call's return (70 us)."""
    trace = _read(tmp_path, [
        _call("cudaMemcpy", -10, 30, 1), _gpu("gpu_memcpy", PAGEABLE, copy_us, 5, 1),
        _call("cudaLaunchKernel", 35, 2, 3), _gpu("kernel", "k", 46, 10, 3, stream=8),
        _call("cudaMemcpy", 40, 30, 2), _gpu("gpu_memcpy", PAGEABLE, 56, 5, 2, stream=8),
    ])  # fmt: skip
    g = build_graph(trace)
    assert g.calibration["gpu_clock_offset_ns"] == 0
    copy_end = int(copy_us * 1000) + 5_000
    assert _tasks(g)[1:6] == [
        ("cudaMemcpy", -10_000, own_ns),
        ("cudaMemcpy [wait]", copy_end, 20_000 - copy_end),
        ("cudaLaunchKernel", 35_000, 2_000),
        ("cudaMemcpy", 40_000, 5_000),
        ("cudaMemcpy [wait]", 61_000, 9_000),
    ]


@pytest.mark.parametrize("shift_us", [0, -50])
def test_a_launch_that_blocked_on_a_full_queue_keeps_its_usual_cost_and_waits_for_a_slot(
    tmp_path, shift_us
):
    """Seven launches of 2 us every 3 us from t = 0, their kernels 100 us each back to back
    from 5 us. The fourth launch (9 us) lasts 97 us, more than 10 x the name's median (2 us), and
    returns 1 us after the first kernel ended (105 us; 1 us is within 10 % of its 95 us excess):
    it blocked until that kernel freed a queue slot. It keeps the median, 2 us, and the next
    launch (107 us) waits for that kernel with the recorded 2 us reaction. The first kernel's
    launch began at t = 0, or (the whole trace 50 us earlier) at -50 us: launch times like any
    other."""
    events = []
    for i, (start, dur) in enumerate(zip((0, 3, 6, 9, 107, 110, 113), (2, 2, 2, 97, 2, 2, 2),
                                         strict=True)):  # fmt: skip
        events += [_call("cudaLaunchKernel", start + shift_us, dur, i + 1),
                   _gpu("kernel", f"k{i}", 5 + 100 * i + shift_us, 100, i + 1)]  # fmt: skip
    g = build_graph(_read(tmp_path, events))
    assert g.calibration["gpu_clock_offset_ns"] == 0
    assert g.diagnostics.count("blocking_call_split") == 1
    assert _tasks(g)[4] == ("cudaLaunchKernel", (9 + shift_us) * 1_000, 2_000)
    e = g.edges
    sync = [(g.names[int(g.tasks.name_idx[s])], int(d), int(dl))
            for s, d, k, dl in zip(e.src, e.dst, e.kind, e.delay_ns, strict=True)
            if k == int(DepKind.SYNC)]  # fmt: skip
    assert sync == [("k0", 5, 2_000)]


def _op(name: str, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {}}  # fmt: skip


@pytest.mark.parametrize(("wait_us", "split"), [(40, False), (41, True)])
def test_an_op_that_waited_on_another_thread_is_split_only_when_longer_than_four_gaps(
    tmp_path, wait_us, split
):
    """Thread 1 runs five ops 10 us apart (gaps of 10 us: the usual overhead); the third, ``W``,
    runs from 30 us for ``wait_us``. Thread 2's only op, ``u``, runs 32-68 us inside ``W`` and
    ends 2 or 3 us before ``W`` (within 10 % of it). ``W`` holds a wait only when longer than
    4 x 10 us: at exactly 40 us it is an ordinary op and keeps its 40 us; at 41 us it keeps the
    2 us until thread 2 began (32 us), and the next op ``c`` (81 us) waits for ``u`` with the
    recorded 81 - 68 = 13 us reaction, its own 10 us gap after ``W`` kept on the thread."""
    c_us = 30 + wait_us + 10
    trace = _read(tmp_path, [
        _op("a", 0, 5), _op("b", 15, 5), _op("W", 30, wait_us), _op("c", c_us, 5),
        _op("d", c_us + 15, 5), _op("u", 32, 36, tid=2),
    ])  # fmt: skip
    g = build_graph(trace)
    tasks = _tasks(g)
    names = [t[0] for t in tasks]
    assert tasks[names.index("W")] == ("W", 30_000, 2_000 if split else wait_us * 1_000)
    e = g.edges
    into_c = sorted((DepKind(int(k)).name, names[int(s)], int(dl))
                    for s, d, k, dl in zip(e.src, e.dst, e.kind, e.delay_ns, strict=True)
                    if names[int(d)] == "c")  # fmt: skip
    if split:
        assert into_c == [("INTER_THREAD", "u", 13_000), ("INTRA_THREAD", "W", 10_000)]
        assert g.diagnostics.count("blocking_call_split") == 1
    else:
        assert into_c == [("INTRA_THREAD", "W", 10_000)]
        assert g.diagnostics.count("blocking_call_split") == 0


def test_a_kernel_launched_after_a_blocked_launch_began_did_not_free_its_slot(tmp_path):
    """The blocked launch of the full-queue test above (9-106 us, kernels k0-k6 on stream 7,
    k0 ending at 105 us) plus thread 2 launching ``kx`` at 10 us (after the blocked call began)
    onto stream 8, running 20-105.5 us. ``kx`` ends later than k0 and within the call, but a
    kernel launched after the call began cannot be the one whose end freed the slot it waited
    for: the releaser is still k0 (the next launch, 107 us, waits for it with 2 us)."""
    events = []
    for i, (start, dur) in enumerate(zip((0, 3, 6, 9, 107, 110, 113), (2, 2, 2, 97, 2, 2, 2),
                                         strict=True)):  # fmt: skip
        events += [_call("cudaLaunchKernel", start, dur, i + 1),
                   _gpu("kernel", f"k{i}", 5 + 100 * i, 100, i + 1)]  # fmt: skip
    events += [{**_call("cudaLaunchKernel", 10, 2, 99), "tid": 2},
               _gpu("kernel", "kx", 20, 85.5, 99, stream=8)]  # fmt: skip
    g = build_graph(_read(tmp_path, events))
    assert g.diagnostics.count("blocking_call_split") == 1
    e = g.edges
    sync = [(g.names[int(g.tasks.name_idx[s])], g.names[int(g.tasks.name_idx[d])], int(dl))
            for s, d, k, dl in zip(e.src, e.dst, e.kind, e.delay_ns, strict=True)
            if k == int(DepKind.SYNC)]  # fmt: skip
    assert sync == [("k0", "cudaLaunchKernel", 2_000)]
