"""The in-memory Chakra execution trace: one rank's nodes as columns, lossless for round trips.

:class:`ChakraTrace` holds one ``.et`` file as struct-of-arrays numpy columns (no Python object
per node). What the columns do not model (``inputs``/``outputs``, each attribute message, fields
unknown to the schema) is kept as byte spans into one ``blob`` (for a file read from disk, the
file's own bytes or memory map), so writing a trace back reproduces it byte for byte.

Node columns (``n`` = number of nodes; ``*_ptr`` arrays are CSR offsets of length ``n + 1``):

=====================  ==========  =====================================================
column                 dtype       meaning
=====================  ==========  =====================================================
node_id                uint64      ``Node.id`` (an external id: ``*_idx`` is a row here)
name_idx               int32       row of ``names`` (interned node names)
node_type              int8        :class:`~lumos.chakra.schema.NodeType`
ctrl_ptr / ctrl_deps   int64/u64   ``Node.ctrl_deps`` ids, per node
data_ptr / data_deps   int64/u64   ``Node.data_deps`` ids, per node
start_time_micros      uint64      ``Node.start_time_micros`` (0 when absent)
duration_micros        uint64      ``Node.duration_micros`` (0 when absent)
inputs_off/len         int64       span of the ``inputs`` IOInfo body, len -1 when absent
outputs_off/len        int64       same for ``outputs``
attr_ptr               int64       attributes of node i are rows attr_ptr[i]:attr_ptr[i+1]
=====================  ==========  =====================================================

Attribute rows: ``attr_off``/``attr_len`` (the whole ``AttributeProto`` body in ``blob``),
``attr_name_idx`` (row of ``attr_names``), ``attr_kind`` (oneof field number, 0 = no value),
``attr_int`` (integer and bool scalars), ``attr_float`` (double/float scalars). The
communication attributes that tools rely on are extracted by :attr:`ChakraTrace.comm`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from lumos.chakra.attr_table import AttrRows, AttrTable
from lumos.chakra.attrs import Attr, IOInfo, WireError, decode_io_info
from lumos.chakra.metadata import ChakraMetadata
from lumos.chakra.schema import ATTR_KIND_NAMES, INTEGER_KINDS, NodeType
from lumos.chakra.view import NodeView, ViewColumns, node_views
from lumos.errors import ChakraFormatError

__all__ = [
    "MISSING",
    "ChakraMetadata",
    "ChakraNode",
    "ChakraTrace",
    "ChakraWorkload",
    "CommColumns",
]

#: Sentinel of integer comm columns for "attribute absent (or not an integer)".
MISSING = np.iinfo(np.int64).min

_INT_KINDS = np.array(sorted(INTEGER_KINDS), dtype=np.int8)
_BOOL_KIND = 27
_UINT64_KINDS = np.array([13, 21], dtype=np.int8)  # uint64_val, fixed64_val
_STRING_KIND = 29


def exact_sum(a: np.ndarray) -> int:
    """The exact sum of an integer array (NumPy's wraps silently past 64 bits)."""
    if a.size == 0:
        return 0
    if max(abs(int(a.max())), abs(int(a.min()))) * a.size < 2**63:
        return int(a.sum())
    return sum(a.tolist())


@dataclass(frozen=True, slots=True)
class ChakraNode:
    """One node with every field decoded (``ChakraTrace.materialize(idx)``); not used on hot
    paths, where :class:`~lumos.chakra.view.NodeView` reads the same fields from the columns."""

    id: int
    name: str
    type: NodeType
    ctrl_deps: tuple[int, ...] = ()
    data_deps: tuple[int, ...] = ()
    start_time_micros: int = 0
    duration_micros: int = 0
    inputs: IOInfo | None = None
    outputs: IOInfo | None = None
    attrs: tuple[Attr, ...] = ()
    unknown: bytes = b""

    def attr(self, name: str, default: Any = None) -> Any:
        """Value of the last attribute called ``name``."""
        for a in reversed(self.attrs):
            if a.name == name:
                return a.value
        return default


@dataclass(frozen=True, slots=True)
class CommColumns:
    """Communication attributes per node, any integer type accepted.

    Integer columns hold :data:`MISSING` where the attribute is absent or not an integer;
    ``pg_name_idx`` is a row of ``pg_names`` or -1; ``is_cpu_op`` is 1, 0 or -1 (absent).
    ``ill_typed`` lists ``(node_idx, attribute name, kind)`` for convention attributes written
    with a kind that tools cannot use (e.g. ``comm_type`` as a string); ``out_of_range`` lists
    ``(node_idx, attribute name, exact value)`` for unsigned values beyond int64 (2**63 and up),
    which the columns hold as :data:`MISSING` rather than wrapped negative.
    """

    comm_type: np.ndarray
    comm_size: np.ndarray
    comm_src: np.ndarray
    comm_dst: np.ndarray
    comm_tag: np.ndarray
    pg_name_idx: np.ndarray
    pg_names: tuple[str, ...]
    is_cpu_op: np.ndarray
    ill_typed: tuple[tuple[int, str, str], ...]
    out_of_range: tuple[tuple[int, str, int], ...] = ()


@dataclass(frozen=True, eq=False)
class ChakraTrace:
    """One rank's Chakra ET as columns (see the module docstring for the column table)."""

    metadata: ChakraMetadata
    node_id: np.ndarray
    name_idx: np.ndarray
    names: tuple[str, ...]
    node_type: np.ndarray
    ctrl_ptr: np.ndarray
    ctrl_deps: np.ndarray
    data_ptr: np.ndarray
    data_deps: np.ndarray
    start_time_micros: np.ndarray
    duration_micros: np.ndarray
    blob: np.ndarray
    inputs_off: np.ndarray
    inputs_len: np.ndarray
    outputs_off: np.ndarray
    outputs_len: np.ndarray
    attr_ptr: np.ndarray
    attr_off: np.ndarray
    attr_len: np.ndarray
    attr_name_idx: np.ndarray
    attr_names: tuple[str, ...]
    attr_kind: np.ndarray
    attr_int: np.ndarray
    attr_float: np.ndarray
    unk_ptr: np.ndarray
    unk_off: np.ndarray
    unk_len: np.ndarray
    path: str | None = None
    rank: int | None = None
    diagnostics: dict[str, int] = field(default_factory=dict)

    # ---- sizes and per-node access ------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Number of nodes (the metadata record is not a node)."""
        return int(self.node_id.shape[0])

    def __len__(self) -> int:
        return self.num_nodes

    def __repr__(self) -> str:
        schema = next((str(a.value) for a in self.metadata.attrs if a.name == "schema"), "")
        return (f"ChakraTrace({self.path!r}, rank {'?' if self.rank is None else self.rank}, "
                f"schema {schema or self.metadata.version or '?'!r}, {self.num_nodes} nodes)")  # fmt: skip

    def name_of(self, idx: int) -> str:
        """Name of node row ``idx``."""
        return self.names[int(self.name_idx[idx])]

    def ctrl_deps_of(self, idx: int) -> np.ndarray:
        """``ctrl_deps`` ids of node row ``idx``."""
        return self.ctrl_deps[self.ctrl_ptr[idx] : self.ctrl_ptr[idx + 1]]

    def data_deps_of(self, idx: int) -> np.ndarray:
        """``data_deps`` ids of node row ``idx``."""
        return self.data_deps[self.data_ptr[idx] : self.data_ptr[idx + 1]]

    def attrs_of(self, idx: int) -> tuple[Attr, ...]:
        """Decoded attributes of node row ``idx``, in file order, kinds preserved."""
        lo, hi = int(self.attr_ptr[idx]), int(self.attr_ptr[idx + 1])
        return tuple(self._attr(k) for k in range(lo, hi))

    @cached_property
    def names_array(self) -> np.ndarray:
        """``names`` as an object array (``names_array[name_idx]`` names every node at once)."""
        out = np.empty(len(self.names), dtype=object)
        out[:] = self.names
        return out

    @cached_property
    def attr_names_array(self) -> np.ndarray:
        """``attr_names`` as an object array."""
        out = np.empty(len(self.attr_names), dtype=object)
        out[:] = self.attr_names
        return out

    @cached_property
    def attr_rows(self) -> AttrRows:
        """The attribute rows as values, kinds and doc strings are read one at a time
        (:class:`lumos.chakra.attr_table.AttrRows`)."""
        return AttrRows(self.blob, self.attr_off, self.attr_len, self.attr_kind, self.attr_ptr,
                        self.node_id, self.path)  # fmt: skip

    @cached_property
    def view_columns(self) -> ViewColumns:
        """The columns that node and attribute views read (:class:`lumos.chakra.view.ViewColumns`,
        made on first use; it holds no reference to the trace)."""
        return ViewColumns(self)

    @property
    def attr_values(self) -> AttrTable:
        """Every attribute's value, scalar or list, as one columnar table (decoded on first
        use: :meth:`AttrTable.decode`; row ``k`` is attribute row ``k``)."""
        return self.attr_rows.table

    def attr_value(self, k: int) -> Any:
        """The Python value of attribute row ``k``; ``ChakraFormatError`` naming the node when
        it does not decode."""
        return self.attr_rows.value(k)

    def attr_doc(self, k: int) -> str:
        """``doc_string`` of attribute row ``k``."""
        return self.attr_rows.doc(k)

    def _attr(self, k: int) -> Attr:
        kind = ATTR_KIND_NAMES.get(int(self.attr_kind[k]), "")
        name = self.attr_names[int(self.attr_name_idx[k])]
        return Attr(name, self.attr_value(k), kind, self.attr_doc(k))

    def _io(self, off: np.ndarray, ln: np.ndarray, idx: int) -> IOInfo | None:
        n = int(ln[idx])
        if n < 0:
            return None
        o = int(off[idx])
        try:
            return decode_io_info(self.blob[o : o + n].tobytes())
        except WireError as exc:
            raise self._error(idx, f"inputs/outputs do not decode: {exc}") from None

    def _error(self, idx: int, problem: str) -> ChakraFormatError:
        return ChakraFormatError(
            self.path, f"node id {int(self.node_id[idx])} (row {idx}): {problem}"
        )

    def unknown_of(self, idx: int) -> bytes:
        """Raw bytes of node row ``idx``'s fields unknown to the schema, in file order."""
        lo, hi = int(self.unk_ptr[idx]), int(self.unk_ptr[idx + 1])
        return b"".join(
            self.blob[int(o) : int(o) + int(n)].tobytes()
            for o, n in zip(self.unk_off[lo:hi], self.unk_len[lo:hi], strict=True)
        )

    def node(self, idx: int) -> NodeView:
        """A view of node row ``idx`` (fields read from the columns on access)."""
        if not -self.num_nodes <= idx < self.num_nodes:
            raise IndexError(f"node row {idx} out of range ({self.num_nodes} nodes)")
        idx %= self.num_nodes
        return next(node_views(self, idx, idx + 1))

    def materialize(self, idx: int) -> ChakraNode:
        """Node row ``idx`` as a frozen :class:`ChakraNode`, every field decoded."""
        t = int(self.node_type[idx])
        return ChakraNode(
            id=int(self.node_id[idx]),
            name=self.name_of(idx),
            type=NodeType(t) if t in NodeType._value2member_map_ else t,  # type: ignore[arg-type]
            ctrl_deps=tuple(self.ctrl_deps_of(idx).tolist()),
            data_deps=tuple(self.data_deps_of(idx).tolist()),
            start_time_micros=int(self.start_time_micros[idx]),
            duration_micros=int(self.duration_micros[idx]),
            inputs=self._io(self.inputs_off, self.inputs_len, idx),
            outputs=self._io(self.outputs_off, self.outputs_len, idx),
            attrs=self.attrs_of(idx),
            unknown=self.unknown_of(idx),
        )

    def iter_nodes(self) -> Iterator[NodeView]:
        """Views of every node in file order, each made as it is asked for."""
        return node_views(self, 0, self.num_nodes)

    # ---- id lookup ----------------------------------------------------------------------
    @cached_property
    def _id_order(self) -> np.ndarray:
        return np.argsort(self.node_id, kind="stable")

    def index_of(self, ids: np.ndarray | list[int]) -> np.ndarray:
        """Row of each node id (the first row when an id repeats), -1 for unknown ids."""
        ids = np.asarray(ids, dtype=np.uint64)
        order = self._id_order
        sorted_ids = self.node_id[order]
        pos = np.searchsorted(sorted_ids, ids)
        pos_c = np.minimum(pos, max(len(order) - 1, 0))
        found = (
            (pos < len(order)) & (sorted_ids[pos_c] == ids)
            if len(order)
            else np.zeros(ids.shape, dtype=bool)
        )
        return np.where(found, order[pos_c] if len(order) else -1, -1).astype(np.int64)

    # ---- communication columns ----------------------------------------------------------
    @cached_property
    def comm(self) -> CommColumns:
        """Communication attributes as columns (computed once, on first use)."""
        n = self.num_nodes
        node_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.attr_ptr))
        is_int = np.isin(self.attr_kind, _INT_KINDS)
        ill: list[tuple[int, str, str]] = []
        # uint64/fixed64 values of 2**63 and more: kept exact in out_of_range, never wrapped
        wrapped = np.isin(self.attr_kind, _UINT64_KINDS) & (self.attr_int < 0)
        big: list[tuple[int, str, int]] = []
        cols: dict[str, np.ndarray] = {}
        for key in ("comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag", "is_cpu_op"):
            col = np.full(n, MISSING, dtype=np.int64)
            if key in self.attr_names:
                rows = self.attr_name_idx == self.attr_names.index(key)
                ok = rows & (is_int | (self.attr_kind == _BOOL_KIND))
                col[node_of[ok]] = self.attr_int[ok]
                for k in np.flatnonzero(rows & wrapped):
                    col[node_of[k]] = MISSING
                    big.append((int(node_of[k]), key, int(self.attr_int[k]) + (1 << 64)))
                for k in np.flatnonzero(rows & ~ok):
                    kind = ATTR_KIND_NAMES.get(int(self.attr_kind[k]), "none")
                    ill.append((int(node_of[k]), key, kind))
            cols[key] = col
        cpu = cols.pop("is_cpu_op")
        is_cpu = np.where(cpu == MISSING, -1, cpu != 0).astype(np.int8)
        pg_idx = np.full(n, -1, dtype=np.int32)
        pg_names: list[str] = []
        if "pg_name" in self.attr_names:
            lookup: dict[str, int] = {}
            rows = np.flatnonzero(self.attr_name_idx == self.attr_names.index("pg_name"))
            for k in rows:
                value = self.attr_value(int(k))
                if isinstance(value, (str, int)) and not isinstance(value, bool):
                    s = str(value)
                    pg_idx[node_of[k]] = lookup.setdefault(s, len(lookup))
                else:
                    kind = ATTR_KIND_NAMES.get(int(self.attr_kind[k]), "none")
                    ill.append((int(node_of[k]), "pg_name", kind))
            pg_names = list(lookup)
        ill.sort()
        return CommColumns(
            pg_name_idx=pg_idx,
            pg_names=tuple(pg_names),
            is_cpu_op=is_cpu,
            ill_typed=tuple(ill),
            out_of_range=tuple(sorted(big)),
            **cols,
        )

    def with_deps(
        self,
        ctrl_ptr: np.ndarray,
        ctrl_deps: np.ndarray,
        data_ptr: np.ndarray,
        data_deps: np.ndarray,
    ) -> ChakraTrace:
        """A copy with new dependency CSR arrays (everything else shared)."""
        return dataclasses.replace(
            self, ctrl_ptr=ctrl_ptr, ctrl_deps=ctrl_deps, data_ptr=data_ptr, data_deps=data_deps
        )


@dataclass(frozen=True)
class ChakraWorkload:
    """Several ranks' traces (``<prefix>.<rank>.et``), iterated in rank order."""

    traces: dict[int, ChakraTrace]
    prefix: str | None = None

    @property
    def ranks(self) -> list[int]:
        """Ranks in ascending order."""
        return sorted(self.traces)

    def __repr__(self) -> str:
        nodes = sum(t.num_nodes for t in self.traces.values())
        return f"ChakraWorkload({self.prefix!r}, {len(self.traces)} rank(s), {nodes} nodes)"

    def __getitem__(self, rank: int) -> ChakraTrace:
        return self.traces[rank]

    def __iter__(self) -> Iterator[ChakraTrace]:
        for r in self.ranks:
            yield self.traces[r]

    def __len__(self) -> int:
        return len(self.traces)
