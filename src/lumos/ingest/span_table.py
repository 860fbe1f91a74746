"""Distinct byte spans of one payload, numbered in first-seen order, for compiled scanners.

A :class:`SpanTable` is an open-addressing hash table held in one ``int64`` array (so that a
numba kernel can take it as an argument): the count and the capacity, then per slot a hash and
an id, then per id the span's offset and length in the payload. :func:`intern_span` (compiled)
looks a span up by its FNV-1a hash and compares the bytes, so equal strings get one id and no two
different strings ever share one.
"""

from __future__ import annotations

import numba
import numpy as np

from lumos._jit import Kernel, array

__all__ = ["SpanTable", "intern_span"]

_FNV_OFFSET = np.int64(-3750763034362895579)  # 0xcbf29ce484222325 as int64
_FNV_PRIME = np.int64(1099511628211)


class SpanTable:
    """Distinct byte spans of one payload, numbered in first-seen order (a table for the
    compiled scan, in one ``int64`` array: count, capacity, then per slot a hash and an id, and
    per id the span's offset and length).

    :meth:`reserve` before each scan keeps the table at most half full.
    """

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.array = _empty_table(capacity)

    def __len__(self) -> int:
        return int(self.array[0])

    def span(self, i: int) -> tuple[int, int]:
        """(offset, length) of string ``i`` in the payload."""
        cap = int(self.array[1])
        return int(self.array[2 + 2 * cap + i]), int(self.array[2 + 3 * cap + i])

    def reserve(self, more: int) -> None:
        """Make room for ``more`` new strings (grows and re-inserts when needed)."""
        cap = int(self.array[1])
        if 2 * (len(self) + more) <= cap:
            return
        while 2 * (len(self) + more) > cap:
            cap *= 2
        new = _empty_table(cap)
        _regrow(self.array, new, work=cap)
        self.array = new


def _empty_table(capacity: int) -> np.ndarray:
    t = np.full(2 + 4 * capacity, -1, dtype=np.int64)
    t[0], t[1] = 0, capacity
    return t


@numba.njit(cache=True, nogil=True)
def _insert(t: np.ndarray, h: int, idv: int) -> None:  # pragma: no cover - compiled
    cap = t[1]
    slot = h & (cap - 1)
    while t[2 + cap + slot] >= 0:
        slot = (slot + 1) & (cap - 1)
    t[2 + slot] = h
    t[2 + cap + slot] = idv


@numba.njit(cache=True, nogil=True)
def _regrow_tables(old: np.ndarray, new: np.ndarray) -> int:  # pragma: no cover - compiled
    """Insert every entry of ``old`` into the larger, empty ``new`` (same ids and spans)."""
    cap, ncap = old[1], new[1]
    for slot in range(cap):
        idv = old[2 + cap + slot]
        if idv >= 0:
            _insert(new, old[2 + slot], idv)
    n = old[0]
    for i in range(n):
        new[2 + 2 * ncap + i] = old[2 + 2 * cap + i]
        new[2 + 3 * ncap + i] = old[2 + 3 * cap + i]
    new[0] = n
    return n


_regrow = Kernel(_regrow_tables, (array(np.int64), array(np.int64, writes=True)), max_interpreted=0)


@numba.njit(cache=True, nogil=True)
def intern_span(t: np.ndarray, buf: np.ndarray, s: int, e: int) -> int:  # pragma: no cover - compiled
    """The id of the bytes ``buf[s:e]`` in table ``t``, adding them if they are new."""
    h = _FNV_OFFSET
    for j in range(s, e):
        h = (h ^ buf[j]) * _FNV_PRIME
    cap = t[1]
    slot = h & (cap - 1)
    n = e - s
    while True:
        idv = t[2 + cap + slot]
        if idv < 0:
            idv = t[0]
            t[2 + slot] = h
            t[2 + cap + slot] = idv
            t[2 + 2 * cap + idv] = s
            t[2 + 3 * cap + idv] = n
            t[0] = idv + 1
            return idv
        if t[2 + slot] == h and t[2 + 3 * cap + idv] == n:
            r = t[2 + 2 * cap + idv]
            same = True
            for j in range(n):
                if buf[r + j] != buf[s + j]:
                    same = False
                    break
            if same:
                return idv
        slot = (slot + 1) & (cap - 1)
