"""Cheap read-only views of a :class:`~lumos.chakra.trace.ChakraTrace`'s nodes and attributes.

A :class:`NodeView` has the fields of a :class:`~lumos.chakra.trace.ChakraNode` (``id``,
``name``, ``type``, ``ctrl_deps``, ``data_deps``, ``start_time_micros``, ``duration_micros``,
``inputs``, ``outputs``, ``attrs``, ``unknown`` and ``attr(name)``). Views come in blocks of
rows: each column of the block becomes a Python list in one ``ndarray.tolist`` call, and the
views are zipped from those lists by loops that run in C, so reading every node's fields costs
an index per field, not a NumPy scalar or a Python call per field. What is costly to decode is
read from the trace only when asked for: an :class:`AttrView` has ``name`` and ``kind`` at once
and decodes its ``value`` from the trace's compiled attribute table
(:class:`~lumos.chakra.attr_table.AttrTable`); ``inputs``, ``outputs`` and ``unknown`` are
decoded on access.

Both views are tuples underneath (that is what lets C build them); read them by field name.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from lumos.chakra.attrs import IOInfo
from lumos.chakra.schema import ATTR_KIND_NAMES, NodeType

if TYPE_CHECKING:
    from lumos.chakra.trace import ChakraNode, ChakraTrace

__all__ = ["AttrView", "NodeView", "attr_view_class", "node_block"]

# NodeType by the low byte of the int8 column; a value outside the enum stays an int
_TYPES: list[Any] = [v - 256 if v > 127 else v for v in range(256)]
for _t in NodeType:
    _TYPES[_t.value] = _t
_TYPE_LUT = np.array(_TYPES, dtype=object)


class NodeView(tuple):
    """One node of a trace (see the module docstring); a tuple underneath, so that a block of
    them is made by one call over the block's columns, but read it by field name."""

    __slots__ = ()

    id = property(itemgetter(0), doc="``Node.id``.")
    name = property(itemgetter(1), doc="``Node.name``.")
    type = property(itemgetter(2), doc="``Node.type`` (an ``int`` outside :class:`NodeType`).")
    ctrl_deps = property(itemgetter(3), doc="``Node.ctrl_deps`` ids (a tuple).")
    data_deps = property(itemgetter(4), doc="``Node.data_deps`` ids (a tuple).")
    start_time_micros = property(itemgetter(5), doc="``Node.start_time_micros`` (0: absent).")
    duration_micros = property(itemgetter(6), doc="``Node.duration_micros`` (0: absent).")
    attrs = property(itemgetter(7), doc="The attributes (:class:`AttrView`), in file order.")
    row = property(itemgetter(8), doc="Row of this node in its trace.")

    def attr(self, name: str, default: Any = None) -> Any:
        """Value of the last attribute called ``name``, else ``default``."""
        for a in reversed(self[7]):
            if a.name == name:
                return a.value
        return default

    @property
    def inputs(self) -> IOInfo | None:
        """``Node.inputs``, decoded on access (None when absent)."""
        t = self[9]
        return t._io(t.inputs_off, t.inputs_len, self[8])

    @property
    def outputs(self) -> IOInfo | None:
        """``Node.outputs``, decoded on access (None when absent)."""
        t = self[9]
        return t._io(t.outputs_off, t.outputs_len, self[8])

    @property
    def unknown(self) -> bytes:
        """Fields unknown to the schema, as their raw bytes in file order."""
        return self[9].unknown_of(self[8])

    def materialize(self) -> ChakraNode:
        """This node as a frozen :class:`~lumos.chakra.trace.ChakraNode` (every field decoded)."""
        return self[9].materialize(self[8])

    def __repr__(self) -> str:
        return f"NodeView(id={self.id}, name={self.name!r}, type={self.type!r})"


class AttrView(int):
    """One attribute of a node: ``name`` at once, ``kind`` and ``value`` decoded on access.

    An ``int`` underneath (the attribute's row in its trace), of a subclass made once per trace
    (:func:`attr_view_class`) whose ``name`` reads a list of the trace's attribute names: made
    in C, and an ``int`` is not tracked by the garbage collector, so a view costs little more
    than the list entry it points at."""

    __slots__ = ()
    _trace: ChakraTrace

    @property
    def name(self) -> str:  # replaced per trace by a C-level getter
        """``AttributeProto.name``."""
        return self._trace.attr_names[int(self._trace.attr_name_idx[self])]

    @property
    def kind(self) -> str:
        """The oneof member that carries the value (``"int64_val"``...; ``""`` for none)."""
        return ATTR_KIND_NAMES.get(int(self._trace.attr_kind[self]), "")

    @property
    def value(self) -> Any:
        """The value (a list for a list kind); raises ``ChakraFormatError`` naming the node
        when it does not decode."""
        return self._trace.attr_value(int(self))

    @property
    def doc_string(self) -> str:
        """``AttributeProto.doc_string``."""
        return self._trace.attr_doc(int(self))

    def __repr__(self) -> str:
        return f"AttrView(name={self.name!r}, kind={self.kind!r})"

    __str__ = __repr__


def attr_view_class(trace: ChakraTrace) -> type[AttrView]:
    """The :class:`AttrView` subclass of ``trace``: its ``name`` indexes a list of the name of
    every attribute row, made once here in one call."""
    row_names = trace.attr_names_array[trace.attr_name_idx].tolist()
    return type(
        "AttrView",
        (AttrView,),
        {"__slots__": (), "_trace": trace, "name": property(row_names.__getitem__)},
    )


def _split(values: Iterator[Any], ptr: np.ndarray) -> Iterator[tuple[Any, ...]]:
    """``values`` cut at the CSR offsets ``ptr`` into one tuple per row, lazily: a row's items
    are taken (and made, when ``values`` is lazy) only when its tuple is asked for."""
    return map(tuple, map(islice, repeat(values), np.diff(ptr).tolist()))


def _csr_values(ptr: np.ndarray, val: np.ndarray, lo: int, hi: int) -> Iterator[tuple[int, ...]]:
    a, b = int(ptr[lo]), int(ptr[hi])
    if a == b:  # common for ctrl_deps: no per-row work at all
        return repeat((), hi - lo)
    return _split(iter(val[a:b].tolist()), ptr[lo : hi + 1] - a)


def node_block(trace: ChakraTrace, lo: int, hi: int) -> Iterator[NodeView]:
    """Views of node rows ``lo..hi-1``. Each column of the block becomes a Python list in one
    call, and the views are zipped from those lists by loops that run in C, one view (and its
    attribute views) at a time as they are asked for: a view that the caller drops at once is
    never seen by the garbage collector's older generations."""
    t = trace
    a, b = int(t.attr_ptr[lo]), int(t.attr_ptr[hi])
    attrs = map(t.attr_view_class, range(a, b))
    return map(NodeView, zip(
        t.node_id[lo:hi].tolist(),
        t.names_array[t.name_idx[lo:hi]].tolist(),
        _TYPE_LUT[t.node_type[lo:hi].view(np.uint8)].tolist(),
        _csr_values(t.ctrl_ptr, t.ctrl_deps, lo, hi),
        _csr_values(t.data_ptr, t.data_deps, lo, hi),
        t.start_time_micros[lo:hi].tolist(),
        t.duration_micros[lo:hi].tolist(),
        _split(attrs, t.attr_ptr[lo : hi + 1] - a),
        range(lo, hi),
        repeat(t),
    ))  # fmt: skip
