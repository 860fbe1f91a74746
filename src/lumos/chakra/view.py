# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""Read-only views of a :class:`~lumos.chakra.trace.ChakraTrace`'s nodes and attributes
(Cython, pure-Python mode: see ``setup.py``).

A :class:`NodeView` has the fields of a :class:`~lumos.chakra.trace.ChakraNode` (``id``,
``name``, ``type``, ``ctrl_deps``, ``data_deps``, ``start_time_micros``, ``duration_micros``,
``inputs``, ``outputs``, ``attrs``, ``unknown`` and ``attr(name)``), and its ``row``. It is one
small object, a row number and the trace's columns (:class:`ViewColumns`, shared by every view
of the trace); each field is read from the columns when asked for, so a view costs what reading
the columns costs plus that object. An :class:`AttrView` is the same for one attribute row:
``name`` from the columns, ``kind``, ``value`` and ``doc_string`` decoded from the trace's
attribute table (:class:`~lumos.chakra.attr_table.AttrRows`); ``inputs``, ``outputs`` and
``unknown`` are decoded on access.

Compiled, both are extension types that the garbage collector does not track (they hold no
cycle: the trace never holds its views), recycled from a free list.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from lumos.chakra.schema import NodeType

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

if TYPE_CHECKING:
    from lumos.chakra.attrs import IOInfo
    from lumos.chakra.trace import ChakraNode, ChakraTrace

__all__ = ["AttrView", "NodeView", "ViewColumns", "node_views"]

# NodeType by the low byte of the int8 column; a value outside the enum stays an int
_TYPES: list[Any] = [v - 256 if v > 127 else v for v in range(256)]
for _t in NodeType:
    _TYPES[_t.value] = _t
_NODE_TYPES = cython.declare(list, _TYPES)


@cython.final
@cython.cclass
class ViewColumns:
    """The columns of one trace that its views read, typed (made once per trace:
    ``ChakraTrace.view_columns``); it holds no reference to the trace."""

    node_id: cython.const[cython.ulonglong][::1]
    name_idx: cython.const[cython.int][::1]
    node_type: cython.const[cython.schar][::1]
    ctrl_ptr: cython.const[cython.longlong][::1]
    ctrl_deps: cython.const[cython.ulonglong][::1]
    data_ptr: cython.const[cython.longlong][::1]
    data_deps: cython.const[cython.ulonglong][::1]
    start: cython.const[cython.ulonglong][::1]
    duration: cython.const[cython.ulonglong][::1]
    attr_ptr: cython.const[cython.longlong][::1]
    attr_name_idx: cython.const[cython.int][::1]
    names: tuple
    attr_names: tuple
    attr_rows: Any  # the trace's AttrRows

    def __init__(self, trace: ChakraTrace) -> None:
        t = trace
        self.node_id = np.ascontiguousarray(t.node_id, dtype=np.uint64)
        self.name_idx = np.ascontiguousarray(t.name_idx, dtype=np.int32)
        self.node_type = np.ascontiguousarray(t.node_type, dtype=np.int8)
        self.ctrl_ptr = np.ascontiguousarray(t.ctrl_ptr, dtype=np.int64)
        self.ctrl_deps = np.ascontiguousarray(t.ctrl_deps, dtype=np.uint64)
        self.data_ptr = np.ascontiguousarray(t.data_ptr, dtype=np.int64)
        self.data_deps = np.ascontiguousarray(t.data_deps, dtype=np.uint64)
        self.start = np.ascontiguousarray(t.start_time_micros, dtype=np.uint64)
        self.duration = np.ascontiguousarray(t.duration_micros, dtype=np.uint64)
        self.attr_ptr = np.ascontiguousarray(t.attr_ptr, dtype=np.int64)
        self.attr_name_idx = np.ascontiguousarray(t.attr_name_idx, dtype=np.int32)
        self.names = tuple(t.names)
        self.attr_names = tuple(t.attr_names)
        self.attr_rows = t.attr_rows


@cython.cfunc
def _ids(
    ptr: cython.const[cython.longlong][::1],
    val: cython.const[cython.ulonglong][::1],
    row: cython.Py_ssize_t,
) -> tuple:
    """The ids of row ``row`` of a CSR dependency list, as a tuple of ints."""
    lo: cython.Py_ssize_t = ptr[row]
    hi: cython.Py_ssize_t = ptr[row + 1]
    k: cython.Py_ssize_t
    if lo == hi:
        return ()
    out: list = []
    for k in range(lo, hi):
        out.append(cython.cast(cython.ulonglong, val[k]))
    return tuple(out)


@cython.final
@cython.no_gc
@cython.freelist(64)
@cython.cclass
class AttrView:
    """One attribute of a node: ``name``, and ``kind``, ``value`` and ``doc_string`` decoded on
    access; ``row`` is its attribute row in the trace."""

    _cols: ViewColumns
    _row: cython.Py_ssize_t

    @property
    def name(self) -> str:
        """``AttributeProto.name``."""
        return self._cols.attr_names[self._cols.attr_name_idx[self._row]]

    @property
    def row(self) -> int:
        """The attribute row in the trace."""
        return self._row

    @property
    def kind(self) -> str:
        """The oneof member that carries the value (``"int64_val"``...; ``""`` for none)."""
        return self._cols.attr_rows.kind(self._row)

    @property
    def value(self) -> Any:
        """The value (a list for a list kind); raises ``ChakraFormatError`` naming the node
        when it does not decode."""
        return self._cols.attr_rows.value(self._row)

    @property
    def doc_string(self) -> str:
        """``AttributeProto.doc_string``."""
        return self._cols.attr_rows.doc(self._row)

    def __repr__(self) -> str:
        return f"AttrView(name={self.name!r}, kind={self.kind!r})"

    def __str__(self) -> str:
        return self.__repr__()


@cython.cfunc
def _attr_view(cols: ViewColumns, row: cython.Py_ssize_t) -> AttrView:
    a: AttrView = AttrView.__new__(AttrView)
    a._cols = cols
    a._row = row
    return a


@cython.final
@cython.no_gc
@cython.freelist(64)
@cython.cclass
class NodeView:
    """One node of a trace (see the module docstring): ``id``, ``name``, ``type`` (a
    :class:`NodeType`, an ``int`` outside it), ``ctrl_deps`` and ``data_deps`` (tuples of ids),
    ``start_time_micros`` and ``duration_micros`` (0: absent), ``attrs`` (a tuple of
    :class:`AttrView`, in file order) and ``row`` (its row in the trace), read from the columns
    on access; ``inputs``, ``outputs`` and ``unknown`` are decoded on access."""

    _cols: ViewColumns
    _trace: object
    _row: cython.Py_ssize_t

    @property
    def id(self) -> int:
        """``Node.id``."""
        return cython.cast(cython.ulonglong, self._cols.node_id[self._row])

    @property
    def name(self) -> str:
        """``Node.name``."""
        return self._cols.names[self._cols.name_idx[self._row]]

    @property
    def type(self) -> NodeType | int:
        """``Node.type``: a :class:`NodeType`, an ``int`` outside the enum."""
        return _NODE_TYPES[cython.cast(cython.int, self._cols.node_type[self._row]) & 0xFF]

    @property
    def ctrl_deps(self) -> tuple[int, ...]:
        """``Node.ctrl_deps`` ids."""
        return _ids(self._cols.ctrl_ptr, self._cols.ctrl_deps, self._row)

    @property
    def data_deps(self) -> tuple[int, ...]:
        """``Node.data_deps`` ids."""
        return _ids(self._cols.data_ptr, self._cols.data_deps, self._row)

    @property
    def start_time_micros(self) -> int:
        """``Node.start_time_micros`` (0: absent)."""
        return cython.cast(cython.ulonglong, self._cols.start[self._row])

    @property
    def duration_micros(self) -> int:
        """``Node.duration_micros`` (0: absent)."""
        return cython.cast(cython.ulonglong, self._cols.duration[self._row])

    @property
    def attrs(self) -> tuple[AttrView, ...]:
        """The node's attributes, in file order."""
        cols: ViewColumns = self._cols
        lo: cython.Py_ssize_t = cols.attr_ptr[self._row]
        hi: cython.Py_ssize_t = cols.attr_ptr[self._row + 1]
        k: cython.Py_ssize_t
        if lo == hi:
            return ()
        out: list = []
        for k in range(lo, hi):
            out.append(_attr_view(cols, k))
        return tuple(out)

    @property
    def row(self) -> int:
        """The node's row in the trace."""
        return self._row

    def attr(self, name: str, default: Any = None) -> Any:
        """Value of the last attribute called ``name``, else ``default``."""
        cols: ViewColumns = self._cols
        k: cython.Py_ssize_t
        for k in range(cols.attr_ptr[self._row + 1] - 1, cols.attr_ptr[self._row] - 1, -1):
            if cols.attr_names[cols.attr_name_idx[k]] == name:
                return cols.attr_rows.value(k)
        return default

    @property
    def inputs(self) -> IOInfo | None:
        """``Node.inputs``, decoded on access (None when absent)."""
        t: Any = self._trace
        return t._io(t.inputs_off, t.inputs_len, self._row)

    @property
    def outputs(self) -> IOInfo | None:
        """``Node.outputs``, decoded on access (None when absent)."""
        t: Any = self._trace
        return t._io(t.outputs_off, t.outputs_len, self._row)

    @property
    def unknown(self) -> bytes:
        """Fields unknown to the schema, as their raw bytes in file order."""
        t: Any = self._trace
        return t.unknown_of(self._row)

    def materialize(self) -> ChakraNode:
        """This node as a frozen :class:`~lumos.chakra.trace.ChakraNode` (every field decoded)."""
        t: Any = self._trace
        return t.materialize(self._row)

    def __repr__(self) -> str:
        return f"NodeView(id={self.id}, name={self.name!r}, type={self.type!r})"


@cython.cfunc
def _node_view(cols: ViewColumns, trace: object, row: cython.Py_ssize_t) -> NodeView:
    v: NodeView = NodeView.__new__(NodeView)
    v._cols = cols
    v._trace = trace
    v._row = row
    return v


def node_views(
    trace: ChakraTrace, lo: cython.Py_ssize_t, hi: cython.Py_ssize_t
) -> Iterator[NodeView]:
    """Views of node rows ``lo..hi-1``, one at a time as they are asked for."""
    cols: ViewColumns = trace.view_columns
    row: cython.Py_ssize_t
    for row in range(lo, hi):
        yield _node_view(cols, trace, row)
