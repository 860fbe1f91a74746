# numba, not mypy, types these kernels (scalars change between Python ints and numpy ints):
# mypy: disable-error-code="assignment, call-arg"
"""Compiled protobuf wire codec for Chakra files (numba), independent of the protobuf runtime.

Reading is two kernels over one ``uint8`` buffer (the decompressed file or a memory map):

- :func:`scan_records` checks the framing (varint32 length + message) and counts the records.
- :func:`decode_nodes` walks every ``Node`` record once and fills columns, interning node and
  attribute names on the fly. Strings, ``inputs``/``outputs`` and whole attribute messages are
  kept as spans (offset, length) into the buffer, so nothing is copied and nothing unknown is
  lost. When an output array is full it returns and the caller grows it and resumes.
- :func:`encode_nodes` writes nodes back in canonical protobuf order (field number order, proto3
  defaults omitted, packed repeated deps, attributes and unknown fields copied verbatim), which
  reproduces files written by the protobuf library byte for byte.

Every length read from the file is checked against the bytes left in its message before it
is used (a length of 2**63 or more would otherwise wrap negative and move the parser backwards),
and a varint longer than 10 bytes is an error, so every loop moves forward and ends.

Errors are reported through a small ``err`` array ``[code, record, byte offset, field]`` so
that the Python side can raise one :class:`~lumos.errors.ChakraFormatError` naming the file,
the byte offset and, when known, the node id.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lumos._jit import borrow as _borrow
from lumos._spans import intern_span as _intern

# error codes written to err[0]
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


U7F = np.uint64(0x7F)
U80 = np.uint64(0x80)

# expected wire type of each AttributeProto field number 0..32 (-1: any)
_ATTR_WT = np.array(
    [-1, 2, 2]
    + [1, 2, 5, 2]  # double, list, float, list
    + [0, 2] * 6  # int32 int64 uint32 uint64 sint32 sint64
    + [5, 2, 1, 2, 5, 2, 1, 2]  # fixed32 fixed64 sfixed32 sfixed64
    + [0, 2, 2, 2, 2, 2],  # bool, string, bytes (+ lists)
    dtype=np.int64,
)


@njit(cache=True, inline="always")  # inlined by numba: a call per varint costs 10x the decode
def _varint(buf, pos, end):  # pragma: no cover - compiled
    result = np.uint64(0)
    shift = np.uint64(0)
    while pos < end:
        b = np.uint64(buf[pos])
        pos += 1
        result |= (b & U7F) << shift
        if b < U80:
            return result, pos
        shift += np.uint64(7)
        if shift > np.uint64(63):
            return result, -2
    return result, -1


@njit(cache=True, inline="always")
def _vcode(p):  # pragma: no cover - compiled
    """Error code of a failed :func:`_varint` (its negative position)."""
    return E_TRUNCATED_VARINT if p == -1 else E_VARINT_TOO_LONG


@njit(cache=True, inline="always")
def _fail(err, code, record, offset, field):  # pragma: no cover - compiled
    err[0] = code
    err[1] = record
    err[2] = offset
    err[3] = field


@njit(cache=True, inline="always")
def _skip(buf, pos, end, wt):  # pragma: no cover - compiled
    """Position after a field value of wire type ``wt``; negative error code on failure."""
    if wt == 0:
        _, pos = _varint(buf, pos, end)
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
        if ln > np.uint64(end - pos):
            return -E_FIELD_PAST_END
        pos += np.int64(ln)
    else:
        return -E_GROUP
    if pos > end:
        return -E_FIELD_PAST_END
    return pos


@njit(cache=True)
def scan_records(buf, pos, end, max_len, fill, rec_off, rec_len, err):  # pragma: no cover
    """Count (``fill=False``) or locate (``fill=True``) the length-delimited records in
    ``buf[pos:end]``. Returns the record count; on error sets ``err`` and returns the count so far
    (a record longer than ``max_len`` bytes is an error, its length in ``err[3]``). A zero-length
    record is an empty message, not the end of the file; ``err[4]`` counts those after the first
    record (empty Node records)."""
    n = 0
    empty = 0
    while pos < end:
        start = pos
        ln, pos = _varint(buf, pos, end)
        if pos < 0:
            _fail(err, _vcode(pos), n, start, 0)
            return n
        if ln > np.uint64(0x7FFFFFFF):
            _fail(err, E_RECORD_TOO_LONG, n, start, 0)
            return n
        if np.int64(ln) > max_len:
            _fail(err, E_RECORD_LIMIT, n, start, np.int64(ln))
            return n
        if pos + np.int64(ln) > end:
            _fail(err, E_LENGTH_PAST_EOF, n, start, np.int64(ln))
            return n
        if fill:
            rec_off[n] = pos
            rec_len[n] = np.int64(ln)
        if ln == np.uint64(0) and n > 0:
            empty += 1
        pos += np.int64(ln)
        n += 1
    err[4] = empty
    return n


# decode_nodes status: 0 done, else which arrays are full (see ST_*); state st[...] indices
GROW_CTRL = 1
GROW_DATA = 2
GROW_ATTR = 3
GROW_UNK = 4
GROW_NAMES = 5
GROW_ATTR_NAMES = 6
ST_NODE, ST_CTRL, ST_DATA, ST_ATTR, ST_UNK, ST_NAMES, ST_ATTR_NAMES, ST_POS = range(8)


@njit(cache=True)
def decode_nodes(  # pragma: no cover - compiled
    buf,
    end,
    n,
    st,
    node_id,
    name_idx,
    node_type,
    start_us,
    dur_us,
    inp_off,
    inp_len,
    out_off,
    out_len,
    ctrl_ptr,
    ctrl_val,
    data_ptr,
    data_val,
    attr_ptr,
    attr_off,
    attr_len,
    attr_name,
    attr_kind,
    attr_int,
    attr_float,
    unk_ptr,
    unk_off,
    unk_len,
    names_tab,
    names_rep,
    names_hash,
    attrs_tab,
    attrs_rep,
    attrs_hash,
    tmp8,
    err,
):
    """Decode Node records ``st[ST_NODE]..n-1``, the first at byte ``st[ST_POS]``, in one pass.

    The framing must have been checked by :func:`scan_records`. Node and attribute names are
    interned on the fly (open-addressing hash table, exact). When a repeated-item array (deps,
    attributes, unknown fields) or an interning table is full, the state ``st`` is left at the
    start of the current node and the ``GROW_*`` code of what to grow is returned: the caller
    grows it and calls again, so that no array is ever reallocated in here (numba would then
    reference-count every access). Interned names are kept across such a restart (the counts
    ``st[ST_NAMES]``/``st[ST_ATTR_NAMES]`` are never rolled back; interning is idempotent).
    Returns 0 when every node is decoded. A malformed node sets ``err = [code, row, byte
    offset, field, record offset, record length, value]`` (value: the out-of-range number of
    ``E_NODE_TYPE_RANGE``/``E_TIME_RANGE``) and raises :class:`MalformedNode`."""
    pos = st[ST_POS]
    n_ctrl = st[ST_CTRL]
    n_data = st[ST_DATA]
    n_attr = st[ST_ATTR]
    n_unk = st[ST_UNK]
    n_names = st[ST_NAMES]
    n_attr_names = st[ST_ATTR_NAMES]
    buf = _borrow(buf)
    names_tab = _borrow(names_tab)
    names_rep = _borrow(names_rep)
    names_hash = _borrow(names_hash)
    attrs_tab = _borrow(attrs_tab)
    attrs_rep = _borrow(attrs_rep)
    attrs_hash = _borrow(attrs_hash)
    tmp8 = _borrow(tmp8)
    status = 0
    memo = np.full(_MEMO, -1, dtype=np.int64)  # attribute name row by position in a node
    for i in range(st[ST_NODE], n):
        st[ST_NODE] = i
        st[ST_POS] = pos
        st[ST_CTRL] = n_ctrl
        st[ST_DATA] = n_data
        st[ST_ATTR] = n_attr
        st[ST_UNK] = n_unk
        ln, p = _varint(buf, pos, end)
        e = p + np.int64(ln)
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
        name_l = np.int64(0)
        while p < e:
            fstart = p
            tag, p = _varint(buf, p, e)
            if p < 0:
                _fail(err, _vcode(p), i, fstart, 0)
                raise MalformedNode()
            fno = np.int64(tag >> np.uint64(3))
            wt = np.int64(tag & np.uint64(7))
            if fno == 1 or fno == 3 or fno == 6 or fno == 7:
                if wt != 0:
                    _fail(err, E_BAD_WIRE_TYPE, i, fstart, fno)
                    raise MalformedNode()
                v, p = _varint(buf, p, e)
                if p < 0:
                    _fail(err, _vcode(p), i, fstart, fno)
                    raise MalformedNode()
                if fno == 1:
                    node_id[i] = v
                elif fno == 3:
                    t = np.int64(v)  # an enum is an int32; negative ones are sign-extended
                    if t < -128 or t > 127:  # beyond the int8 column: never wrapped silently
                        err[6] = t
                        _fail(err, E_NODE_TYPE_RANGE, i, fstart, fno)
                        raise MalformedNode()
                    node_type[i] = t
                else:
                    if v > np.uint64(MAX_MICROS):
                        err[6] = np.int64(v)  # the caller reads the bits back as unsigned
                        _fail(err, E_TIME_RANGE, i, fstart, fno)
                        raise MalformedNode()
                    if fno == 6:
                        start_us[i] = v
                    else:
                        dur_us[i] = v
            elif fno == 4 or fno == 5:
                if wt == 0:
                    q = p  # one unpacked value: the loop below runs once
                elif wt == 2:
                    lv, p = _varint(buf, p, e)
                    if p < 0:
                        _fail(err, _vcode(p), i, fstart, fno)
                        raise MalformedNode()
                    if lv > np.uint64(e - p):
                        _fail(err, E_FIELD_PAST_END, i, fstart, fno)
                        raise MalformedNode()
                    q = p + np.int64(lv)
                else:
                    _fail(err, E_BAD_WIRE_TYPE, i, fstart, fno)
                    raise MalformedNode()
                lim = e if wt == 0 else q
                while p < q or wt == 0:
                    v, p = _varint(buf, p, lim)
                    if p < 0:
                        _fail(err, _vcode(p), i, fstart, fno)
                        raise MalformedNode()
                    if fno == 4:
                        if n_ctrl == ctrl_val.shape[0]:
                            return GROW_CTRL
                        ctrl_val[n_ctrl] = v
                        n_ctrl += 1
                    else:
                        if n_data == data_val.shape[0]:
                            return GROW_DATA
                        data_val[n_data] = v
                        n_data += 1
                    if wt == 0:
                        break
            elif fno == 2 or fno == 8 or fno == 9 or fno == 10:
                if wt != 2:
                    _fail(err, E_BAD_WIRE_TYPE, i, fstart, fno)
                    raise MalformedNode()
                lv, p = _varint(buf, p, e)
                if p < 0:
                    _fail(err, _vcode(p), i, fstart, fno)
                    raise MalformedNode()
                if lv > np.uint64(e - p):
                    _fail(err, E_FIELD_PAST_END, i, fstart, fno)
                    raise MalformedNode()
                q = p + np.int64(lv)
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
                    code, a_no, a_nl, kind, ival, fval = _decode_attr(buf, p, q, tmp8)
                    if code != 0:
                        _fail(err, code, i, fstart, 10)
                        raise MalformedNode()
                    if n_attr == attr_off.shape[0]:
                        return GROW_ATTR
                    # a node's k-th attribute is mostly named as the previous node's k-th:
                    # comparing with that name costs a fraction of hashing and probing
                    k = n_attr - attr_ptr[i]
                    r = -1
                    if k < _MEMO:
                        r = memo[k]
                        if r >= 0 and not _same(buf, attrs_rep[r, 0], a_no, a_nl, attrs_rep[r, 1]):
                            r = -1
                    if r < 0:
                        r, n_attr_names = _intern(
                            buf, a_no, a_nl, attrs_tab, attrs_rep, attrs_hash, n_attr_names
                        )
                        st[ST_ATTR_NAMES] = n_attr_names  # never rolled back: idempotent
                        if r < 0:
                            return GROW_ATTR_NAMES
                        if k < _MEMO:
                            memo[k] = r
                    attr_off[n_attr] = p
                    attr_len[n_attr] = q - p
                    attr_name[n_attr] = r
                    attr_kind[n_attr] = kind
                    attr_int[n_attr] = ival
                    attr_float[n_attr] = fval
                    n_attr += 1
                p = q
            else:
                q = _skip(buf, p, e, wt)
                if q < 0:
                    _fail(err, -q, i, fstart, fno)
                    raise MalformedNode()
                if n_unk == unk_off.shape[0]:
                    return GROW_UNK
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
            r, n_names = _intern(buf, name_o, name_l, names_tab, names_rep, names_hash, n_names)
            st[ST_NAMES] = n_names
            if r < 0:
                return GROW_NAMES
        name_idx[i] = r
    ctrl_ptr[n] = n_ctrl
    data_ptr[n] = n_data
    attr_ptr[n] = n_attr
    unk_ptr[n] = n_unk
    st[ST_NODE] = n
    st[ST_POS] = pos
    st[ST_CTRL] = n_ctrl
    st[ST_DATA] = n_data
    st[ST_ATTR] = n_attr
    st[ST_UNK] = n_unk
    st[ST_NAMES] = n_names
    st[ST_ATTR_NAMES] = n_attr_names
    return status


_MEMO = 32  # attribute positions remembered by decode_nodes


@njit(cache=True, inline="always")
def _same(buf, a, b, ln, ln_a):  # pragma: no cover - compiled
    """Whether ``buf[a:a+ln_a]`` equals ``buf[b:b+ln]``."""
    same = ln == ln_a
    j = 0
    while same and j < ln:
        same = buf[a + j] == buf[b + j]
        j += 1
    return same


@njit(cache=True, inline="always")
def _decode_attr(buf, p, e, tmp8):  # pragma: no cover - compiled
    """Decode one AttributeProto body ``buf[p:e]``: ``(error code, name offset, name length,
    kind, integer value, float value)``; kind is the oneof field number, 0 when unset."""
    name_o = p
    name_l = np.int64(0)
    kind = np.int64(0)
    ival = np.int64(0)
    fval = 0.0
    while p < e:
        tag, p = _varint(buf, p, e)
        if p < 0:
            return _vcode(p), name_o, name_l, kind, ival, fval
        fno = np.int64(tag >> np.uint64(3))
        wt = np.int64(tag & np.uint64(7))
        if fno <= 32 and fno >= 1 and wt != _ATTR_WT[fno]:
            return E_ATTR_WIRE_TYPE, name_o, name_l, kind, ival, fval
        if fno == 1:
            ln, p = _varint(buf, p, e)
            if p < 0:
                return _vcode(p), name_o, name_l, kind, ival, fval
            if ln > np.uint64(e - p):
                return E_FIELD_PAST_END, name_o, name_l, kind, ival, fval
            name_o = p
            name_l = np.int64(ln)
            p += name_l
            continue
        if fno >= 3 and fno <= 32:
            kind = fno
            ival = np.int64(0)
            fval = 0.0
            if wt == 0:
                v, p = _varint(buf, p, e)
                if p < 0:
                    return _vcode(p), name_o, name_l, kind, ival, fval
                if fno == 15 or fno == 17:  # zigzag
                    ival = np.int64(v >> np.uint64(1)) ^ -np.int64(v & np.uint64(1))
                elif fno == 27:
                    ival = 1 if v != np.uint64(0) else 0
                elif fno == 7:  # int32: the low 32 bits, signed
                    ival = np.int64(np.int32(np.uint32(v & np.uint64(0xFFFFFFFF))))
                elif fno == 11:
                    ival = np.int64(v & np.uint64(0xFFFFFFFF))
                else:
                    ival = np.int64(v)
                continue
            if wt == 1 or wt == 5:
                width = 8 if wt == 1 else 4
                if p + width > e:
                    return E_FIELD_PAST_END, name_o, name_l, kind, ival, fval
                for j in range(8):
                    tmp8[j] = buf[p + j] if j < width else 0
                p += width
                if fno == 3:
                    fval = tmp8.view(np.float64)[0]
                elif fno == 5:
                    fval = np.float64(tmp8[:4].view(np.float32)[0])
                elif fno == 19:
                    ival = np.int64(tmp8[:4].view(np.uint32)[0])
                elif fno == 23:
                    ival = np.int64(tmp8[:4].view(np.int32)[0])
                else:
                    ival = tmp8.view(np.int64)[0]
                continue
        q = _skip(buf, p, e, wt)
        if q < 0:
            return -q, name_o, name_l, kind, ival, fval
        p = q
    return 0, name_o, name_l, kind, ival, fval


@njit(cache=True)
def _vsize(v):  # pragma: no cover - compiled
    n = 1
    while v >= U80:
        v >>= np.uint64(7)
        n += 1
    return n


@njit(cache=True)
def _put(out, p, v):  # pragma: no cover - compiled
    while v >= U80:
        out[p] = np.uint8((v & U7F) | U80)
        v >>= np.uint64(7)
        p += 1
    out[p] = np.uint8(v)
    return p + 1


@njit(cache=True)
def _packed_size(ptr, val, i):  # pragma: no cover - compiled
    b = 0
    for k in range(ptr[i], ptr[i + 1]):
        b += _vsize(val[k])
    return 0 if b == 0 else 1 + _vsize(np.uint64(b)) + b


@njit(cache=True)
def _put_packed(out, p, tag, ptr, val, i):  # pragma: no cover - compiled
    b = 0
    for k in range(ptr[i], ptr[i + 1]):
        b += _vsize(val[k])
    if b == 0:
        return p
    out[p] = tag
    p = _put(out, p + 1, np.uint64(b))
    for k in range(ptr[i], ptr[i + 1]):
        p = _put(out, p, val[k])
    return p


@njit(cache=True)
def _node_size(  # pragma: no cover - compiled
    i,
    node_id,
    name_idx,
    names_off,
    node_type,
    start_us,
    dur_us,
    inp_len,
    out_len,
    ctrl_ptr,
    ctrl_val,
    data_ptr,
    data_val,
    attr_ptr,
    attr_len,
    unk_ptr,
    unk_len,
):
    s = 0
    if node_id[i] != 0:
        s += 1 + _vsize(node_id[i])
    nl = names_off[name_idx[i] + 1] - names_off[name_idx[i]]
    if nl > 0:
        s += 1 + _vsize(np.uint64(nl)) + nl
    if node_type[i] != 0:
        s += 1 + _vsize(np.uint64(node_type[i]))
    s += _packed_size(ctrl_ptr, ctrl_val, i)
    s += _packed_size(data_ptr, data_val, i)
    if start_us[i] != 0:
        s += 1 + _vsize(start_us[i])
    if dur_us[i] != 0:
        s += 1 + _vsize(dur_us[i])
    if inp_len[i] >= 0:
        s += 1 + _vsize(np.uint64(inp_len[i])) + inp_len[i]
    if out_len[i] >= 0:
        s += 1 + _vsize(np.uint64(out_len[i])) + out_len[i]
    for k in range(attr_ptr[i], attr_ptr[i + 1]):
        s += 1 + _vsize(np.uint64(attr_len[k])) + attr_len[k]
    for k in range(unk_ptr[i], unk_ptr[i + 1]):
        s += unk_len[k]
    return s


@njit(cache=True)
def encode_nodes(  # pragma: no cover - compiled
    lo,
    hi,
    node_id,
    name_idx,
    names_blob,
    names_off,
    node_type,
    start_us,
    dur_us,
    blob,
    inp_off,
    inp_len,
    out_off,
    out_len,
    ctrl_ptr,
    ctrl_val,
    data_ptr,
    data_val,
    attr_ptr,
    attr_off,
    attr_len,
    unk_ptr,
    unk_off,
    unk_len,
):
    """Length-prefixed records for nodes ``lo..hi-1`` as one ``uint8`` array.

    ``inp_len``/``out_len`` of -1 mean the message field is absent; ``blob`` holds the bytes
    that the ``*_off`` spans point at (IOInfo bodies, attribute bodies, unknown fields)."""
    total = 0
    sizes = np.empty(hi - lo, dtype=np.int64)
    for i in range(lo, hi):
        s = _node_size(
            i,
            node_id,
            name_idx,
            names_off,
            node_type,
            start_us,
            dur_us,
            inp_len,
            out_len,
            ctrl_ptr,
            ctrl_val,
            data_ptr,
            data_val,
            attr_ptr,
            attr_len,
            unk_ptr,
            unk_len,
        )
        sizes[i - lo] = s
        total += _vsize(np.uint64(s)) + s
    out = np.empty(total, dtype=np.uint8)
    p = 0
    for i in range(lo, hi):
        p = _put(out, p, np.uint64(sizes[i - lo]))
        if node_id[i] != 0:
            out[p] = 0x08
            p = _put(out, p + 1, node_id[i])
        a = names_off[name_idx[i]]
        nl = names_off[name_idx[i] + 1] - a
        if nl > 0:
            out[p] = 0x12
            p = _put(out, p + 1, np.uint64(nl))
            out[p : p + nl] = names_blob[a : a + nl]
            p += nl
        if node_type[i] != 0:
            out[p] = 0x18
            p = _put(out, p + 1, np.uint64(node_type[i]))
        p = _put_packed(out, p, 0x22, ctrl_ptr, ctrl_val, i)
        p = _put_packed(out, p, 0x2A, data_ptr, data_val, i)
        if start_us[i] != 0:
            out[p] = 0x30
            p = _put(out, p + 1, start_us[i])
        if dur_us[i] != 0:
            out[p] = 0x38
            p = _put(out, p + 1, dur_us[i])
        for tag, o, ln in ((0x42, inp_off[i], inp_len[i]), (0x4A, out_off[i], out_len[i])):
            if ln >= 0:
                out[p] = tag
                p = _put(out, p + 1, np.uint64(ln))
                out[p : p + ln] = blob[o : o + ln]
                p += ln
        for k in range(attr_ptr[i], attr_ptr[i + 1]):
            out[p] = 0x52
            ln = attr_len[k]
            p = _put(out, p + 1, np.uint64(ln))
            out[p : p + ln] = blob[attr_off[k] : attr_off[k] + ln]
            p += ln
        for k in range(unk_ptr[i], unk_ptr[i + 1]):
            ln = unk_len[k]
            out[p : p + ln] = blob[unk_off[k] : unk_off[k] + ln]
            p += ln
    return out
