# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""The compiled longest common subsequence of two op sequences (Cython, pure-Python mode), for
:mod:`lumos.link.align`."""

from __future__ import annotations

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

import numpy as np


def lcs(
    a: cython.const[cython.longlong][::1],
    b: cython.const[cython.longlong][::1],
    ia: cython.longlong[::1],
    ib: cython.longlong[::1],
) -> int:
    """A longest common subsequence of ``a`` and ``b``: its positions in each are written to
    ``ia[:k]`` and ``ib[:k]``; returns ``k``. Ties prefer advancing in ``a`` (deterministic)."""
    n: cython.Py_ssize_t = a.shape[0]
    m: cython.Py_ssize_t = b.shape[0]
    table: cython.int[:, ::1] = np.zeros((n + 1, m + 1), dtype=np.int32)
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    k: cython.Py_ssize_t = 0
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if a[i] == b[j]:
                table[i, j] = table[i + 1, j + 1] + 1
            elif table[i + 1, j] >= table[i, j + 1]:
                table[i, j] = table[i + 1, j]
            else:
                table[i, j] = table[i, j + 1]
    i = 0
    j = 0
    while i < n and j < m:
        if a[i] == b[j]:
            ia[k] = i
            ib[k] = j
            k += 1
            i += 1
            j += 1
        elif table[i + 1, j] >= table[i, j + 1]:
            i += 1
        else:
            j += 1
    return k
