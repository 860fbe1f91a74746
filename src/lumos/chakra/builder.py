"""Build a :class:`ChakraTrace` from Python values (generators, converters, tests).

>>> from lumos.chakra import NodeType, attr
>>> b = ChakraTraceBuilder(version="0.0.4")
>>> b.add_node(1, "all_reduce", NodeType.COMM_COLL_NODE,
...            attrs=[attr("is_cpu_op", False), attr("comm_type", 0), attr("comm_size", 1 << 20)])
>>> trace = b.build()
>>> trace.num_nodes, int(trace.comm.comm_size[0])
(1, 1048576)

Attributes are encoded once, here, with the kind each :class:`Attr` names, so the bytes match
what upstream's protobuf writers produce for the same values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from lumos.chakra.attrs import Attr, IOInfo, decode_attr, encode_attr, encode_io_info
from lumos.chakra.schema import ATTR_KIND_BY_NAME
from lumos.chakra.trace import ChakraMetadata, ChakraNode, ChakraTrace

__all__ = ["ChakraTraceBuilder", "trace_from_nodes"]


class ChakraTraceBuilder:
    """Accumulates nodes; :meth:`build` returns an immutable :class:`ChakraTrace`."""

    def __init__(
        self,
        version: str = "",
        metadata_attrs: Sequence[Attr] = (),
        *,
        metadata: ChakraMetadata | None = None,
        rank: int | None = None,
    ) -> None:
        self.metadata = metadata or ChakraMetadata.build(version, list(metadata_attrs))
        self.rank = rank
        self._ids: list[int] = []
        self._name_idx: list[int] = []
        self._names: dict[str, int] = {}
        self._types: list[int] = []
        self._ctrl: list[int] = []
        self._ctrl_ptr: list[int] = [0]
        self._data: list[int] = []
        self._data_ptr: list[int] = [0]
        self._start: list[int] = []
        self._dur: list[int] = []
        self._blob = bytearray()
        self._io: list[tuple[int, int, int, int]] = []
        self._attr_ptr: list[int] = [0]
        self._attr_spans: list[tuple[int, int]] = []
        self._attr_rows: list[Attr] = []
        self._unk_ptr: list[int] = [0]
        self._unk_spans: list[tuple[int, int]] = []

    def _put(self, data: bytes) -> tuple[int, int]:
        off = len(self._blob)
        self._blob += data
        return off, len(data)

    def add_node(
        self,
        id: int,
        name: str,
        type: int,
        *,
        ctrl_deps: Iterable[int] = (),
        data_deps: Iterable[int] = (),
        start_time_micros: int = 0,
        duration_micros: int = 0,
        inputs: IOInfo | None = None,
        outputs: IOInfo | None = None,
        attrs: Iterable[Attr] = (),
        unknown: bytes = b"",
    ) -> None:
        """Append one node (ids are not checked here; ``validate`` does that)."""
        self._ids.append(int(id))
        self._name_idx.append(self._names.setdefault(name, len(self._names)))
        self._types.append(int(type))
        self._ctrl.extend(int(d) for d in ctrl_deps)
        self._ctrl_ptr.append(len(self._ctrl))
        self._data.extend(int(d) for d in data_deps)
        self._data_ptr.append(len(self._data))
        self._start.append(int(start_time_micros))
        self._dur.append(int(duration_micros))
        io: list[int] = []
        for info in (inputs, outputs):
            io.extend(self._put(encode_io_info(info)) if info is not None else (0, -1))
        self._io.append((io[0], io[1], io[2], io[3]))
        for a in attrs:
            self._attr_spans.append(self._put(encode_attr(a)))
            self._attr_rows.append(a)
        self._attr_ptr.append(len(self._attr_spans))
        if unknown:
            self._unk_spans.append(self._put(unknown))
        self._unk_ptr.append(len(self._unk_spans))

    def add(self, node: ChakraNode) -> None:
        """Append a :class:`ChakraNode`."""
        self.add_node(
            node.id, node.name, node.type, ctrl_deps=node.ctrl_deps, data_deps=node.data_deps,
            start_time_micros=node.start_time_micros, duration_micros=node.duration_micros,
            inputs=node.inputs, outputs=node.outputs, attrs=node.attrs, unknown=node.unknown,
        )  # fmt: skip

    def build(self) -> ChakraTrace:
        """The trace of every node added so far."""
        attr_names: dict[str, int] = {}
        name_idx = [attr_names.setdefault(a.name, len(attr_names)) for a in self._attr_rows]
        kinds, ints, floats = [], [], []
        for a, (off, ln) in zip(self._attr_rows, self._attr_spans, strict=True):
            kinds.append(ATTR_KIND_BY_NAME.get(a.kind, 0))
            # the decoded value is what the compiled reader would see (int32 wrap, float32, ...)
            v = decode_attr(bytes(self._blob[off : off + ln])).value
            is_num = isinstance(v, (int, float)) and not isinstance(v, bool)
            iv = int(v) if isinstance(v, bool) or (is_num and isinstance(v, int)) else 0
            ints.append(iv - (1 << 64) if iv >= 1 << 63 else iv)
            floats.append(float(v) if is_num and isinstance(v, float) else 0.0)
        io = np.array(self._io, dtype=np.int64).reshape(-1, 4)
        blob = np.frombuffer(bytes(self._blob), dtype=np.uint8)
        spans = np.array(self._attr_spans, dtype=np.int64).reshape(-1, 2)
        unk = np.array(self._unk_spans, dtype=np.int64).reshape(-1, 2)
        return ChakraTrace(
            metadata=self.metadata,
            node_id=np.array(self._ids, dtype=np.uint64),
            name_idx=np.array(self._name_idx, dtype=np.int32),
            names=tuple(self._names),
            node_type=np.array(self._types, dtype=np.int8),
            ctrl_ptr=np.array(self._ctrl_ptr, dtype=np.int64),
            ctrl_deps=np.array(self._ctrl, dtype=np.uint64),
            data_ptr=np.array(self._data_ptr, dtype=np.int64),
            data_deps=np.array(self._data, dtype=np.uint64),
            start_time_micros=np.array(self._start, dtype=np.uint64),
            duration_micros=np.array(self._dur, dtype=np.uint64),
            blob=blob,
            inputs_off=io[:, 0].copy(),
            inputs_len=io[:, 1].copy(),
            outputs_off=io[:, 2].copy(),
            outputs_len=io[:, 3].copy(),
            attr_ptr=np.array(self._attr_ptr, dtype=np.int64),
            attr_off=spans[:, 0].copy(),
            attr_len=spans[:, 1].copy(),
            attr_name_idx=np.array(name_idx, dtype=np.int32),
            attr_names=tuple(attr_names),
            attr_kind=np.array(kinds, dtype=np.int8),
            attr_int=np.array(ints, dtype=np.int64),
            attr_float=np.array(floats, dtype=np.float64),
            unk_ptr=np.array(self._unk_ptr, dtype=np.int64),
            unk_off=unk[:, 0].copy(),
            unk_len=unk[:, 1].copy(),
            rank=self.rank,
        )


def trace_from_nodes(
    nodes: Iterable[ChakraNode], metadata: ChakraMetadata | None = None, rank: int | None = None
) -> ChakraTrace:
    """A trace holding ``nodes`` in order."""
    b = ChakraTraceBuilder(metadata=metadata, rank=rank)
    for n in nodes:
        b.add(n)
    return b.build()
