# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""Decoding of ``AttributeProto`` values, scalar and list, into one value table (Cython,
pure-Python mode: see ``setup.py``).

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
The varint, field-skipping and bit-cast helpers are :mod:`lumos.chakra._wire`'s, called in C
(``_wire_attr.pxd``).
"""

from __future__ import annotations

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

from lumos.chakra._wire import E_ATTR_WIRE_TYPE, E_FIELD_PAST_END

if not cython.compiled:
    from lumos.chakra._wire import (
        _attr_wire_type,
        _float64_bits,
        _le,
        _signed32,
        _signed64,
        _skip,
        _varint,
        _vcode,
    )

# base type of each oneof field number (3..32): the scalar field and its list share one
_B_DOUBLE = cython.declare(cython.int, 0)
_B_FLOAT = cython.declare(cython.int, 1)
_B_INT32 = cython.declare(cython.int, 2)
_B_UINT32 = cython.declare(cython.int, 3)
_B_ZIGZAG = cython.declare(cython.int, 4)
_B_FIX32 = cython.declare(cython.int, 5)
_B_SFIX32 = cython.declare(cython.int, 6)
_B_FIX64 = cython.declare(cython.int, 7)
_B_BOOL = cython.declare(cython.int, 8)
_B_STRING = cython.declare(cython.int, 9)
_B_VARINT64 = cython.declare(cython.int, 10)
_ATTR_WIRE_TYPE = cython.declare(cython.int, E_ATTR_WIRE_TYPE)
_FIELD_PAST_END = cython.declare(cython.int, E_FIELD_PAST_END)
_LOW32 = cython.declare(cython.ulonglong, 0xFFFFFFFF)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _base(fno: cython.longlong) -> cython.int:
    """The base type of oneof field ``fno`` (3..32)."""
    scalar: cython.longlong = fno - 1 + fno % 2  # a list's field number is its scalar's + 1
    if scalar == 3:
        return _B_DOUBLE
    if scalar == 5:
        return _B_FLOAT
    if scalar == 7:
        return _B_INT32
    if scalar == 11:
        return _B_UINT32
    if scalar == 15 or scalar == 17:  # sint32, sint64
        return _B_ZIGZAG
    if scalar == 19:
        return _B_FIX32
    if scalar == 21 or scalar == 25:  # fixed64, sfixed64: the same 64 bits
        return _B_FIX64
    if scalar == 23:
        return _B_SFIX32
    if scalar == 27:
        return _B_BOOL
    if scalar == 29 or scalar == 31:  # string, bytes
        return _B_STRING
    return _B_VARINT64  # int64, uint64


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _element_wire_type(base: cython.int) -> cython.longlong:
    """The wire type of one element of ``base`` (string: length-delimited)."""
    if base in (_B_DOUBLE, _B_FIX64):
        return 1
    if base in (_B_FLOAT, _B_FIX32, _B_SFIX32):
        return 5
    if base == _B_STRING:
        return 2
    return 0


@cython.cfunc
@cython.exceptval(check=False)
def _element(
    buf: cython.const[cython.uchar][::1],
    p: cython.Py_ssize_t,
    e: cython.Py_ssize_t,
    base: cython.int,
    val: cython.longlong[::1],
    val_len: cython.longlong[::1],
    j: cython.Py_ssize_t,
    lim: cython.Py_ssize_t,
) -> cython.Py_ssize_t:
    """Decode one element of ``base`` at ``buf[p:e]`` into row ``j`` when ``j < lim``; the next
    position, or a negative error code."""
    fill: cython.bint = j < lim
    wt: cython.longlong = _element_wire_type(base)
    v: cython.ulonglong
    width: cython.Py_ssize_t
    if wt == 0:
        v, p = _varint(buf, p, e)
        if p < 0:
            return -_vcode(p)
        if fill:
            if base == _B_ZIGZAG:
                val[j] = cython.cast(cython.longlong, v >> 1) ^ -cython.cast(cython.longlong, v & 1)
            elif base == _B_BOOL:
                val[j] = 1 if v != 0 else 0
            elif base == _B_INT32:  # the low 32 bits, signed
                val[j] = _signed32(v)
            elif base == _B_UINT32:
                val[j] = cython.cast(cython.longlong, v & _LOW32)
            else:
                val[j] = _signed64(v)
            val_len[j] = 0
        return p
    if wt == 2:
        v, p = _varint(buf, p, e)
        if p < 0:
            return -_vcode(p)
        if v > cython.cast(cython.ulonglong, e - p):
            return -_FIELD_PAST_END
        if fill:
            val[j] = p
            val_len[j] = cython.cast(cython.longlong, v)
        return p + cython.cast(cython.Py_ssize_t, v)
    width = 8 if wt == 1 else 4
    if p + width > e:
        return -_FIELD_PAST_END
    if fill:
        v = _le(buf, p, width)
        if base == _B_FLOAT:  # stored as the float64 of the float32
            val[j] = _signed64(_float64_bits(v))
        elif base == _B_SFIX32:
            val[j] = _signed32(v)
        else:  # double bits, fixed32, fixed64, sfixed64
            val[j] = _signed64(v)
        val_len[j] = 0
    return p + width


def decode_attr_values(
    buf: cython.const[cython.uchar][::1],
    off: cython.const[cython.longlong][::1],
    ln: cython.const[cython.longlong][::1],
    fill: cython.bint,
    ptr: cython.longlong[::1],
    val: cython.longlong[::1],
    val_len: cython.longlong[::1],
    bad: cython.schar[::1],
) -> None:
    """Count (``fill=False``: into ``ptr[k + 1]``) or write (``fill=True``) the values of the
    attributes ``k`` whose bodies are ``buf[off[k]:off[k]+ln[k]]``; see the module docstring.
    A malformed attribute gets its error code in ``bad[k]`` (counting) and no values; the others
    are decoded all the same, so one bad attribute fails only where it is asked for."""
    k: cython.Py_ssize_t
    n: cython.Py_ssize_t
    code: cython.int
    for k in range(off.shape[0]):
        if fill:
            if bad[k] == 0:
                _one(buf, off[k], off[k] + ln[k], ptr[k], ptr[k + 1], val, val_len)
            continue
        n, code = _one(buf, off[k], off[k] + ln[k], 0, 0, val, val_len)
        bad[k] = code
        ptr[k + 1] = n if code == 0 else 0


@cython.cfunc
@cython.exceptval(check=False)
def _one(
    buf: cython.const[cython.uchar][::1],
    p: cython.Py_ssize_t,
    e: cython.Py_ssize_t,
    row: cython.Py_ssize_t,
    lim: cython.Py_ssize_t,
    val: cython.longlong[::1],
    val_len: cython.longlong[::1],
) -> tuple[cython.Py_ssize_t, cython.int]:
    """``(number of values, error code)`` of the attribute body ``buf[p:e]``, its values written
    to rows ``row..`` below ``lim``."""
    n: cython.Py_ssize_t = 0  # values of the current oneof member (the last one wins)
    tag: cython.ulonglong
    lv: cython.ulonglong
    fno: cython.longlong
    wt: cython.longlong
    f2: cython.longlong
    w2: cython.longlong
    base: cython.int
    q: cython.Py_ssize_t
    le: cython.Py_ssize_t
    pe: cython.Py_ssize_t
    while p < e:
        tag, p = _varint(buf, p, e)
        if p < 0:
            return 0, _vcode(p)
        fno = cython.cast(cython.longlong, tag >> 3)
        wt = cython.cast(cython.longlong, tag & 7)
        if fno >= 1 and fno <= 32 and wt != _attr_wire_type(fno):
            return 0, _ATTR_WIRE_TYPE
        if fno < 3 or fno > 32:
            q = _skip(buf, p, e, wt)
            if q < 0:
                return 0, -q
            p = q
            continue
        base = _base(fno)
        if fno % 2 == 1:  # a scalar
            q = _element(buf, p, e, base, val, val_len, row, lim)
            if q < 0:
                return 0, -q
            p = q
            n = 1
            continue
        n = 0
        lv, p = _varint(buf, p, e)  # a list message: repeated values = 1
        if p < 0:
            return 0, _vcode(p)
        if lv > cython.cast(cython.ulonglong, e - p):
            return 0, _FIELD_PAST_END
        le = p + cython.cast(cython.Py_ssize_t, lv)
        while p < le:
            tag, p = _varint(buf, p, le)
            if p < 0:
                return 0, _vcode(p)
            f2 = cython.cast(cython.longlong, tag >> 3)
            w2 = cython.cast(cython.longlong, tag & 7)
            if f2 != 1:
                q = _skip(buf, p, le, w2)
            elif w2 == 2 and base != _B_STRING:  # packed
                lv, p = _varint(buf, p, le)
                if p < 0:
                    return 0, _vcode(p)
                if lv > cython.cast(cython.ulonglong, le - p):
                    return 0, _FIELD_PAST_END
                pe = p + cython.cast(cython.Py_ssize_t, lv)
                q = p
                while q < pe:
                    q = _element(buf, q, pe, base, val, val_len, row + n, lim)
                    n += 1
                    if q < 0:
                        break
            elif w2 == _element_wire_type(base):
                q = _element(buf, p, le, base, val, val_len, row + n, lim)
                n += 1
            else:
                q = -_ATTR_WIRE_TYPE
            if q < 0:
                return 0, -q
            p = q
    return n, 0
