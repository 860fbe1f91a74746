# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""Interning of byte spans for compiled decoders: equal strings of a buffer get one row.

A table is three arrays (:func:`new_table`, grown by :func:`grow_table`): ``tab``
(open-addressing slots holding row + 1, 0 when free; twice the rows), ``rep`` (per row, the
offset and length of its first occurrence in the buffer) and ``rep_hash`` (per row, the FNV-1a
hash of its bytes).
:func:`intern_span` looks a span up by its hash and confirms equal hashes byte by byte, so
interning is exact even on a hash collision; the caller keeps the number of rows.

Other kernel modules call :func:`intern_span` in C: their ``.pxd`` cimports it (``_intern.pxd``
declares it), and their Python source imports it when it runs uncompiled.
"""

from __future__ import annotations

import numpy as np

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

# C constants (a module-level annotation, ``_X: cython.ulonglong = ...``, is a Python global in
# pure-Python mode, and so is an integer literal of 2**31 or more in an expression)
_FNV_OFFSET = cython.declare(cython.ulonglong, 14695981039346656037)
_FNV_PRIME = cython.declare(cython.ulonglong, 1099511628211)
_U64 = cython.declare(cython.ulonglong, 0xFFFFFFFFFFFFFFFF)

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
    rehash(tab2, hash2, used)
    return tab2, rep2, hash2


@cython.ccall
@cython.exceptval(check=False)
def fnv(
    buf: cython.const[cython.uchar][::1], off: cython.Py_ssize_t, ln: cython.Py_ssize_t
) -> cython.ulonglong:
    """The 64-bit FNV-1a hash of ``buf[off:off+ln]``."""
    h: cython.ulonglong = _FNV_OFFSET
    k: cython.Py_ssize_t
    for k in range(off, off + ln):
        # (the mask is C's own 64-bit wrap, spelled out for the source run as Python)
        h = ((h ^ cython.cast(cython.ulonglong, buf[k])) * _FNV_PRIME) & _U64
    return h


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _lookup(
    buf: cython.const[cython.uchar][::1],
    off: cython.Py_ssize_t,
    ln: cython.Py_ssize_t,
    h: cython.ulonglong,
    tab: cython.int[::1],
    rep: cython.longlong[:, ::1],
    rep_hash: cython.ulonglong[::1],
) -> cython.longlong:
    """Row of the interned string ``buf[off:off+ln]`` (hash ``h``), or ``-(slot + 1)`` of the
    free table slot where it belongs."""
    mask: cython.Py_ssize_t = tab.shape[0] - 1
    s: cython.Py_ssize_t = cython.cast(cython.Py_ssize_t, h & mask)
    r: cython.longlong
    a: cython.longlong
    j: cython.Py_ssize_t
    same: cython.bint
    while True:
        r = tab[s]
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


@cython.ccall
@cython.exceptval(check=False)
def intern_span(
    buf: cython.const[cython.uchar][::1],
    off: cython.Py_ssize_t,
    ln: cython.Py_ssize_t,
    tab: cython.int[::1],
    rep: cython.longlong[:, ::1],
    rep_hash: cython.ulonglong[::1],
    nrep: cython.longlong,
) -> cython.longlong:
    """The row of the string ``buf[off:off+ln]``, added as row ``nrep`` when new (the caller
    counts a row added when the result equals ``nrep``); -1 when the table or the row arrays
    are full (the caller grows them and decodes the record again)."""
    h: cython.ulonglong = fnv(buf, off, ln)
    r: cython.longlong = _lookup(buf, off, ln, h, tab, rep, rep_hash)
    if r >= 0:
        return r
    if nrep == rep.shape[0] or 2 * (nrep + 1) > tab.shape[0]:
        return -1
    rep[nrep, 0] = off
    rep[nrep, 1] = ln
    rep_hash[nrep] = h
    tab[-r - 1] = nrep + 1
    return nrep


def rehash(
    tab: cython.int[::1], rep_hash: cython.const[cython.ulonglong][::1], nrep: cython.longlong
) -> None:
    """Fill an empty (all-zero) interning table ``tab`` with rows ``0..nrep-1``."""
    mask: cython.Py_ssize_t = tab.shape[0] - 1
    r: cython.Py_ssize_t
    s: cython.Py_ssize_t
    for r in range(nrep):
        s = cython.cast(cython.Py_ssize_t, rep_hash[r] & mask)
        while tab[s] != 0:
            s = (s + 1) & mask
        tab[s] = r + 1
