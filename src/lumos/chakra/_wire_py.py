"""The Chakra decoder of :mod:`lumos.chakra._wire` in plain Python, for a first command's files.

Numba compiles :func:`~lumos.chakra._wire.scan_records` and :func:`~lumos.chakra._wire.decode_nodes`
on their first call unless its disk cache holds them: 5 s, which a user's first command after
``pip install`` would wait for even to read a 3 KB trace. :func:`use_python` says when
to decode here instead: the compiled decoder is neither in this process nor in numba's cache,
and the bytes decoded here by this process stay within :data:`MAX_BYTES`; the background warmer
(:mod:`lumos._jit`) fills the cache for the next command meanwhile.

The results are exactly the compiled ones: :func:`scan_records` has the compiled signature;
:func:`decode_nodes` returns the columns of ``lumos.chakra.io_nodes.decode_node_records`` (same dtypes and
values, names interned in first-occurrence order with the same ``(offset, length)`` spans); a
malformed node fills ``err`` as the compiled decoder does and raises
:class:`~lumos.chakra._wire.MalformedNode`, so the caller's error message is the same. Fields
are walked one by one in Python; the packed dependency lists (most of upstream's chakra.0.et)
are only checked there (:func:`_check_packed`) and decoded for the whole file at once with numpy
(:func:`_varints`); attributes with equal bytes (14 in 15 in chakra.0.et, 2 in 3 in a converted
trace) are decoded once.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from lumos import _jit
from lumos.chakra import _wire
from lumos.chakra._wire import (
    _ATTR_WT,
    E_ATTR_WIRE_TYPE,
    E_BAD_WIRE_TYPE,
    E_FIELD_PAST_END,
    E_GROUP,
    E_LENGTH_PAST_EOF,
    E_NODE_TYPE_RANGE,
    E_RECORD_LIMIT,
    E_RECORD_TOO_LONG,
    E_TIME_RANGE,
    E_TRUNCATED_VARINT,
    E_VARINT_TOO_LONG,
    MAX_MICROS,
    MalformedNode,
)

__all__ = [
    "MAX_BYTES",
    "compiled",
    "decode_nodes",
    "scan_records",
    "stand_in",
    "take",
    "use_python",
]

#: Bytes (decompressed) that one process decodes here, all files together; beyond, it compiles.
#: ``benchmarks/bench_chakra.py --python-decoder``: 8 MiB of a ``lumos convert`` ET (48k nodes,
#: 265k attributes) decode here in 0.64 s and upstream's chakra.0.et in 0.04 s, against 5 s to
#: compile the decoder; a many-rank workload compiles once instead of decoding slowly rank by rank.
MAX_BYTES = _jit.SMALL_INPUT_BYTES
_spent: dict[str, int] = {}
_compiled_only = False
_COMPILED = (_wire.scan_records, _wire.decode_nodes)

_WT = tuple(_ATTR_WT.tolist())
_LONG_RUN = re.compile(rb"[\x80-\xff]{10}")  # 10 continuation bytes: a varint over 10 bytes
# wire types each Node field 1..10 allows (bit 0: varint, bit 2: length-delimited): id, name,
# type, ctrl deps, data deps (packed or not), start, duration, inputs, outputs, attributes
_NODE_WT = (0, 1, 4, 1, 5, 5, 1, 1, 4, 4, 4)
_DOUBLE, _U32, _I32, _I64 = (struct.Struct(f).unpack_from for f in ("<d", "<I", "<i", "<q"))


def use_python(nbytes: int) -> bool:
    """Whether to decode ``nbytes`` here: the compiled decoder is neither loaded nor in numba's
    cache, and this process has decoded at most :data:`MAX_BYTES` here, these included (they
    are counted), and is not inside :func:`compiled`."""
    return take(_spent, "nodes", _COMPILED, nbytes, MAX_BYTES)


def stand_in(dispatchers: tuple[Any, ...]) -> bool:
    """Whether Python stands in for the compiled ``dispatchers``: one of them is neither loaded
    nor in numba's cache, and the caller is not inside :func:`compiled`."""
    return not _compiled_only and not all(d.overloads or _jit.cached(d) for d in dispatchers)


def take(
    budget: dict[Any, int], key: Any, dispatchers: tuple[Any, ...], nbytes: int, limit: int
) -> bool:
    """Whether Python stands in for ``dispatchers`` (:func:`stand_in`) for ``nbytes`` more bytes
    of work, the bytes this process ran so far in their stead being ``budget[key]``, which
    stays within ``limit``; the bytes are counted when it does (the rule of every Python twin
    of compiled Chakra code: the node and attribute decoders, the encoders)."""
    spent = budget.get(key, 0)
    if spent + nbytes > limit or not stand_in(dispatchers):
        return False
    budget[key] = spent + nbytes
    return True


@contextmanager
def compiled() -> Iterator[None]:
    """Within it, files and their attribute values decode compiled whatever :func:`use_python`
    (or :func:`lumos.chakra._wire_attr_py.use_python`) would say, and encode compiled whatever
    :func:`lumos.chakra._encode_py.use_python` would say (the background warmer: it writes and
    reads a Chakra file to compile the encoders and the decoders)."""
    global _compiled_only
    saved, _compiled_only = _compiled_only, True
    try:
        yield
    finally:
        _compiled_only = saved


def _varint(data: bytes, p: int, end: int) -> tuple[int, int]:
    """``(value, position after it)`` of the varint at ``data[p]``, ending by ``end``; the position
    is -1 when it is truncated, -2 when it is longer than 10 bytes (as ``_wire._varint``)."""
    result = 0
    shift = 0
    while p < end:
        b = data[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, p
        shift += 7
        if shift > 63:
            return result & 0xFFFFFFFFFFFFFFFF, -2
    return result & 0xFFFFFFFFFFFFFFFF, -1


def _vcode(p: int) -> int:
    return E_TRUNCATED_VARINT if p == -1 else E_VARINT_TOO_LONG


def _signed(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


def _span(data: bytes, p: int, end: int) -> tuple[int, int]:
    """``(start, length)`` of the length-delimited value at ``data[p]``; ``(-code, 0)`` when its
    length is truncated or runs past ``end``."""
    ln, p = _varint(data, p, end)
    if p < 0:
        return -_vcode(p), 0
    if ln > end - p:
        return -E_FIELD_PAST_END, 0
    return p, ln


def _skip(data: bytes, p: int, end: int, wt: int) -> int:
    """Position after a field value of wire type ``wt``; negative error code on failure."""
    if wt == 0:
        _, p = _varint(data, p, end)
        return p if p >= 0 else -_vcode(p)
    if wt == 1:
        p += 8
    elif wt == 5:
        p += 4
    elif wt == 2:
        p, ln = _span(data, p, end)
        if p < 0:
            return p
        p += ln
    else:
        return -E_GROUP
    return -E_FIELD_PAST_END if p > end else p


def scan_records(
    buf: np.ndarray, pos: int, end: int, max_len: int, fill: bool,
    rec_off: np.ndarray, rec_len: np.ndarray, err: np.ndarray,
) -> int:  # fmt: skip
    """:func:`lumos.chakra._wire.scan_records`, interpreted."""
    data = buf[:end].tobytes()
    n = empty = 0
    while pos < end:
        start = pos
        ln, pos = _varint(data, pos, end)
        code = 0
        if pos < 0:
            code, ln = _vcode(pos), 0
        elif ln > 0x7FFFFFFF:
            code, ln = E_RECORD_TOO_LONG, 0
        elif ln > max_len:
            code = E_RECORD_LIMIT
        elif pos + ln > end:
            code = E_LENGTH_PAST_EOF
        if code:
            err[:4] = (code, n, start, ln)
            return n
        if fill:
            rec_off[n], rec_len[n] = pos, ln
        empty += ln == 0 and n > 0
        pos += ln
        n += 1
    err[4] = empty
    return n


def _fail(err: np.ndarray, code: int, row: int, at: int, fno: int, rec: tuple[int, int]) -> None:
    err[:6] = (code, row, at, fno, rec[0], rec[1] - rec[0])


def _decode_attr(data: bytes, p: int, e: int) -> tuple[int, int, int, int, int, float]:
    """``_wire._decode_attr``: ``(error code, name offset, name length, kind, integer value,
    float value)`` of the AttributeProto body ``data[p:e]``; kind 0 when no value is set."""
    name_o, name_l, kind, ival, fval = p, 0, 0, 0, 0.0
    while p < e:
        tag, p = _varint(data, p, e)
        if p < 0:
            return _vcode(p), name_o, name_l, kind, ival, fval
        fno, wt = tag >> 3, tag & 7
        if 1 <= fno <= 32 and wt != _WT[fno]:
            return E_ATTR_WIRE_TYPE, name_o, name_l, kind, ival, fval
        if fno == 1:
            p, ln = _span(data, p, e)
            if p < 0:
                return -p, name_o, name_l, kind, ival, fval
            name_o, name_l = p, ln
            p += ln
            continue
        if 3 <= fno <= 32 and wt != 2:
            kind, ival, fval = fno, 0, 0.0
            if wt == 0:
                v, p = _varint(data, p, e)
                if p < 0:
                    return _vcode(p), name_o, name_l, kind, ival, fval
                if fno == 15 or fno == 17:  # zigzag
                    ival = (v >> 1) ^ -(v & 1)
                elif fno == 27:
                    ival = int(v != 0)
                elif fno == 7:  # int32: the low 32 bits, signed
                    ival = (v & 0xFFFFFFFF) - ((v & 0x80000000) << 1)
                elif fno == 11:
                    ival = v & 0xFFFFFFFF
                else:
                    ival = _signed(v)
                continue
            width = 8 if wt == 1 else 4  # the wire types left: 1 and 5 (checked above)
            if p + width > e:
                return E_FIELD_PAST_END, name_o, name_l, kind, ival, fval
            if fno == 3:
                fval = _DOUBLE(data, p)[0]
            elif fno == 5:  # numpy's float32 -> float64 cast, as the compiled code's
                fval = float(np.frombuffer(data, np.float32, 1, p)[0])
            elif fno == 19:
                ival = _U32(data, p)[0]
            elif fno == 23:
                ival = _I32(data, p)[0]
            else:
                ival = _I64(data, p)[0]
            p += width
            continue
        if 3 <= fno <= 32:  # a list, string or bytes: its kind, no scalar value
            kind, ival, fval = fno, 0, 0.0
        q = _skip(data, p, e, wt)
        if q < 0:
            return -q, name_o, name_l, kind, ival, fval
        p = q
    return 0, name_o, name_l, kind, ival, fval


def _check_packed(data: bytes, p: int, q: int) -> int:
    """Error code of the packed varints ``data[p:q]`` as the compiled decoder reads them one by
    one (a run of 10 continuation bytes first, then a last varint cut by ``q``), else 0."""
    if _LONG_RUN.search(data, p, q):
        return E_VARINT_TOO_LONG
    return E_TRUNCATED_VARINT if q > p and data[q - 1] >= 0x80 else 0


def _varints(arr: np.ndarray, spans: list[int], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr, values)``: the varints of byte spans ``spans = [node, lo, hi, ...]`` (each whole,
    checked, in node order) as one ``uint64`` column, ``ptr`` its CSR over ``n`` nodes."""
    node, lo, hi = (np.array(spans[k::3], dtype=np.int64) for k in range(3))
    lens = hi - lo
    total = int(lens.sum())
    if total == 0:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    at = np.cumsum(lens) - lens  # where each span starts in the gathered bytes
    raw = arr[np.arange(total, dtype=np.int64) + np.repeat(lo - at, lens)]
    last = raw < 0x80
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
    k = np.arange(total, dtype=np.int64) - np.repeat(starts, ends - starts + 1)
    bits = (raw & 0x7F).astype(np.uint64) << (7 * k).astype(np.uint64)
    values = np.bitwise_or.reduceat(bits, starts)
    done = np.concatenate(([0], np.cumsum(last, dtype=np.int64)))
    per_node = np.bincount(node, weights=done[at + lens] - done[at], minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_node.astype(np.int64), out=ptr[1:])
    return ptr, values


def _intern(table: dict[bytes, int], rep: list[int], data: bytes, o: int, ln: int) -> int:
    key = data[o : o + ln]
    r = table.get(key)
    if r is None:
        r = table[key] = len(table)
        rep += (o, ln)
    return r


def decode_nodes(buf: np.ndarray, pos: int, n: int, err: np.ndarray) -> list[np.ndarray]:
    """The ``n`` Node records from byte ``pos`` of ``buf`` (framing checked by
    :func:`scan_records`) as the columns of ``lumos.chakra.io_nodes.decode_node_records``, in its order."""
    data = buf.tobytes()
    node_id, name_idx, node_type, start, dur = [0] * n, [0] * n, [0] * n, [0] * n, [0] * n
    inp_off, inp_len, out_off, out_len = [0] * n, [-1] * n, [0] * n, [-1] * n
    deps: tuple[list[int], list[int]] = ([], [])  # ctrl, data: [node, lo, hi, ...]
    attr_ptr, unk_ptr = [0] * (n + 1), [0] * (n + 1)
    attr_off: list[int] = []
    attr_len: list[int] = []
    attr_vals: list[tuple[int, int, int, float]] = []  # name row, kind, int, float
    unk: list[int] = []  # offset, length, ...
    names: dict[bytes, int] = {}
    attr_names: dict[bytes, int] = {}
    names_rep: list[int] = []
    attr_names_rep: list[int] = []
    seen: dict[bytes, tuple[int, int, int, float]] = {}  # attribute bytes -> its attr_vals row
    for i in range(n):
        ln, p = _varint(data, pos, len(data))
        rec = (p, p + ln)
        e = pos = p + ln
        attr_ptr[i], unk_ptr[i] = len(attr_off), len(unk) // 2
        name_o, name_l = p, 0
        while p < e:
            fstart = p
            tag = data[p]
            p += 1
            if tag >= 0x80:  # tags (and most values) are one byte: calls were most of the time
                tag, p = _varint(data, fstart, e)
                if p < 0:
                    _fail(err, _vcode(p), i, fstart, 0, rec)
                    raise MalformedNode()
            fno, wt = tag >> 3, tag & 7
            if fno < 1 or fno > 10:
                q = _skip(data, p, e, wt)
                if q < 0:
                    _fail(err, -q, i, fstart, fno, rec)
                    raise MalformedNode()
                unk += (fstart, q - fstart)
                p = q
                continue
            if not _NODE_WT[fno] >> wt & 1:
                _fail(err, E_BAD_WIRE_TYPE, i, fstart, fno, rec)
                raise MalformedNode()
            vp = p
            v = data[p] if p < e else 0x80  # the value, or the length of a length-delimited one
            p += 1
            if v >= 0x80:
                v, p = _varint(data, vp, e)
                if p < 0:
                    _fail(err, _vcode(p), i, fstart, fno, rec)
                    raise MalformedNode()
            if wt == 2:
                if v > e - p:
                    _fail(err, E_FIELD_PAST_END, i, fstart, fno, rec)
                    raise MalformedNode()
                q = p + v
                if fno == 10:
                    key = data[p:q]
                    vals = seen.get(key)
                    if vals is None:
                        code, a_no, a_nl, kind, ival, fval = _decode_attr(data, p, q)
                        if code:
                            _fail(err, code, i, fstart, 10, rec)
                            raise MalformedNode()
                        row = _intern(attr_names, attr_names_rep, data, a_no, a_nl)
                        vals = seen[key] = (row, kind, ival, fval)
                    attr_off.append(p)
                    attr_len.append(q - p)
                    attr_vals.append(vals)
                elif fno == 2:
                    name_o, name_l = p, v
                elif fno == 8:
                    inp_off[i], inp_len[i] = p, v
                elif fno == 9:
                    out_off[i], out_len[i] = p, v
                else:
                    code = _check_packed(data, p, q)
                    if code:
                        _fail(err, code, i, fstart, fno, rec)
                        raise MalformedNode()
                    deps[fno - 4].extend((i, p, q))
                p = q
            elif fno == 1:
                node_id[i] = v
            elif fno == 3:
                t = _signed(v)  # an enum is an int32; negative ones are sign-extended
                if t < -128 or t > 127:  # beyond the int8 column: never wrapped silently
                    err[6] = t
                    _fail(err, E_NODE_TYPE_RANGE, i, fstart, fno, rec)
                    raise MalformedNode()
                node_type[i] = t
            elif fno == 6 or fno == 7:
                if v > MAX_MICROS:
                    err[6] = _signed(v)  # the caller reads the bits back as unsigned
                    _fail(err, E_TIME_RANGE, i, fstart, fno, rec)
                    raise MalformedNode()
                (start if fno == 6 else dur)[i] = v
            else:  # one unpacked dependency: its varint is a span of its own
                deps[fno - 4].extend((i, vp, p))
        name_idx[i] = _intern(names, names_rep, data, name_o, name_l)
    attr_ptr[n], unk_ptr[n] = len(attr_off), len(unk) // 2
    arr = np.frombuffer(data, dtype=np.uint8)
    ctrl_ptr, ctrl = _varints(arr, deps[0], n)
    data_ptr, data_deps = _varints(arr, deps[1], n)
    a_name, a_kind, a_int, a_float = zip(*attr_vals, strict=True) if attr_vals else ((),) * 4
    i64 = np.int64
    return [
        np.array(node_id, np.uint64), np.array(name_idx, np.int32), np.array(node_type, np.int8),
        np.array(start, np.uint64), np.array(dur, np.uint64), np.array(inp_off, i64),
        np.array(inp_len, i64), np.array(out_off, i64), np.array(out_len, i64),
        ctrl_ptr, ctrl, data_ptr, data_deps, np.array(attr_ptr, i64), np.array(attr_off, i64),
        np.array(attr_len, i64), np.array(a_name, np.int32), np.array(a_kind, np.int8),
        np.array(a_int, i64), np.array(a_float, np.float64), np.array(unk_ptr, i64),
        np.array(unk[0::2], i64), np.array(unk[1::2], i64),
        np.array(names_rep, i64).reshape(-1, 2), np.array(attr_names_rep, i64).reshape(-1, 2),
    ]  # fmt: skip
