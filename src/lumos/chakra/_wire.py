# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""The protobuf wire codec of Chakra files (Cython, pure-Python mode: see ``setup.py``),
independent of the protobuf runtime.

Reading is two kernels over one ``uint8`` buffer (the decompressed file or a memory map):

- :func:`scan_records` checks the framing (varint32 length + message) and counts the records.
- :func:`decode_nodes` walks every ``Node`` record once and fills columns, interning node and
  attribute names on the fly (:func:`lumos._intern.intern_span`, called in C). Strings,
  ``inputs``/``outputs`` and whole attribute messages are kept as spans (offset, length) into
  the buffer, so nothing is copied and nothing unknown is lost. When an output array is full it
  returns and the caller grows it and resumes.
- :func:`encode_nodes` writes nodes back in canonical protobuf order (field number order, proto3
  defaults omitted, packed repeated deps, attributes and unknown fields copied verbatim), which
  reproduces files written by the protobuf library byte for byte.

Every length read from the file is checked against the bytes left in its message before it
is used (a length of 2**63 or more would otherwise wrap negative and move the parser backwards),
and a varint longer than 10 bytes is an error, so every loop moves forward and ends.

Errors are reported through a small ``err`` array ``[code, record, byte offset, field]`` so
that the Python side can raise one :class:`~lumos.errors.ChakraFormatError` naming the file,
the byte offset and, when known, the node id.

The helpers the attribute value decoder shares (:mod:`lumos.chakra._wire_attr`: varints,
skipping a field, the wire type of an attribute field, bit casts) are declared in ``_wire.pxd``.
Values are unsigned 64-bit in C and Python ints when the source runs as Python, where every
step that C would wrap is masked or converted explicitly (:func:`_signed64`, :func:`_signed32`).
"""

from __future__ import annotations

import numpy as np

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

if not cython.compiled:
    from lumos._intern import intern_span

# error codes written to err[0] (the loops read the C copies below)
E_OK = 0
E_TRUNCATED_VARINT = 1
E_LENGTH_PAST_EOF = 2
E_RECORD_TOO_LONG = 3
E_BAD_WIRE_TYPE = 4
E_FIELD_PAST_END = 5
E_GROUP = 6
E_ATTR_WIRE_TYPE = 7
E_VARINT_TOO_LONG = 8
E_NODE_TYPE_RANGE = 9
E_TIME_RANGE = 10
E_RECORD_LIMIT = 11

#: Largest ``start_time_micros``/``duration_micros`` whose nanoseconds fit an int64 (292 years):
#: larger values are refused when read, as every consumer converts them to int64 nanoseconds.
MAX_MICROS = (2**63 - 1) // 1000

ERROR_TEXT = {
    E_TRUNCATED_VARINT: "truncated varint (file ends inside a number)",
    E_LENGTH_PAST_EOF: "record length prefix runs past the end of the file",
    E_RECORD_TOO_LONG: "record length prefix is larger than a varint32 allows",
    E_BAD_WIRE_TYPE: "field has the wrong wire type for its schema type",
    E_FIELD_PAST_END: "a field runs past the end of its message",
    E_GROUP: "deprecated protobuf group wire type (not a Chakra message)",
    E_ATTR_WIRE_TYPE: "attribute value has the wrong wire type for its declared kind",
    E_VARINT_TOO_LONG: "varint longer than 10 bytes",
    E_NODE_TYPE_RANGE: "node type {value} is not a NodeType (0..7)",
    E_RECORD_LIMIT: "record length prefix is above the record size limit",
    E_TIME_RANGE: "{value} us does not fit int64 nanoseconds (at most 9223372036854775 us)",
}


class MalformedNode(Exception):
    """Raised by :func:`decode_nodes` after it has filled ``err`` (the caller names the node)."""


# C copies of the constants for the loops (a module-level annotation would be a Python global)
_TRUNCATED_VARINT = cython.declare(cython.int, E_TRUNCATED_VARINT)
_LENGTH_PAST_EOF = cython.declare(cython.int, E_LENGTH_PAST_EOF)
_RECORD_TOO_LONG = cython.declare(cython.int, E_RECORD_TOO_LONG)
_BAD_WIRE_TYPE = cython.declare(cython.int, E_BAD_WIRE_TYPE)
_FIELD_PAST_END = cython.declare(cython.int, E_FIELD_PAST_END)
_GROUP = cython.declare(cython.int, E_GROUP)
_ATTR_WIRE_TYPE = cython.declare(cython.int, E_ATTR_WIRE_TYPE)
_VARINT_TOO_LONG = cython.declare(cython.int, E_VARINT_TOO_LONG)
_NODE_TYPE_RANGE = cython.declare(cython.int, E_NODE_TYPE_RANGE)
_TIME_RANGE = cython.declare(cython.int, E_TIME_RANGE)
_RECORD_LIMIT = cython.declare(cython.int, E_RECORD_LIMIT)
_MAX_MICROS = cython.declare(cython.ulonglong, MAX_MICROS)
# C's own 64-bit wrap, spelled out for the source run as Python; the sign bit; float64 bits
_U64 = cython.declare(cython.ulonglong, 0xFFFFFFFFFFFFFFFF)
_SIGN = cython.declare(cython.ulonglong, 0x8000000000000000)
_F64_EXP = cython.declare(cython.ulonglong, 0x7FF0000000000000)  # exponent all ones
_F64_QUIET = cython.declare(cython.ulonglong, 0x0008000000000000)  # a quiet NaN's bit
_I64_MAX = cython.declare(cython.longlong, 0x7FFFFFFFFFFFFFFF)
_LOW32 = cython.declare(cython.ulonglong, 0xFFFFFFFF)
_BIT31 = cython.declare(cython.longlong, 0x80000000)
_TWO32 = cython.declare(cython.longlong, 0x100000000)


# ---- shared helpers (declared in _wire.pxd) ---------------------------------------------------
@cython.ccall
@cython.exceptval(check=False)
def _varint(
    buf: cython.const[cython.uchar][::1], pos: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> tuple[cython.ulonglong, cython.Py_ssize_t]:
    """``(value, position after it)`` of the varint at ``buf[pos]``, ending by ``end``; the
    position is -1 when it is truncated, -2 when it is longer than 10 bytes."""
    result: cython.ulonglong = 0
    shift: cython.int = 0
    b: cython.ulonglong
    while pos < end:
        b = cython.cast(cython.ulonglong, buf[pos])
        pos += 1
        result |= ((b & 0x7F) << shift) & _U64
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            return result, -2
    return result, -1


@cython.ccall
@cython.exceptval(check=False)
def _vcode(p: cython.Py_ssize_t) -> cython.int:
    """Error code of a failed :func:`_varint` (its negative position)."""
    return _TRUNCATED_VARINT if p == -1 else _VARINT_TOO_LONG


@cython.ccall
@cython.exceptval(check=False)
def _skip(
    buf: cython.const[cython.uchar][::1],
    pos: cython.Py_ssize_t,
    end: cython.Py_ssize_t,
    wt: cython.longlong,
) -> cython.Py_ssize_t:
    """Position after a field value of wire type ``wt``; negative error code on failure."""
    ln: cython.ulonglong
    if wt == 0:
        ln, pos = _varint(buf, pos, end)
        if pos < 0:
            return -_vcode(pos)
        return pos
    if wt == 1:
        pos += 8
    elif wt == 5:
        pos += 4
    elif wt == 2:
        ln, pos = _varint(buf, pos, end)
        if pos < 0:
            return -_vcode(pos)
        if ln > cython.cast(cython.ulonglong, end - pos):
            return -_FIELD_PAST_END
        pos += cython.cast(cython.Py_ssize_t, ln)
    else:
        return -_GROUP
    if pos > end:
        return -_FIELD_PAST_END
    return pos


@cython.ccall
@cython.exceptval(check=False)
def _attr_wire_type(fno: cython.longlong) -> cython.longlong:
    """The wire type ``AttributeProto`` field ``fno`` must have (-1 outside 1..32): name, doc
    string, lists, strings and bytes 2; double, fixed64 and sfixed64 1; float, fixed32 and
    sfixed32 5; the varint kinds (int32 .. sint64, bool) 0."""
    if fno < 1 or fno > 32:
        return -1
    if fno <= 2 or fno % 2 == 0 or fno >= 29:
        return 2
    if fno == 3 or fno == 21 or fno == 25:
        return 1
    if fno == 5 or fno == 19 or fno == 23:
        return 5
    return 0


@cython.ccall
@cython.exceptval(check=False)
def _signed64(u: cython.ulonglong) -> cython.longlong:
    """The int64 with the bits of ``u`` (C's cast, which Python does not wrap)."""
    if u < _SIGN:
        return cython.cast(cython.longlong, u)
    return cython.cast(cython.longlong, u - _SIGN) - _I64_MAX - 1


@cython.ccall
@cython.exceptval(check=False)
def _signed32(u: cython.ulonglong) -> cython.longlong:
    """The int32 with the low 32 bits of ``u``."""
    low: cython.longlong = cython.cast(cython.longlong, u & _LOW32)
    return low - _TWO32 if low >= _BIT31 else low


@cython.ccall
@cython.exceptval(check=False)
def _le(
    buf: cython.const[cython.uchar][::1], p: cython.Py_ssize_t, width: cython.Py_ssize_t
) -> cython.ulonglong:
    """Little-endian unsigned integer of ``width`` bytes at ``buf[p]``."""
    v: cython.ulonglong = 0
    j: cython.Py_ssize_t
    for j in range(width):
        v |= cython.cast(cython.ulonglong, buf[p + j]) << (8 * j)
    return v


@cython.ccall
@cython.exceptval(check=False)
def _float64_bits(b: cython.ulonglong) -> cython.ulonglong:
    """The bits of the float64 that C's cast makes of the float32 whose bits are ``b`` (NaN
    payloads kept, the quiet bit set, subnormals made normal); integers only, so the source run
    as Python gives the same bits."""
    sign: cython.ulonglong = ((b >> 31) & 1) << 63
    exp: cython.longlong = cython.cast(cython.longlong, (b >> 23) & 0xFF)
    man: cython.ulonglong = b & 0x7FFFFF
    if exp == 0xFF:
        return sign | _F64_EXP | (_F64_QUIET | (man << 29) if man else 0)
    if exp == 0:
        if man == 0:
            return sign
        exp = 1
        while man & 0x800000 == 0:
            man <<= 1
            exp -= 1
        man &= 0x7FFFFF
    return sign | (cython.cast(cython.ulonglong, exp + 896) << 52) | (man << 29)


# ---- reading --------------------------------------------------------------------------------
@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _fail(
    err: cython.longlong[::1],
    code: cython.longlong,
    record: cython.longlong,
    offset: cython.longlong,
    field: cython.longlong,
) -> cython.void:
    err[0] = code
    err[1] = record
    err[2] = offset
    err[3] = field


def scan_records(
    buf: cython.const[cython.uchar][::1],
    pos: cython.Py_ssize_t,
    end: cython.Py_ssize_t,
    max_len: cython.longlong,
    fill: cython.bint,
    rec_off: cython.longlong[::1],
    rec_len: cython.longlong[::1],
    err: cython.longlong[::1],
) -> int:
    """Count (``fill=False``) or locate (``fill=True``) the length-delimited records in
    ``buf[pos:end]``. Returns the record count; on error sets ``err`` and returns the count so far
    (a record longer than ``max_len`` bytes is an error, its length in ``err[3]``). A zero-length
    record is an empty message, not the end of the file; ``err[4]`` counts those after the first
    record (empty Node records)."""
    n: cython.Py_ssize_t = 0
    empty: cython.Py_ssize_t = 0
    start: cython.Py_ssize_t
    ln: cython.ulonglong
    while pos < end:
        start = pos
        ln, pos = _varint(buf, pos, end)
        if pos < 0:
            _fail(err, _vcode(pos), n, start, 0)
            return n
        if ln > 0x7FFFFFFF:
            _fail(err, _RECORD_TOO_LONG, n, start, 0)
            return n
        if cython.cast(cython.longlong, ln) > max_len:
            _fail(err, _RECORD_LIMIT, n, start, cython.cast(cython.longlong, ln))
            return n
        if pos + cython.cast(cython.Py_ssize_t, ln) > end:
            _fail(err, _LENGTH_PAST_EOF, n, start, cython.cast(cython.longlong, ln))
            return n
        if fill:
            rec_off[n] = pos
            rec_len[n] = cython.cast(cython.longlong, ln)
        if ln == 0 and n > 0:
            empty += 1
        pos += cython.cast(cython.Py_ssize_t, ln)
        n += 1
    err[4] = empty
    return n


# decode_nodes status: 0 done, else which arrays are full (GROW_*); state st[...] indices (ST_*)
GROW_CTRL, GROW_DATA, GROW_ATTR, GROW_UNK, GROW_NAMES, GROW_ATTR_NAMES = range(1, 7)
ST_NODE, ST_CTRL, ST_DATA, ST_ATTR, ST_UNK, ST_NAMES, ST_ATTR_NAMES, ST_POS = range(8)
_GROW_CTRL = cython.declare(cython.int, GROW_CTRL)
_GROW_DATA = cython.declare(cython.int, GROW_DATA)
_GROW_ATTR = cython.declare(cython.int, GROW_ATTR)
_GROW_UNK = cython.declare(cython.int, GROW_UNK)
_GROW_NAMES = cython.declare(cython.int, GROW_NAMES)
_GROW_ATTR_NAMES = cython.declare(cython.int, GROW_ATTR_NAMES)
_ST_NODE = cython.declare(cython.int, ST_NODE)
_ST_CTRL = cython.declare(cython.int, ST_CTRL)
_ST_DATA = cython.declare(cython.int, ST_DATA)
_ST_ATTR = cython.declare(cython.int, ST_ATTR)
_ST_UNK = cython.declare(cython.int, ST_UNK)
_ST_NAMES = cython.declare(cython.int, ST_NAMES)
_ST_ATTR_NAMES = cython.declare(cython.int, ST_ATTR_NAMES)
_ST_POS = cython.declare(cython.int, ST_POS)

_MEMO = cython.declare(cython.int, 32)  # attribute positions remembered by decode_nodes


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _same(
    buf: cython.const[cython.uchar][::1],
    a: cython.Py_ssize_t,
    b: cython.Py_ssize_t,
    ln: cython.Py_ssize_t,
    ln_a: cython.Py_ssize_t,
) -> cython.bint:
    """Whether ``buf[a:a+ln_a]`` equals ``buf[b:b+ln]``."""
    j: cython.Py_ssize_t = 0
    if ln != ln_a:
        return False
    while j < ln and buf[a + j] == buf[b + j]:
        j += 1
    return j == ln


@cython.cfunc
@cython.exceptval(check=False)
def _decode_attr(
    buf: cython.const[cython.uchar][::1], p: cython.Py_ssize_t, e: cython.Py_ssize_t
) -> tuple[
    cython.int,
    cython.Py_ssize_t,
    cython.Py_ssize_t,
    cython.longlong,
    cython.longlong,
    cython.ulonglong,
]:
    """Decode one AttributeProto body ``buf[p:e]``: ``(error code, name offset, name length,
    kind, integer value, float value's bits)``; kind is the oneof field number, 0 when unset."""
    name_o: cython.Py_ssize_t = p
    name_l: cython.Py_ssize_t = 0
    kind: cython.longlong = 0
    ival: cython.longlong = 0
    fbits: cython.ulonglong = 0
    tag: cython.ulonglong
    v: cython.ulonglong
    fno: cython.longlong
    wt: cython.longlong
    width: cython.Py_ssize_t
    q: cython.Py_ssize_t
    while p < e:
        tag, p = _varint(buf, p, e)
        if p < 0:
            return _vcode(p), name_o, name_l, kind, ival, fbits
        fno = cython.cast(cython.longlong, tag >> 3)
        wt = cython.cast(cython.longlong, tag & 7)
        if fno <= 32 and fno >= 1 and wt != _attr_wire_type(fno):
            return _ATTR_WIRE_TYPE, name_o, name_l, kind, ival, fbits
        if fno == 1:
            v, p = _varint(buf, p, e)
            if p < 0:
                return _vcode(p), name_o, name_l, kind, ival, fbits
            if v > cython.cast(cython.ulonglong, e - p):
                return _FIELD_PAST_END, name_o, name_l, kind, ival, fbits
            name_o = p
            name_l = cython.cast(cython.Py_ssize_t, v)
            p += name_l
            continue
        if fno >= 3 and fno <= 32:
            kind = fno
            ival = 0
            fbits = 0
            if wt == 0:
                v, p = _varint(buf, p, e)
                if p < 0:
                    return _vcode(p), name_o, name_l, kind, ival, fbits
                if fno == 15 or fno == 17:  # zigzag
                    ival = cython.cast(cython.longlong, v >> 1) ^ -cython.cast(
                        cython.longlong, v & 1
                    )
                elif fno == 27:
                    ival = 1 if v != 0 else 0
                elif fno == 7:  # int32: the low 32 bits, signed
                    ival = _signed32(v)
                elif fno == 11:
                    ival = cython.cast(cython.longlong, v & _LOW32)
                else:
                    ival = _signed64(v)
                continue
            if wt == 1 or wt == 5:
                width = 8 if wt == 1 else 4
                if p + width > e:
                    return _FIELD_PAST_END, name_o, name_l, kind, ival, fbits
                v = _le(buf, p, width)
                p += width
                if fno == 3:
                    fbits = v
                elif fno == 5:
                    fbits = _float64_bits(v)
                elif fno == 19:
                    ival = cython.cast(cython.longlong, v)
                elif fno == 23:
                    ival = _signed32(v)
                else:
                    ival = _signed64(v)
                continue
        q = _skip(buf, p, e, wt)
        if q < 0:
            return -q, name_o, name_l, kind, ival, fbits
        p = q
    return 0, name_o, name_l, kind, ival, fbits


def decode_nodes(
    buf: cython.const[cython.uchar][::1],
    end: cython.Py_ssize_t,
    n: cython.Py_ssize_t,
    st: cython.longlong[::1],
    node_id: cython.ulonglong[::1],
    name_idx: cython.int[::1],
    node_type: cython.schar[::1],
    start_us: cython.ulonglong[::1],
    dur_us: cython.ulonglong[::1],
    inp_off: cython.longlong[::1],
    inp_len: cython.longlong[::1],
    out_off: cython.longlong[::1],
    out_len: cython.longlong[::1],
    ctrl_ptr: cython.longlong[::1],
    ctrl_val: cython.ulonglong[::1],
    data_ptr: cython.longlong[::1],
    data_val: cython.ulonglong[::1],
    attr_ptr: cython.longlong[::1],
    attr_off: cython.longlong[::1],
    attr_len: cython.longlong[::1],
    attr_name: cython.int[::1],
    attr_kind: cython.schar[::1],
    attr_int: cython.longlong[::1],
    attr_fbits: cython.ulonglong[::1],
    unk_ptr: cython.longlong[::1],
    unk_off: cython.longlong[::1],
    unk_len: cython.longlong[::1],
    names_tab: cython.int[::1],
    names_rep: cython.longlong[:, ::1],
    names_hash: cython.ulonglong[::1],
    attrs_tab: cython.int[::1],
    attrs_rep: cython.longlong[:, ::1],
    attrs_hash: cython.ulonglong[::1],
    err: cython.longlong[::1],
) -> int:
    """Decode Node records ``st[ST_NODE]..n-1``, the first at byte ``st[ST_POS]``, in one pass.

    The framing must have been checked by :func:`scan_records`. Node and attribute names are
    interned on the fly (open-addressing hash table, exact). When a repeated-item array (deps,
    attributes, unknown fields) or an interning table is full, the state ``st`` is left at the
    start of the current node and the ``GROW_*`` code of what to grow is returned: the caller
    grows it and calls again. Interned names are kept across such a restart (the counts
    ``st[ST_NAMES]``/``st[ST_ATTR_NAMES]`` are never rolled back; interning is idempotent).
    ``attr_fbits`` receives the bits of each attribute's float value (a ``float64`` column
    viewed as ``uint64``). Returns 0 when every node is decoded. A malformed node sets
    ``err = [code, row, byte offset, field, record offset, record length, value]`` (value: the
    out-of-range number of ``E_NODE_TYPE_RANGE``/``E_TIME_RANGE``) and raises
    :class:`MalformedNode`."""
    pos: cython.Py_ssize_t = st[_ST_POS]
    n_ctrl: cython.Py_ssize_t = st[_ST_CTRL]
    n_data: cython.Py_ssize_t = st[_ST_DATA]
    n_attr: cython.Py_ssize_t = st[_ST_ATTR]
    n_unk: cython.Py_ssize_t = st[_ST_UNK]
    n_names: cython.longlong = st[_ST_NAMES]
    n_attr_names: cython.longlong = st[_ST_ATTR_NAMES]
    memo_arr = np.full(_MEMO, -1, dtype=np.int64)  # attribute name row by position in a node
    memo: cython.longlong[::1] = memo_arr
    i: cython.Py_ssize_t
    p: cython.Py_ssize_t
    e: cython.Py_ssize_t
    q: cython.Py_ssize_t
    lim: cython.Py_ssize_t
    fstart: cython.Py_ssize_t
    name_o: cython.Py_ssize_t
    name_l: cython.Py_ssize_t
    a_no: cython.Py_ssize_t
    a_nl: cython.Py_ssize_t
    k: cython.Py_ssize_t
    back: cython.Py_ssize_t
    ln: cython.ulonglong
    tag: cython.ulonglong
    v: cython.ulonglong
    fno: cython.longlong
    wt: cython.longlong
    t: cython.longlong
    r: cython.longlong
    code: cython.int
    kind: cython.longlong
    ival: cython.longlong
    fbits: cython.ulonglong
    for i in range(st[_ST_NODE], n):
        st[_ST_NODE] = i
        st[_ST_POS] = pos
        st[_ST_CTRL] = n_ctrl
        st[_ST_DATA] = n_data
        st[_ST_ATTR] = n_attr
        st[_ST_UNK] = n_unk
        ln, p = _varint(buf, pos, end)
        e = p + cython.cast(cython.Py_ssize_t, ln)
        err[4] = p
        err[5] = e - p
        pos = e
        ctrl_ptr[i] = n_ctrl
        data_ptr[i] = n_data
        attr_ptr[i] = n_attr
        unk_ptr[i] = n_unk
        node_id[i] = 0
        node_type[i] = 0
        start_us[i] = 0
        dur_us[i] = 0
        inp_off[i] = 0
        inp_len[i] = -1
        out_off[i] = 0
        out_len[i] = -1
        name_o = p
        name_l = 0
        while p < e:
            fstart = p
            tag, p = _varint(buf, p, e)
            if p < 0:
                _fail(err, _vcode(p), i, fstart, 0)
                raise MalformedNode()
            fno = cython.cast(cython.longlong, tag >> 3)
            wt = cython.cast(cython.longlong, tag & 7)
            if fno == 1 or fno == 3 or fno == 6 or fno == 7:
                if wt != 0:
                    _fail(err, _BAD_WIRE_TYPE, i, fstart, fno)
                    raise MalformedNode()
                v, p = _varint(buf, p, e)
                if p < 0:
                    _fail(err, _vcode(p), i, fstart, fno)
                    raise MalformedNode()
                if fno == 1:
                    node_id[i] = v
                elif fno == 3:
                    t = _signed64(v)  # an enum is an int32; negative ones are sign-extended
                    if t < -128 or t > 127:  # beyond the int8 column: never wrapped silently
                        err[6] = t
                        _fail(err, _NODE_TYPE_RANGE, i, fstart, fno)
                        raise MalformedNode()
                    node_type[i] = cython.cast(cython.schar, t)
                else:
                    if v > _MAX_MICROS:
                        err[6] = _signed64(v)  # the caller reads the bits back as unsigned
                        _fail(err, _TIME_RANGE, i, fstart, fno)
                        raise MalformedNode()
                    if fno == 6:
                        start_us[i] = v
                    else:
                        dur_us[i] = v
            elif fno == 4 or fno == 5:
                if wt == 0:
                    q = p  # one unpacked value: the loop below runs once
                elif wt == 2:
                    v, p = _varint(buf, p, e)
                    if p < 0:
                        _fail(err, _vcode(p), i, fstart, fno)
                        raise MalformedNode()
                    if v > cython.cast(cython.ulonglong, e - p):
                        _fail(err, _FIELD_PAST_END, i, fstart, fno)
                        raise MalformedNode()
                    q = p + cython.cast(cython.Py_ssize_t, v)
                else:
                    _fail(err, _BAD_WIRE_TYPE, i, fstart, fno)
                    raise MalformedNode()
                lim = e if wt == 0 else q
                while p < q or wt == 0:
                    v, p = _varint(buf, p, lim)
                    if p < 0:
                        _fail(err, _vcode(p), i, fstart, fno)
                        raise MalformedNode()
                    if fno == 4:
                        if n_ctrl == ctrl_val.shape[0]:
                            return _grow(st, n_names, n_attr_names, _GROW_CTRL)
                        ctrl_val[n_ctrl] = v
                        n_ctrl += 1
                    else:
                        if n_data == data_val.shape[0]:
                            return _grow(st, n_names, n_attr_names, _GROW_DATA)
                        data_val[n_data] = v
                        n_data += 1
                    if wt == 0:
                        break
            elif fno == 2 or fno == 8 or fno == 9 or fno == 10:
                if wt != 2:
                    _fail(err, _BAD_WIRE_TYPE, i, fstart, fno)
                    raise MalformedNode()
                v, p = _varint(buf, p, e)
                if p < 0:
                    _fail(err, _vcode(p), i, fstart, fno)
                    raise MalformedNode()
                if v > cython.cast(cython.ulonglong, e - p):
                    _fail(err, _FIELD_PAST_END, i, fstart, fno)
                    raise MalformedNode()
                q = p + cython.cast(cython.Py_ssize_t, v)
                if fno == 2:
                    name_o = p
                    name_l = q - p
                elif fno == 8:
                    inp_off[i] = p
                    inp_len[i] = q - p
                elif fno == 9:
                    out_off[i] = p
                    out_len[i] = q - p
                else:
                    code, a_no, a_nl, kind, ival, fbits = _decode_attr(buf, p, q)
                    if code != 0:
                        _fail(err, code, i, fstart, 10)
                        raise MalformedNode()
                    if n_attr == attr_off.shape[0]:
                        return _grow(st, n_names, n_attr_names, _GROW_ATTR)
                    # a node's k-th attribute is mostly named as the previous node's k-th:
                    # comparing with that name costs a fraction of hashing and probing
                    k = n_attr - attr_ptr[i]
                    r = -1
                    if k < _MEMO:
                        r = memo[k]
                        if r >= 0 and not _same(buf, attrs_rep[r, 0], a_no, a_nl, attrs_rep[r, 1]):
                            r = -1
                    if r < 0:
                        r = intern_span(
                            buf, a_no, a_nl, attrs_tab, attrs_rep, attrs_hash, n_attr_names
                        )
                        if r < 0:
                            return _grow(st, n_names, n_attr_names, _GROW_ATTR_NAMES)
                        if r == n_attr_names:  # a new row (never rolled back: idempotent)
                            n_attr_names += 1
                        if k < _MEMO:
                            memo[k] = r
                    attr_off[n_attr] = p
                    attr_len[n_attr] = q - p
                    attr_name[n_attr] = cython.cast(cython.int, r)
                    attr_kind[n_attr] = cython.cast(cython.schar, kind)
                    attr_int[n_attr] = ival
                    attr_fbits[n_attr] = fbits
                    n_attr += 1
                p = q
            else:
                q = _skip(buf, p, e, wt)
                if q < 0:
                    _fail(err, -q, i, fstart, fno)
                    raise MalformedNode()
                if n_unk == unk_off.shape[0]:
                    return _grow(st, n_names, n_attr_names, _GROW_UNK)
                unk_off[n_unk] = fstart
                unk_len[n_unk] = q - fstart
                n_unk += 1
                p = q
        r = -1
        for back in range(1, 3):  # runs of a few repeating names are common
            if r < 0 and i >= back:
                r = name_idx[i - back]
                if not _same(buf, names_rep[r, 0], name_o, name_l, names_rep[r, 1]):
                    r = -1
        if r < 0:
            r = intern_span(buf, name_o, name_l, names_tab, names_rep, names_hash, n_names)
            if r < 0:
                return _grow(st, n_names, n_attr_names, _GROW_NAMES)
            if r == n_names:
                n_names += 1
        name_idx[i] = cython.cast(cython.int, r)
    ctrl_ptr[n] = n_ctrl
    data_ptr[n] = n_data
    attr_ptr[n] = n_attr
    unk_ptr[n] = n_unk
    st[_ST_NODE] = n
    st[_ST_POS] = pos
    st[_ST_CTRL] = n_ctrl
    st[_ST_DATA] = n_data
    st[_ST_ATTR] = n_attr
    st[_ST_UNK] = n_unk
    st[_ST_NAMES] = n_names
    st[_ST_ATTR_NAMES] = n_attr_names
    return 0


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _grow(
    st: cython.longlong[::1],
    n_names: cython.longlong,
    n_attr_names: cython.longlong,
    code: cython.int,
) -> cython.int:
    """Return ``code`` (a ``GROW_*``) from :func:`decode_nodes`, the node counters left at the
    start of the current node and the interned rows kept."""
    st[_ST_NAMES] = n_names
    st[_ST_ATTR_NAMES] = n_attr_names
    return code


# ---- writing --------------------------------------------------------------------------------
@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _vsize(v: cython.ulonglong) -> cython.Py_ssize_t:
    n: cython.Py_ssize_t = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _put(out: cython.uchar[::1], p: cython.Py_ssize_t, v: cython.ulonglong) -> cython.Py_ssize_t:
    while v >= 0x80:
        out[p] = cython.cast(cython.uchar, (v & 0x7F) | 0x80)
        v >>= 7
        p += 1
    out[p] = cython.cast(cython.uchar, v)
    return p + 1


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _copy(
    out: cython.uchar[::1],
    p: cython.Py_ssize_t,
    src: cython.const[cython.uchar][::1],
    a: cython.Py_ssize_t,
    ln: cython.Py_ssize_t,
) -> cython.Py_ssize_t:
    """Copy ``src[a:a+ln]`` to ``out[p:]``; the position after it."""
    j: cython.Py_ssize_t
    for j in range(ln):
        out[p + j] = src[a + j]
    return p + ln


@cython.cfunc
@cython.exceptval(check=False)
def _packed_size(
    ptr: cython.const[cython.longlong][::1],
    val: cython.const[cython.ulonglong][::1],
    i: cython.Py_ssize_t,
) -> cython.Py_ssize_t:
    b: cython.Py_ssize_t = 0
    k: cython.Py_ssize_t
    for k in range(ptr[i], ptr[i + 1]):
        b += _vsize(cython.cast(cython.ulonglong, val[k]))
    return 0 if b == 0 else 1 + _vsize(b) + b


@cython.cfunc
@cython.exceptval(check=False)
def _put_packed(
    out: cython.uchar[::1],
    p: cython.Py_ssize_t,
    tag: cython.uchar,
    ptr: cython.const[cython.longlong][::1],
    val: cython.const[cython.ulonglong][::1],
    i: cython.Py_ssize_t,
) -> cython.Py_ssize_t:
    b: cython.Py_ssize_t = 0
    k: cython.Py_ssize_t
    for k in range(ptr[i], ptr[i + 1]):
        b += _vsize(cython.cast(cython.ulonglong, val[k]))
    if b == 0:
        return p
    out[p] = tag
    p = _put(out, p + 1, b)
    for k in range(ptr[i], ptr[i + 1]):
        p = _put(out, p, cython.cast(cython.ulonglong, val[k]))
    return p


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _u64(v: cython.longlong) -> cython.ulonglong:
    """``v`` as protobuf writes a negative int32/int64 (its 64 bits, sign-extended)."""
    return cython.cast(cython.ulonglong, cython.cast(cython.longlong, v) & _U64)


def encode_nodes(
    lo: cython.Py_ssize_t,
    hi: cython.Py_ssize_t,
    node_id: cython.const[cython.ulonglong][::1],
    name_idx: cython.const[cython.int][::1],
    names_blob: cython.const[cython.uchar][::1],
    names_off: cython.const[cython.longlong][::1],
    node_type: cython.const[cython.schar][::1],
    start_us: cython.const[cython.ulonglong][::1],
    dur_us: cython.const[cython.ulonglong][::1],
    blob: cython.const[cython.uchar][::1],
    inp_off: cython.const[cython.longlong][::1],
    inp_len: cython.const[cython.longlong][::1],
    out_off: cython.const[cython.longlong][::1],
    out_len: cython.const[cython.longlong][::1],
    ctrl_ptr: cython.const[cython.longlong][::1],
    ctrl_val: cython.const[cython.ulonglong][::1],
    data_ptr: cython.const[cython.longlong][::1],
    data_val: cython.const[cython.ulonglong][::1],
    attr_ptr: cython.const[cython.longlong][::1],
    attr_off: cython.const[cython.longlong][::1],
    attr_len: cython.const[cython.longlong][::1],
    unk_ptr: cython.const[cython.longlong][::1],
    unk_off: cython.const[cython.longlong][::1],
    unk_len: cython.const[cython.longlong][::1],
) -> np.ndarray:
    """Length-prefixed records for nodes ``lo..hi-1`` as one ``uint8`` array.

    ``inp_len``/``out_len`` of -1 mean the message field is absent; ``blob`` holds the bytes
    that the ``*_off`` spans point at (IOInfo bodies, attribute bodies, unknown fields)."""
    total: cython.Py_ssize_t = 0
    sizes_arr = np.empty(hi - lo, dtype=np.int64)
    sizes: cython.longlong[::1] = sizes_arr
    i: cython.Py_ssize_t
    k: cython.Py_ssize_t
    s: cython.Py_ssize_t
    a: cython.Py_ssize_t
    nl: cython.Py_ssize_t
    ln: cython.Py_ssize_t
    for i in range(lo, hi):
        s = 0
        if node_id[i] != 0:
            s += 1 + _vsize(cython.cast(cython.ulonglong, node_id[i]))
        nl = names_off[name_idx[i] + 1] - names_off[name_idx[i]]
        if nl > 0:
            s += 1 + _vsize(nl) + nl
        if node_type[i] != 0:
            s += 1 + _vsize(_u64(node_type[i]))
        s += _packed_size(ctrl_ptr, ctrl_val, i)
        s += _packed_size(data_ptr, data_val, i)
        if start_us[i] != 0:
            s += 1 + _vsize(cython.cast(cython.ulonglong, start_us[i]))
        if dur_us[i] != 0:
            s += 1 + _vsize(cython.cast(cython.ulonglong, dur_us[i]))
        if inp_len[i] >= 0:
            s += 1 + _vsize(inp_len[i]) + inp_len[i]
        if out_len[i] >= 0:
            s += 1 + _vsize(out_len[i]) + out_len[i]
        for k in range(attr_ptr[i], attr_ptr[i + 1]):
            s += 1 + _vsize(attr_len[k]) + attr_len[k]
        for k in range(unk_ptr[i], unk_ptr[i + 1]):
            s += unk_len[k]
        sizes[i - lo] = s
        total += _vsize(s) + s
    out_arr = np.empty(total, dtype=np.uint8)
    out: cython.uchar[::1] = out_arr
    p: cython.Py_ssize_t = 0
    for i in range(lo, hi):
        p = _put(out, p, sizes[i - lo])
        if node_id[i] != 0:
            out[p] = 0x08
            p = _put(out, p + 1, cython.cast(cython.ulonglong, node_id[i]))
        a = names_off[name_idx[i]]
        nl = names_off[name_idx[i] + 1] - a
        if nl > 0:
            out[p] = 0x12
            p = _copy(out, _put(out, p + 1, nl), names_blob, a, nl)
        if node_type[i] != 0:
            out[p] = 0x18
            p = _put(out, p + 1, _u64(node_type[i]))
        p = _put_packed(out, p, 0x22, ctrl_ptr, ctrl_val, i)
        p = _put_packed(out, p, 0x2A, data_ptr, data_val, i)
        if start_us[i] != 0:
            out[p] = 0x30
            p = _put(out, p + 1, cython.cast(cython.ulonglong, start_us[i]))
        if dur_us[i] != 0:
            out[p] = 0x38
            p = _put(out, p + 1, cython.cast(cython.ulonglong, dur_us[i]))
        if inp_len[i] >= 0:
            out[p] = 0x42
            p = _copy(out, _put(out, p + 1, inp_len[i]), blob, inp_off[i], inp_len[i])
        if out_len[i] >= 0:
            out[p] = 0x4A
            p = _copy(out, _put(out, p + 1, out_len[i]), blob, out_off[i], out_len[i])
        for k in range(attr_ptr[i], attr_ptr[i + 1]):
            out[p] = 0x52
            ln = attr_len[k]
            p = _copy(out, _put(out, p + 1, ln), blob, attr_off[k], ln)
        for k in range(unk_ptr[i], unk_ptr[i + 1]):
            p = _copy(out, p, blob, unk_off[k], unk_len[k])
    return out_arr
