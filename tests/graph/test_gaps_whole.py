"""``lumos.graph.build_gaps`` whole: every rule of the module's table on hand-built layouts.

Each test lays out a few CPU threads and GPU streams by hand (:func:`_build`: every processor
led by its ``<start>`` anchor at the origin, times in ns) and calls the functions directly.
Expected edges are worked out from the module's rules in each docstring: a thread's usual
overhead (``floor``) is the median of its positive gaps (of all threads' gaps together when it
has fewer than 50), a gap is *long* above 4 x floor and *strong* above 20 x floor, a releaser
must end inside the gap and within a tenth of it (a quarter for a strong or a thread's first
gap) before the resume, a GPU one at least 500 ns before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_gaps import (
    Candidates,
    _own_work,
    attribute_gaps,
    next_on_processor,
    overhead_floor_ns,
    releaser,
)
from lumos.graph.build_tasks import MARK, START, TaskLayout
from lumos.graph.model import DepKind

SYNC, INTER = int(DepKind.SYNC), int(DepKind.INTER_THREAD)
NEVER = np.iinfo(np.int64).max


class _Built:
    """A hand-built layout with its columns; ``idx[p]``: processor p's tasks (anchor excluded)."""

    def __init__(
        self,
        layout: TaskLayout,
        arrive: NDArray[np.int64],
        end: NDArray[np.int64],
        on_stream: NDArray[np.bool_],
        names: NDArray[np.int32],
        idx: list[list[int]],
    ) -> None:
        self.layout, self.arrive, self.end = layout, arrive, end
        self.on_stream, self.names, self.idx = on_stream, names, idx


def _build(procs: Sequence[tuple[bool, Sequence[tuple[int, ...]]]], origin: int = 0) -> _Built:
    """Processors in the order given, each ``(is_stream, tasks)``; a task is ``(arrive, end,
    name)`` or ``(arrive, end, name, event_idx)``; real tasks get event rows 0, 1, ... ."""
    arrive, end, names, ev, proc, stream, ptr, idx = [], [], [], [], [], [], [0], []
    row = 0
    for p, (is_stream, tasks) in enumerate(procs):
        arrive.append(origin)
        end.append(origin)
        names.append(-1)
        ev.append(START)
        proc.append(p)
        stream.append(is_stream)
        mine = []
        for t in tasks:
            mine.append(len(arrive))
            arrive.append(t[0])
            end.append(t[1])
            names.append(t[2])
            if len(t) > 3:
                ev.append(t[3])
            else:
                ev.append(row)
                row += 1
            proc.append(p)
            stream.append(is_stream)
        idx.append(mine)
        ptr.append(len(arrive))
    a = np.array(arrive, dtype=np.int64)
    e = np.array(end, dtype=np.int64)
    evs = np.array(ev, dtype=np.int64)
    layout = TaskLayout(
        event_idx=evs,
        kind=np.full(a.size, 2, dtype=np.int8),
        processor_idx=np.array(proc, dtype=np.int32),
        ts_ns=a,
        dur_ns=e - a,
        is_wait=np.zeros(a.size, dtype=bool),
        mark=np.where(evs == MARK, 0, -1).astype(np.int32),
        proc_ptr=np.array(ptr, dtype=np.int64),
        processors=np.arange(len(procs), dtype=np.int32),
        origin_ns=origin,
    )
    return _Built(layout, a, e, np.array(stream, dtype=bool), np.array(names, np.int32), idx)


def _gaps(
    b: _Built, **kw: Any
) -> tuple[list[tuple[int, int, int, int, int]], list[bool], Diagnostics]:
    """attribute_gaps' plan as rows ``(src, dst, delay, kind, intra delay)``, released starts,
    and the diagnostics."""
    diag = Diagnostics()
    launcher = np.full(b.arrive.size, -1, dtype=np.int64)
    plan = attribute_gaps(b.layout, b.arrive, b.end, b.on_stream, launcher, b.names, diag, **kw)
    rows = list(zip(plan.src.tolist(), plan.dst.tolist(), plan.delay_ns.tolist(),
                    plan.kind.tolist(), plan.intra_delay_ns.tolist(), strict=True))  # fmt: skip
    return rows, plan.released_start.tolist(), diag


def _settled(b: _Built, *tasks: int) -> NDArray[np.bool_]:
    out = np.zeros(b.arrive.size, dtype=bool)
    out[list(tasks)] = True
    return out


# ---- overhead_floor_ns, next_on_processor, Candidates.of, _own_work, releaser


@pytest.mark.parametrize(
    ("gaps", "floor"),
    [([], 0), ([0, -5], 0), ([0, 0, 3], 3), ([1, 1, 3], 1), ([-7, 2, 4], 3), ([5, 1, 9, 1000], 7)],
)
def test_overhead_floor_is_the_median_of_the_positive_gaps(gaps: list[int], floor: int) -> None:
    """Only positive gaps count (zeros and negatives are dropped, a 1 ns gap counts): [0, 0, 3]
    -> median of [3] = 3; [1, 1, 3] -> 1; [-7, 2, 4] -> (2 + 4) / 2 = 3; [5, 1, 9, 1000] ->
    (5 + 9) / 2 = 7; none positive -> 0."""
    assert overhead_floor_ns(np.array(gaps, dtype=np.int64)) == floor


def test_next_on_processor_looks_only_within_each_processor() -> None:
    """Six tasks on processors 0, 0, 0, 1, 1, 2 arriving at 10, 20, 30, 40, 50, 60 ns: tasks 0,
    1 and 3 have a next task on their processor (arriving 20, 30, 50); the last of each
    processor has none (next start "never", int64 max)."""
    b = _build([(False, [(10, 11, 0), (20, 21, 0), (30, 31, 0)]), (False, [(40, 41, 0), (50, 51, 0)]),
                (False, [(60, 61, 0)])])  # fmt: skip
    keep = np.array([1, 2, 3, 5, 6, 8])  # drop the anchors: processors 0, 0, 0, 1, 1, 2
    layout = TaskLayout(**{f: getattr(b.layout, f)[keep] for f in
                           ("event_idx", "kind", "processor_idx", "ts_ns", "dur_ns", "is_wait", "mark")},
                        proc_ptr=np.array([0, 3, 5, 6]), processors=b.layout.processors,
                        origin_ns=0)  # fmt: skip
    same, nxt = next_on_processor(layout, b.arrive[keep])
    assert same.dtype == np.dtype(bool) and nxt.dtype == np.dtype(np.int64)
    assert same.tolist() == [True, True, False, True, False, False]
    assert nxt.tolist() == [20, 30, NEVER, 50, NEVER, NEVER]


def test_candidates_keep_int64_busy_times() -> None:
    """One processor, tasks 0-10 and 20-50 ns (busy 10 then 30): busy before each is 0, 10, 40
    ns, as int64 like the ends and starts."""
    b = _build([(False, [(0, 10, 0), (20, 50, 0)])])
    c = Candidates.of(b.layout, 0, b.arrive, b.end, b.end)
    assert c.busy_before.tolist() == [0, 10, 40]
    assert (c.busy_before.dtype, c.ends.dtype, c.starts.dtype) == (np.dtype(np.int64),) * 3


def test_own_work_groups_a_threads_collectives_by_their_end_keeping_handed_order_on_ties() -> None:
    """Thread 0 issues calls 1, 2, 3, 4 (work 8, 9, 10, 11 on worker thread 2, ending 200,
    200, 100, 100 ns), thread 1 issues call 6 (work 12, ending 50). Per issuer the work sorted
    by end, ties kept in the order handed (a stable sort): thread 0 -> 10, 11, 8, 9 (ends 100,
    100, 200, 200); thread 1 -> 12. No collectives handed (None or empty) -> no entry."""
    b = _build([(False, [(0, 1, 0), (2, 3, 0), (4, 5, 0), (6, 7, 0)]), (False, [(0, 1, 0)]),
                (False, [(0, 200, 1), (0, 200, 1), (0, 100, 1), (0, 100, 1), (0, 50, 1)])])  # fmt: skip
    assert b.idx == [[1, 2, 3, 4], [6], [8, 9, 10, 11, 12]]
    call = np.array([1, 2, 6, 3, 4], dtype=np.int64)
    work = np.array([8, 9, 12, 10, 11], dtype=np.int64)
    got = _own_work(b.layout, b.end, (call, work))
    assert {p: (w.tolist(), e.tolist()) for p, (w, e) in got.items()} == {
        0: ([10, 11, 8, 9], [100, 100, 200, 200]),
        1: ([12], [50]),
    }
    assert all(type(p) is int for p in got)
    assert _own_work(b.layout, b.end, None) == {}
    z = np.zeros(0, dtype=np.int64)
    assert _own_work(b.layout, b.end, (z, z)) == {}


def _cands(tasks: list[int], starts: list[int], ends: list[int]) -> Candidates:
    """A processor's candidates as Candidates.of makes them (running-max ends, busy sums)."""
    s, e = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    busy = np.concatenate(([0], np.cumsum(e - s))).astype(np.int64)
    return Candidates(np.array(tasks, dtype=np.int64), np.maximum.accumulate(e), s, busy)


def _releaser_world(n: int = 12) -> dict[str, Any]:
    return {"end": np.zeros(n, dtype=np.int64), "next_start": np.full(n, NEVER, dtype=np.int64),
            "on_stream": np.zeros(n, dtype=bool)}  # fmt: skip


def _one(w: dict[str, Any], task: int, start: int, finish: int, stream: bool = False) -> Candidates:
    w["end"][task] = finish
    w["on_stream"][task] = stream
    return _cands([task], [start], [finish])


def _rel(w: dict[str, Any], cands: list[Candidates], min_busy: int = 0, **kw: Any) -> int:
    """releaser for thread 0 waiting from 100 to 1000 ns (thread 0 offers no candidate)."""
    own = _cands([], [], [])
    return releaser(100, 1000, min_busy, 0, [own, *cands], w["end"], w["next_start"],
                    w["on_stream"], **kw)  # fmt: skip


@pytest.mark.parametrize(("finish", "found"), [(500, True), (501, False), (999, False)])
def test_a_gpu_task_releases_only_if_it_ended_500_ns_before_the_resume(
    finish: int, found: bool
) -> None:
    """A kernel (task 3) ending 500 ns before the resume at 1000 ns released the thread; one
    ending 499 or 1 ns before ended by coincidence (the CPU learns of a GPU end later)."""
    w = _releaser_world()
    assert _rel(w, [_one(w, 3, 200, finish, stream=True)]) == (3 if found else -1)


def test_a_cpu_task_ending_exactly_at_the_resume_can_release() -> None:
    """A CPU task (3) running 200-1000 ns on another thread ends as the thread resumes at 1000:
    a CPU release has no minimum reaction, so it is the releaser; one ending at 1001 is not."""
    w = _releaser_world()
    assert _rel(w, [_one(w, 3, 200, 1000)]) == 3
    assert _rel(w, [_one(w, 4, 200, 1001)]) == -1


def test_a_task_ending_as_the_gap_began_or_tied_with_a_better_one_is_not_taken() -> None:
    """Gap 100-1000 ns. A task ending at 100 (as the gap began) did not end inside it: -1.
    (a kernel, 50-100 ns). Two tasks on two threads both ending at 800: the first offered keeps
    it (3, not 4)."""
    w = _releaser_world()
    assert _rel(w, [_one(w, 3, 50, 100, stream=True)]) == -1
    assert _rel(w, [_one(w, 3, 200, 800), _one(w, 4, 300, 800)]) == 3


def test_a_processor_busy_again_before_the_resume_did_not_drain() -> None:
    """Task 3 (200-800 ns) is followed on its thread by a task starting at 950, before the
    resume at 1000: not drained, so task 4 (ending earlier, 700) is the releaser even though 3
    ends later; a next task starting exactly at the resume leaves 3 drained."""
    w = _releaser_world()
    w["next_start"][3] = 950
    assert _rel(w, [_one(w, 4, 200, 700), _one(w, 3, 200, 800)]) == 4
    w["next_start"][3] = 1000
    assert _rel(w, [_one(w, 4, 200, 700), _one(w, 3, 200, 800)]) == 3


def test_a_task_submitted_at_the_resume_can_release_one_submitted_later_cannot() -> None:
    """Kernel 3 ends at 400 ns; submitted at 1000 ns (the resume itself) it can have released the
    thread, submitted at 1001 it was launched after the thread resumed."""
    w = _releaser_world()
    sub = np.zeros(12, dtype=np.int64)
    sub[3] = 1000
    assert _rel(w, [_one(w, 3, 200, 400, stream=True)], submitted=sub) == 3
    sub[3] = 1001
    assert _rel(w, [_one(w, 3, 200, 400, stream=True)], submitted=sub) == -1


def test_busy_time_counts_only_the_work_started_in_the_gap() -> None:
    """Thread 1 ran task 2 (0-90 ns, before the gap from 100) then task 3 (150-160): busy in
    the gap 10 ns (the 90 ns before it do not count). With a 10 ns floor 3 released the
    thread; with 11 ns nothing did."""
    w = _releaser_world()
    w["end"][2], w["end"][3] = 90, 160
    w["next_start"][2] = 150
    c = _cands([2, 3], [0, 150], [90, 160])
    assert _rel(w, [c], min_busy=10) == 3
    assert _rel(w, [c], min_busy=11) == -1


@pytest.mark.parametrize("why", ["none-ended", "not-drained", "submitted-later", "lock", "idle"])
def test_a_rejected_processor_does_not_stop_the_search(why: str) -> None:
    """Thread 1 offers task 3, rejected for ``why`` (its only task ends after the resume; busy
    again at 950; submitted at 1001; started at 50, before the gap: a lock; busy 5 ns of a 10
    ns floor); thread 2's task 5 (200-600 ns, drained) is still found."""
    w = _releaser_world()
    sub = np.zeros(12, dtype=np.int64)
    start, finish = 200, 900
    if why == "none-ended":
        finish = 1100
    elif why == "not-drained":
        w["next_start"][3] = 950
    elif why == "submitted-later":
        sub[3] = 1001
    elif why == "lock":
        start = 50
    elif why == "idle":
        start = 895
    first = _one(w, 3, start, finish)
    assert _rel(w, [first, _one(w, 5, 200, 600)], min_busy=10, submitted=sub) == 5


# ---- attribute_gaps


def _basic() -> _Built:
    """Stream S (kernel k 25-39 us, layout 1), thread A (a0..a3 1 us each from 0, 2, 4, 6 us;
    b 20-21 us; c 22-23; d 40-41; layout 3..9), thread B (x 8-19.5 us, layout 11), thread C
    (y 100-101 us, layout 13). Names: k 0, a* and c 1, b and d 2, x 3, y 4."""
    us = 1_000
    a = [(0, 1, 1), (2, 3, 1), (4, 5, 1), (6, 7, 1), (20, 21, 2), (22, 23, 1), (40, 41, 2)]
    return _build([
        (True, [(25 * us, 39 * us, 0)]),
        (False, [(s * us, e * us, n) for s, e, n in a]),
        (False, [(8 * us, 19_500, 3)]),
        (False, [(100 * us, 101 * us, 4)]),
    ])  # fmt: skip


def test_waits_on_cpu_and_gpu_tasks_and_on_a_threads_start() -> None:
    """See :func:`_basic`. A's gaps 1, 1, 1, 13, 1, 17 us: usual overhead (median) 1 us, the
    same for B and C (no gaps of their own: all threads' median). Into b (13 us gap from
    7 us): x ended at 19.5 us, 0.5 us before, within a tenth (1.3 us), started inside the gap
    and kept B busy: INTER_THREAD x -> b, delay 500, intra-thread delay the 1 us overhead. Into
    d (17 us from 23 us): k ended at 39 us, 1 us before (>= 0.5 us for a GPU, <= 1.7 us):
    SYNC k -> d, 1,000. B's first gap (8 us from the origin) ends 1 us after a3 (7 us; A
    then idle until 20 us), within a quarter of a first gap (2 us): a3 released B's start
    (intra delay 0, ``released_start``). C's first gap (100 us) ends 59 us after d ended,
    more than a quarter: unexplained, counted with C's task (layout 13) as example."""
    b = _basic()
    rows, released, diag = _gaps(b)
    assert rows == [
        (11, 7, 500, INTER, 1_000),
        (1, 9, 1_000, SYNC, 1_000),
        (6, 11, 1_000, INTER, 0),
    ]
    assert released == [False, False, True, False]
    assert diag.to_dict() == {"thread_start_unexplained": {"count": 1, "example": "task 13"}}


def test_a_plan_without_waits_keeps_its_column_types() -> None:
    """A thread whose gaps are all 1 us (not one longer than 4x the overhead) waits nowhere:
    every column is empty, with the declared types (int64, kind int8, bool)."""
    b = _build([(False, [(0, 1_000, 0), (2_000, 3_000, 0), (4_000, 5_000, 0)])])
    diag = Diagnostics()
    plan = attribute_gaps(b.layout, b.arrive, b.end, b.on_stream, b.arrive, b.names, diag)
    cols = {c: getattr(plan, c) for c in ("src", "dst", "delay_ns", "kind", "intra_delay_ns")}
    assert {c: (v.size, v.dtype) for c, v in cols.items()} == {
        "src": (0, np.dtype(np.int64)), "dst": (0, np.dtype(np.int64)),
        "delay_ns": (0, np.dtype(np.int64)), "kind": (0, np.dtype(np.int8)),
        "intra_delay_ns": (0, np.dtype(np.int64)),
    }  # fmt: skip
    assert plan.released_start.dtype == np.dtype(bool)
    assert plan.released_start.tolist() == [False]
    assert diag.total == 0


def test_a_found_plans_kinds_are_int8() -> None:
    """The plan of :func:`_basic` (three waits) keeps ``kind`` int8 and the rest int64."""
    b = _basic()
    plan = attribute_gaps(b.layout, b.arrive, b.end, b.on_stream, b.arrive, b.names, Diagnostics())
    assert plan.kind.dtype == np.dtype(np.int8)
    assert {plan.src.dtype, plan.dst.dtype, plan.delay_ns.dtype} == {np.dtype(np.int64)}


def _one_gap(unit: int, i: int, gap: int, reaction: int) -> tuple[_Built, int, int]:
    """Thread A: seven tasks ``unit`` ns long, ``unit`` ns apart, but the gap before task ``i``
    is ``gap`` (for i = 0: from the origin). Thread B's only task x starts as that gap begins
    and ends ``reaction`` before A resumes (x's own start is settled). Returns the build, x's
    and the resumed task's layout index."""
    t, tasks = 0, []
    for j in range(7):
        t += gap if j == i else (unit if j else 0)
        tasks.append((t, t + unit, 1))
        t += unit
    resume = tasks[i][0]
    gap_start = resume - gap
    b = _build([(False, tasks), (False, [(gap_start, resume - reaction, 2)])])
    return b, b.idx[1][0], b.idx[0][i]


@pytest.mark.parametrize(
    ("unit", "i", "gap", "reaction", "found"),
    [
        (1_000, 0, 10_000, 2_500, True),  # a first gap: a quarter
        (1_000, 1, 10_000, 1_000, True),  # medium: a tenth, inclusive
        (1_000, 1, 10_000, 1_001, False),
        (1_000, 1, 30_000, 7_500, True),  # strong (> 20 us): a quarter
        (1_000, 1, 20_000, 2_001, False),  # exactly 20 x the overhead: medium, a tenth
        (1_000, 1, 4_000, 0, False),  # exactly 4 x the overhead: no wait at all
        (1, 1, 6, 0, True),  # floor 1 ns: over 4 ns is long
        (1, 1, 30, 7, True),  # floor 1 ns: over 20 ns is strong, 7 <= 7.5
    ],
    ids=["first", "tenth", "slow", "strong", "20x", "4x", "1ns-long", "1ns-strong"],
)
def test_how_long_a_gap_and_how_quick_a_reaction_make_a_wait(
    unit: int, i: int, gap: int, reaction: int, found: bool
) -> None:
    """See :func:`_one_gap`: A's usual overhead is ``unit`` (the median of its gaps, five of
    ``unit`` and the one under test). A gap of exactly 4x the overhead is no wait; longer, x
    released A if it ended within a tenth of the gap, a quarter when the gap is the first or
    longer than 20x (exactly 20x is not). x -> A's task: INTER_THREAD, delay the reaction,
    intra-thread delay the overhead (0 for a first gap, which also marks a released start)."""
    b, x, task = _one_gap(unit, i, gap, reaction)
    rows, released, diag = _gaps(b, settled=_settled(b, x))
    want = [(x, task, reaction, INTER, unit if i else 0)] if found else []
    assert rows == want
    assert released == [found and i == 0, False]
    assert diag.to_dict() == {}


@pytest.mark.parametrize(("recorded_extra", "found"), [(0, False), (200, True)])
def test_a_cpu_releaser_must_have_been_busy_for_two_percent_of_the_gap(
    recorded_extra: int, found: bool
) -> None:
    """A 10 us gap (overhead 1 us) ended 500 ns after x ended; x ran only 100 ns, less than 2 %
    of the gap (200 ns): a thread waking for a moment, no release. Had x been recorded 200 ns
    longer (a blocked call shortened since: ``recorded_end``), it was busy 300 ns: it released
    A (the delay still from x's shortened end, 500 ns)."""
    b, x, task = _one_gap(1_000, 1, 10_000, 500)
    b.arrive[x] = b.end[x] - 100
    recorded = b.end.copy()
    recorded[x] += recorded_extra
    rows, _, _ = _gaps(b, settled=_settled(b, x), recorded_end=recorded)
    assert rows == ([(x, task, 500, INTER, 1_000)] if found else [])
    if not found:
        assert _gaps(b, settled=_settled(b, x))[0] == []


def test_a_settled_task_is_not_looked_at_and_the_next_wait_still_is() -> None:
    """Thread A: 1 us tasks 1 us apart but 10 us gaps before t1 (ends 12 us) and t3 (ends 26
    us); B's x ends 0.5 us before t1 resumes, C's y 0.5 us before t3. With t1 settled (its
    wait already found) only y -> t3 is found (delay 500, intra 1 us); without, both."""
    us = 1_000
    a = [(0, 1), (11, 12), (13, 14), (24, 25), (26, 27), (28, 29), (30, 31), (32, 33)]
    b = _build([(False, [(s * us, e * us, j) for j, (s, e) in enumerate(a)]),
                (False, [(1_000, 10_500, 20)]), (False, [(14_000, 23_500, 21)])])  # fmt: skip
    t1, t3 = b.idx[0][1], b.idx[0][3]
    x, y = b.idx[1][0], b.idx[2][0]
    rows, _, _ = _gaps(b, settled=_settled(b, x, y, t1))
    assert rows == [(y, t3, 500, INTER, 1_000)]
    rows, _, _ = _gaps(b, settled=_settled(b, x, y))
    assert rows == [(x, t1, 500, INTER, 1_000), (y, t3, 500, INTER, 1_000)]


@pytest.mark.parametrize(("submitted_after", "found"), [(None, True), (0, True), (1, False)])
def test_a_kernel_submitted_after_the_resume_released_nothing(
    submitted_after: int | None, found: bool
) -> None:
    """A 20 us gap before t1 (1 us overhead); kernel k ends 1 us before t1 resumes (within a
    tenth: 2 us). Without ``submitted``, or submitted at the resume, k released t1 (SYNC,
    1,000); submitted 1 ns after the resume it was not launched yet."""
    tasks = [
        (0, 1_000, 1),
        (21_000, 22_000, 1),
        *((t, t + 1_000, 1) for t in (23_000, 25_000, 27_000)),
    ]
    b = _build([(False, tasks), (True, [(5_000, 20_000, 0)])])
    k, t1 = b.idx[1][0], b.idx[0][1]
    kw: dict[str, Any] = {}
    if submitted_after is not None:
        sub = np.zeros(b.arrive.size, dtype=np.int64)
        sub[k] = 21_000 + submitted_after
        kw["submitted"] = sub
    rows, _, _ = _gaps(b, **kw)
    assert rows == ([(k, t1, 1_000, SYNC, 1_000)] if found else [])


def test_a_threads_own_collective_releases_it_though_the_worker_stayed_busy() -> None:
    """Thread A (overhead 1 us) issues collective call c (2-3 us) run by worker W as w (2.5-15
    us; W busy again from 15.05 us). A's gap 5-16 us ends 1 us after w ended (within 1.1 us):
    A waited for its own collective, though w began before the gap and W did not drain, which
    rules out any other releaser: INTER_THREAD w -> t3, 1,000. Without the hand-off (or with
    its calls issued by another thread) nothing released A."""
    us = 1_000
    a = [(0, 1), (2, 3), (4, 5), (16, 17), (18, 19), (20, 21), (22, 23), (24, 25)]
    b = _build([(False, [(s * us, e * us, j) for j, (s, e) in enumerate(a)]),
                (False, [(2_500, 15_000, 10), (15_050, 30_000, 11)])])  # fmt: skip
    c, t3, w = b.idx[0][1], b.idx[0][3], b.idx[1][0]
    call, work = np.array([c], dtype=np.int64), np.array([w], dtype=np.int64)
    settled = _settled(b, w)
    rows, _, _ = _gaps(b, settled=settled, handed=(call, work))
    assert rows == [(w, t3, 1_000, INTER, 1_000)]
    assert _gaps(b, settled=settled)[0] == []
    other = np.array([b.idx[1][1]], dtype=np.int64)
    assert _gaps(b, settled=settled, handed=(other, work))[0] == []


def _ops(ops: list[tuple[int, int, bool]]) -> tuple[_Built, list[int], list[int]]:
    """Thread A runs ``ops`` ``(name, gap before, released)``, each 1 us; a kernel on stream S
    ends 0.6 us before each released op resumes (and starts 0.1 us after the gap began).
    Returns the build, A's and the kernels' layout indices."""
    t, tasks, kernels = 0, [], []
    for name, gap, rel in ops:
        start = t + gap
        if rel:
            kernels.append((t + 100, start - 600, 0))
        tasks.append((start, start + 1_000, name))
        t = start + 1_000
    b = _build([(False, tasks), (True, kernels)])
    return b, b.idx[0], b.idx[1]


F = 0  # the filler op


def _step(prev: int, op: int, released: bool) -> list[tuple[int, int, bool]]:
    """``prev``, a 10 us gap (medium: overhead 1 us) into ``op``, then four fillers 1 us apart."""
    return [(prev, 1_000, False), (op, 10_000, released), *[(F, 1_000, False)] * 4]


def test_a_wait_found_in_exactly_half_of_its_pairs_gaps_is_kept() -> None:
    """The pair 1 -> 2 waits in its first of two medium gaps (a kernel ending 0.6 us before):
    half is not a minority, the wait is kept (SYNC, 600 ns, intra 1 us)."""
    b, a, k = _ops(_step(1, 2, True) + _step(1, 2, False))
    rows, _, diag = _gaps(b)
    assert rows == [(k[0], a[1], 600, SYNC, 1_000)]
    assert diag.to_dict() == {}


def test_a_coincidence_is_dropped_and_named_and_the_next_pair_still_looked_at() -> None:
    """Pair 1 -> 2 waits in one of its three medium gaps: a coincidence, dropped, counted with
    the task (A's second op) as example. The later pair 1 -> 3 waits in its only gap: kept."""
    ops = _step(1, 2, True) + _step(1, 2, False) + _step(1, 2, False) + _step(1, 3, True)
    b, a, k = _ops(ops)
    rows, _, diag = _gaps(b)
    assert rows == [(k[1], a[19], 600, SYNC, 1_000)]
    assert diag.to_dict() == {"wait_coincidence_dropped": {"count": 1, "example": f"task {a[1]}"}}


@pytest.mark.parametrize(
    "ops",
    [
        # same next op after different ones: 1 -> 2 waits once, 0 -> 2 never (twice)
        _step(1, 2, True) + _step(F, 2, False) + _step(F, 2, False),
        # same first op, different next ones: 1 -> 2 waits once, 1 -> 3 never (twice)
        _step(1, 2, True) + _step(1, 3, False) + _step(1, 3, False),
        # the same with name ids near the int32 top (products near 2**62)
        _step(2_000_000_000, 2_000_000_001, True)
        + _step(2_000_000_000, 2_000_000_002, False)
        + _step(2_000_000_000, 2_000_000_002, False),
    ],
    ids=["prev-differs", "next-differs", "large-ids"],
)
def test_pairs_of_ops_are_told_apart_by_both_ops(ops: list[tuple[int, int, bool]]) -> None:
    """A wait found in the only medium gap of its pair is kept though two gaps of another pair
    (sharing one of its ops) never wait: pairs differ when either op differs, for any name
    ids an int32 holds."""
    b, a, k = _ops(ops)
    rows, _, diag = _gaps(b)
    assert rows == [(k[0], a[1], 600, SYNC, 1_000)]
    assert diag.to_dict() == {}


@pytest.mark.parametrize(("op", "later"), [(1, (2, 1)), (2, (3, 1))], ids=["after-2", "after-max"])
def test_a_threads_first_op_is_its_own_pair(op: int, later: tuple[int, int]) -> None:
    """A's first op ``op`` starts 10 us after the origin (medium; a kernel ends 0.6 us before,
    within a quarter of a first gap): released (intra 0, ``released_start``). Later, the pair
    ``later`` has two medium gaps that never wait; it is another pair (the first op follows
    nothing), so the first op's wait is kept."""
    ops = [(op, 10_000, True), *[(F, 1_000, False)] * 4]
    ops += _step(*later, False) + _step(*later, False)
    b, a, k = _ops(ops)
    rows, released, diag = _gaps(b)
    assert rows == [(k[0], a[0], 600, SYNC, 0)]
    assert released == [True, False]
    assert diag.to_dict() == {}


def _floor_world(positive: int) -> tuple[_Built, int, int]:
    """Thread A: 100 ns tasks, 48 gaps of 100 ns, one gap of 1 ns (``positive`` = 50) or 0 ns
    (49), then a 50.2 us gap ended 1 us after kernel k; thread B (from 100 us, its start
    settled) 201 tasks 500 ns long, 1 us apart."""
    tasks, t = [], 0
    for _ in range(49):
        tasks.append((t, t + 100, 1))
        t += 200
    t += (1 if positive == 50 else 0) - 100
    tasks.append((t, t + 100, 1))
    gap_start = t + 100
    tasks.append((60_000, 60_100, 2))
    b = _build([(False, tasks), (False, [(100_000 + 1_500 * j, 100_500 + 1_500 * j, 3)
                                          for j in range(201)]),
                (True, [(20_000, 59_000, 0)])])  # fmt: skip
    assert gap_start == 9_800 + (1 if positive == 50 else 0)
    return b, b.idx[2][0], b.idx[0][-1]


@pytest.mark.parametrize(("positive", "floor"), [(50, 100), (49, 1_000)])
def test_a_thread_with_50_positive_gaps_has_its_own_overhead(positive: int, floor: int) -> None:
    """See :func:`_floor_world`. A's positive gaps: 48 x 100 ns, the 1 ns one (if any) and the
    long one. With 50 of them A's overhead is their median, 100 ns; with 49, all threads'
    median (A's 48 or 49 and B's 200 gaps of 1 us): 1 us. The long gap is strong either way
    and k released it (SYNC, 1 us); the intra-thread delay is the overhead."""
    b, k, last = _floor_world(positive)
    rows, _, _ = _gaps(b, settled=_settled(b, b.idx[1][0]))
    assert rows == [(k, last, 1_000, SYNC, floor)]


def test_gaps_are_exact_at_kineto_timestamps() -> None:
    """Kineto's ns since 1970 (about 1.7e18, where a double is 256 ns coarse): A's overhead is
    1 us and a gap of 4,094 ns (from ...9,345 to ...13,439) is long, though each end rounded
    to a double would make it 3,840 ns. x ends 100 ns before the resume (within 409 ns):
    INTER_THREAD x -> b, delay 100."""
    t0 = 1_700_000_000_000_000_000
    us = 1_000
    tasks = [(t0 + s * us, t0 + s * us + 1_000, 1) for s in (0, 2, 4, 6)]
    tasks.append((t0 + 8_345, t0 + 9_345, 1))
    tasks += [(t0 + 13_439, t0 + 14_439, 2), (t0 + 15_439, t0 + 16_439, 1)]
    b = _build([(False, tasks), (False, [(t0 + 9_400, t0 + 13_339, 3)])], origin=t0)
    x, task = b.idx[1][0], b.idx[0][5]
    rows, _, _ = _gaps(b, settled=_settled(b, x))
    assert rows == [(x, task, 100, INTER, 1_000)]


def test_tasks_that_are_neither_events_nor_markers_and_empty_processors_are_passed_over() -> None:
    """Thread E holds only a synthetic task (event_idx START, not a real task): no gaps, and the
    search goes on. Thread A: a (0-1 us), a synthetic task at 2-5 us, b at 12 us, then 1 us
    gaps: b's gap runs from a's end (11 us, medium), and x (1.5-11 us, started in that gap)
    ended 1 us before: x -> b (1,000). Processor 3 has no task at all."""
    us = 1_000
    a = [(0, us, 1), (2 * us, 5 * us, 1, START), (12 * us, 13 * us, 2),
         *((t * us, (t + 1) * us, 1) for t in (14, 16, 18, 20))]  # fmt: skip
    b = _build([(False, [(0, 0, 0, START)]), (False, a), (False, [(1_500, 11_000, 3)]),
                (False, [])])  # fmt: skip
    n = b.arrive.size
    layout = b.layout
    b.layout = TaskLayout(**{f: getattr(layout, f)[:-1] for f in
                             ("event_idx", "kind", "processor_idx", "ts_ns", "dur_ns", "is_wait", "mark")},
                          proc_ptr=np.array([0, 2, 10, 12, 12]), processors=layout.processors,
                          origin_ns=0)  # fmt: skip
    b.arrive, b.end, b.on_stream, b.names = (
        b.arrive[:-1],
        b.end[:-1],
        b.on_stream[:-1],
        b.names[:-1],
    )
    assert n - 1 == 12
    x, task = b.idx[2][0], b.idx[1][2]
    rows, _, _ = _gaps(b, settled=_settled(b, x))
    assert rows == [(x, task, 1_000, INTER, 1_000)]
