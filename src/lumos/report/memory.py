"""Memory timelines and step peaks: measured (the recording) and predicted (a replay).

A graph's :class:`~lumos.graph.memory.GraphMemory` rows hang off anchor tasks. Placed on a
timeline, each task that carries an anchor's source event row emits that anchor's rows (a copied
task, copies of them): at ``start + offset`` scaled to the task's simulated duration while the
offset lies inside the anchor, after its end by the recorded gap otherwise. The device's
allocated bytes after each event are ``base_bytes`` plus the running sum of ``delta_bytes`` in
time order (ties in recorded order).

The *peak* of a step (DESIGN.md section 8) is the largest allocated total inside its window:
the level it starts at, or any level an event inside reaches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.kinds import AnnotationKind
from lumos.graph.memory import PHASES, GraphMemory
from lumos.graph.model import ExecGraph

__all__ = [
    "NO_MEMORY_NOTE",
    "Timeline",
    "measured_timeline",
    "predicted_timeline",
    "step_memory",
    "window_peaks",
]

#: What a summary says when the trace has no memory events.
NO_MEMORY_NOTE = (
    "memory unknown: the trace has no [memory] events (record with profile_memory=True; "
    "lumos collect does by default)"
)


@dataclass(frozen=True, eq=False)
class Timeline:
    """Allocated bytes of one device over time: after event ``i`` (at ``t_ns[i]``, sorted) the
    device holds ``level[i]``; before the first, ``base``. ``row``: the GraphMemory row of
    each event; ``copy``: which task carried it (rows of a copied task repeat)."""

    t_ns: NDArray[np.int64]
    level: NDArray[np.int64]
    row: NDArray[np.int64]
    task: NDArray[np.int64]
    base: int

    def level_at(self, t: NDArray[np.int64]) -> NDArray[np.int64]:
        """The level just before each time of ``t`` (events at ``t`` itself not yet in)."""
        k = np.searchsorted(self.t_ns, t, side="left") - 1
        return np.where(k >= 0, self.level[np.maximum(k, 0)], self.base).astype(np.int64)


def _carriers(g: ExecGraph, mem: GraphMemory) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(task, row)`` pairs: every task of ``g`` whose source event anchors memory rows,
    each with each of those rows (in row order per task)."""
    order = np.argsort(mem.event_idx, kind="stable")
    keys = mem.event_idx[order]
    ev = g.tasks.event_idx
    tasks = np.flatnonzero(ev >= 0)
    lo = np.searchsorted(keys, ev[tasks], side="left")
    hi = np.searchsorted(keys, ev[tasks], side="right")
    n = hi - lo
    tasks, lo, n = tasks[n > 0], lo[n > 0], n[n > 0]
    if not tasks.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    task = np.repeat(tasks, n)
    start_of = np.repeat(np.cumsum(n) - n, n)
    pos = np.repeat(lo, n) + (np.arange(task.size) - start_of)
    return task.astype(np.int64), order[pos].astype(np.int64)


def _timeline(
    mem: GraphMemory, task: NDArray[np.int64], row: NDArray[np.int64], t: NDArray[np.int64]
) -> Timeline:
    order = np.lexsort((row, task, t))
    t, task, row = t[order], task[order], row[order]
    # a free frees every copy of its allocation: where an edit copied the allocating task but
    # not the freeing one (a copied layer's gradients, freed by the one optimizer), each copy
    # of the free takes the extra copies' bytes too
    copies = np.bincount(row, minlength=len(mem)).astype(np.float64)
    delta = mem.delta_bytes.astype(np.float64)
    frees = np.flatnonzero((mem.alloc_row >= 0) & (copies > 0))
    alloc = mem.alloc_row[frees]
    delta[frees] *= copies[alloc] / copies[frees]
    _rehome_orphans(mem, copies, delta)
    level = mem.base_bytes + np.cumsum(np.rint(delta[row]).astype(np.int64))
    return Timeline(t.astype(np.int64), level.astype(np.int64), row, task, mem.base_bytes)


def _rehome_orphans(
    mem: GraphMemory, copies: NDArray[np.float64], delta: NDArray[np.float64]
) -> None:
    """Where an edit removed tasks (fewer layers), a kept allocation may have lost the task
    that freed it (the next layer's backward), while a kept free lost its allocation (it freed
    what the removed layer made, and now frees what takes its place). Match the two, the k-th
    orphan free of a size with the k-th orphan allocation of that size in recorded order, so
    that the kept free frees the kept allocation (``delta`` changed in place)."""
    pairs = np.flatnonzero(mem.alloc_row >= 0)
    a_of = mem.alloc_row[pairs]
    kept_alloc_lost_free = pairs[(copies[a_of] > 0) & (copies[pairs] == 0)]
    orphan_alloc = mem.alloc_row[kept_alloc_lost_free]
    orphan_free = pairs[(copies[pairs] > 0) & (copies[a_of] == 0)]
    if not orphan_alloc.size or not orphan_free.size:
        return
    size_a = mem.num_bytes[orphan_alloc]
    size_f = -mem.num_bytes[orphan_free]
    oa = orphan_alloc[np.lexsort((orphan_alloc, size_a))]
    of = orphan_free[np.lexsort((orphan_free, size_f))]
    sa, sf = mem.num_bytes[oa], -mem.num_bytes[of]
    # rank of each within its size
    ka = np.arange(oa.size) - np.searchsorted(sa, sa, side="left")
    kf = np.arange(of.size) - np.searchsorted(sf, sf, side="left")
    key_a = np.stack([sa, ka]).T
    key_f = np.stack([sf, kf]).T
    common, ia, jf = _match_rows(key_a, key_f)
    if common:
        a, f = oa[ia], of[jf]
        delta[f] = -mem.delta_bytes[a] * copies[a] / copies[f]


def _match_rows(
    a: NDArray[np.int64], b: NDArray[np.int64]
) -> tuple[int, NDArray[np.int64], NDArray[np.int64]]:
    """Rows of ``a`` and ``b`` (2 columns each) equal to one another, as index pairs."""
    both = np.concatenate([a, b])
    _, inv = np.unique(both, axis=0, return_inverse=True)
    inv = inv.ravel()
    ia_of = np.full(inv.max() + 1, -1, dtype=np.int64)
    ia_of[inv[: a.shape[0]]] = np.arange(a.shape[0])
    ib = np.arange(b.shape[0])
    ia = ia_of[inv[a.shape[0] :]]
    hit = ia >= 0
    return int(hit.sum()), ia[hit], ib[hit]


def predicted_timeline(
    g: ExecGraph, start: NDArray[np.int64], end: NDArray[np.int64]
) -> Timeline | None:
    """The device's allocated bytes when ``g``'s tasks run from ``start`` to ``end``."""
    mem = g.memory
    if mem is None:
        return None
    task, row = _carriers(g, mem)
    off = mem.offset_ns[row]
    adur = mem.anchor_dur_ns[row]
    s, e = start[task].astype(np.int64), end[task].astype(np.int64)
    inside = (off >= 0) & (off <= adur)
    frac = np.where(adur > 0, off / np.maximum(adur, 1), 0.0)
    t = np.where(
        off < 0,
        s + off,
        np.where(inside, s + np.rint(frac * (e - s)).astype(np.int64), e + off - adur),
    )
    return _timeline(mem, task, row, t.astype(np.int64))


def measured_timeline(g: ExecGraph) -> Timeline | None:
    """The recorded timeline of a graph as built from its trace (each anchor one task)."""
    t = g.tasks
    return predicted_timeline(g, t.ts_ns, t.ts_ns + t.dur_ns) if g.memory is not None else None


def window_peaks(
    tl: Timeline, lo: NDArray[np.int64], hi: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Per window ``[lo, hi]``: (peak, level at its start, time of the peak)."""
    start = tl.level_at(lo)
    a = np.searchsorted(tl.t_ns, lo, side="left")
    b = np.searchsorted(tl.t_ns, hi, side="right")
    peak = start.copy()
    when = lo.astype(np.int64).copy()
    for i in np.flatnonzero(b > a).tolist():
        seg = tl.level[a[i] : b[i]]
        k = int(np.argmax(seg))
        if int(seg[k]) > int(peak[i]):
            peak[i], when[i] = int(seg[k]), int(tl.t_ns[a[i] + k])
    return peak, start, when


def _live_at(
    tl: Timeline, mem: GraphMemory, lo: int, when: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Rows of the allocations made in ``[lo, when]`` still live at ``when`` and their bytes
    (recorded timeline: each row once)."""
    rows = tl.row
    at = np.full(len(mem), np.iinfo(np.int64).max, dtype=np.int64)
    at[rows] = tl.t_ns
    freed = np.full(len(mem), np.iinfo(np.int64).max, dtype=np.int64)
    frees = np.flatnonzero(mem.alloc_row >= 0)
    freed[mem.alloc_row[frees]] = at[frees]
    alloc = np.flatnonzero((mem.num_bytes > 0) & (at >= lo) & (at <= when) & (freed > when))
    return alloc, mem.num_bytes[alloc]


def step_memory(
    g: ExecGraph,
    rec: ExecGraph,
    sim_start: NDArray[np.int64],
    sim_end: NDArray[np.int64],
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    top: int = 5,
    windows: tuple[tuple[int, int], tuple[int, int]] | None = None,
    bin_ns: int = 1_000_000,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per STEP annotation: ``measured_peak_memory_bytes``, ``predicted_peak_memory_bytes``
    (None without memory events), and the measured peak split into what was resident when the
    step began and what the step allocated (by phase and op, from the allocations made in the
    step and live at its peak); plus a rank-level ``memory`` block. ``lo``/``hi``: predicted
    step spans."""
    a = g.annotations
    steps = np.flatnonzero(a.kind == AnnotationKind.STEP)
    mem = rec.memory
    if mem is None or not len(mem):
        empty = {"measured_peak_memory_bytes": None, "predicted_peak_memory_bytes": None}
        return [dict(empty) for _ in steps.tolist()], {"device": None, "note": NO_MEMORY_NOTE}
    meas = measured_timeline(rec)
    pred = predicted_timeline(g, sim_start, sim_end)
    assert meas is not None and pred is not None
    ra = rec.annotations
    m_lo = ra.ts_ns[steps].astype(np.int64)
    m_hi = m_lo + ra.dur_ns[steps].astype(np.int64)
    m_peak, m_start, m_when = window_peaks(meas, m_lo, m_hi)
    p_peak, _, _ = window_peaks(pred, lo[steps].astype(np.int64), hi[steps].astype(np.int64))
    out = []
    # which allocations are live at a peak needs frees paired with them (by address)
    paired = bool((mem.alloc_row >= 0).any()) or not bool((mem.num_bytes < 0).any())
    for k in range(steps.size):
        alloc, nbytes = _live_at(meas, mem, int(m_lo[k]), int(m_when[k]))
        by_phase: dict[str, int] = {}
        for code, name in enumerate(PHASES):
            b = int(nbytes[mem.phase[alloc] == code].sum())
            if b:
                by_phase[name] = b
        by_op = _top_ops(mem, alloc, nbytes, top)
        out.append(
            {
                "measured_peak_memory_bytes": int(m_peak[k]),
                "predicted_peak_memory_bytes": int(p_peak[k]),
                "memory": {
                    "resident_bytes": int(m_start[k]),
                    "allocated_in_step_bytes": int(m_peak[k] - m_start[k]),
                    "live_at_peak_by_phase": by_phase if paired else None,
                    "live_at_peak_top_ops": by_op if paired else None,
                },
            }
        )
    reserved = mem.total_reserved[mem.total_reserved >= 0]
    block = {
        "device": mem.device,
        "levels_recorded": mem.levels_recorded,
        "capacity_bytes": mem.capacity_bytes or None,
        "max_reserved_bytes": int(reserved.max()) if reserved.size else None,
        "events": len(mem),
    }
    if windows is not None:
        (m0, m1), (p0, p1) = windows
        block["timeline"] = {
            "bin_ns": bin_ns,
            "measured": binned_levels(meas, m0, m1, bin_ns),
            "predicted": binned_levels(pred, p0, p1, bin_ns),
        }
    if not mem.levels_recorded:
        block["note"] = (
            "the trace records no 'Total Allocated': levels count from the start of the "
            "recording (memory allocated before it is not seen)"
        )
    return out, block


def binned_levels(tl: Timeline, t0: int, t1: int, bin_ns: int) -> list[int]:
    """The largest allocated total in each ``bin_ns`` bin of ``[t0, t1)`` (a bin without
    events holds the level it started at)."""
    n = max(-(-(t1 - t0) // bin_ns), 0)
    if n == 0:
        return []
    edges = t0 + bin_ns * np.arange(n + 1, dtype=np.int64)
    out = tl.level_at(edges[:-1])
    a = np.searchsorted(tl.t_ns, edges[:-1], side="left")
    b = np.searchsorted(tl.t_ns, edges[1:], side="left")
    for i in np.flatnonzero(b > a).tolist():  # bins are few (bounded like sm_util's)
        out[i] = max(int(out[i]), int(tl.level[a[i] : b[i]].max()))
    return [int(v) for v in out.tolist()]


def _top_ops(
    mem: GraphMemory, alloc: NDArray[np.int64], nbytes: NDArray[np.int64], top: int
) -> list[dict[str, Any]]:
    op = mem.op_name_idx[alloc].astype(np.int64)
    if not op.size:
        return []
    uniq, inv = np.unique(op, return_inverse=True)
    sums = np.bincount(inv.ravel(), weights=nbytes, minlength=uniq.size)
    order = np.argsort(-sums, kind="stable")[:top]
    return [
        {"op": mem.op_names[int(uniq[i])] if uniq[i] >= 0 else "(no op)", "bytes": int(sums[i])}
        for i in order.tolist()
    ]


def memory_table(
    view: str, graphs: Any, starts: Any, ends: Any, top: int = 5
) -> list[tuple[Any, ...]]:
    """Rows of the ``memory`` analysis table for one view (see :func:`lumos.report.analysis_ranks
    .analyze`): per rank and step, ``kind`` ``peak`` (``name`` the device), ``resident`` (held
    when the step began), ``allocated_in_step`` (the peak less that); where frees are paired
    with allocations and no edit copied tasks, what the step allocated and still held at its
    peak: ``phase`` rows (forward, backward, optimizer, unknown) and the ``top`` ``op`` rows."""
    rows: list[tuple[Any, ...]] = []
    for g, s, e in zip(graphs, starts, ends, strict=True):
        mem = g.memory
        if mem is None or not len(mem):
            continue
        tl = predicted_timeline(g, s, e)
        assert tl is not None
        a = g.annotations
        steps = np.flatnonzero(a.kind == AnnotationKind.STEP)
        first = np.maximum(a.first_task_idx[steps], 0)
        last = np.maximum(a.last_task_idx[steps], 0)
        has = a.first_task_idx[steps] >= 0
        lo = np.where(has, s[first] - a.lead_ns[steps], a.ts_ns[steps]).astype(np.int64)
        hi = np.where(has, e[last] + a.tail_ns[steps], a.ts_ns[steps] + a.dur_ns[steps])
        peak, start, when = window_peaks(tl, lo, hi.astype(np.int64))
        once = np.unique(tl.row).size == tl.row.size
        paired = bool((mem.alloc_row >= 0).any())
        for k, i in enumerate(steps.tolist()):
            step = g.names[int(a.name_idx[i])]
            rows += [
                (view, g.rank, step, "peak", mem.device, int(peak[k])),
                (view, g.rank, step, "resident", "", int(start[k])),
                (view, g.rank, step, "allocated_in_step", "", int(peak[k] - start[k])),
            ]
            if not (once and paired):
                continue
            alloc, nbytes = _live_at(tl, mem, int(lo[k]), int(when[k]))
            for code, name in enumerate(PHASES):
                b = int(nbytes[mem.phase[alloc] == code].sum())
                if b:
                    rows.append((view, g.rank, step, "phase", name, b))
            rows += [(view, g.rank, step, "op", d["op"], d["bytes"])
                     for d in _top_ops(mem, alloc, nbytes, top)]  # fmt: skip
    return rows
