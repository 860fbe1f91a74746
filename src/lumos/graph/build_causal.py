"""Inferred dependencies checked against the order the recording proves, and the guarantee that
an unedited recording replays.

A dependency found from timing (a thread gap that ended with a GPU task, a stream held until
another stream's task ended) is a claim that one task released another. The recording proves an
order it must respect: a task can only be released by work that existed when it was reached, so
the releaser was *submitted* (a CPU task began, a GPU task's launch call began) no later than the
released task was (:func:`causal`). A claim against that order is a coincidence of timestamps
(a clock the build could not put right, a kernel that ended while the thread was busy elsewhere)
and would close a cycle: the thread would wait for work it launches only later.

What the checks cannot see (a cycle through runtime synchronizations, collectives, ties at the
recording's resolution) :func:`settle` finds by replaying the graph: a recording replayed as
recorded can always finish, so tasks that never start mark dependencies the recording contradicts.
In every cycle among them the dependency that runs most against the recorded order is cut, and
its task falls back to its recorded timing (an edge's gap becomes a fixed delay, a synchronize
keeps its recorded length); this repeats until the replay finishes. Each cut is counted
(``dependency_unsatisfiable``) with the share of step time now frozen at its recorded length.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.errors import GraphError
from lumos.graph.model import DepKind, ExecGraph, ProcessorKind, WaitKind

__all__ = ["CUT", "causal", "settle", "submitted_ns"]

#: Diagnostic code of a dependency :func:`settle` had to cut.
CUT = "dependency_unsatisfiable"
#: Dependencies :func:`settle` may cut (the others are the program's own order and launches).
_INFERRED = np.array(
    [int(DepKind.SYNC), int(DepKind.INTER_THREAD), int(DepKind.INTER_STREAM)], dtype=np.int8
)
_NEVER = np.iinfo(np.int64).min
_MAX_ROUNDS = 200


def submitted_ns(
    arrive: NDArray[np.int64], launcher: NDArray[np.int64], on_stream: NDArray[np.bool_]
) -> NDArray[np.int64]:
    """When each task entered the program: a CPU task when its thread reached it, a GPU task
    when its launch call began (long before anything for work queued before the window)."""
    out = arrive.copy()
    gpu = np.flatnonzero(on_stream)
    has = launcher[gpu] >= 0
    out[gpu[has]] = arrive[launcher[gpu[has]]]
    out[gpu[~has]] = _NEVER
    return out


def causal(
    src: NDArray[np.int64], dst: NDArray[np.int64], submitted: NDArray[np.int64]
) -> NDArray[np.bool_]:
    """Which ``src -> dst`` dependencies the recorded order allows (see the module docstring)."""
    return submitted[src] <= submitted[dst]


def settle(
    graph: ExecGraph,
    arrive: NDArray[np.int64],
    recorded_end: NDArray[np.int64],
    step_ns: int,
    diag: Diagnostics,
) -> ExecGraph:
    """``graph``, with the dependencies that keep its own replay from finishing cut (see the
    module docstring). ``arrive``/``recorded_end``: when each task was reached and when it
    ended in the recording; ``step_ns``: the recorded time the share of frozen waits is of."""
    from lumos.sim.engine import stuck_tasks

    cut_edges: list[int] = []
    cut_waits: list[int] = []
    frozen_ns = 0
    for _ in range(_MAX_ROUNDS):
        stuck = stuck_tasks(graph)
        if not stuck.size:
            break
        edges, waits = _cuts(graph, stuck, arrive)
        if not edges.size and not waits.size:
            raise GraphError(
                f"rank {graph.rank}: the recording does not replay and no inferred dependency "
                f"explains it ({stuck.size} tasks never start; first "
                f"{graph.describe_task(int(stuck[0]))})"
            )
        graph, frozen = _cut(graph, edges, waits, arrive, recorded_end)
        frozen_ns += frozen
        cut_edges += edges.tolist()
        cut_waits += waits.tolist()
    else:
        raise GraphError(f"rank {graph.rank}: the recording still does not replay after "
                         f"{_MAX_ROUNDS} rounds of cutting dependencies")  # fmt: skip
    n = len(cut_edges) + len(cut_waits)
    if n:
        share = frozen_ns / step_ns if step_ns > 0 else 0.0
        diag.warn(CUT, f"{n} dependencies the recording contradicts kept at their recorded "
                  f"length: {frozen_ns / 1e6:.3f} ms, {share:.2%} of step time", n)  # fmt: skip
    return graph


def _cuts(
    graph: ExecGraph, stuck: NDArray[np.int64], arrive: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """One dependency to cut per cycle among the stuck tasks: edge rows and wait rows."""
    n = graph.num_tasks
    is_stuck = np.zeros(n, dtype=bool)
    is_stuck[stuck] = True
    e, t = graph.edges, graph.tasks
    sub = _graph_submitted(graph, arrive)
    # who each stuck task waits for, among the stuck: predecessor on its processor, edge
    # sources, and the last work launched before it on the streams it synchronizes with
    pairs: list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]] = []
    _, perm = graph.processor_order()
    pos = np.empty(n, dtype=np.int64)
    pos[perm] = np.arange(n)
    prev = np.where(pos > 0, perm[np.maximum(pos - 1, 0)], -1)
    prev[(prev >= 0) & (t.processor_idx[np.maximum(prev, 0)] != t.processor_idx)] = -1
    none = np.full(n, -1, dtype=np.int64)
    ok = is_stuck & (prev >= 0)
    ok[ok] &= is_stuck[prev[ok]]
    pairs.append((prev[ok], np.flatnonzero(ok), none[ok]))
    es = is_stuck[e.src] & is_stuck[e.dst]
    rows = np.flatnonzero(es)
    pairs.append((e.src[rows].astype(np.int64), e.dst[rows].astype(np.int64), rows))
    w_src, w_dst, w_row = _wait_targets(graph, sub, arrive, is_stuck)
    pairs.append((w_src, w_dst, -2 - w_row))  # wait rows encoded below -1
    src = np.concatenate([p[0] for p in pairs])
    dst = np.concatenate([p[1] for p in pairs])
    ref = np.concatenate([p[2] for p in pairs])
    comp = _components(n, src, dst)
    edges: list[int] = []
    waits: list[int] = []
    inside = comp[src] == comp[dst]
    cuttable = inside & (
        ((ref >= 0) & np.isin(e.kind[np.maximum(ref, 0)], _INFERRED)) | (ref <= -2)
    )
    score = np.where(ref <= -2, sub[src] - arrive[dst], sub[src] - sub[dst]).astype(np.float64)
    score[ref <= -2] -= 1e18  # an edge against the recorded order goes before any wait
    for c in np.unique(comp[src[cuttable]]).tolist():
        cand = np.flatnonzero(cuttable & (comp[src] == c))
        k = int(cand[np.argmax(score[cand])])
        (edges if ref[k] >= 0 else waits).append(int(ref[k]) if ref[k] >= 0 else -2 - int(ref[k]))
    i64 = np.int64
    return np.unique(np.asarray(edges, i64)), np.unique(np.asarray(waits, i64))


def _wait_targets(
    graph: ExecGraph, sub: NDArray[np.int64], arrive: NDArray[np.int64], is_stuck: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """(target, waiting task, wait row): the last stuck GPU task launched before the waiting
    task was reached, on each stream a stuck task's runtime wait refers to."""
    w, p = graph.waits, graph.processors
    ptr, perm = graph.processor_order()
    src, dst, row = [], [], []
    streams_of: dict[int, list[int]] = {}
    for q in np.flatnonzero(p.kind == int(ProcessorKind.STREAM)).tolist():
        streams_of.setdefault(int(p.device[q]), []).append(q)
    for k in np.flatnonzero(is_stuck[w.task_idx]).tolist():
        task = int(w.task_idx[k])
        kind = int(w.kind[k])
        if kind == int(WaitKind.DEVICE):
            streams = streams_of.get(int(w.device[k]), [])
        else:
            streams = [int(w.target_processor_idx[k])] if w.target_processor_idx[k] >= 0 else []
        when = int(arrive[task])
        if kind == int(WaitKind.EVENT) and w.record_task_idx[k] >= 0:
            when = int(arrive[int(w.record_task_idx[k])])
        for q in streams:
            on_q = perm[ptr[q] : ptr[q + 1]]
            before = on_q[sub[on_q] < when]
            if before.size and is_stuck[before[-1]]:
                src.append(int(before[-1]))
                dst.append(task)
                row.append(k)
    i64 = np.int64
    return np.asarray(src, i64), np.asarray(dst, i64), np.asarray(row, i64)


def _graph_submitted(graph: ExecGraph, arrive: NDArray[np.int64]) -> NDArray[np.int64]:
    e = graph.edges
    on_stream = graph.processors.kind[graph.tasks.processor_idx] == int(ProcessorKind.STREAM)
    launcher = np.full(graph.num_tasks, -1, dtype=np.int64)
    sel = e.kind == int(DepKind.LAUNCH)
    launcher[e.dst[sel]] = e.src[sel]
    return submitted_ns(arrive, launcher, on_stream)


def _components(n: int, src: NDArray[np.int64], dst: NDArray[np.int64]) -> NDArray[np.int64]:
    """Strongly connected component of each task over ``src -> dst`` (iterative Tarjan; tasks
    without edges are components of their own)."""
    order = np.argsort(src, kind="stable")
    s_sorted, d_sorted = src[order], dst[order]
    nodes = np.unique(np.concatenate([src, dst]))
    lo = np.searchsorted(s_sorted, nodes, side="left")
    hi = np.searchsorted(s_sorted, nodes, side="right")
    out_lo = dict(zip(nodes.tolist(), lo.tolist(), strict=True))
    out_hi = dict(zip(nodes.tolist(), hi.tolist(), strict=True))
    succ = d_sorted.tolist()
    comp = np.arange(n, dtype=np.int64)
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    counter = 0
    for root in nodes.tolist():
        if root in index:
            continue
        work = [(root, out_lo[root])]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, i = work[-1]
            if i < out_hi[v]:
                work[-1] = (v, i + 1)
                u = succ[i]
                if u not in index:
                    index[u] = low[u] = counter
                    counter += 1
                    stack.append(u)
                    on_stack.add(u)
                    work.append((u, out_lo.get(u, 0)))
                elif u in on_stack:
                    low[v] = min(low[v], index[u])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                while True:
                    u = stack.pop()
                    on_stack.discard(u)
                    comp[u] = v
                    if u == v:
                        break
    return comp


def _cut(
    graph: ExecGraph,
    edges: NDArray[np.int64],
    waits: NDArray[np.int64],
    arrive: NDArray[np.int64],
    recorded_end: NDArray[np.int64],
) -> tuple[ExecGraph, int]:
    """The graph without those edges and waits, each released task at its recorded timing, and
    how much recorded time that froze."""
    e, t = graph.edges, graph.tasks
    ts, dur = t.ts_ns.copy(), t.dur_ns.copy()
    frozen = 0
    for k in waits.tolist():
        task = int(graph.waits.task_idx[k])
        full = int(recorded_end[task] - arrive[task])
        frozen += max(full - int(dur[task]), 0)
        ts[task], dur[task] = arrive[task], full
    delay = e.delay_ns.copy()
    intra = np.isin(e.kind, [int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)])
    into = np.full(graph.num_tasks, -1, dtype=np.int64)
    into[e.dst[intra]] = np.flatnonzero(intra)
    for k in edges.tolist():
        d = int(e.dst[k])
        j = int(into[d])
        if j < 0:
            continue
        prev = int(e.src[j])
        gap = int(arrive[d]) - int(ts[prev] + dur[prev])
        if gap > delay[j]:
            frozen += gap - int(delay[j])
            delay[j] = gap
    keep = np.ones(len(e), dtype=bool)
    keep[edges] = False
    keep_w = np.ones(len(graph.waits), dtype=bool)
    keep_w[waits] = False
    out = graph.replace(
        tasks=t.replace(ts_ns=ts, dur_ns=dur),
        edges=e.replace(delay_ns=delay).take(keep),
        waits=graph.waits.take(keep_w),
    )
    return out, frozen
