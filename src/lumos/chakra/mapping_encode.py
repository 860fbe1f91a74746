"""Build a :class:`ChakraTrace` from attribute COLUMNS, vectorised (the writer behind ``to_chakra``).

:class:`~lumos.chakra.builder.ChakraTraceBuilder` encodes one :class:`Attr` object at a time,
which costs ~50 us per node with a dozen attributes. Here each attribute is a column (one name,
one kind, a value per node where a mask is set); the bytes of every ``AttributeProto`` are
written by one compiled loop (:func:`lumos.chakra._encode_attrs.encode_attributes`), so a graph
of a million tasks converts in seconds. Attributes of a few nodes that do not fit a column (an
ET op's ``op_schema``) come as :class:`Attr` objects and are encoded one by one. The bytes are exactly what :func:`lumos.chakra.attrs.encode_attr` writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.chakra import _encode_attrs
from lumos.chakra.attrs import Attr, IOInfo, decode_attr, encode_attr, encode_io_info, varint_bytes
from lumos.chakra.schema import ATTR_KIND_BY_NAME
from lumos.chakra.trace import ChakraMetadata, ChakraTrace

__all__ = ["AttrColumn", "build_trace"]

_VARINT, _ZIGZAG, _RAW = 0, 1, 2
_WIRE_TYPE = {"bool_val": 0, "int32_val": 0, "int64_val": 0, "sint64_val": 0, "string_val": 2}


@dataclass(frozen=True)
class AttrColumn:
    """One attribute on the nodes where ``mask`` is set (``None``: every node).

    ``values`` are integers (bool, int32, int64, sint64 kinds) or, for ``string_val``, indices
    into ``strings``.
    """

    name: str
    kind: str
    values: NDArray[np.int64]
    mask: NDArray[np.bool_] | None = None
    strings: tuple[str, ...] = ()


def _prefix(name: str, kind: str) -> bytes:
    data = name.encode("utf-8")
    fno = ATTR_KIND_BY_NAME[kind]
    return b"\x0a" + varint_bytes(len(data)) + data + varint_bytes(fno << 3 | _WIRE_TYPE[kind])


def build_trace(
    metadata: ChakraMetadata,
    *,
    names: Sequence[str],
    name_idx: NDArray[np.int64],
    node_type: NDArray[np.int8],
    data_ptr: NDArray[np.int64],
    data_deps: NDArray[np.int64],
    start_time_micros: NDArray[np.int64],
    duration_micros: NDArray[np.int64],
    columns: Sequence[AttrColumn],
    extra_attrs: Mapping[int, Sequence[Attr]] | None = None,
    io: Mapping[int, tuple[IOInfo | None, IOInfo | None]] | None = None,
    rank: int | None = None,
) -> ChakraTrace:
    """A trace of ``len(node_type)`` nodes with ids ``0..n-1``; attributes of a node come in
    column order, then its ``extra_attrs``."""
    n = int(node_type.shape[0])
    extra_attrs = extra_attrs or {}
    io = io or {}
    # raw byte strings: string values per column, and whole extra attributes
    raw: list[bytes] = []
    prefixes: list[bytes] = []
    modes: list[int] = []
    kinds: list[int] = []
    attr_names: list[str] = []
    r_node, r_col, r_val, r_int = [], [], [], []
    for ci, col in enumerate(columns):
        prefixes.append(_prefix(col.name, col.kind))
        kinds.append(ATTR_KIND_BY_NAME[col.kind])
        attr_names.append(col.name)
        nodes = np.arange(n, dtype=np.int64) if col.mask is None else np.flatnonzero(col.mask)
        vals = np.asarray(col.values, dtype=np.int64)
        vals = vals if col.mask is None else vals[nodes]
        if col.kind == "string_val":
            base = len(raw)
            for s in col.strings:
                data = s.encode("utf-8")
                raw.append(varint_bytes(len(data)) + data)
            modes.append(_RAW)
            r_val.append(vals + base)
            r_int.append(np.zeros(nodes.size, dtype=np.int64))
        else:
            modes.append(_ZIGZAG if col.kind == "sint64_val" else _VARINT)
            r_val.append(vals)
            ints = vals.astype(np.int32).astype(np.int64) if col.kind == "int32_val" else vals
            r_int.append(ints)
        r_node.append(nodes)
        r_col.append(np.full(nodes.size, ci, dtype=np.int64))
    extra_name_col: dict[str, int] = {}
    e_node, e_col, e_val, e_int, e_kind = [], [], [], [], []
    for node in sorted(extra_attrs):
        for a in extra_attrs[node]:
            body = encode_attr(a)
            raw.append(body)
            v = decode_attr(body).value
            is_int = isinstance(v, (bool, int))
            e_node.append(node)
            e_val.append(len(raw) - 1)
            e_int.append(int(v) if is_int and -(1 << 63) <= int(v) < 1 << 63 else 0)
            e_kind.append(ATTR_KIND_BY_NAME.get(a.kind, 0))
            key = a.name
            if key not in extra_name_col:
                extra_name_col[key] = len(prefixes)
                prefixes.append(b"")
                modes.append(_RAW)
                kinds.append(0)
                attr_names.append(a.name)
            e_col.append(extra_name_col[key])
    node_of = np.concatenate([*r_node, np.asarray(e_node, dtype=np.int64)])
    col_of = np.concatenate([*r_col, np.asarray(e_col, dtype=np.int64)])
    val_of = np.concatenate([*r_val, np.asarray(e_val, dtype=np.int64)])
    int_of = np.concatenate([*r_int, np.asarray(e_int, dtype=np.int64)])
    kind_tab = np.asarray(kinds, dtype=np.int8)
    kind_of = kind_tab[col_of] if col_of.size else np.zeros(0, np.int8)
    if e_kind:
        kind_of[-len(e_kind) :] = np.asarray(e_kind, dtype=np.int8)
    # extras come after the columns and keep their own order: sort by (node, position)
    seq = np.arange(node_of.size, dtype=np.int64)
    pos = np.where(
        np.arange(node_of.size) >= node_of.size - len(e_node), len(columns) + seq, col_of
    )
    order = np.lexsort((pos, node_of))
    node_of, col_of, val_of, int_of, kind_of = (
        node_of[order],
        col_of[order],
        val_of[order],
        int_of[order],
        kind_of[order],
    )
    prefix_off = np.zeros(len(prefixes) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in prefixes], out=prefix_off[1:])
    raw_off = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=raw_off[1:])
    prefix_blob = np.frombuffer(b"".join(prefixes) + b"\0", dtype=np.uint8)
    raw_blob = np.frombuffer(b"".join(raw) + b"\0", dtype=np.uint8)
    mode = np.asarray(modes, dtype=np.int64)
    bound = int(np.diff(prefix_off)[col_of].sum()) + 10 * col_of.size
    raw_rows = mode[col_of] == _RAW if col_of.size else np.zeros(0, bool)
    bound += int(np.diff(raw_off)[val_of[raw_rows]].sum())
    out = np.empty(bound + 1, dtype=np.uint8)
    attr_off = np.empty(col_of.size, dtype=np.int64)
    end = _encode_attrs.encode_attributes(
        prefix_blob, prefix_off, raw_blob, raw_off, col_of, mode, val_of, attr_off, out
    )
    attr_len = np.diff(np.r_[attr_off, end])
    # inputs / outputs after the attributes in the same blob
    io_parts: list[bytes] = []
    in_off = np.zeros(n, np.int64)
    in_len = np.full(n, -1, np.int64)
    out_off = np.zeros(n, np.int64)
    out_len = np.full(n, -1, np.int64)
    p = end
    for node in sorted(io):
        for info, off_a, len_a in ((io[node][0], in_off, in_len), (io[node][1], out_off, out_len)):
            if info is not None:
                data = encode_io_info(info)
                off_a[node], len_a[node] = p, len(data)
                io_parts.append(data)
                p += len(data)
    blob = np.concatenate([out[:end], np.frombuffer(b"".join(io_parts), dtype=np.uint8)])
    # unique attribute names (a column and an extra may share a name)
    uniq: dict[str, int] = {}
    name_map = np.array([uniq.setdefault(s, len(uniq)) for s in attr_names], dtype=np.int32)
    attr_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(node_of, minlength=n), out=attr_ptr[1:])
    zeros_ptr = np.zeros(n + 1, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    return ChakraTrace(
        metadata=metadata,
        node_id=np.arange(n, dtype=np.uint64),
        name_idx=np.asarray(name_idx, dtype=np.int32),
        names=tuple(names),
        node_type=np.asarray(node_type, dtype=np.int8),
        ctrl_ptr=zeros_ptr,
        ctrl_deps=np.zeros(0, dtype=np.uint64),
        data_ptr=np.asarray(data_ptr, dtype=np.int64),
        data_deps=np.asarray(data_deps, dtype=np.uint64),
        start_time_micros=np.asarray(start_time_micros, dtype=np.uint64),
        duration_micros=np.asarray(duration_micros, dtype=np.uint64),
        blob=blob,
        inputs_off=in_off,
        inputs_len=in_len,
        outputs_off=out_off,
        outputs_len=out_len,
        attr_ptr=attr_ptr,
        attr_off=attr_off,
        attr_len=attr_len,
        attr_name_idx=name_map[col_of] if col_of.size else np.zeros(0, np.int32),
        attr_names=tuple(uniq),
        attr_kind=kind_of,
        attr_int=int_of,
        attr_float=np.zeros(col_of.size, dtype=np.float64),
        unk_ptr=zeros_ptr.copy(),
        unk_off=empty,
        unk_len=empty.copy(),
        rank=rank,
    )
