# numba, not mypy, types these kernels (scalars change between Python ints and numpy ints):
# mypy: disable-error-code="assignment, call-arg"
"""Compiled decoding of ``AttributeProto`` values, scalar and list, into one value table.

:func:`decode_attr_values` walks the attribute bodies ``buf[off[k]:off[k]+ln[k]]`` and writes
every value of attribute ``k`` to rows ``ptr[k]:ptr[k+1]`` of two ``int64`` columns:

=========================  ======================================  ===========================
kind (oneof member)        ``val``                                 ``val_len``
=========================  ======================================  ===========================
integer kinds, bool        the value (uint64 as its 64 bits)       0
double, float              the ``float64`` bits of the value       0
string, bytes              byte offset of the value in ``buf``     its length in bytes
=========================  ======================================  ===========================

A scalar kind has exactly one value row, a list kind as many as the list holds, no kind none.
It runs twice: ``fill=False`` counts each attribute's values into ``ptr[k + 1]``, the caller
takes the cumulative sum, then ``fill=True`` writes them. As in protobuf, when a message holds
several oneof members the last one wins. Strings are not checked for UTF-8 here; the Python side
does that when it turns a span into ``str``.

A malformed attribute's error code (those of :mod:`lumos.chakra._wire`) goes to ``bad[k]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lumos.chakra._wire import (
    _ATTR_WT,
    E_ATTR_WIRE_TYPE,
    E_FIELD_PAST_END,
    _borrow,
    _skip,
    _varint,
    _vcode,
)

# base type of each oneof field number (3..32): the scalar field and its list share one
_B_DOUBLE, _B_FLOAT, _B_INT32, _B_UINT32, _B_ZIGZAG, _B_FIX32, _B_SFIX32, _B_FIX64 = range(8)
_B_BOOL, _B_STRING, _B_VARINT64 = 8, 9, 10
_BASE = np.array(
    [-1, -1, -1]
    + [_B_DOUBLE] * 2
    + [_B_FLOAT] * 2
    + [_B_INT32] * 2
    + [_B_VARINT64] * 2  # int64
    + [_B_UINT32] * 2
    + [_B_VARINT64] * 2  # uint64
    + [_B_ZIGZAG] * 4  # sint32, sint64
    + [_B_FIX32] * 2
    + [_B_FIX64] * 2
    + [_B_SFIX32] * 2
    + [_B_FIX64] * 2  # sfixed64: the same 64 bits
    + [_B_BOOL] * 2
    + [_B_STRING] * 4,  # string, bytes
    dtype=np.int64,
)
# wire type of one element of each base (string: length-delimited)
_ELEM_WT = np.array([1, 5, 0, 0, 0, 5, 5, 1, 0, 2, 0], dtype=np.int64)


@njit(cache=True, inline="always")
def _le(buf, p, width):  # pragma: no cover - compiled
    """Little-endian unsigned integer of ``width`` bytes at ``buf[p]``."""
    v = np.uint64(0)
    for j in range(width):
        v |= np.uint64(buf[p + j]) << np.uint64(8 * j)
    return v


@njit(cache=True, inline="always")
def _element(buf, p, e, base, val, val_len, j, lim, scratch):  # pragma: no cover - compiled
    """Decode one element of ``base`` at ``buf[p:e]`` into row ``j`` when ``j < lim``; the next
    position, or a negative error code. ``scratch`` is ``(uint32[1], float64[1])``, reused for
    the bit casts of ``float``."""
    fill = j < lim
    wt = _ELEM_WT[base]
    if wt == 0:
        v, p = _varint(buf, p, e)
        if p < 0:
            return -_vcode(p)
        if fill:
            if base == _B_ZIGZAG:
                val[j] = np.int64(v >> np.uint64(1)) ^ -np.int64(v & np.uint64(1))
            elif base == _B_BOOL:
                val[j] = 1 if v != np.uint64(0) else 0
            elif base == _B_INT32:  # the low 32 bits, signed
                val[j] = np.int64(np.int32(np.uint32(v & np.uint64(0xFFFFFFFF))))
            elif base == _B_UINT32:
                val[j] = np.int64(v & np.uint64(0xFFFFFFFF))
            else:
                val[j] = np.int64(v)
            val_len[j] = 0
        return p
    if wt == 2:
        ln, p = _varint(buf, p, e)
        if p < 0:
            return -_vcode(p)
        if ln > np.uint64(e - p):
            return -E_FIELD_PAST_END
        if fill:
            val[j] = p
            val_len[j] = np.int64(ln)
        return p + np.int64(ln)
    width = 8 if wt == 1 else 4
    if p + width > e:
        return -E_FIELD_PAST_END
    if fill:
        bits = _le(buf, p, width)
        if base == _B_FLOAT:  # stored as the float64 of the float32
            u32, f64 = scratch
            u32[0] = np.uint32(bits)
            f64[0] = np.float64(u32.view(np.float32)[0])
            val[j] = f64.view(np.int64)[0]
        elif base == _B_SFIX32:
            val[j] = np.int64(np.int32(np.uint32(bits)))
        else:  # double bits, fixed32, fixed64, sfixed64
            val[j] = np.int64(bits)
        val_len[j] = 0
    return p + width


@njit(cache=True)
def decode_attr_values(buf, off, ln, fill, ptr, val, val_len, bad):  # pragma: no cover
    """Count (``fill=False``: into ``ptr[k + 1]``) or write (``fill=True``) the values of the
    attributes ``k`` whose bodies are ``buf[off[k]:off[k]+ln[k]]``; see the module docstring.
    A malformed attribute gets its error code in ``bad[k]`` (counting) and no values; the others
    are decoded all the same, so one bad attribute fails only where it is asked for."""
    scratch = (np.zeros(1, dtype=np.uint32), np.zeros(1, dtype=np.float64))
    for k in range(off.shape[0]):
        if fill:
            if bad[k] == 0:
                _one(buf, off[k], off[k] + ln[k], ptr[k], ptr[k + 1], val, val_len, scratch)
            continue
        n, code = _one(buf, off[k], off[k] + ln[k], 0, 0, val, val_len, scratch)
        bad[k] = code
        ptr[k + 1] = n if code == 0 else 0


@njit(cache=True)
def _one(buf, p, e, row, lim, val, val_len, scratch):  # pragma: no cover - compiled
    """``(number of values, error code)`` of the attribute body ``buf[p:e]``, its values written
    to rows ``row..`` below ``lim``."""
    buf = _borrow(buf)  # no reference counting per inlined helper call (see _wire._borrow)
    val = _borrow(val)
    val_len = _borrow(val_len)
    n = 0  # values of the current oneof member (the last one wins)
    while p < e:
        tag, p = _varint(buf, p, e)
        if p < 0:
            return 0, _vcode(p)
        fno = np.int64(tag >> np.uint64(3))
        wt = np.int64(tag & np.uint64(7))
        if fno >= 1 and fno <= 32 and wt != _ATTR_WT[fno]:
            return 0, E_ATTR_WIRE_TYPE
        if fno < 3 or fno > 32:
            q = _skip(buf, p, e, wt)
            if q < 0:
                return 0, -q
            p = q
            continue
        base = _BASE[fno]
        if fno % 2 == 1:  # a scalar
            q = _element(buf, p, e, base, val, val_len, row, lim, scratch)
            if q < 0:
                return 0, -q
            p = q
            n = 1
            continue
        n = 0
        lv, p = _varint(buf, p, e)  # a list message: repeated values = 1
        if p < 0:
            return 0, _vcode(p)
        if lv > np.uint64(e - p):
            return 0, E_FIELD_PAST_END
        le = p + np.int64(lv)
        while p < le:
            t2, p = _varint(buf, p, le)
            if p < 0:
                return 0, _vcode(p)
            f2 = np.int64(t2 >> np.uint64(3))
            w2 = np.int64(t2 & np.uint64(7))
            if f2 != 1:
                q = _skip(buf, p, le, w2)
            elif w2 == 2 and base != _B_STRING:  # packed
                plen, p = _varint(buf, p, le)
                if p < 0:
                    return 0, _vcode(p)
                if plen > np.uint64(le - p):
                    return 0, E_FIELD_PAST_END
                pe = p + np.int64(plen)
                q = p
                while q < pe:
                    q = _element(buf, q, pe, base, val, val_len, row + n, lim, scratch)
                    n += 1
                    if q < 0:
                        break
            elif w2 == _ELEM_WT[base]:
                q = _element(buf, p, le, base, val, val_len, row + n, lim, scratch)
                n += 1
            else:
                q = -E_ATTR_WIRE_TYPE
            if q < 0:
                return 0, -q
            p = q
    return n, 0
