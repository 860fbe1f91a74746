"""Cheap read-only views of a :class:`~lumos.chakra.trace.ChakraTrace`'s nodes and attributes.

A :class:`NodeView` has the fields of a :class:`~lumos.chakra.trace.ChakraNode` (``id``,
``name``, ``type``, ``ctrl_deps``, ``data_deps``, ``start_time_micros``, ``duration_micros``,
``inputs``, ``outputs``, ``attrs``, ``unknown`` and ``attr(name)``). Views come in blocks of
rows: each column of the block becomes a Python list in one ``ndarray.tolist`` call, and the
views are zipped from those lists by loops that run in C, so reading every node's fields costs
an index per field, not a NumPy scalar or a Python call per field (fields are read through the
C-level getters of :func:`collections.namedtuple`). What is costly to decode is read from the
trace only when asked for: an :class:`AttrView` has ``name`` at once and decodes its ``kind``,
``value`` and ``doc_string`` from the trace's compiled attribute table
(:class:`~lumos.chakra.attr_table.AttrTable`); ``inputs``, ``outputs`` and ``unknown`` are
decoded on access.

Both views are tuples underneath (that is what lets C build them); read them by field name.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator
from itertools import chain, islice, repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from lumos.chakra.attrs import IOInfo
from lumos.chakra.schema import NodeType

if TYPE_CHECKING:
    from lumos.chakra.trace import ChakraNode, ChakraTrace

__all__ = ["AttrView", "NodeView", "node_block"]

# NodeType by the low byte of the int8 column; a value outside the enum stays an int
_TYPES: list[Any] = [v - 256 if v > 127 else v for v in range(256)]
for _t in NodeType:
    _TYPES[_t.value] = _t
_TYPE_LUT = np.array(_TYPES, dtype=object)


# C-level getters of a tuple's items (what namedtuple fields are): about twice as fast to read
# as property(itemgetter(k)), and a node's fields are read millions of times
_Fields = namedtuple(
    "_Fields", "id name type ctrl_deps data_deps start_time_micros duration_micros attrs row"
)


class NodeView(tuple):
    """One node of a trace (see the module docstring); a tuple underneath, so that a block of
    them is made by one call over the block's columns, but read it by field name: ``id``,
    ``name``, ``type`` (a :class:`NodeType`, an ``int`` outside it), ``ctrl_deps`` and
    ``data_deps`` (tuples of ids), ``start_time_micros`` and ``duration_micros`` (0: absent),
    ``attrs`` (a tuple of :class:`AttrView`, in file order) and ``row`` (its row in the trace);
    ``inputs``, ``outputs`` and ``unknown`` are decoded on access."""

    __slots__ = ()

    id = _Fields.id
    name = _Fields.name
    type = _Fields.type
    ctrl_deps = _Fields.ctrl_deps
    data_deps = _Fields.data_deps
    start_time_micros = _Fields.start_time_micros
    duration_micros = _Fields.duration_micros
    attrs = _Fields.attrs
    row = _Fields.row
    if TYPE_CHECKING:  # what the getters return, for type checkers
        id: int  # type: ignore[no-redef]
        name: str  # type: ignore[no-redef]
        type: NodeType | int  # type: ignore[no-redef]
        ctrl_deps: tuple[int, ...]  # type: ignore[no-redef]
        data_deps: tuple[int, ...]  # type: ignore[no-redef]
        start_time_micros: int  # type: ignore[no-redef]
        duration_micros: int  # type: ignore[no-redef]
        attrs: tuple[AttrView, ...]  # type: ignore[no-redef]
        row: int  # type: ignore[no-redef]

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


_AttrFields = namedtuple("_AttrFields", "name row rows")


class AttrView(tuple):
    """One attribute of a node: ``name`` at once, ``kind``, ``value`` and ``doc_string`` decoded
    on access.

    A tuple ``(name, row, rows)`` underneath, made in C (see :func:`node_block`): ``row`` is its
    attribute row in the trace, ``rows`` the trace's :class:`~lumos.chakra.attr_table.AttrRows`
    that decodes it (not the trace: the trace holds its ``AttrRows``)."""

    __slots__ = ()

    name = _AttrFields.name
    row = _AttrFields.row
    if TYPE_CHECKING:
        name: str  # type: ignore[no-redef]
        row: int  # type: ignore[no-redef]

    @property
    def kind(self) -> str:
        """The oneof member that carries the value (``"int64_val"``...; ``""`` for none)."""
        return self[2].kind(self[1])

    @property
    def value(self) -> Any:
        """The value (a list for a list kind); raises ``ChakraFormatError`` naming the node
        when it does not decode."""
        return self[2].value(self[1])

    @property
    def doc_string(self) -> str:
        """``AttributeProto.doc_string``."""
        return self[2].doc(self[1])

    def __repr__(self) -> str:
        return f"AttrView(name={self.name!r}, kind={self.kind!r})"

    __str__ = __repr__


def _runs(items: Iterator[Any], counts: np.ndarray) -> Iterator[tuple[Any, ...]] | None:
    """``items`` cut into one tuple per row, row ``i`` taking the next ``counts[i]``, lazily (a
    row's items are taken, and made when ``items`` is lazy, when its tuple is asked for), by
    runs of rows with the same count ``k``: ``zip`` over ``k`` references to ``items`` makes a
    run's tuples in C, with no object per row. None when the runs are too short for that."""
    n = counts.shape[0]
    change = np.flatnonzero(counts[1:] != counts[:-1]) + 1
    if change.shape[0] * 16 > n:
        return None
    bounds = [0, *change.tolist(), n]
    ks = counts[bounds[:-1]].tolist()
    return chain.from_iterable(
        islice(zip(*[items] * k, strict=False), e - s) if k else repeat((), e - s)
        for s, e, k in zip(bounds[:-1], bounds[1:], ks, strict=True)
    )


def _csr_values(ptr: np.ndarray, val: np.ndarray, lo: int, hi: int) -> Iterator[tuple[int, ...]]:
    a, b = int(ptr[lo]), int(ptr[hi])
    if a == b:  # common for ctrl_deps: no per-row work at all
        return repeat((), hi - lo)
    values = val[a:b].tolist()
    counts = np.diff(ptr[lo : hi + 1])
    by_runs = _runs(iter(values), counts)
    if by_runs is not None:
        return by_runs
    whole = tuple(values)  # one slice of it per row
    bounds = (ptr[lo : hi + 1] - a).tolist()
    return map(whole.__getitem__, map(slice, bounds[:-1], bounds[1:]))


def _attr_tuples(t: ChakraTrace, lo: int, hi: int) -> Iterator[tuple[AttrView, ...]]:
    """The attribute views of node rows ``lo..hi-1``, a tuple per node, each view made only
    when its node's tuple is (so that a node dropped at once takes its views with it: a view
    that lived through a garbage collection would be moved to an older generation, and many
    such make the collector walk the whole heap again and again)."""
    a, b = int(t.attr_ptr[lo]), int(t.attr_ptr[hi])
    if a == b:
        return repeat((), hi - lo)
    names = t.attr_names_array[t.attr_name_idx[a:b]].tolist()
    views = map(AttrView, zip(names, range(a, b), repeat(t.attr_rows)))
    counts = np.diff(t.attr_ptr[lo : hi + 1])
    by_runs = _runs(views, counts)
    if by_runs is not None:
        return by_runs
    return map(tuple, map(islice, repeat(views), counts.tolist()))


def node_block(trace: ChakraTrace, lo: int, hi: int) -> Iterator[NodeView]:
    """Views of node rows ``lo..hi-1``. Each column of the block becomes a Python list in one
    call, and the views are zipped from those lists by loops that run in C, one view (and its
    attribute views) at a time as they are asked for: a view that the caller drops at once is
    never seen by the garbage collector's older generations."""
    t = trace
    return map(NodeView, zip(
        t.node_id[lo:hi].tolist(),
        t.names_array[t.name_idx[lo:hi]].tolist(),
        _TYPE_LUT[t.node_type[lo:hi].view(np.uint8)].tolist(),
        _csr_values(t.ctrl_ptr, t.ctrl_deps, lo, hi),
        _csr_values(t.data_ptr, t.data_deps, lo, hi),
        t.start_time_micros[lo:hi].tolist(),
        t.duration_micros[lo:hi].tolist(),
        _attr_tuples(t, lo, hi),
        range(lo, hi),
        repeat(t),
    ))  # fmt: skip
