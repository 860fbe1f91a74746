# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""Which event encloses each point of a thread, in one compiled sweep (Cython, pure-Python mode):
the op that made each ``[memory]`` event (:mod:`lumos.ingest.kineto_memory`)."""

from __future__ import annotations

import numpy as np

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

__all__ = ["enclosing_events"]


def enclosing_events(
    ev_proc: cython.const[cython.int][::1],
    ev_ts: cython.const[cython.longlong][::1],
    ev_end: cython.const[cython.longlong][::1],
    marked: cython.const[cython.uchar][::1],
    q_proc: cython.const[cython.int][::1],
    q_ts: cython.const[cython.longlong][::1],
):
    """For each query ``(q_proc[i], q_ts[i])`` (sorted by processor, then time): the innermost
    event on that processor enclosing it (``ev_ts <= q_ts <= ev_end``) and the innermost such
    event with ``marked`` set; -1 where none. Events sorted by ``(processor, ts, -dur)``
    (nested events of a thread: a parent before its children). Returns the two ``int64``
    arrays."""
    n: cython.Py_ssize_t = q_ts.shape[0]
    m: cython.Py_ssize_t = ev_ts.shape[0]
    inner_a = np.full(n, -1, dtype=np.int64)
    marked_a = np.full(n, -1, dtype=np.int64)
    inner: cython.longlong[::1] = inner_a
    near: cython.longlong[::1] = marked_a
    stack_a = np.empty(m + 1, dtype=np.int64)
    stack: cython.longlong[::1] = stack_a
    smark_a = np.empty(m + 1, dtype=np.int64)  # per stack entry: the nearest marked at or below
    smark: cython.longlong[::1] = smark_a
    top: cython.Py_ssize_t = 0
    i: cython.Py_ssize_t = 0
    q: cython.Py_ssize_t
    p: cython.int
    cur: cython.int = -2147483647
    t: cython.longlong
    below: cython.longlong
    for q in range(n):
        p = q_proc[q]
        t = q_ts[q]
        if p != cur:
            cur = p
            top = 0
            while i < m and ev_proc[i] < p:
                i += 1
        while i < m and ev_proc[i] == p and ev_ts[i] <= t:
            while top > 0 and ev_end[stack[top - 1]] < ev_ts[i]:
                top -= 1
            below = smark[top - 1] if top > 0 else -1
            stack[top] = i
            smark[top] = i if marked[i] else below
            top += 1
            i += 1
        while top > 0 and ev_end[stack[top - 1]] < t:
            top -= 1
        if top > 0:
            inner[q] = stack[top - 1]
            near[q] = smark[top - 1]
    return inner_a, marked_a
