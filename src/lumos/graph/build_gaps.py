"""Gaps on CPU threads: CPU overhead, or a wait on another processor's task.

A thread that stops between two of its tasks is either busy with work the trace does not show
(Python, framework bookkeeping: an *overhead delay*, a cost that stays the same when other tasks
change) or blocked until something else finishes (a *wait*: a GPU task it polls for, another
thread's hand-off, a collective). A wait becomes a dependency on the task whose end released the
thread, with the thread's observed reaction as the edge delay, so that the simulation, not the
recording, decides how long the thread stands still.

The evidence for a wait in the gap between tasks ``a`` and ``b`` of thread ``p`` (recorded times,
``arrive[b]`` is when the thread reached ``b``):

==============================  ==============================================================
condition                       why
==============================  ==============================================================
``u`` on another processor      the releaser; a thread does not wait for itself
``end[a] < end[u] <= arrive[b]``  ``u`` ended while the thread stood still
``u``'s processor idle until    it *drained*: nothing else it did could be the cause, and a
``arrive[b]``                   busy GPU's steady stream of kernel ends is not mistaken for one
reaction ``arrive[b] - end[u]``  a released thread reacts quickly; a thread busy with untraced
``<= REACTION_SHARE * gap``      work for most of the gap resumes long after the GPU went idle
(``STRONG_REACTION_SHARE`` for   (a very long gap, or the thread's first one, is no
very long or first gaps)         coincidence even after a slow reaction)
gap longer than                 an ordinary overhead gap is not a wait, whatever ends in it:
``WAIT_FACTOR`` x the thread's  a wrongly found short wait ties a thread to another's
median gap                      schedule, a missed one costs at most its own length
the same pair of ops waits in   a program repeats: a release found in a minority of the
most of its long gaps (when     gaps between the same two ops is a coincidence (beyond
shorter than UNEXPLAINED_FACTOR ``UNEXPLAINED_FACTOR`` x the overhead a coincidence is
x the overhead)                 too unlikely to test for)
a CPU ``u``'s thread worked     a thread that wakes for a moment (a watchdog polling every
``>= BUSY_SHARE * gap`` in it   100 ms) hands nothing off; it only coincides
a CPU ``u`` started inside the  a thread that blocked while ``u`` ran waited for a lock ``u``
gap                             held (GIL, driver lock), which an edit does not preserve
==============================  ==============================================================

One releaser needs none of the table's proof beyond the reaction: a collective the thread
itself handed to a worker (gloo). A thread that resumes right after one of its own
collectives ended waited for it (``work.wait()``, DDP's bucket-by-bucket finalize after the
backward), even when the collective began before the thread blocked or the worker had already
picked up the next one; without this, each such wait was frozen into the thread's gap and a
faster or slower collective moved nothing.

A thread's usual overhead is the median of its positive gaps; a thread with fewer than
``MIN_OWN_GAPS`` of them mostly waits (a poller, a worker) and takes the median over all threads.
Among the candidates the latest-ending one is the releaser. The intra-thread edge into ``b``
keeps the thread's usual overhead (its median gap, at most the gap), so a wait that stops
binding under an edit leaves the thread with its ordinary overhead, not with none.

A thread whose first task starts after the trace's origin (a backward thread, a worker) is
released the same way, from the window's start; without a releaser it stays anchored at its
recorded offset and is counted (``thread_start_unexplained``).

Gaps that are neither waits nor ordinary overhead (longer than ``UNEXPLAINED_FACTOR`` times the
thread's median gap) are *unexplained*: kept as delays and reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_tasks import MARK, TaskLayout
from lumos.graph.model import DepKind

__all__ = [
    "BUSY_SHARE",
    "REACTION_SHARE",
    "STRONG_REACTION_SHARE",
    "UNEXPLAINED_FACTOR",
    "WAIT_FACTOR",
    "Candidates",
    "GapPlan",
    "attribute_gaps",
    "next_on_processor",
    "overhead_floor_ns",
    "releaser",
    "thread_gaps",
]

#: A wait's reaction (release to resume) is at most this share of the gap it ends...
REACTION_SHARE = 0.1
#: ...or of a gap beyond ``UNEXPLAINED_FACTOR`` x the overhead, or of a thread's first gap
#: (from the window's start, an arbitrary length), where a slow reaction is no coincidence.
STRONG_REACTION_SHARE = 0.25
#: A gap is a candidate wait when longer than this many times its thread's usual overhead.
WAIT_FACTOR = 4
#: A CPU releaser's thread was busy for at least this share of the gap it ends.
BUSY_SHARE = 0.02
#: A non-wait gap longer than this many times its thread's median gap is "unexplained".
UNEXPLAINED_FACTOR = 20
#: A thread released by GPU work resumes at least this long after it ended: a CPU learns of a
#: GPU task's end over PCIe (an interrupt, a poll of host memory), never at once; a resume at
#: the very instant, as whole-microsecond traces often show, is a coincidence.
MIN_GPU_REACTION_NS = 500
#: A thread needs this many positive gaps of its own to measure its usual overhead.
MIN_OWN_GAPS = 50
_NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True, eq=False)
class GapPlan:
    """Waits found on CPU threads.

    ``src[i] -> dst[i]`` with ``delay_ns[i]`` (the reaction) and ``kind[i]`` (``SYNC`` for a GPU
    releaser, ``INTER_THREAD`` for a CPU one). ``intra_delay_ns`` is the delay of the
    intra-thread edge into each released task (the thread's usual overhead, at most the gap).
    ``released_start[p]`` is True for a thread whose first task is released by a cause (its
    anchor edge then carries no recorded offset).
    """

    src: NDArray[np.int64]
    dst: NDArray[np.int64]
    delay_ns: NDArray[np.int64]
    kind: NDArray[np.int8]
    intra_delay_ns: NDArray[np.int64]
    released_start: NDArray[np.bool_]


def overhead_floor_ns(gaps: NDArray[np.int64]) -> int:
    """The usual overhead between tasks: the median of the positive gaps (0 if none)."""
    pos = gaps[gaps > 0]
    return int(np.median(pos)) if pos.size else 0


def attribute_gaps(
    layout: TaskLayout,
    arrive: NDArray[np.int64],
    end: NDArray[np.int64],
    on_stream: NDArray[np.bool_],
    launcher: NDArray[np.int64],
    names: NDArray[np.int32],
    diag: Diagnostics,
    settled: NDArray[np.bool_] | None = None,
    recorded_end: NDArray[np.int64] | None = None,
    handed: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None,
    submitted: NDArray[np.int64] | None = None,
) -> GapPlan:
    """Find the waits among the gaps of every CPU thread (see the module docstring).

    Tasks marked in ``settled`` already have their wait (a blocked call's successor) and are
    not looked at; ``recorded_end`` (default ``end``) are the ends before blocked calls were
    shortened: a call that blocked was busy, not idle. ``handed`` is ``(call, work)``: the
    collectives a thread issued to a worker (gloo); a gap of the issuing thread that ends right
    after one of its own collectives finished waited for it (``work.wait()``, DDP's bucket
    finalize), even when the worker had already started the next one or the collective began
    before the gap: the lock and drain rules are for releasers the thread has no claim on.
    ``submitted`` (:func:`lumos.graph.build_causal.submitted_ns`): a releaser submitted after the
    thread reached its task is no releaser (the recorded order rules it out).
    """
    ev = layout.event_idx
    real = (ev >= 0) | (ev == MARK)
    _, next_start = next_on_processor(layout, arrive)  # the drain test
    busy_end = end if recorded_end is None else recorded_end
    candidates = [Candidates.of(layout, q, arrive, end, busy_end)
                  for q in range(len(layout.processors))]  # fmt: skip

    src: list[int] = []
    dst: list[int] = []
    delay: list[int] = []
    kind: list[int] = []
    intra: list[int] = []
    n_proc = len(layout.processors)
    released_start = np.zeros(n_proc, dtype=bool)
    gaps_of = thread_gaps(layout, arrive, end, on_stream, real)
    trace_floor = overhead_floor_ns(np.concatenate([np.zeros(0, np.int64), *gaps_of.values()]))
    own_work = _own_work(layout, end, handed)
    for p in range(n_proc):
        lo, hi = int(layout.proc_ptr[p]), int(layout.proc_ptr[p + 1])
        if hi - lo < 2 or on_stream[lo]:
            continue
        tasks = np.arange(lo + 1, hi)
        tasks = tasks[real[tasks]]
        if tasks.size == 0:
            continue
        prev_end = np.empty(tasks.size, dtype=np.int64)
        prev_end[0] = layout.origin_ns
        prev_end[1:] = end[tasks[:-1]]
        gap = arrive[tasks] - prev_end
        own = gaps_of.get(p, gap[1:])
        # a thread with few gaps of its own (a poller, a worker) mostly waits: its median gap is
        # a wait, and its usual overhead is that of all threads together
        floor = overhead_floor_ns(own) if (own > 0).sum() >= MIN_OWN_GAPS else trace_floor
        # one id per (previous op, op) pair, numbered as the pairs sort (names are -1 for
        # synthetic tasks, and the thread's first task has the previous name -2)
        span = int(names.max(initial=0)) + 2
        prev_name = np.concatenate(([-2], names[tasks[:-1]])).astype(np.int64)
        _, key = np.unique((prev_name + 2) * span + (names[tasks] + 1), return_inverse=True)
        key = key.reshape(-1)
        found: list[tuple[int, int, int, int]] = []  # (i, releaser, reaction, key)
        long_gaps = np.flatnonzero(gap > WAIT_FACTOR * max(floor, 1))
        strong = gap > UNEXPLAINED_FACTOR * max(floor, 1)
        for i in long_gaps.tolist():
            b = int(tasks[i])
            if settled is not None and settled[b]:
                continue
            g = int(gap[i])
            u = _own_releaser(own_work.get(p), int(prev_end[i]), int(arrive[b]))
            if u < 0:
                u = releaser(int(prev_end[i]), int(arrive[b]), int(BUSY_SHARE * g), p,
                             candidates, end, next_start, on_stream, submitted)  # fmt: skip
            r = int(arrive[b] - end[u]) if u >= 0 else -1
            share = STRONG_REACTION_SHARE if i == 0 or strong[i] else REACTION_SHARE
            if u >= 0 and r <= share * g:
                found.append((i, u, r, int(key[i])))
            elif i == 0:
                diag.warn("thread_start_unexplained", f"task {int(tasks[0])}")
        # the same step of a program (same pair of ops, a gap of the same order between them)
        # waits every time or it did not wait: a release found in a minority of them is a
        # coincidence. Gaps beyond UNEXPLAINED_FACTOR x the overhead are rarely coincidences.
        medium = long_gaps[~strong[long_gaps]]
        per_key = np.bincount(key[medium], minlength=int(key.max()) + 1)
        hits = np.bincount([k for i, *_, k in found if not strong[i]], minlength=per_key.size)
        for i, u, r, k in found:
            if not strong[i] and 2 * hits[k] < per_key[k]:
                diag.warn("wait_coincidence_dropped", f"task {int(tasks[i])}")
                continue
            src.append(u)
            dst.append(int(tasks[i]))
            delay.append(r)
            kind.append(int(DepKind.SYNC if on_stream[u] else DepKind.INTER_THREAD))
            intra.append(min(floor, int(gap[i])) if i else 0)
            if i == 0:
                released_start[p] = True
    i64 = np.int64
    return GapPlan(
        src=np.asarray(src, dtype=i64),
        dst=np.asarray(dst, dtype=i64),
        delay_ns=np.asarray(delay, dtype=i64),
        kind=np.asarray(kind, dtype=np.int8),
        intra_delay_ns=np.asarray(intra, dtype=i64),
        released_start=released_start,
    )


def _own_work(
    layout: TaskLayout,
    end: NDArray[np.int64],
    handed: tuple[NDArray[np.int64], NDArray[np.int64]] | None,
) -> dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Per issuing thread, its collectives' worker tasks and their running-max ends (sorted)."""
    if handed is None or not len(handed[0]):
        return {}
    call, work = handed
    out = {}
    issuer = layout.processor_idx[call]
    for p in np.unique(issuer).tolist():
        w = work[issuer == p]
        w = w[np.argsort(end[w], kind="stable")]
        out[int(p)] = (w, end[w])
    return out


def _own_releaser(
    own: tuple[NDArray[np.int64], NDArray[np.int64]] | None, gap_start: int, resume: int
) -> int:
    """The latest of the thread's own collectives to end inside the gap (-1 if none)."""
    if own is None:
        return -1
    work, ends = own
    k = int(np.searchsorted(ends, resume, side="right")) - 1
    return int(work[k]) if k >= 0 and ends[k] > gap_start else -1


@dataclass(frozen=True, eq=False)
class Candidates:
    """One processor's possible releasers: its real tasks in order, their running-max ends
    (non-decreasing, for binary search), starts, and the busy time before each."""

    tasks: NDArray[np.int64]
    ends: NDArray[np.int64]
    starts: NDArray[np.int64]
    busy_before: NDArray[np.int64]

    @classmethod
    def of(
        cls,
        layout: TaskLayout,
        q: int,
        arrive: NDArray[np.int64],
        end: NDArray[np.int64],
        busy_end: NDArray[np.int64],
    ) -> Candidates:
        lo, hi = int(layout.proc_ptr[q]), int(layout.proc_ptr[q + 1])
        tq = np.arange(lo, hi)[(layout.event_idx[lo:hi] >= 0) & (end[lo:hi] > arrive[lo:hi])]
        busy = np.concatenate(([0], np.cumsum(busy_end[tq] - arrive[tq]))).astype(np.int64)
        ends = np.maximum.accumulate(end[tq]) if tq.size else end[tq]
        return cls(tq, ends, arrive[tq], busy)


def releaser(
    gap_start: int,
    resume: int,
    min_busy_ns: int,
    thread: int,
    candidates: list[Candidates],
    end: NDArray[np.int64],
    next_start: NDArray[np.int64],
    on_stream: NDArray[np.bool_],
    submitted: NDArray[np.int64] | None = None,
) -> int:
    """The latest-ending task that can have released a thread resuming at ``resume`` after a
    gap from ``gap_start`` (-1 if none); see the module table. Only a processor's last task
    ending before the resume can have drained it, so each processor offers one candidate; with
    ``submitted``, one submitted after ``resume`` (launched later) offers none."""
    best, best_end = -1, gap_start
    for q, c in enumerate(candidates):
        if q == thread or c.tasks.size == 0:
            continue
        # the CPU learns that GPU work ended a moment later (an interrupt, a poll): a GPU task
        # that ends the instant the thread resumes ended by coincidence
        by = resume - (MIN_GPU_REACTION_NS if on_stream[int(c.tasks[0])] else 0)
        k = int(c.ends.searchsorted(by, side="right")) - 1
        if k < 0:
            continue
        u = int(c.tasks[k])
        if end[u] <= best_end or next_start[u] < resume:
            continue
        if submitted is not None and submitted[u] > resume:
            continue
        if not on_stream[u]:
            if c.starts[k] < gap_start:
                continue  # the thread blocked while u ran: a lock let go, not work handed off
            first = min(int(c.starts.searchsorted(gap_start, side="left")), k + 1)
            if c.busy_before[k + 1] - c.busy_before[first] < min_busy_ns:
                continue
        best, best_end = u, int(end[u])
    return best


def thread_gaps(
    layout: TaskLayout,
    arrive: NDArray[np.int64],
    end: NDArray[np.int64],
    on_stream: NDArray[np.bool_],
    real: NDArray[np.bool_],
) -> dict[int, NDArray[np.int64]]:
    """The gaps between consecutive real tasks of every CPU thread."""
    out = {}
    for p in range(len(layout.processors)):
        lo, hi = int(layout.proc_ptr[p]) + 1, int(layout.proc_ptr[p + 1])
        if hi - lo < 2 or on_stream[lo - 1]:
            continue
        tasks = np.arange(lo, hi)
        tasks = tasks[real[tasks]]
        out[p] = arrive[tasks[1:]] - end[tasks[:-1]]
    return out


def next_on_processor(
    layout: TaskLayout, arrive: NDArray[np.int64]
) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """Whether each task has a next task on its processor, and when that one began."""
    n = len(layout)
    same_next = np.zeros(n, dtype=bool)
    same_next[:-1] = layout.processor_idx[1:] == layout.processor_idx[:-1]
    next_start = np.full(n, _NEVER, dtype=np.int64)
    next_start[:-1] = np.where(same_next[:-1], arrive[1:], _NEVER)
    return same_next, next_start
