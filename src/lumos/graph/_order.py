# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""Compiled loops over dependency graphs in CSR form (Cython, pure-Python mode): Kahn's order
(:func:`lumos.graph.algorithms.kahn_order`), a successor CSR from a predecessor CSR, the longest
chain through an order and a list schedule (Chakra ETs: :mod:`lumos.chakra.deps`,
:mod:`lumos.chakra.timeline`), the longest chain inside a step (:mod:`lumos.synth.measure`)."""

from __future__ import annotations

import numpy as np

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython


def kahn_fifo(
    n: cython.Py_ssize_t,
    out_ptr: cython.const[cython.longlong][::1],
    out_edge: cython.const[cython.longlong][::1],
    dst: cython.const[cython.int][::1],
    succ: cython.const[cython.longlong][::1],
):
    """Kahn's algorithm, FIFO, over edges ``out_edge[out_ptr[t]:out_ptr[t+1]]`` (heads ``dst``)
    and one more successor ``succ[t]`` (or -1) per task: ``(queue, length)``, the order being
    ``queue[:length]``."""
    indeg: cython.longlong[::1] = np.zeros(n, dtype=np.int64)
    queue_a = np.empty(n, dtype=np.int64)
    queue: cython.longlong[::1] = queue_a
    e: cython.Py_ssize_t
    t: cython.longlong
    k: cython.longlong
    d: cython.longlong
    s: cython.longlong
    head: cython.Py_ssize_t = 0
    tail: cython.Py_ssize_t = 0
    for e in range(dst.shape[0]):
        indeg[dst[e]] += 1
    for t in range(n):
        if succ[t] >= 0:
            indeg[succ[t]] += 1
    for t in range(n):
        if indeg[t] == 0:
            queue[tail] = t
            tail += 1
    while head < tail:
        t = queue[head]
        head += 1
        for k in range(out_ptr[t], out_ptr[t + 1]):
            d = dst[out_edge[k]]
            indeg[d] -= 1
            if indeg[d] == 0:
                queue[tail] = d
                tail += 1
        s = succ[t]
        if s >= 0:
            indeg[s] -= 1
            if indeg[s] == 0:
                queue[tail] = s
                tail += 1
    return queue_a, tail


def successor_csr(
    n: cython.Py_ssize_t,
    pred_ptr: cython.const[cython.longlong][::1],
    pred_idx: cython.const[cython.longlong][::1],
):
    """``(succ_ptr, succ)``: the successor CSR of a predecessor CSR, each row's successors in
    row order (no sort)."""
    succ_ptr_a = np.zeros(n + 1, dtype=np.int64)
    succ_ptr: cython.longlong[::1] = succ_ptr_a
    succ_a = np.empty(pred_idx.shape[0], dtype=np.int32)
    succ: cython.int[::1] = succ_a
    i: cython.Py_ssize_t
    k: cython.longlong
    p: cython.longlong
    for i in range(n):
        for k in range(pred_ptr[i], pred_ptr[i + 1]):
            succ_ptr[pred_idx[k] + 1] += 1
    for i in range(n):
        succ_ptr[i + 1] += succ_ptr[i]
    fill: cython.longlong[::1] = succ_ptr_a.copy()
    for i in range(n):
        for k in range(pred_ptr[i], pred_ptr[i + 1]):
            p = pred_idx[k]
            succ[fill[p]] = i
            fill[p] += 1
    return succ_ptr_a, succ_a


def longest_path(
    order: cython.const[cython.longlong][::1],
    pred_ptr: cython.const[cython.longlong][::1],
    pred_idx: cython.const[cython.longlong][::1],
    dur: cython.const[cython.longlong][::1],
):
    """``(finish, via)``: each row's finish on the longest chain of its predecessors in
    ``order`` (a predecessor not in ``order`` has finished at 0) and the predecessor it waits
    for there (-1 for none)."""
    n: cython.Py_ssize_t = pred_ptr.shape[0] - 1
    finish_a = np.zeros(n, dtype=np.int64)
    via_a = np.full(n, -1, dtype=np.int64)
    finish: cython.longlong[::1] = finish_a
    via: cython.longlong[::1] = via_a
    q: cython.Py_ssize_t
    v: cython.longlong
    k: cython.longlong
    p: cython.longlong
    best: cython.longlong
    for q in range(order.shape[0]):
        v = order[q]
        best = -1
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            p = pred_idx[k]
            if finish[p] > best:
                best = finish[p]
                via[v] = p
        finish[v] = max(best, 0) + dur[v]
    return finish_a, via_a


def list_schedule(
    order: cython.const[cython.longlong][::1],
    pred_ptr: cython.const[cython.longlong][::1],
    pred_idx: cython.const[cython.longlong][::1],
    dur: cython.const[cython.longlong][::1],
    proc: cython.const[cython.longlong][::1],
    n_proc: cython.Py_ssize_t,
):
    """``(start, end)`` per row: the rows of ``order`` list-scheduled on ``n_proc`` processors
    (``proc`` per row); start -1 and end 0 for rows not in ``order``."""
    n: cython.Py_ssize_t = pred_ptr.shape[0] - 1
    start_a = np.full(n, -1, dtype=np.int64)
    end_a = np.zeros(n, dtype=np.int64)
    start: cython.longlong[::1] = start_a
    end: cython.longlong[::1] = end_a
    free: cython.longlong[::1] = np.zeros(n_proc, dtype=np.int64)
    q: cython.Py_ssize_t
    v: cython.longlong
    k: cython.longlong
    ready: cython.longlong
    s: cython.longlong
    for q in range(order.shape[0]):
        v = order[q]
        ready = 0
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            ready = max(ready, end[pred_idx[k]])
        s = max(ready, free[proc[v]])
        start[v] = s
        end[v] = s + dur[v]
        free[proc[v]] = end[v]
    return start_a, end_a


def chain_depth(
    order: cython.const[cython.longlong][::1],
    out_ptr: cython.const[cython.longlong][::1],
    out_edge: cython.const[cython.longlong][::1],
    dst: cython.const[cython.int][::1],
    step: cython.const[cython.longlong][::1],
):
    """Per task, the number of tasks on the longest chain of edges ending at it whose tasks
    are all in its step (``step[src] == step[dst]``), over a topological ``order``."""
    n: cython.Py_ssize_t = step.shape[0]
    depth_a = np.ones(n, dtype=np.int64)
    depth: cython.longlong[::1] = depth_a
    q: cython.Py_ssize_t
    t: cython.longlong
    k: cython.longlong
    d: cython.longlong
    for q in range(order.shape[0]):
        t = order[q]
        for k in range(out_ptr[t], out_ptr[t + 1]):
            d = dst[out_edge[k]]
            if step[d] == step[t] and depth[t] + 1 > depth[d]:
                depth[d] = depth[t] + 1
    return depth_a
