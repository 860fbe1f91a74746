"""Obfuscate a Chakra ET: same nodes, ids, dependencies and durations, no names of the model.

Per node (names: :mod:`lumos.synth.obfuscate_names`):

=====================  ========================================================================
field                  output
=====================  ========================================================================
``id``, deps, type,    kept (the graph and its timing)
start, duration
``name``               renamed by task kind: ``lumos_kind`` in files lumos wrote; otherwise
                       the node type and ``is_cpu_op`` (GPU ``Memcpy``/``Memset`` names are
                       copies, host names that are CUDA/HIP API names runtime calls), as
                       :mod:`lumos.chakra.mapping_foreign` reads them. ``<start>`` anchors
                       and ``... [wait]`` tasks keep their lumos suffix
attributes             numbers and booleans kept when the attribute name is vocabulary
                       (``comm_type``, ``comm_size``, ``rf_id``, ``lumos_*``...);
                       ``pg_name``/``lumos_pg_name``/``lumos_pg_desc`` renamed like process
                       groups; ``lumos_names`` (the interned names) renamed like node names;
                       ``lumos_proc_label`` (thread names) replaced by ``proc <i>``; other
                       strings (``op_schema``...) kept only when vocabulary, else dropped
``inputs/outputs``     ``shapes`` per ``--shapes``; ``values`` (tensor ids, element counts)
                       kept with ``--shapes keep`` when vocabulary, else ``""`` (a METADATA
                       node's, ASTRA-sim's process-group list, always, groups renamed); ``types``
                       kept when vocabulary (``Tensor(float)``), else ``""``
unknown fields         dropped
metadata               attributes by the same rules; ``version`` kept when vocabulary
=====================  ========================================================================

``--jitter`` multiplies ``duration_micros`` (and lumos's exact ``dur_ns``) of every node by a
seeded factor. The returned trace's strings are what the writer serializes, so the leak check
runs on them (:func:`chakra_strings`) before the file is written.

Column-wise: each distinct (name, kind) is renamed once and each attribute *name* judged once;
kept numeric attributes keep their encoded bytes, only replaced ones are re-encoded.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.chakra.attrs import Attr, IOInfo, decode_io_info, encode_attr, encode_io_info
from lumos.chakra.schema import NodeType
from lumos.chakra.trace import ChakraMetadata, ChakraTrace
from lumos.graph.model import TaskKind
from lumos.synth.obfuscate_names import Namer, bucket_dims, is_api_name

__all__ = ["chakra_strings", "obfuscate_chakra"]

_WAIT = " [wait]"
_KEPT = ("<start>",)
_PG_ATTRS = frozenset({"pg_name", "lumos_pg_name", "lumos_pg_desc"})
_COMM_TYPES = (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)


_PG_FIELD = re.compile(r'"(pg_name|pg_desc)": "([^"]*)"')
_STRING_KINDS = np.array([29, 30, 31, 32], dtype=np.int8)  # string/bytes, scalar and list
_DUR_NS = "dur_ns"


def _attr_column(trace: ChakraTrace, name: str, default: int) -> NDArray[np.int64]:
    """Per node, the integer value of its (last) attribute ``name``; ``default`` if absent."""
    out = np.full(trace.num_nodes, default, dtype=np.int64)
    if name in trace.attr_names:
        rows = np.flatnonzero(trace.attr_name_idx == trace.attr_names.index(name))
        owner = np.searchsorted(trace.attr_ptr, rows, side="right") - 1
        out[owner] = trace.attr_int[rows]
    return out


def _kinds(trace: ChakraTrace) -> NDArray[np.int64]:
    """Per node, its task kind: ``lumos_kind`` in files lumos wrote, else from the node type,
    ``is_cpu_op`` and name as :mod:`lumos.chakra.mapping_foreign` reads them; -1 for METADATA."""
    kind = _attr_column(trace, "lumos_kind", -1)
    cpu = _attr_column(trace, "is_cpu_op", 0) != 0
    t = trace.node_type
    comm = np.isin(t, np.array(_COMM_TYPES, dtype=np.int8))
    low = [n.lower() for n in trace.names]
    api = np.array([is_api_name(n) for n in trace.names], dtype=bool)
    mcpy = np.array([n.startswith("memcpy") for n in low], dtype=bool)
    mset = np.array([n.startswith("memset") for n in low], dtype=bool)
    ni = trace.name_idx
    guess = np.select(
        [t == NodeType.METADATA_NODE, comm & cpu, comm, cpu & api[ni], cpu, mcpy[ni], mset[ni]],
        [-1, TaskKind.CPU_COMM, TaskKind.COMM, TaskKind.RUNTIME, TaskKind.CPU_OP,
         TaskKind.MEMCPY, TaskKind.MEMSET],
        default=TaskKind.KERNEL,
    )  # fmt: skip
    ok = (kind >= 0) & (kind <= max(TaskKind)) & (t != NodeType.METADATA_NODE)
    return np.where(ok, kind, guess)


def _doc_present(trace: ChakraTrace) -> NDArray[np.bool_]:
    """Per attribute row: does it carry a ``doc_string`` (field 2 right after the name)?"""
    name_len = np.array([len(s.encode("utf-8")) for s in trace.attr_names], dtype=np.int64)
    n = name_len[trace.attr_name_idx] if trace.attr_names else np.zeros(0, np.int64)
    head = 1 + np.where(n < 128, 1, 2) + n  # tag, length varint, name
    pos = trace.attr_off + np.where(n > 0, head, 0)
    inside = pos < trace.attr_off + trace.attr_len
    out = np.zeros(len(pos), dtype=bool)
    out[inside] = trace.blob[pos[inside]] == 0x12
    return out


class _Obfuscator:
    def __init__(self, namer: Namer, shapes: str, jitter_pct: float, seed: int) -> None:
        self.namer = namer
        self.shapes = shapes
        self.jitter = jitter_pct / 100.0
        self.rng = np.random.default_rng(seed)
        self.names: dict[str, str] = {}
        self.diag: Counter[str] = Counter()

    def name(self, name: str, kind: int | None) -> str:
        new = self.names.get(name)
        if new is not None:
            return new
        if name in _KEPT or (kind is None and self.namer.safe(name)):
            new = name
        elif name.endswith(_WAIT):
            new = self.name(name[: -len(_WAIT)], kind) + _WAIT
        elif kind is None:
            new = self.namer.span(name)
        else:
            new = self.namer.task(name, kind)
        self.names[name] = new
        return new

    def attr(self, a: Attr) -> Attr | None:
        """The attribute to write in place of ``a`` (None: dropped)."""
        v, namer = a.value, self.namer
        if not namer.safe(a.name):
            self.diag["attributes_dropped"] += 1
            return None
        if a.name in _PG_ATTRS:
            v = [namer.pg(x) for x in v] if isinstance(v, list) else namer.pg(str(v))
        elif a.name == "lumos_names":
            v = [self.name(x, None) for x in v]
        elif a.name == "lumos_proc_label":
            v = [x if namer.safe(x) else f"proc {i}" for i, x in enumerate(v)]
        elif not all(namer.safe(x if isinstance(x, str) else x.decode("latin-1"))
                     for x in _texts(v)):  # fmt: skip
            self.diag["attributes_dropped"] += 1
            return None
        return Attr(a.name, v, a.kind, a.doc_string if namer.safe(a.doc_string) else "")

    def io(self, info: IOInfo, metadata: bool) -> IOInfo:
        """``inputs``/``outputs``; a METADATA node's values (``process_group:init``'s group
        list) are kept whatever ``--shapes`` says, with its group names renamed."""
        shapes = ""
        if self.shapes == "keep":
            shapes = info.shapes
        elif self.shapes == "bucket" and info.shapes:
            try:
                shapes = json.dumps(bucket_dims(json.loads(info.shapes)))
            except ValueError:
                self.diag["shapes_unreadable_dropped"] += 1
        text = self.namer.text
        values = info.values
        if metadata:
            values = _PG_FIELD.sub(lambda m: f'"{m[1]}": "{self.namer.pg(m[2])}"', values)
        values = text(values) if self.shapes == "keep" or metadata else ""
        return IOInfo(values=values, shapes=text(shapes), types=text(info.types))

    def trace(self, t: ChakraTrace) -> ChakraTrace:
        kinds = _kinds(t)
        pairs, inv = np.unique(np.stack([t.name_idx.astype(np.int64), kinds]), axis=1,
                               return_inverse=True)  # fmt: skip
        new_names: dict[str, int] = {}
        pair_new = np.array([
            new_names.setdefault(self.name(t.names[int(i)], None if k < 0 else int(k)),
                                 len(new_names))
            for i, k in pairs.T.tolist()], dtype=np.int32)  # fmt: skip
        name_idx = pair_new[inv.reshape(-1)] if t.num_nodes else t.name_idx
        extra = bytearray()
        base = len(t.blob)

        def put(data: bytes) -> tuple[int, int]:
            extra.extend(data)
            return base + len(extra) - len(data), len(data)

        # attributes: judged per name; kept numeric rows keep their bytes
        n_rows = len(t.attr_kind)
        keep = np.ones(n_rows, dtype=bool)
        off, ln = t.attr_off.copy(), t.attr_len.copy()
        ints, floats = t.attr_int.copy(), t.attr_float.copy()
        redo = _doc_present(t) | np.isin(t.attr_kind, _STRING_KINDS)
        for j, name in enumerate(t.attr_names):
            rows = t.attr_name_idx == j
            if not self.namer.safe(name):
                keep &= ~rows
                self.diag["attributes_dropped"] += int(rows.sum())
            elif name in _PG_ATTRS or name in ("lumos_names", "lumos_proc_label"):
                redo |= rows
        factor = np.ones(t.num_nodes)
        if self.jitter:
            factor = 1.0 + self.rng.uniform(-self.jitter, self.jitter, t.num_nodes)
            if _DUR_NS in t.attr_names:
                redo |= t.attr_name_idx == t.attr_names.index(_DUR_NS)
        owner = np.searchsorted(t.attr_ptr, np.arange(n_rows), side="right") - 1
        for k in np.flatnonzero(redo & keep).tolist():
            a = self.attr(t._attr(k))
            if a is not None and a.name == _DUR_NS and isinstance(a.value, int):
                a = Attr(a.name, round(a.value * float(factor[owner[k]])), a.kind, a.doc_string)
                ints[k] = a.value
            if a is None:
                keep[k] = False
            else:
                off[k], ln[k] = put(encode_attr(a))
        counts = np.concatenate(([0], np.cumsum(keep)))
        attr_ptr = counts[t.attr_ptr]
        # inputs / outputs
        io_cols = []
        for o_col, l_col in ((t.inputs_off, t.inputs_len), (t.outputs_off, t.outputs_len)):
            o2, l2 = o_col.copy(), l_col.copy()
            for i in np.flatnonzero(l_col >= 0).tolist():
                raw = t.blob[int(o_col[i]) : int(o_col[i]) + int(l_col[i])].tobytes()
                meta = bool(t.node_type[i] == NodeType.METADATA_NODE)
                o2[i], l2[i] = put(encode_io_info(self.io(decode_io_info(raw), meta)))
            io_cols.append((o2, l2))
        if int(t.unk_ptr[-1]):
            self.diag["unknown_fields_dropped"] += int(t.unk_ptr[-1])
        dur = t.duration_micros
        if self.jitter:
            dur = np.rint(dur.astype(np.float64) * factor).astype(np.uint64)
        blob = np.concatenate([t.blob, np.frombuffer(bytes(extra), dtype=np.uint8)])
        meta_attrs = [b for b in (self.attr(a) for a in t.metadata.attrs) if b is not None]
        version = t.metadata.version if self.namer.safe(t.metadata.version) else ""
        return dataclasses.replace(
            t, metadata=ChakraMetadata.build(version, meta_attrs), name_idx=name_idx,
            names=tuple(new_names), duration_micros=dur, blob=blob,
            inputs_off=io_cols[0][0], inputs_len=io_cols[0][1],
            outputs_off=io_cols[1][0], outputs_len=io_cols[1][1],
            attr_ptr=attr_ptr, attr_off=off[keep], attr_len=ln[keep],
            attr_name_idx=t.attr_name_idx[keep], attr_kind=t.attr_kind[keep],
            attr_int=ints[keep], attr_float=floats[keep],
            unk_ptr=np.zeros_like(t.unk_ptr), unk_off=t.unk_off[:0], unk_len=t.unk_len[:0],
            diagnostics={},
        )  # fmt: skip


def _texts(v: Any) -> list[Any]:
    items = v if isinstance(v, list) else [v]
    return [x for x in items if isinstance(x, str | bytes)]


def obfuscate_chakra(
    trace: ChakraTrace,
    namer: Namer,
    *,
    shapes: str = "keep",
    jitter_pct: float = 0.0,
    seed: int = 0,
) -> tuple[ChakraTrace, dict[str, int]]:
    """The obfuscated trace and counts of what was dropped (module docstring)."""  # fmt: skip
    ob = _Obfuscator(namer, shapes, jitter_pct, seed)
    out = ob.trace(trace)
    return out, dict(sorted(ob.diag.items()))


def chakra_strings(trace: ChakraTrace) -> Iterator[str]:
    """Every string a Chakra trace holds (the "strings" of :mod:`lumos.synth.leaks`): names,
    attribute names, doc strings and string values, ``inputs``/``outputs``, metadata, and the
    bytes of unknown fields (as Latin-1)."""
    yield trace.metadata.version
    for a in trace.metadata.attrs:
        yield a.name
        yield a.doc_string
        yield from (x if isinstance(x, str) else x.decode("latin-1") for x in _texts(a.value))
    yield from trace.names
    yield from (trace.attr_names[j] for j in np.unique(trace.attr_name_idx).tolist())
    for k in np.flatnonzero(_doc_present(trace)).tolist():
        yield trace.attr_doc(k)
    for k in np.flatnonzero(np.isin(trace.attr_kind, _STRING_KINDS)).tolist():
        for x in _texts(trace.attr_value(k)):
            yield x if isinstance(x, str) else x.decode("latin-1")
    for o_col, l_col in ((trace.inputs_off, trace.inputs_len),
                         (trace.outputs_off, trace.outputs_len)):  # fmt: skip
        for i in np.flatnonzero(l_col > 0).tolist():
            info = decode_io_info(
                trace.blob[int(o_col[i]) : int(o_col[i]) + int(l_col[i])].tobytes()
            )
            yield from (info.values, info.shapes, info.types)
    for o, n in zip(trace.unk_off.tolist(), trace.unk_len.tolist(), strict=True):
        yield trace.blob[o : o + n].tobytes().decode("latin-1")
