"""Blocking calls: what a call that waited costs by itself, and what it waited for.

A blocking call's traced duration holds its wait. The graph keeps only its own cost and makes
the wait a dependency, so the simulation, not the recording, decides how long it blocks:

==============================  ============================================================
call                            own cost / what it waits for
==============================  ============================================================
blocking copy (``cudaMemcpy``,  the time to the copy's start (at most a nominal launch when
a pageable async copy)          the copy was queued) / the copy, through a ``[wait]`` task
stream/device/event sync        its time after the GPU work ended / a runtime wait
launch on a full launch queue   its name's median / the GPU task whose end freed a slot
leaf op waiting for a thread    its time until that thread began / that thread's last task
(``backward()``)
==============================  ============================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_deps import LAUNCH_LATENCY_NOMINAL_NS, TOL_NS
from lumos.graph.build_gaps import (
    BUSY_SHARE,
    REACTION_SHARE,
    WAIT_FACTOR,
    Candidates,
    next_on_processor,
    overhead_floor_ns,
    releaser,
    thread_gaps,
)
from lumos.graph.build_links import launching_event
from lumos.graph.build_tasks import TaskLayout
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_schema import Category
from lumos.ingest.kineto_trace import Events

__all__ = [
    "BLOCKED_FACTOR",
    "BlockedCalls",
    "blocked_calls",
    "blocking_copies",
    "blocking_ops",
    "copy_task_of_wait",
    "enqueue_names",
    "merge_blocked",
    "shorten_blocking",
    "shorten_syncs",
]

#: A launch call this many times longer than its name's median blocked (a full launch queue).
BLOCKED_FACTOR = 10


_ENQUEUE = re.compile(
    r"^(cuda|hip|cu)(Launch|ExtLaunch|ModuleLaunch|ExtModuleLaunch|Memcpy\w*Async|"
    r"Memset\w*Async|GraphLaunch)"
)


def enqueue_names(trace: KinetoTrace) -> NDArray[np.bool_]:
    """Per interned name: a runtime call that enqueues GPU work (and blocks when the queue is full)."""
    return np.array([bool(_ENQUEUE.match(n)) for n in trace.names], dtype=bool)


def blocking_copies(trace: KinetoTrace) -> NDArray[np.bool_]:
    """Runtime calls that launched a copy/set and returned only after it finished."""
    ev = trace.events
    out = np.zeros(len(ev), dtype=bool)
    launch = launching_event(trace)
    gpu = np.flatnonzero(
        np.isin(ev.cat, (int(Category.MEMCPY), int(Category.MEMSET))) & (launch >= 0)
    )
    for g in gpu.tolist():
        r = int(launch[g])
        call = trace.names[int(ev.name_idx[r])]
        sync_api = "Async" not in call or "Pageable" in trace.names[int(ev.name_idx[g])]
        if not sync_api:
            continue
        g_end = int(ev.ts_ns[g] + ev.dur_ns[g])
        if ev.ts_ns[g] + TOL_NS >= ev.ts_ns[r] and g_end <= ev.ts_ns[r] + ev.dur_ns[r] + TOL_NS:
            out[r] = True
    return out


def shorten_blocking(
    trace: KinetoTrace,
    layout: TaskLayout,
    ts: NDArray[np.int64],
    dur: NDArray[np.int64],
    launch: NDArray[np.int64],
) -> None:
    """Split a blocking copy call: the call keeps its launch part, its [wait] task the rest.

    The launch part is the time to the copy's start when the copy's stream was idle; when the
    copy was queued behind earlier work it started when that work ended, so the call's own
    part is at most the nominal launch latency and the queueing comes from the simulation.
    """
    ev = trace.events
    copy_of_call = {int(launch[g]): int(g) for g in np.flatnonzero(launch >= 0).tolist()}
    stream_prev_end = _previous_end_on_processor(ev)
    for w in np.flatnonzero(layout.is_wait).tolist():
        call_t = w - 1
        r = int(layout.event_idx[w])
        g = copy_of_call.get(r)
        c_ts, c_end = int(ev.ts_ns[r]), int(ev.ts_ns[r] + ev.dur_ns[r])
        g_ts = int(ev.ts_ns[g]) if g is not None else c_ts
        g_end = int(ev.ts_ns[g] + ev.dur_ns[g]) if g is not None else c_end
        part = min(max(g_ts - c_ts, 0), c_end - c_ts)
        if g is not None and stream_prev_end[g] >= g_ts - TOL_NS and stream_prev_end[g] > c_ts:
            part = min(part, LAUNCH_LATENCY_NOMINAL_NS)
        dur[call_t] = part
        start = min(max(g_end, c_ts + part), c_end)
        ts[w] = start
        dur[w] = c_end - start


#: "No previous event": earlier than any recorded time (-1 ns is a time a trace can hold).
_NO_PREVIOUS = np.iinfo(np.int64).min


def _previous_end_on_processor(ev: Events) -> NDArray[np.int64]:
    """For every event, the end of the previous event on its processor (events are sorted by
    processor, then start); :data:`_NO_PREVIOUS` for a processor's first."""
    out = np.full(len(ev), _NO_PREVIOUS, dtype=np.int64)
    if len(ev) > 1:
        same = ev.processor_idx[1:] == ev.processor_idx[:-1]
        out[1:] = np.where(same, (ev.ts_ns + ev.dur_ns)[:-1], _NO_PREVIOUS)
    return out


def copy_task_of_wait(
    trace: KinetoTrace, layout: TaskLayout, waits: NDArray[np.int64]
) -> NDArray[np.int64]:
    launch = launching_event(trace)
    task_of = layout.task_of_event(len(trace.events))
    copy_of_call = {int(launch[g]): int(g) for g in np.flatnonzero(launch >= 0).tolist()}
    out = np.full(waits.size, -1, dtype=np.int64)
    for i, w in enumerate(waits.tolist()):
        g = copy_of_call.get(int(layout.event_idx[w]))
        if g is not None:
            out[i] = task_of[g]
    return out


def shorten_syncs(
    layout: TaskLayout,
    tasks: list[int],
    waited_end: dict[int, int],
    ts: NDArray[np.int64],
    dur: NDArray[np.int64],
    diag: Diagnostics,
) -> list[bool]:
    """A sync call that blocked keeps only its cost after the GPU work ended."""
    keep: list[bool] = []
    for t in tasks:
        g_end = waited_end.get(t, -1)
        s, e = int(ts[t]), int(ts[t] + dur[t])
        if g_end > e + TOL_NS:
            # the recording says the call returned before that work ended: not what it waited on
            diag.warn("sync_wait_contradicted", f"task {t}")
            keep.append(False)
            continue
        keep.append(True)
        if g_end > s:
            ts[t] = min(g_end, e)
            dur[t] = e - ts[t]
    return keep


@dataclass(frozen=True, eq=False)
class BlockedCalls:
    """Enqueue calls (kernel launches, async copies) that blocked on a full launch queue.

    ``call[i]`` keeps ``cost_ns[i]`` (the median cost of calls of its name); the thread's next
    task ``next_task[i]`` waits for ``releaser[i]``, the GPU task whose end freed a queue slot,
    plus ``reaction_ns[i]`` (recorded, from the releaser's end to the next task's start);
    ``gap_ns[i]`` is the recorded gap after the call.
    """

    call: NDArray[np.int64]
    cost_ns: NDArray[np.int64]
    next_task: NDArray[np.int64]
    releaser: NDArray[np.int64]
    reaction_ns: NDArray[np.int64]
    gap_ns: NDArray[np.int64]


def blocked_calls(
    layout: TaskLayout,
    names: NDArray[np.int32],
    enqueue_name: NDArray[np.bool_],
    arrive: NDArray[np.int64],
    end: NDArray[np.int64],
    on_stream: NDArray[np.bool_],
    launcher: NDArray[np.int64],
) -> BlockedCalls:
    """Launch calls that returned only when a GPU task ended (the CUDA launch queue was full).

    A call of an enqueueing runtime function (``enqueue_name[name]``) longer than
    ``BLOCKED_FACTOR`` times its name's median, whose return follows the end of a GPU task
    launched before the call began by at most ``REACTION_SHARE`` of its excess, blocked: it keeps
    its name's median cost and the wait becomes a dependency of the thread's next task.
    ``names`` is each task's name index.
    """
    n = len(layout)
    dur = end - arrive
    cand = np.flatnonzero((layout.kind == 1) & (layout.event_idx >= 0) & ~layout.is_wait)
    cand = cand[enqueue_name[names[cand]]]
    out: dict[str, list[int]] = {k: [] for k in ("call", "cost", "next", "rel", "r", "gap")}
    if cand.size:
        gpu = np.flatnonzero(on_stream & (layout.event_idx >= 0) & (end > arrive))
        by_end = gpu[np.argsort(end[gpu], kind="stable")]
        ends = end[by_end]
        launched = launcher >= 0  # a time cannot mark "no launch": a trace may hold any
        launch_ts = arrive[np.maximum(launcher, 0)]
        for name in np.unique(names[cand]).tolist():
            calls = cand[names[cand] == name]
            typical = int(np.median(dur[calls]))
            for c in calls[dur[calls] > BLOCKED_FACTOR * max(typical, 1)].tolist():
                nxt = c + 1
                if nxt >= n or layout.processor_idx[nxt] != layout.processor_idx[c]:
                    continue
                k = int(np.searchsorted(ends, end[c], side="right")) - 1
                while k >= 0 and ends[k] > arrive[c]:
                    u = int(by_end[k])
                    k -= 1
                    if launched[u] and launch_ts[u] < arrive[c]:
                        break
                else:
                    continue
                r = int(end[c] - end[u])
                if r > REACTION_SHARE * (int(dur[c]) - typical):
                    continue
                out["call"].append(c)
                out["cost"].append(typical)
                out["next"].append(nxt)
                out["rel"].append(u)
                out["r"].append(int(arrive[nxt] - end[u]))
                out["gap"].append(max(int(arrive[nxt] - end[c]), 0))
    a = {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}
    return BlockedCalls(a["call"], a["cost"], a["next"], a["rel"], a["r"], a["gap"])


def blocking_ops(
    layout: TaskLayout,
    arrive: NDArray[np.int64],
    end: NDArray[np.int64],
    on_stream: NDArray[np.bool_],
) -> BlockedCalls:
    """Leaf CPU ops whose recorded span holds a wait on another thread (``backward()`` on the
    main thread while the autograd thread runs the backward pass).

    A leaf op longer than ``WAIT_FACTOR`` times the usual overhead ends at most
    ``REACTION_SHARE`` of its length after a task ``u`` of another thread that then drained,
    whose thread began working inside the op and worked at least ``BUSY_SHARE`` of it: the op
    keeps its cost up to the moment that thread began (the hand-off happened before), and the
    thread's next task waits for ``u`` plus the recorded reaction.
    """
    n = len(layout)
    real = layout.event_idx >= 0
    gaps = list(thread_gaps(layout, arrive, end, on_stream, real).values())
    floor = overhead_floor_ns(np.concatenate([np.zeros(0, np.int64), *gaps]))
    dur = end - arrive
    cand = np.flatnonzero(
        (layout.kind == 0) & real & ~on_stream & (dur > WAIT_FACTOR * max(floor, 1))
    )
    same_next, next_start = next_on_processor(layout, arrive)
    candidates = [Candidates.of(layout, q, arrive, end, end) for q in range(len(layout.processors))]
    out: dict[str, list[int]] = {k: [] for k in ("call", "cost", "next", "rel", "r", "gap")}
    for t in cand.tolist():
        nxt = t + 1
        if nxt >= n or not same_next[t]:
            continue
        d = int(dur[t])
        u = releaser(int(arrive[t]), int(end[t]), int(BUSY_SHARE * d), int(layout.processor_idx[t]),
                      candidates, end, next_start, on_stream | ~real)  # fmt: skip
        if u < 0 or on_stream[u] or end[t] - end[u] > REACTION_SHARE * d:
            continue
        c = candidates[int(layout.processor_idx[u])]
        began = c.starts[int(np.searchsorted(c.starts, arrive[t], side="left"))]
        out["call"].append(t)
        out["cost"].append(int(min(max(began - arrive[t], 0), d)))
        out["next"].append(nxt)
        out["rel"].append(u)
        out["r"].append(int(arrive[nxt] - end[u]))
        out["gap"].append(max(int(arrive[nxt] - end[t]), 0))
    a = {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}
    return BlockedCalls(a["call"], a["cost"], a["next"], a["rel"], a["r"], a["gap"])


def merge_blocked(a: BlockedCalls, b: BlockedCalls) -> BlockedCalls:
    """Both sets of blocked tasks (a task found by both keeps ``a``'s entry)."""
    keep = ~np.isin(b.call, a.call)
    return BlockedCalls(*(np.concatenate([getattr(a, f), getattr(b, f)[keep]])
                          for f in ("call", "cost_ns", "next_task", "releaser", "reaction_ns",
                                    "gap_ns")))  # fmt: skip
