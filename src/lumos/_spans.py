"""Interning of byte spans for compiled decoders: equal strings of a buffer get one row.

A table is three arrays, made by :func:`new_table` and grown by :func:`grow_table`: ``tab``
(open-addressing slots holding row + 1, 0 when free; twice the rows), ``rep`` (per row, the
offset and length of its first occurrence in the buffer) and ``rep_hash`` (per row, the FNV-1a
hash of its bytes). :func:`intern_span` (compiled, inlined into its caller) looks a span up by
its hash and confirms equal hashes byte by byte, so interning is exact even on a hash
collision; the caller keeps the number of rows. The Chakra decoder interns node and attribute
names with it, the Kineto scan event names, categories and shapes.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit

from lumos import _intern
from lumos._jit import Kernel, array

__all__ = ["fnv", "grow_table", "intern_span", "new_table", "rehash"]

Table = tuple[np.ndarray, np.ndarray, np.ndarray]


def new_table(cap: int) -> Table:
    """An empty table with room for ``cap`` rows: (slots, row spans (offset, length), row
    hashes)."""
    return np.zeros(2 * cap, np.int32), np.empty((cap, 2), np.int64), np.empty(cap, np.uint64)


def grow_table(table: Table, used: int, cap: int | None = None) -> Table:
    """``table`` (``used`` rows) moved into one with room for ``cap`` rows (default: twice as
    many)."""
    _, rep, rep_hash = table
    tab2, rep2, hash2 = new_table(cap if cap is not None else 2 * rep.shape[0])
    rep2[:used] = rep[:used]
    hash2[:used] = rep_hash[:used]
    _intern.rehash(tab2, hash2, used)  # compiled at install: no numba compile on a first run
    return tab2, rep2, hash2


@njit(cache=True, inline="always")
def fnv(buf, off, ln):  # pragma: no cover - compiled
    h = np.uint64(14695981039346656037)
    for k in range(off, off + ln):
        h = (h ^ np.uint64(buf[k])) * np.uint64(1099511628211)
    return h


@njit(cache=True, inline="always")
def _lookup(buf, off, ln, h, tab, rep, rep_hash):  # pragma: no cover - compiled
    """Row of the interned string ``buf[off:off+ln]`` (hash ``h``), or ``-(slot + 1)`` of the
    free table slot where it belongs. Equal hashes are confirmed byte by byte, so interning is
    exact even on a hash collision."""
    mask = tab.shape[0] - 1
    s = np.int64(h & np.uint64(mask))
    while True:
        r = np.int64(tab[s])
        if r == 0:
            return -(s + 1)
        r -= 1
        if rep_hash[r] == h and rep[r, 1] == ln:
            a = rep[r, 0]
            same = True
            for j in range(ln):
                if buf[a + j] != buf[off + j]:
                    same = False
                    break
            if same:
                return r
        s = (s + 1) & mask


@njit(cache=True)
def rehash(tab, rep_hash, nrep):  # pragma: no cover - compiled
    """Fill an empty (all-zero) interning table ``tab`` with rows ``0..nrep-1``."""
    mask = tab.shape[0] - 1
    for r in range(nrep):
        s = np.int64(rep_hash[r] & np.uint64(mask))
        while tab[s] != 0:
            s = (s + 1) & mask
        tab[s] = r + 1


@njit(cache=True, inline="always")
def intern_span(buf, off, ln, tab, rep, rep_hash, nrep):  # pragma: no cover - compiled
    """``(row, nrep)`` of the string ``buf[off:off+ln]``, added when new; row -1 when the table
    or the row arrays are full (the caller grows them and decodes the node again)."""
    h = fnv(buf, off, ln)
    r = _lookup(buf, off, ln, h, tab, rep, rep_hash)
    if r >= 0:
        return r, nrep
    if nrep == rep.shape[0] or 2 * (nrep + 1) > tab.shape[0]:
        return -1, nrep
    rep[nrep, 0] = off
    rep[nrep, 1] = ln
    rep_hash[nrep] = h
    tab[-r - 1] = nrep + 1
    return nrep, nrep + 1


_rehash = Kernel(
    rehash,
    (array(np.int32, writes=True), array(np.uint64), numba.types.int64),
    max_interpreted=0,
)
