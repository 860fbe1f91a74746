# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""The bytes of many ``AttributeProto`` messages in one pass (Cython, pure-Python mode: see
``setup.py``): the loop behind :func:`lumos.chakra.mapping_encode.build_trace`.

Attribute row ``k`` belongs to column ``col[k]``: its bytes are the column's prefix (the name
field and the value's tag, ``prefix_blob[prefix_off[c]:prefix_off[c + 1]]``), then by the
column's ``mode``: the varint of ``value[k]`` (0), its zigzag varint (1), or raw bytes row
``value[k]`` (2: ``raw_blob[raw_off[r]:raw_off[r + 1]]``, a string's length and bytes, or a
whole attribute whose column has an empty prefix).
"""

from __future__ import annotations

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

_U64 = cython.declare(cython.ulonglong, 0xFFFFFFFFFFFFFFFF)  # C's 64-bit wrap, for Python


def encode_attributes(
    prefix_blob: cython.const[cython.uchar][::1],
    prefix_off: cython.const[cython.longlong][::1],
    raw_blob: cython.const[cython.uchar][::1],
    raw_off: cython.const[cython.longlong][::1],
    col: cython.const[cython.longlong][::1],
    mode: cython.const[cython.longlong][::1],
    value: cython.const[cython.longlong][::1],
    out_off: cython.longlong[::1],
    out: cython.uchar[::1],
) -> int:
    """Write attribute row ``k``'s bytes at ``out[out_off[k]:]`` for every ``k`` (``out`` must
    hold them all); returns the bytes written."""
    p: cython.Py_ssize_t = 0
    k: cython.Py_ssize_t
    j: cython.Py_ssize_t
    c: cython.Py_ssize_t
    r: cython.Py_ssize_t
    m: cython.longlong
    v: cython.longlong
    u: cython.ulonglong
    for k in range(col.shape[0]):
        out_off[k] = p
        c = col[k]
        for j in range(prefix_off[c], prefix_off[c + 1]):
            out[p] = prefix_blob[j]
            p += 1
        m = mode[c]
        if m == 2:
            r = value[k]
            for j in range(raw_off[r], raw_off[r + 1]):
                out[p] = raw_blob[j]
                p += 1
            continue
        v = cython.cast(cython.longlong, value[k])
        u = cython.cast(cython.ulonglong, v & _U64)  # an int64 varint: its 64 bits
        if m == 1:  # zigzag: (v << 1) ^ (v >> 63), on the 64 bits
            u = ((u << 1) & _U64) ^ cython.cast(cython.ulonglong, (v >> 63) & _U64)
        while u >= 0x80:
            out[p] = cython.cast(cython.uchar, (u & 0x7F) | 0x80)
            u >>= 7
            p += 1
        out[p] = cython.cast(cython.uchar, u)
        p += 1
    return p
