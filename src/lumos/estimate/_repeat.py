# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""The compiled search of :func:`lumos.estimate.layers.find_repeat` (Cython, pure-Python mode):
the tandem repeat covering most of a sequence of op symbols."""

from __future__ import annotations

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

import numpy as np


def best_repeat(
    seq: cython.const[cython.longlong][::1],
    periods: cython.const[cython.longlong][::1],
    mismatch_share: cython.double,
) -> tuple[int, int, int]:
    """``(start, period, count)`` of the repeat covering most of ``seq`` among ``periods``
    (count 0 when none repeats twice); blocks may differ in ``mismatch_share`` of any ``period``
    consecutive positions (one op accumulating a gradient in place where its neighbour assigns
    it must not split a layer). O(n^2 / 2) at worst."""
    n: cython.Py_ssize_t = seq.shape[0]
    cum: cython.longlong[::1] = np.zeros(n + 1, dtype=np.int64)
    best_start: cython.longlong = 0
    best_p: cython.longlong = 0
    best_count: cython.longlong = 0
    best_cover: cython.longlong = 0
    q: cython.Py_ssize_t
    p: cython.longlong
    m: cython.longlong
    budget: cython.longlong
    i: cython.longlong
    start: cython.longlong
    last: cython.longlong
    count: cython.longlong
    lo: cython.longlong
    for q in range(periods.shape[0]):
        p = periods[q]
        m = n - p
        budget = max(1, cython.cast(cython.longlong, p * mismatch_share))
        for i in range(m):
            cum[i + 1] = cum[i] + (seq[i] != seq[i + p])
        start = -1
        last = -1
        for i in range(m + 1):
            if i < m and seq[i] == seq[i + p]:
                if start < 0:
                    start = i
                last = i
                continue
            if start < 0:
                continue
            lo = max(start, i - p + 1)
            if i < m and cum[i + 1] - cum[lo] <= budget:
                continue
            count = (last + 1 - start + p) // p
            if count >= 2 and count * p > best_cover:
                best_start, best_p, best_count, best_cover = start, p, count, count * p
            start = -1
    return best_start, best_p, best_count
