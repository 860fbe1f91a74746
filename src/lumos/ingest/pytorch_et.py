"""Read a PyTorch Execution Trace (``ExecutionTraceObserver`` JSON) into a columnar :class:`HostTrace`.

The file may be plain JSON, gzip, or a member of a tar archive (a tar holding exactly one JSON
member needs no ``member=``). Every schema from 1.0.1 through 1.1.1-chakra.0.0.4 loads, and newer
ones do too as long as the fields we use keep their names: fields are found by presence, never by
the ``schema`` string (see :mod:`lumos.ingest.et_schema` for the two layouts).

Nodes are sorted by id, which is the order ops started in. What a node becomes:

=================  ============================================================================
column             meaning
=================  ============================================================================
``node_id``        the ET ``id`` (int64, ascending, unique)
``parent_idx``     position of the ``ctrl_deps``/``parent`` node; -1 for a root (self-parent)
``name_idx``       op name, interned into ``names``
``rf_id``, ``tid`` record-function id (joins Kineto "Record function id"), thread; -1 absent
``fw_parent``,     forward-op parent, sequence number, record scope, forward thread;
``seq_id``, ...    -1 when the trace does not have them (``fields_present`` says which do)
``op_schema_idx``  interned into ``op_schemas`` ("" when absent)
inputs/outputs     undecoded bytes in ``io_blob``; :meth:`HostTrace.inputs` decodes one node
=================  ============================================================================

A *linked* ET (host+device, as ``lumos link -o`` and upstream ``chakra_trace_link`` write it) reads
too: its GPU nodes (those with a ``cat``) are not host ops, so they stay out of the columns and
are counted by category in ``device_nodes``; ``timed_nodes`` counts the host ops that carry Kineto
timing (``ts``).

Bad input raises :class:`~lumos.errors.TraceFormatError` (or ``InputError`` for unreadable files)
naming the file. A parent id that names no node is the one thing degraded rather than refused:
the node becomes a root and ``diagnostics.count("dangling_parent")`` counts it.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec
import numpy as np

from lumos._io import decompress, read_bytes
from lumos.diagnostics import Diagnostics
from lumos.errors import TraceFormatError
from lumos.ingest.et_comm import COMM_ATTR_NAMES, CommTable, build_comm_table
from lumos.ingest.et_schema import RawET, RawIO

__all__ = ["HostTrace", "IOInfo", "read_et_document", "read_pytorch_et", "summarize_et"]

# Slots of io_spans: the three undecoded pieces of each direction. The newer object form keeps
# everything in the VALUES slot; the 1.0.1 form splits values, shapes and types.
IN_VALUES, IN_SHAPES, IN_TYPES, OUT_VALUES, OUT_SHAPES, OUT_TYPES = range(6)
_INT_FIELDS = ("rf_id", "tid", "fw_parent", "fw_tid", "seq_id", "scope")


class IOInfo(NamedTuple):
    """The decoded arguments of one node in one direction (lists aligned by position)."""

    values: list[Any]
    shapes: list[Any]
    types: list[Any]
    strides: list[Any] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class HostTrace:
    """One rank's PyTorch Execution Trace, struct-of-arrays (one row per node, sorted by id)."""

    path: str
    schema: str
    pid: int
    time: str
    start_ts_ns: int  # the observer's start_ts (microseconds) in ns; -1 when absent
    finish_ts_ns: int
    distributed_info: Mapping[str, Any] | None
    node_id: np.ndarray  # int64
    parent_idx: np.ndarray  # int32
    name_idx: np.ndarray  # int32 -> names
    names: tuple[str, ...]
    rf_id: np.ndarray  # int64
    tid: np.ndarray  # int64
    fw_parent: np.ndarray  # int64
    fw_tid: np.ndarray  # int64
    seq_id: np.ndarray  # int64
    scope: np.ndarray  # int64
    op_schema_idx: np.ndarray  # int32 -> op_schemas
    op_schemas: tuple[str, ...]
    io_blob: bytes
    io_spans: np.ndarray  # int64 (num_nodes, 6, 2): [start, end) into io_blob per slot
    comm: CommTable
    extra_attrs: Mapping[str, Mapping[int, Any]]  # attr name -> {node_idx: value}, sparse
    fields_present: tuple[str, ...]
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    #: In a linked host+device ET: its GPU nodes by ``cat`` (not host ops: not in the columns).
    device_nodes: Mapping[str, int] = field(default_factory=dict)
    #: In a linked host+device ET: host nodes that carry Kineto timing (``ts``).
    timed_nodes: int = 0

    def __repr__(self) -> str:
        linked = (
            f", linked ({sum(self.device_nodes.values())} GPU nodes)" if self.device_nodes else ""
        )
        return f"HostTrace({self.path!r}, schema {self.schema!r}, {self.num_nodes} nodes{linked})"

    @property
    def num_nodes(self) -> int:
        return int(self.node_id.shape[0])

    def name(self, idx: int) -> str:
        """The op name of node ``idx``."""
        return self.names[int(self.name_idx[idx])]

    def index_of(self, node_id: int) -> int:
        """Position of the node with ET id ``node_id``; raises KeyError when there is none."""
        i = int(np.searchsorted(self.node_id, node_id))
        if i >= self.num_nodes or int(self.node_id[i]) != node_id:
            raise KeyError(node_id)
        return i

    def inputs(self, idx: int) -> IOInfo:
        """The decoded inputs of node ``idx``."""
        return self._io(idx, IN_VALUES)

    def outputs(self, idx: int) -> IOInfo:
        """The decoded outputs of node ``idx``."""
        return self._io(idx, OUT_VALUES)

    def _io(self, idx: int, base: int) -> IOInfo:
        return _decode_io(self.path, self.io_blob, self.io_spans, self.node_id, idx, base)


def _decode_slot(blob: bytes, spans: np.ndarray, idx: int, slot: int) -> Any:
    start, end = (int(x) for x in spans[idx, slot])
    if end <= start:
        return None
    return msgspec.json.decode(blob[start:end], type=RawIO | list[Any])


def _decode_io(
    where: str, blob: bytes, spans: np.ndarray, node_id: np.ndarray, idx: int, base: int
) -> IOInfo:
    try:
        got = _decode_slot(blob, spans, idx, base)
        if isinstance(got, RawIO):
            return IOInfo(got.values, got.shapes, got.types, got.strides)
        shapes = _decode_slot(blob, spans, idx, base + 1)
        types = _decode_slot(blob, spans, idx, base + 2)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(
            where, f"node {int(node_id[idx])}: malformed inputs/outputs: {exc}"
        ) from None
    except RecursionError:
        raise TraceFormatError(
            where, f"node {int(node_id[idx])}: inputs/outputs nested too deeply"
        ) from None
    return IOInfo(
        got if isinstance(got, list) else [],
        shapes if isinstance(shapes, list) else [],
        types if isinstance(types, list) else [],
    )


def read_pytorch_et(path: str | os.PathLike[str], member: str | None = None) -> HostTrace:
    """Read a PyTorch Execution Trace file into a :class:`HostTrace`.

    ``member`` picks one file of a tar archive; without it a tar holding exactly one ``.json``
    member is read, and one holding several is refused with the list of members.
    """
    where = f"{os.fspath(path)}::{member}" if member else os.fspath(path)
    raw = read_bytes(path, member)
    if member is None and _is_tar(raw):
        member, raw = _single_json_member(where, raw)
        where = f"{where}::{member}"
    return _parse(where, raw)


def read_et_document(path: str | os.PathLike[str], member: str | None = None) -> dict[str, Any]:
    """The whole ET JSON object as plain Python values, for tools that rewrite the file
    (``lumos link -o``). Checked like :func:`read_pytorch_et` (same errors)."""
    where = f"{os.fspath(path)}::{member}" if member else os.fspath(path)
    raw = read_bytes(path, member)
    if member is None and _is_tar(raw):
        member, raw = _single_json_member(where, raw)
        where = f"{where}::{member}"
    _decode(where, raw)  # the typed decode names what is wrong with a bad file
    doc = msgspec.json.decode(raw)
    assert isinstance(doc, dict)  # RawET decoded, so the top level is an object
    return doc


def summarize_et(trace: HostTrace, top: int = 10) -> dict[str, Any]:
    """The ``lumos info`` summary of an ET; see :func:`lumos.ingest.et_summary.summarize_et`."""
    from lumos.ingest.et_summary import summarize_et as _summarize  # it imports this module

    return _summarize(trace, top)


def _is_tar(raw: bytes) -> bool:
    return len(raw) > 262 and raw[257:262] == b"ustar"


def _single_json_member(where: str, raw: bytes) -> tuple[str, bytes]:
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            members = [m for m in tar.getmembers() if m.isfile()]
            jsons = [m for m in members if m.name.endswith((".json", ".json.gz"))]
            if len(jsons) != 1:
                names = ", ".join(m.name for m in jsons or members) or "none"
                raise TraceFormatError(
                    where,
                    f"archive holds {len(jsons)} JSON members ({names}); name one with member=",
                )
            f = tar.extractfile(jsons[0])
            assert f is not None  # isfile() above
            data = f.read()
    except tarfile.TarError as exc:
        raise TraceFormatError(where, f"cannot read archive: {exc}") from None
    data = decompress(data, f"{where}::{jsons[0].name}")
    return jsons[0].name, data


_DECODER = msgspec.json.Decoder(RawET)
_NULL = msgspec.Raw(b"null")


def _decode(where: str, raw: bytes) -> RawET:
    if not raw.strip():
        raise TraceFormatError(where, "empty file")
    try:
        return _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        head = raw[:4096]
        if b'"traceEvents"' in head:
            raise TraceFormatError(
                where, "this is a Kineto trace, not a PyTorch Execution Trace"
            ) from None
        if b'"nodes"' not in raw:
            raise TraceFormatError(
                where, "not a PyTorch Execution Trace (no top-level 'nodes' list)"
            ) from None
        raise TraceFormatError(where, f"malformed Execution Trace: {exc}") from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(where, f"invalid or truncated JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(where, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except RecursionError:
        raise TraceFormatError(where, "JSON nested too deeply (hundreds of levels)") from None


def _parse(where: str, raw: bytes) -> HostTrace:
    et = _decode(where, raw)
    device_nodes: dict[str, int] = {}
    for nd in et.nodes:
        if nd.cat is not None:
            device_nodes[nd.cat] = device_nodes.get(nd.cat, 0) + 1
    nodes = sorted((nd for nd in et.nodes if nd.cat is None), key=lambda n: n.id)
    n = len(nodes)
    if n == 0:
        raise TraceFormatError(where, "Execution Trace has no nodes")
    node_id = np.fromiter((nd.id for nd in nodes), dtype=np.int64, count=n)
    dup = np.flatnonzero(node_id[1:] == node_id[:-1])
    if dup.size:
        raise TraceFormatError(where, f"duplicate node id {int(node_id[dup[0]])}")

    # Plain lists while looping (numpy item assignment is ~10x slower), arrays once at the end.
    ints: dict[str, list[int]] = {k: [-1] * n for k in _INT_FIELDS}
    parents = [-1] * n
    name_ids: dict[str, int] = {}
    schema_ids: dict[str, int] = {"": 0}
    names_of = [0] * n
    schemas_of = [0] * n
    present: dict[str, None] = {}
    extra: dict[str, dict[int, Any]] = {}
    comm_attrs: dict[int, dict[str, Any]] = {}
    flat_spans = [0] * (n * 12)
    parts: list[Any] = []
    pos = 0
    for i, nd in enumerate(nodes):
        names_of[i] = name_ids.setdefault(nd.name, len(name_ids))
        p = nd.ctrl_deps if nd.ctrl_deps is not None else nd.parent
        if isinstance(p, list):
            p = p[0] if p else None
        if p is not None:
            parents[i] = p
        schema = nd.op_schema
        for k in _INT_FIELDS:
            v = getattr(nd, k)
            if v is not None:
                ints[k][i] = v
                present[k] = None
        if nd.attrs:
            for a in nd.attrs:
                if a.name in ints and type(a.value) is int and -(2**63) <= a.value < 2**63:
                    ints[a.name][i] = a.value
                    present[a.name] = None
                elif a.name == "op_schema" and isinstance(a.value, str):
                    schema = a.value
                elif a.name in COMM_ATTR_NAMES:
                    comm_attrs.setdefault(i, {})[a.name] = a.value
                else:
                    extra.setdefault(a.name, {})[i] = a.value
        if schema is not None:
            present["op_schema"] = None
            schemas_of[i] = schema_ids.setdefault(schema, len(schema_ids))
        base = i * 12
        for r in (
            nd.inputs,
            nd.input_shapes,
            nd.input_types,
            nd.outputs,
            nd.output_shapes,
            nd.output_types,
        ):
            size = len(r)
            if size and r != _NULL:
                flat_spans[base] = pos
                pos += size
                flat_spans[base + 1] = pos
                parts.append(r)
            base += 2

    spans = np.asarray(flat_spans, dtype=np.int64).reshape(n, 6, 2)
    parent_id = np.asarray(parents, dtype=np.int64)
    name_idx = np.asarray(names_of, dtype=np.int32)
    op_schema_idx = np.asarray(schemas_of, dtype=np.int32)
    diagnostics = Diagnostics()
    parent_idx = _resolve_parents(where, node_id, parent_id, diagnostics)
    blob = b"".join(parts)
    names = tuple(name_ids)
    comm = _comm_table(where, blob, spans, node_id, name_idx, name_ids, comm_attrs)
    return HostTrace(
        path=where,
        schema=et.schema,
        pid=et.pid if et.pid is not None else -1,
        time=et.time,
        start_ts_ns=_us_to_ns(et.start_ts),
        finish_ts_ns=_us_to_ns(et.finish_ts),
        distributed_info=et.distributedInfo,
        node_id=node_id,
        parent_idx=parent_idx,
        name_idx=name_idx,
        names=names,
        op_schema_idx=op_schema_idx,
        op_schemas=tuple(schema_ids),
        io_blob=blob,
        io_spans=spans,
        comm=comm,
        extra_attrs=extra,
        fields_present=tuple(sorted(present)),
        diagnostics=diagnostics,
        device_nodes=dict(sorted(device_nodes.items())),
        timed_nodes=sum(1 for nd in nodes if nd.ts is not None),
        **{k: np.asarray(v, dtype=np.int64) for k, v in ints.items()},
    )


def _us_to_ns(v: float | None) -> int:
    return -1 if v is None else round(v * 1000)


def _resolve_parents(
    where: str, node_id: np.ndarray, parent_id: np.ndarray, diagnostics: Diagnostics
) -> np.ndarray:
    """Parent positions; self-parents and unset parents are roots; refuses cycles."""
    n = node_id.shape[0]
    pos = np.searchsorted(node_id, parent_id).clip(0, n - 1)
    found = node_id[pos] == parent_id
    is_root = (parent_id < 0) | (parent_id == node_id)
    dangling = ~found & ~is_root
    if dangling.any():
        first = int(np.flatnonzero(dangling)[0])
        diagnostics.warn(
            "dangling_parent",
            f"node {int(node_id[first])} names parent {int(parent_id[first])}, which is absent",
            int(dangling.sum()),
        )
    parent_idx = np.where(found & ~is_root, pos, -1).astype(np.int32)
    # Pointer doubling: after k rounds anc holds the 2**k-th ancestor; any node that still has
    # one after 2**k > n steps sits on (or under) a cycle.
    anc = parent_idx.astype(np.int64)
    steps = 1
    while steps <= n:
        anc = np.where(anc >= 0, anc[anc.clip(0)], -1)
        steps *= 2
    if (anc >= 0).any():
        bad = int(node_id[int(np.flatnonzero(anc >= 0)[0])])
        raise TraceFormatError(where, f"parent links form a cycle (reached from node {bad})")
    return parent_idx


def _comm_table(
    where: str,
    blob: bytes,
    spans: np.ndarray,
    node_id: np.ndarray,
    name_idx: np.ndarray,
    name_ids: Mapping[str, int],
    comm_attrs: Mapping[int, Mapping[str, Any]],
) -> CommTable:
    """The collective table, from every record_param_comms node's arguments and attributes."""
    rows = []
    rpc = name_ids.get("record_param_comms", -1)
    for i in np.flatnonzero(name_idx == rpc).tolist():
        ins = _decode_io(where, blob, spans, node_id, i, IN_VALUES)
        outs = _decode_io(where, blob, spans, node_id, i, OUT_VALUES)
        rows.append((i, ins.values, ins.types, outs.values, comm_attrs.get(i, {})))
    return build_comm_table(rows)
