"""The attribute value decoder of :mod:`lumos.chakra._wire_attr` in plain Python, for a first run.

Numba compiles :func:`~lumos.chakra._wire_attr.decode_attr_values` on its first call unless its
disk cache holds it: 4-8 s, which a user's first ``lumos info`` or ``lumos chakra stats`` after
``pip install`` would wait for to read a trace's attribute values. :func:`use_python` says when
to decode here instead, by the rule of the node decoder's twin
(:func:`lumos.chakra._wire_py.use_python`): the compiled decoder is neither in this process nor
in numba's cache, the attribute bytes this process decodes here stay within :data:`MAX_BYTES`
(a budget of their own), and the caller is not inside :func:`lumos.chakra._wire_py.compiled`
(the background warmer, which reads files to compile the decoders).

:func:`decode_attr_values` returns what the compiled count and fill passes leave in ``ptr``,
``val``, ``val_len`` and ``bad`` (``lumos.chakra.attr_table.AttrTable.decode``): the same
values, bit for bit, including the error code of every malformed attribute and the float64 of
a float32 (cast by numpy, as the compiled code casts it, so NaN payloads agree). Attribute
bodies are walked field by field in Python, each distinct body once (most attributes of a trace
repeat another's bytes), with string spans relative to their body; the absolute offsets and
the float32 casts are then applied to the whole value column at once with numpy.
"""

from __future__ import annotations

import struct

import numpy as np

from lumos import _jit
from lumos.chakra import _wire_attr, _wire_py
from lumos.chakra._wire import E_ATTR_WIRE_TYPE, E_FIELD_PAST_END
from lumos.chakra._wire_attr import (
    _B_BOOL,
    _B_FLOAT,
    _B_INT32,
    _B_SFIX32,
    _B_STRING,
    _B_UINT32,
    _B_ZIGZAG,
)
from lumos.chakra._wire_py import _WT, _skip, _span, _varint, _vcode

__all__ = ["MAX_BYTES", "decode_attr_values", "use_python"]

#: Attribute bytes (the bodies, all calls together) that one process decodes here; beyond, it
#: compiles. The node decoder's bound, counted apart: a file holds its attributes, so a first
#: command that decodes a file's nodes in Python decodes their values here too, and compiles
#: neither. The 4.05 MiB of attributes of an 8 MiB ``lumos convert`` ET (265k, 89k distinct)
#: decode here in 0.40 s; the slowest bodies, 8 MiB of distinct 7-byte ones (1.2M), in 4.2 s,
#: about one compile of the decoder.
MAX_BYTES = _jit.SMALL_INPUT_BYTES
_spent: dict[str, int] = {}
_COMPILED = (_wire_attr.decode_attr_values,)

_BASE = tuple(_wire_attr._BASE.tolist())
_ELEM_WT = tuple(_wire_attr._ELEM_WT.tolist())
_U32, _I32, _I64 = (struct.Struct(f).unpack_from for f in ("<I", "<i", "<q"))
# (error code, base of the values, values, lengths): what one attribute body decodes to
Decoded = tuple[int, int, list[int], list[int]]


def use_python(nbytes: int) -> bool:
    """Whether to decode ``nbytes`` of attribute bodies here: the compiled decoder is neither
    loaded nor in numba's cache, this process has decoded at most :data:`MAX_BYTES` here, these
    included (they are counted), and it is not inside :func:`lumos.chakra._wire_py.compiled`."""
    return _wire_py.take(_spent, "attrs", _COMPILED, nbytes, MAX_BYTES)


def _integer(base: int, v: int) -> int:
    """The int64 value of the varint ``v`` (64 bits) for an element of ``base``."""
    if base == _B_ZIGZAG:
        return (v >> 1) ^ -(v & 1)
    if base == _B_BOOL:
        return int(v != 0)
    if base == _B_INT32:  # the low 32 bits, signed
        return (v & 0xFFFFFFFF) - ((v & 0x80000000) << 1)
    if base == _B_UINT32:
        return v & 0xFFFFFFFF
    return v - (1 << 64) if v >> 63 else v


def _element(body: bytes, p: int, e: int, base: int, vals: list[int], lens: list[int]) -> int:
    """Append the element of ``base`` at ``body[p:e]`` (``_wire_attr._element``; a float32 as
    its raw bits, a string as its offset in ``body``); the next position, or a negative error
    code."""
    wt = _ELEM_WT[base]
    if wt == 0:
        v, p = _varint(body, p, e)
        if p < 0:
            return -_vcode(p)
        vals.append(_integer(base, v))
        lens.append(0)
        return p
    if wt == 2:
        p, ln = _span(body, p, e)
        if p < 0:
            return p
        vals.append(p)
        lens.append(ln)
        return p + ln
    width = 8 if wt == 1 else 4
    if p + width > e:
        return -E_FIELD_PAST_END
    if width == 8:  # double bits, fixed64, sfixed64
        vals.append(_I64(body, p)[0])
    else:
        vals.append((_I32 if base == _B_SFIX32 else _U32)(body, p)[0])
    lens.append(0)
    return p + width


def _list(body: bytes, p: int, e: int, base: int, vals: list[int], lens: list[int]) -> int:
    """Append the values of the ``XxxList`` message whose length prefix is at ``body[p]``
    (``repeated values = 1``, packed or not, other fields skipped); the position after it, or a
    negative error code."""
    lv, p = _varint(body, p, e)
    if p < 0:
        return -_vcode(p)
    if lv > e - p:
        return -E_FIELD_PAST_END
    le = p + lv
    while p < le:
        tag, p = _varint(body, p, le)
        if p < 0:
            return -_vcode(p)
        fno, wt = tag >> 3, tag & 7
        if fno != 1:
            q = _skip(body, p, le, wt)
        elif wt == 2 and base != _B_STRING:  # packed
            plen, p = _varint(body, p, le)
            if p < 0:
                return -_vcode(p)
            if plen > le - p:
                return -E_FIELD_PAST_END
            pe, q = p + plen, p
            while 0 <= q < pe:
                q = _element(body, q, pe, base, vals, lens)
        elif wt == _ELEM_WT[base]:
            q = _element(body, p, le, base, vals, lens)
        else:
            q = -E_ATTR_WIRE_TYPE
        if q < 0:
            return q
        p = q
    return p


def _decode(body: bytes) -> Decoded:
    """The values of one ``AttributeProto`` body (those of its last oneof member), or its error
    code and no values (``_wire_attr._one``)."""
    p, e = 0, len(body)
    base = -1
    vals: list[int] = []
    lens: list[int] = []
    while p < e:
        tag = body[p]
        p += 1
        if tag >= 0x80:  # most tags are one byte, read without a call (calls cost most)
            tag, p = _varint(body, p - 1, e)
            if p < 0:
                return _vcode(p), -1, [], []
        fno, wt = tag >> 3, tag & 7
        if 1 <= fno <= 32 and wt != _WT[fno]:
            return E_ATTR_WIRE_TYPE, -1, [], []
        if fno < 3 or fno > 32:
            if fno == 1 and p < e and body[p] < 0x80:  # the name, shorter than 128 bytes
                q = p + 1 + body[p]
                q = q if q <= e else -E_FIELD_PAST_END
            else:
                q = _skip(body, p, e, wt)
        elif wt == 0:  # a scalar varint (no list has wire type 0): most values, one call
            base = _BASE[fno]
            v, q = _varint(body, p, e)
            vals, lens = [_integer(base, v)], [0]
            q = q if q >= 0 else -_vcode(q)
        else:
            base, vals, lens = _BASE[fno], [], []
            f = _element if fno % 2 else _list
            q = f(body, p, e, base, vals, lens)
        if q < 0:
            return -q, -1, [], []
        p = q
    return 0, base, vals, lens


def decode_attr_values(
    buf: np.ndarray, off: np.ndarray, ln: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(ptr, val, val_len, bad)`` of the attribute bodies ``buf[off[k]:off[k]+ln[k]]``: the
    arrays that ``_wire_attr.decode_attr_values`` counts (``fill=False``, then the cumulative
    sum of ``ptr``) and fills (``fill=True``), with their dtypes (int64, ``bad`` int8)."""
    n = off.shape[0]
    off = off.astype(np.int64)
    lo = int(off.min()) if n else 0
    end = off + ln
    data = buf[lo : int(end.max()) if n else 0].tobytes()
    bodies = [data[o:e] for o, e in zip((off - lo).tolist(), (end - lo).tolist(), strict=True)]
    distinct = dict.fromkeys(bodies)  # a body's row among the distinct ones, in first occurrence
    for r, body in enumerate(distinct):
        distinct[body] = r
    row = np.array([distinct[b] for b in bodies], dtype=np.int64)
    decoded = [_decode(b) for b in distinct]
    code = np.array([d[0] for d in decoded], dtype=np.int8)
    base = np.array([d[1] for d in decoded], dtype=np.int64)
    count = np.array([len(d[2]) for d in decoded], dtype=np.int64)
    vals = [v for d in decoded for v in d[2]]
    lens = [m for d in decoded for m in d[3]]
    # the values of distinct body r are rows start[r]:start[r] + count[r] of vals
    start = np.cumsum(count) - count
    counts = count[row]  # none for a malformed body
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    total = int(ptr[-1])
    take = np.arange(total, dtype=np.int64) + np.repeat(start[row] - ptr[:-1], counts)
    val = np.array(vals, dtype=np.int64)[take]
    val_len = np.array(lens, dtype=np.int64)[take]
    row_base = np.repeat(base[row], counts)
    spans = row_base == _B_STRING  # offsets in their body -> in buf
    val[spans] += np.repeat(off, counts)[spans]
    floats = row_base == _B_FLOAT  # float32 bits -> float64 bits (a signalling NaN quietly)
    with np.errstate(invalid="ignore"):
        f64 = val[floats].astype(np.uint32).view(np.float32).astype(np.float64)
    val[floats] = f64.view(np.int64)
    return ptr, val, val_len, code[row]
