"""gloo's spans: the worker threads that run collectives, and lanes for point-to-point in flight.

A gloo *worker* thread runs nothing but ``gloo:<op>`` spans and what gloo does inside them (the
copies around a collective's transfer): :func:`inside_gloo_workers` names those ops, which are
the collective's own time. gloo records ``gloo:send`` / ``gloo:recv`` on the *calling* thread, from the call to the end of
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

__all__ = ["CPU_CANDIDATES", "gloo_lanes", "gloo_spans", "inside_gloo_workers", "on_lanes"]

#: Event categories that may be CPU tasks (their leaves are: lumos.graph.build_tasks).
CPU_CANDIDATES = (int(Category.CPU_OP), int(Category.RUNTIME), int(Category.DRIVER))
# lane thread ids: 2**40 + the lane's processor row, clear of Linux thread ids (below 2**22)
# and below pthread ids (0x7f... on Linux, 0x70... on macOS: about 2**47), which some
# recorders write as the thread id
_LANE_TID_BASE = 1 << 40
_LANE_TID_END = _LANE_TID_BASE + (1 << 32)


def on_lanes(graph: ExecGraph) -> NDArray[np.bool_]:
    """Which of a graph's tasks run on a lane (a gloo send or receive in flight): those on a
    processor whose thread id is a lane's, in ``[2**40, 2**40 + 2**32)``."""
    tid = graph.processors.tid
    lane = (tid >= _LANE_TID_BASE) & (tid < _LANE_TID_END)
    return lane[graph.tasks.processor_idx]


def gloo_spans(trace: KinetoTrace) -> NDArray[np.bool_]:
    """The events that are ``gloo:<op>`` spans."""
    ev = trace.events
    ids = [i for i, n in enumerate(trace.names) if n.startswith("gloo:")]
    return (ev.cat == int(Category.USER_ANNOTATION)) & np.isin(ev.name_idx, ids)


def inside_gloo_workers(
    trace: KinetoTrace, gloo: NDArray[np.bool_], cand: NDArray[np.bool_]
) -> NDArray[np.bool_]:
    """Candidates (not gloo spans) nested inside a gloo span on a gloo worker thread: one
    whose every candidate is a gloo span or lies inside one. On a thread that runs other work
    too (gloo's point-to-point spans are recorded on the calling thread) nothing is nested."""
    ev = trace.events
    out = np.zeros_like(cand)
    spans = np.flatnonzero(gloo)
    for p in np.unique(ev.processor_idx[spans]).tolist():
        o = spans[ev.processor_idx[spans] == p]
        c = np.flatnonzero(cand & ~gloo & (ev.processor_idx == p))
        if _inside(trace, c, o).all():
            out[c] = True
    return out


def gloo_lanes(trace: KinetoTrace) -> tuple[KinetoTrace, NDArray[np.int32]]:
    """The trace with a processor appended per lane, and each event's lane (its processor row
    there; -1 for every event that stays on its own processor). A gloo span is put on a lane
    when another task candidate of its thread (a CPU op, a runtime call, a gloo span) starts
    inside it, on a thread that is no gloo worker (:func:`inside_gloo_workers`)."""
    ev = trace.events
    gloo = gloo_spans(trace)
    lane_of = np.full(len(ev), -1, dtype=np.int32)
    spans = np.flatnonzero(gloo)
    if spans.size == 0:
        return trace, lane_of
    cand = np.isin(ev.cat, CPU_CANDIDATES) | gloo
    procs = trace.processors
    kind, pid, tid, device = [procs.kind], [procs.pid], [procs.tid], [procs.device]
    label = list(procs.label)
    n_procs = len(procs)
    for p in np.unique(ev.processor_idx[spans]).tolist():
        on_p = spans[ev.processor_idx[spans] == p]
        others = np.flatnonzero(cand & ~gloo & (ev.processor_idx == p))
        if others.size and _inside(trace, others, on_p).all():
            continue  # a gloo worker: its spans hold their collective's own ops
        starts = ev.ts_ns[np.flatnonzero(cand & (ev.processor_idx == p))]  # in time order
        s_ts = ev.ts_ns[on_p]
        s_end = s_ts + ev.dur_ns[on_p]
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
                tid.append(np.array([_LANE_TID_BASE + len(label)]))  # unique in the trace
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


def _inside(
    trace: KinetoTrace, events: NDArray[np.int64], spans: NDArray[np.int64]
) -> NDArray[np.bool_]:
    """Which ``events`` lie inside one of ``spans`` (event rows of one processor, in time
    order): the latest end among the spans that start by an event's start reaches its end."""
    ev = trace.events
    s_ts = ev.ts_ns[spans]
    reach = np.maximum.accumulate(s_ts + ev.dur_ns[spans])
    k = s_ts.searchsorted(ev.ts_ns[events], side="right") - 1
    ok = k >= 0
    ok[ok] = ev.ts_ns[events[ok]] + ev.dur_ns[events[ok]] <= reach[k[ok]]
    return ok
