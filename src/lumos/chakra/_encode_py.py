"""The Chakra encoders in NumPy, for a first command's files: the same bytes, no compile.

Numba compiles :func:`lumos.chakra._wire.encode_nodes` (the records of ``write_chakra``) and
:func:`lumos.chakra.mapping_encode._encode` (the attribute bytes of ``to_chakra``) on their first
call unless its disk cache holds them: 4 s, which a user's first ``lumos convert`` after ``pip
install`` would wait for. :func:`use_python` says when to encode here instead: the compiled
encoder is neither in this process nor in numba's cache, and the bytes it has encoded here stay
within :data:`MAX_BYTES`; the background warmer (:mod:`lumos._jit`) fills the cache for the next
command meanwhile, and compiles the encoders even for its small example, as it runs within
:func:`lumos.chakra._wire_py.compiled`, which this module honours too.

The results are byte for byte the compiled ones, computed a column at a time: the size of every
field of every node (varint sizes of whole columns at once), then each node's offset, then each
varint written where it goes (a pass per byte of the longest one) and each copied span (names,
``inputs``/``outputs``, attribute bodies, unknown fields) gathered at once (:func:`_copy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lumos.chakra import _wire_py

if TYPE_CHECKING:
    from lumos.chakra.trace import ChakraTrace

__all__ = ["MAX_BYTES", "copied_bytes", "encode_attributes", "encode_nodes", "use_python"]

#: Bytes that one process encodes here, per encoder, before it compiles that encoder instead
#: (``write_chakra`` counts the bytes its records copy, ``to_chakra`` the attribute bytes).
#: ``benchmarks/bench_encode_py.py`` on df_index_resolver as ``lumos convert`` maps it (162k
#: nodes, a 28 MB ET: 20 MB of copied spans, 797k attributes in 19 MB): the twins encode its
#: records in 0.13 s (compiled: 0.065 s) and its attributes in 0.06 s (0.011 s), against 3.5-7 s
#: to compile the two encoders on a 2-core machine. 64 MiB cost about 0.4 s and 0.2 s here,
#: well under the compile; a bigger output (or many ranks in one process) compiles.
MAX_BYTES = 64 << 20
_encoded: dict[Any, int] = {}  # compiled encoder -> bytes encoded here in its stead

_U64 = np.uint64
_LIMITS = np.array([1 << 7 * k for k in range(1, 10)], dtype=_U64)  # smallest k+1-byte varints
_COPY_BATCH = 1 << 17  # bytes copied per round: index arrays that stay in the CPU caches


def use_python(compiled: Any, nbytes: int) -> bool:
    """Whether to run the Python twin of the numba dispatcher ``compiled`` for ``nbytes`` bytes
    of output: it is neither loaded nor in numba's cache, this process has encoded at most
    :data:`MAX_BYTES` here in its stead, these included (they are counted), and it is not
    inside :func:`lumos.chakra._wire_py.compiled`."""
    return _wire_py.take(_encoded, compiled, (compiled,), nbytes, MAX_BYTES)


def copied_bytes(trace: ChakraTrace, names_off: np.ndarray) -> int:
    """The bytes of ``trace``'s records that are copied spans (names, ``names_off`` their CSR;
    inputs/outputs, attribute bodies, unknown fields): most of the file, the rest being tags,
    lengths and numbers."""
    spans = (np.diff(names_off)[trace.name_idx], trace.attr_len, trace.unk_len,
             np.maximum(trace.inputs_len, 0), np.maximum(trace.outputs_len, 0))  # fmt: skip
    return sum(int(a.sum()) for a in spans)


def _vsize(v: np.ndarray) -> np.ndarray:
    """The varint size (1..10 bytes, int64) of each value of ``v`` (read as ``uint64``)."""
    return np.searchsorted(_LIMITS, v.astype(_U64, copy=False), side="right").astype(np.int64) + 1


def _put(out: np.ndarray, at: np.ndarray, v: np.ndarray) -> None:
    """Write the varint of each ``v`` (read as ``uint64``) at ``out[at]``; one pass per byte, on
    the values that have that byte."""
    v = v.astype(_U64)
    at = np.asarray(at, dtype=np.int64)
    while v.size:
        more = v >= 0x80
        out[at] = (v & 0x7F | more.astype(_U64) << _U64(7)).astype(np.uint8)
        at, v = at[more] + 1, v[more] >> _U64(7)


def _copy(
    out: np.ndarray, dst: np.ndarray, src: np.ndarray, at: np.ndarray, lens: np.ndarray
) -> None:
    """``out[dst[s]:dst[s] + lens[s]] = src[at[s]:at[s] + lens[s]]`` for every span ``s``, about
    :data:`_COPY_BATCH` bytes a round."""
    ends = np.cumsum(lens)
    s, n = 0, len(lens)
    while s < n:
        base = int(ends[s] - lens[s])
        e = max(int(np.searchsorted(ends, base + _COPY_BATCH, side="right")), s + 1)
        ln = lens[s:e]
        first = np.repeat(ends[s:e] - ln - base, ln)  # where each byte's span starts
        k = np.arange(int(ends[e - 1]) - base, dtype=np.int64) - first  # its place in the span
        out[np.repeat(dst[s:e], ln) + k] = src[np.repeat(at[s:e], ln) + k]
        s = e


def _rows(ptr: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, slice]:
    """The CSR pointers of rows ``lo..hi-1`` from 0, and the slice of their items."""
    rel = ptr[lo : hi + 1].astype(np.int64) - int(ptr[lo])
    return rel, slice(int(ptr[lo]), int(ptr[hi]))


def _spread(base: np.ndarray, rel: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(row sums, positions)`` of CSR items of ``sizes`` bytes each: item ``k`` of row ``i``
    goes at ``base[i]`` plus the sizes of row ``i``'s items before it."""
    ex = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=ex[1:])
    first = ex[rel[:-1]]
    return ex[rel[1:]] - first, ex[:-1] + np.repeat(base - first, np.diff(rel))


def _field(present: np.ndarray, size: np.ndarray) -> np.ndarray:
    return np.where(present, size, 0)


def encode_nodes(
    lo: int, hi: int, node_id: np.ndarray, name_idx: np.ndarray, names_blob: np.ndarray,
    names_off: np.ndarray, node_type: np.ndarray, start_us: np.ndarray, dur_us: np.ndarray,
    blob: np.ndarray, inp_off: np.ndarray, inp_len: np.ndarray, out_off: np.ndarray,
    out_len: np.ndarray, ctrl_ptr: np.ndarray, ctrl_val: np.ndarray, data_ptr: np.ndarray,
    data_val: np.ndarray, attr_ptr: np.ndarray, attr_off: np.ndarray, attr_len: np.ndarray,
    unk_ptr: np.ndarray, unk_off: np.ndarray, unk_len: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """:func:`lumos.chakra._wire.encode_nodes`: the length-prefixed records of nodes
    ``lo..hi-1`` as one ``uint8`` array (the same arguments, the same bytes)."""
    m = hi - lo
    nid = node_id[lo:hi].astype(_U64)
    names = name_idx[lo:hi].astype(np.int64)
    name_at = names_off[names].astype(np.int64)
    name_len = names_off[names + 1] - name_at
    ntype = node_type[lo:hi].astype(np.int64).view(_U64)  # negative: 10 bytes, sign-extended
    start, dur = start_us[lo:hi].astype(_U64), dur_us[lo:hi].astype(_U64)
    io = [(off[lo:hi].astype(np.int64), ln[lo:hi].astype(np.int64))
          for off, ln in ((inp_off, inp_len), (out_off, out_len))]  # fmt: skip
    deps = []
    for ptr, val in ((ctrl_ptr, ctrl_val), (data_ptr, data_val)):
        rel, items = _rows(ptr, lo, hi)
        v = val[items].astype(_U64)
        deps.append((rel, v, _vsize(v)))
    a_rel, a_items = _rows(attr_ptr, lo, hi)
    a_len = attr_len[a_items].astype(np.int64)
    u_rel, u_items = _rows(unk_ptr, lo, hi)
    u_len = unk_len[u_items].astype(np.int64)
    zero = np.zeros(m, dtype=np.int64)
    a_size = 1 + _vsize(a_len) + a_len
    a_total = _spread(zero, a_rel, a_size)[0]
    u_total = _spread(zero, u_rel, u_len)[0]
    packed = [_spread(zero, rel, vs)[0] for rel, _, vs in deps]
    # field sizes in canonical order: id, name, type, ctrl, data, start, dur, inputs, outputs,
    # attributes, unknown fields
    sizes = np.stack([
        _field(nid != 0, 1 + _vsize(nid)),
        _field(name_len > 0, 1 + _vsize(name_len) + name_len),
        _field(ntype != 0, 1 + _vsize(ntype)),
        *(_field(b > 0, 1 + _vsize(b) + b) for b in packed),
        _field(start != 0, 1 + _vsize(start)),
        _field(dur != 0, 1 + _vsize(dur)),
        *(_field(ln >= 0, 1 + _vsize(np.maximum(ln, 0)) + ln) for _, ln in io),
        a_total, u_total,
    ])  # fmt: skip
    body = sizes.sum(axis=0)
    rec_at = np.zeros(m, dtype=np.int64)
    np.cumsum((_vsize(body) + body)[:-1], out=rec_at[1:])
    total = int(rec_at[-1] + _vsize(body[-1:])[0] + body[-1]) if m else 0
    out = np.empty(total, dtype=np.uint8)
    _put(out, rec_at, body)
    at = rec_at + _vsize(body) + np.cumsum(sizes, axis=0) - sizes  # where each field starts

    def tagged(f: int, tag: int, present: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Tag and varint ``v`` of field ``f`` where ``present``; returns the positions after."""
        p = at[f][present]
        out[p] = tag
        _put(out, p + 1, v[present])
        return p + 1 + _vsize(v[present])

    tagged(0, 0x08, nid != 0, nid)
    has = name_len > 0
    _copy(out, tagged(1, 0x12, has, name_len), names_blob, name_at[has], name_len[has])
    tagged(2, 0x18, ntype != 0, ntype)
    for f, tag, b, (rel, v, vs) in ((3, 0x22, packed[0], deps[0]), (4, 0x2A, packed[1], deps[1])):
        base = np.zeros(m, dtype=np.int64)
        base[b > 0] = tagged(f, tag, b > 0, b)
        _put(out, _spread(base, rel, vs)[1], v)
    tagged(5, 0x30, start != 0, start)
    tagged(6, 0x38, dur != 0, dur)
    for f, tag, (off, ln) in ((7, 0x42, io[0]), (8, 0x4A, io[1])):
        has = ln >= 0
        _copy(out, tagged(f, tag, has, np.maximum(ln, 0)), blob, off[has], ln[has])
    a_at = _spread(at[9], a_rel, a_size)[1]
    out[a_at] = 0x52
    _put(out, a_at + 1, a_len)
    _copy(out, a_at + 1 + _vsize(a_len), blob, attr_off[a_items].astype(np.int64), a_len)
    u_at = _spread(at[10], u_rel, u_len)[1]
    _copy(out, u_at, blob, unk_off[u_items].astype(np.int64), u_len)
    return out


def encode_attributes(
    prefix_blob: np.ndarray, prefix_off: np.ndarray, raw_blob: np.ndarray, raw_off: np.ndarray,
    col: np.ndarray, mode: np.ndarray, value: np.ndarray, out_off: np.ndarray, out: np.ndarray,
) -> int:  # fmt: skip
    """:func:`lumos.chakra.mapping_encode._encode`: ``AttributeProto`` row ``k`` (its column's
    prefix, then raw bytes ``value[k]`` of ``raw_blob`` in mode 2, else the varint of
    ``value[k]``, zigzagged in mode 1) written to ``out`` from ``out_off[k]`` (filled here);
    returns the bytes written."""
    col = col.astype(np.int64)
    value = value.astype(np.int64)
    row_mode = mode[col]
    raw = np.flatnonzero(row_mode == 2)
    num = np.flatnonzero(row_mode != 2)
    v = value[num]
    u = np.where(row_mode[num] == 1, v << 1 ^ v >> 63, v).view(_U64)
    p_at = prefix_off[col].astype(np.int64)
    p_len = prefix_off[col + 1] - p_at
    r_at = raw_off[value[raw]].astype(np.int64)
    r_len = raw_off[value[raw] + 1] - r_at
    size = p_len.copy()
    size[raw] += r_len
    size[num] += _vsize(u)
    out_off[0:1] = 0
    np.cumsum(size[:-1], out=out_off[1:])
    _copy(out, out_off, prefix_blob, p_at, p_len)
    body = out_off + p_len
    _copy(out, body[raw], raw_blob, r_at, r_len)
    _put(out, body[num], u)
    return int(out_off[-1] + size[-1]) if size.size else 0
