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

import pytest

from lumos.graph.build import build_graph
from lumos.graph.model import WaitKind
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
