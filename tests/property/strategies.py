"""Hypothesis strategies: random *valid* execution graphs.

Rows are generated in a topological order: every edge goes from a lower row to a higher row and
each processor runs its rows in row order, so the fixed graph is acyclic. Each stream is fed by
one thread (``stream % n_threads``); a GPU task's launcher is an earlier task of that thread (or
none). Waits are only placed where they cannot deadlock: every kernel on the waited stream that
is launched before the waiting task also comes before it in row order.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from lumos.graph.model import DepKind, ExecGraph, ProcessorKind, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder


@st.composite
def exec_graphs(draw: st.DrawFn, with_waits: bool = True, max_tasks: int = 40) -> ExecGraph:
    n_threads = draw(st.integers(1, 3))
    n_streams = draw(st.integers(0, 3))
    n = draw(st.integers(0, max_tasks))
    b = GraphBuilder()
    threads = [b.thread(100 + i) for i in range(n_threads)]
    streams = [b.stream(7 + i, device=0) for i in range(n_streams)]
    procs = threads + streams
    kinds = {p: ProcessorKind.THREAD for p in threads} | {p: ProcessorKind.STREAM for p in streams}
    rows_on: dict[int, list[int]] = {p: [] for p in procs}
    launcher: dict[int, int] = {}
    row_proc: list[int] = []
    durs: list[int] = []
    for row in range(n):
        p = draw(st.sampled_from(procs))
        dur = draw(st.integers(0, 50))
        gap = draw(st.integers(0, 5))
        on_stream = kinds[p] == ProcessorKind.STREAM
        kind = draw(st.sampled_from([TaskKind.KERNEL, TaskKind.COMM])) if on_stream else None
        t = b.task(p, f"t{row}", dur, kind, gap_ns=gap if not on_stream else 0)
        assert t == row
        row_proc.append(p)
        durs.append(dur)
        if on_stream:
            feeder = threads[streams.index(p) % n_threads]
            cands = rows_on[feeder]
            if cands and draw(st.booleans()):
                src = draw(st.sampled_from(cands))
                # a kernel may start before its launch call returns, never before it starts
                b.edge(src, t, DepKind.LAUNCH, draw(st.integers(-durs[src], 20)))
                launcher[t] = src
        rows_on[p].append(row)
    # extra forward edges of assorted kinds
    if n >= 2:
        for _ in range(draw(st.integers(0, n))):
            a = draw(st.integers(0, n - 2))
            c = draw(st.integers(a + 1, n - 1))
            if row_proc[a] == row_proc[c]:
                continue
            ka, kc = kinds[row_proc[a]], kinds[row_proc[c]]
            if ka == kc == ProcessorKind.THREAD:
                dep = DepKind.INTER_THREAD
            elif ka == kc:
                dep = DepKind.INTER_STREAM
            elif ka == ProcessorKind.STREAM:
                dep = DepKind.SYNC
            else:
                continue  # thread -> stream edges are launches, added above
            b.edge(a, c, dep, draw(st.integers(0, 30)))
    if with_waits and streams:
        for th in threads:
            for w in rows_on[th]:
                if draw(st.integers(0, 3)) != 0:
                    continue
                s = draw(st.sampled_from(streams))
                if threads[streams.index(s) % n_threads] != th:
                    continue
                launched = [k for k in rows_on[s] if launcher.get(k, -1) < w]
                if any(k > w for k in launched):
                    continue
                if draw(st.booleans()):
                    b.wait(w, WaitKind.STREAM, stream=s)
                else:
                    recs = [r for r in rows_on[th] if r < w]
                    if recs:
                        b.wait(w, WaitKind.EVENT, stream=s, record=draw(st.sampled_from(recs)))
    return b.build().validate()


def launcher_of(g: ExecGraph) -> np.ndarray:
    """``launcher[t]``: source of t's LAUNCH edge, -1 if none."""
    out = np.full(g.num_tasks, -1, dtype=np.int64)
    e = g.edges
    sel = e.kind == DepKind.LAUNCH
    out[e.dst[sel]] = e.src[sel]
    return out
