"""Lanes for asynchronous gloo point-to-point: a send or receive in flight beside its thread.

gloo records ``gloo:send`` / ``gloo:recv`` on the *calling* thread, from the call to the end of
the transfer. A blocking send or receive holds its thread for the whole span, and the span is a
task of that thread. An ``isend``/``irecv`` (``torch.distributed.pipelining`` issues them, and
keeps computing) leaves the span open while the thread goes on: later work of the thread starts
inside it. Such a span is communication running beside the thread, like a gloo worker's: it
goes onto a *lane*, a processor of its own appended to the trace's processors, where its call
hands it over (:func:`lumos.graph.build_comms.handoffs`) and its peers meet it; the thread's
later work waits for it where the recording shows a wait. Spans in flight at once take lanes
of their own (the fewest lanes, first free first), so that none waits for another.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import NDArray

from lumos.graph.model import ExecGraph
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_meta import Processors
from lumos.ingest.kineto_schema import Category

__all__ = ["gloo_lanes", "gloo_spans", "on_lanes"]

_CPU_CANDIDATES = (int(Category.CPU_OP), int(Category.RUNTIME), int(Category.DRIVER))
# lane thread ids, clear of OS thread ids: 2**40 + 64 * (thread id) + lane
_LANE_TID_BASE = 1 << 40


def on_lanes(graph: ExecGraph) -> NDArray[np.bool_]:
    """Which of a graph's tasks run on a lane (a gloo send or receive in flight)."""
    lane = graph.processors.tid >= _LANE_TID_BASE
    return lane[graph.tasks.processor_idx]


def gloo_spans(trace: KinetoTrace) -> NDArray[np.bool_]:
    """The events that are ``gloo:<op>`` spans."""
    ev = trace.events
    ids = [i for i, n in enumerate(trace.names) if n.startswith("gloo:")]
    return (ev.cat == int(Category.USER_ANNOTATION)) & np.isin(ev.name_idx, ids)


def gloo_lanes(trace: KinetoTrace) -> tuple[KinetoTrace, NDArray[np.int32]]:
    """The trace with a processor appended per lane, and each event's lane (its processor row
    there; -1 for every event that stays on its own processor). A gloo span is put on a lane
    when another task candidate of its thread (a CPU op, a runtime call, a gloo span) starts
    inside it, on a thread that runs more than gloo spans (a gloo worker's spans hold the ops
    of their own collective: :func:`lumos.graph.build_tasks.inside_gloo_workers`)."""
    ev = trace.events
    gloo = gloo_spans(trace)
    lane_of = np.full(len(ev), -1, dtype=np.int32)
    spans = np.flatnonzero(gloo)
    if spans.size == 0:
        return trace, lane_of
    cand = np.isin(ev.cat, _CPU_CANDIDATES) | gloo
    procs = trace.processors
    kind, pid, tid, device = [procs.kind], [procs.pid], [procs.tid], [procs.device]
    label = list(procs.label)
    n_procs = len(procs)
    for p in np.unique(ev.processor_idx[spans]).tolist():
        on_p = spans[ev.processor_idx[spans] == p]
        c = np.flatnonzero(cand & (ev.processor_idx == p))
        starts = ev.ts_ns[c]  # events are in time order on their processor
        s_ts = ev.ts_ns[on_p]
        s_end = s_ts + ev.dur_ns[on_p]
        others = np.flatnonzero(cand & ~gloo & (ev.processor_idx == p))
        if others.size and _all_inside(
            ev.ts_ns[others], ev.ts_ns[others] + ev.dur_ns[others], s_ts, s_end
        ):
            continue  # a gloo worker: its spans hold their collective's own ops
        inside = starts.searchsorted(s_end, side="left") - starts.searchsorted(s_ts, side="right")
        flying = inside > 0
        base = len(label)  # this thread's first lane
        lanes_end: list[int] = []
        for e, a, b in zip(on_p[flying].tolist(), s_ts[flying].tolist(), s_end[flying].tolist(),
                           strict=True):  # fmt: skip
            k = next((k for k, end in enumerate(lanes_end) if end <= a), len(lanes_end))
            if k == len(lanes_end):
                lanes_end.append(b)
                kind.append(np.zeros(1, dtype=procs.kind.dtype))
                pid.append(procs.pid[p : p + 1])
                tid.append(np.array([_LANE_TID_BASE + 64 * (int(procs.tid[p]) & 0xFFFFFF) + k]))
                device.append(procs.device[p : p + 1])
                label.append(f"{procs.label[p]} gloo p2p {k}")
            lanes_end[k] = b
            lane_of[e] = base + k
    if len(label) == n_procs:
        return trace, lane_of
    grown = Processors(
        np.concatenate(kind), np.concatenate(pid), np.concatenate(tid).astype(procs.tid.dtype),
        np.concatenate(device), tuple(label),
    )  # fmt: skip
    return dataclasses.replace(trace, processors=grown), lane_of


def _all_inside(
    ts: NDArray[np.int64], end: NDArray[np.int64], s_ts: NDArray[np.int64], s_end: NDArray[np.int64]
) -> bool:
    """Whether every ``[ts, end]`` lies inside one of the spans (sorted by start)."""
    reach = np.maximum.accumulate(s_end)
    k = s_ts.searchsorted(ts, side="right") - 1
    ok = k >= 0
    ok[ok] = end[ok] <= reach[k[ok]]
    return bool(ok.all())
