"""ExecGraph <-> Chakra: one table, both ways, nothing the simulator needs lost.

:func:`to_chakra` writes one rank's :class:`~lumos.graph.model.ExecGraph` as a
:class:`~lumos.chakra.trace.ChakraTrace`; :func:`from_chakra` reads it back, and
``from_chakra(to_chakra(g))`` has the same tables as ``g`` (see :func:`graph_differences`).
A Chakra file written by another tool (no ``lumos_schema`` metadata) is read by
:mod:`lumos.chakra.mapping_foreign`, which guesses what the file does not say and counts it.

Nodes (node id = task index; a METADATA node with id ``num_tasks`` follows when the graph
has process groups):

===========================  =================  ==============================================
task                         Chakra node type   attributes (besides the ``lumos_*`` ones)
===========================  =================  ==============================================
CPU op, runtime call         COMP               ``is_cpu_op`` = true
kernel, memcpy, memset       COMP               ``is_cpu_op`` = false
collective (known type)      COMM_COLL          ``comm_type``, ``comm_size``, ``pg_name``
SEND / RECV                  COMM_SEND / _RECV  ``comm_src``, ``comm_dst``, ``comm_tag`` (int32),
                                                ``comm_size``, ``pg_name``
collective of unknown type   COMP               (its comm row is kept in the lumos tables)
===========================  =================  ==============================================

Host-side collectives (``CPU_COMM``, e.g. gloo) are COMM_COLL with ``is_cpu_op`` = true.
``duration_micros`` is the duration rounded to whole microseconds (Chakra's unit) and
``start_time_micros`` the recorded start (0 when negative); the exact values are the int64
attributes ``dur_ns`` and ``ts_ns``. Per node: ``lumos_kind`` (TaskKind), ``lumos_proc``
(processor row), ``lumos_order``, and when not -1 ``lumos_event_idx`` and ``lumos_comm_idx``.

Dependencies: Chakra says only "after". ASTRA-sim's feeder (v3) enforces ``data_deps`` and
``ctrl_deps`` alike and runs independent nodes concurrently (one per slot), so EVERY edge
of ours, same-processor order included, becomes a ``data_dep`` of its destination: each
predecessor id once (the upstream feeder removes one occurrence per finished parent, so a
repeated id would never clear). ``ctrl_deps`` stay empty. Runtime waits (stream / device / event
synchronize) cannot be resolved by a Chakra consumer; for each one the waited GPU task that
the recording identifies (the last task on the stream launched before the sync started) is
added as a ``data_dep`` too, so ASTRA-sim keeps the sync; lumos itself uses the exact waits.

What Chakra cannot say is kept in ``GlobalMetadata`` attributes, as columns in table order:
``lumos_schema``, ``rank``, ``world_size``, ``lumos_names`` (the interned names),
``lumos_proc_{kind,pid,tid,device,label}``, ``lumos_edge_{src,dst,kind,delay_ns}``,
``lumos_wait_{task,kind,proc,device,record}``, ``lumos_ann_*`` (annotations: steps with
their first/last task, lead/tail and recorded span), ``lumos_comm_*`` (the Comms table).
Process groups are the METADATA node's ``lumos_pg_*`` attributes, plus ASTRA-sim's
``process_group:init`` form (``inputs.values`` = ``['[{"pg_name": ..., "ranks": [...]}]']``)
when every group name is a number. When a tool edits the dependencies of a lumos-written file,
``from_chakra`` notices that ``data_deps`` no longer match the edge table and rebuilds the
edges from ``data_deps`` (counted in diagnostics): delay 0, or a delay node's exact delay for a
dependency through one (see :mod:`lumos.chakra.mapping_delay`).

``to_chakra(graph, delay_nodes=True)`` also writes each positive edge delay as a synthetic
COMP node on its dependency, for consumers that know nothing of delays (see
:mod:`lumos.chakra.mapping_delay`); :func:`from_chakra` drops those nodes again.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.chakra.attrs import Attr, IOInfo
from lumos.chakra.mapping_delay import (
    DELAY_ATTR,
    delay_rows,
    kind_names,
    pair_delays,
    resolve_delay_deps,
)
from lumos.chakra.mapping_encode import AttrColumn, build_trace
from lumos.chakra.schema import NodeType
from lumos.chakra.trace import ChakraMetadata, ChakraTrace, ChakraWorkload
from lumos.diagnostics import Diagnostics
from lumos.errors import ChakraFormatError
from lumos.graph.algorithms import topological_order
from lumos.graph.model import (
    Annotations,
    Comms,
    CommType,
    DepKind,
    Edges,
    ExecGraph,
    ProcessGroup,
    Processors,
    TaskKind,
    Tasks,
    Waits,
    Workload,
)

__all__ = [
    "LUMOS_SCHEMA",
    "WAIT_DEP_KIND",
    "from_chakra",
    "graph_differences",
    "static_wait_targets",
    "to_chakra",
    "workload_from_chakra",
    "workload_to_chakra",
]

#: Value of the ``lumos_schema`` metadata attribute of files written here.
LUMOS_SCHEMA = "lumos/1"
#: Chakra ``GlobalMetadata.version`` written (the upstream schema version of et_def.proto).
CHAKRA_VERSION = "0.0.4"
#: Pseudo dependency kind of a ``data_dep`` that stands for a runtime wait (not an edge of ours).
WAIT_DEP_KIND = 100

_CPU_KINDS = np.array([TaskKind.CPU_OP, TaskKind.RUNTIME, TaskKind.CPU_COMM], dtype=np.int8)
_COMM_KINDS = np.array([TaskKind.COMM, TaskKind.CPU_COMM], dtype=np.int8)
_COLLECTIVES = frozenset(range(0, 10))

# table columns kept in metadata: (attribute prefix, table class, columns, signed)
_TABLES: tuple[tuple[str, type, tuple[tuple[str, str], ...]], ...] = (
    ("lumos_proc_", Processors, (("kind", "kind"), ("pid", "pid"), ("tid", "tid"),
                                 ("device", "device"))),
    ("lumos_edge_", Edges, (("src", "src"), ("dst", "dst"), ("kind", "kind"),
                            ("delay_ns", "delay_ns"))),
    ("lumos_wait_", Waits, (("task", "task_idx"), ("kind", "kind"),
                            ("proc", "target_processor_idx"), ("device", "device"),
                            ("record", "record_task_idx"))),
    ("lumos_ann_", Annotations, (("name", "name_idx"), ("kind", "kind"),
                                 ("proc", "processor_idx"), ("first", "first_task_idx"),
                                 ("last", "last_task_idx"), ("ts_ns", "ts_ns"),
                                 ("dur_ns", "dur_ns"), ("lead_ns", "lead_ns"),
                                 ("tail_ns", "tail_ns"), ("flops", "flops"),
                                 ("bytes", "bytes"))),
    ("lumos_comm_", Comms, (("kind", "kind"), ("size_bytes", "size_bytes"), ("pg", "pg_idx"),
                            ("seq_id", "seq_id"), ("peer", "peer_rank"), ("tag", "tag"),
                            ("wait_ns", "wait_ns"))),
)  # fmt: skip


def _ints(name: str, values: NDArray[Any]) -> Attr:
    return Attr(name, values.astype(np.int64).tolist(), "sint64_list")


# ---------------------------------------------------------------------------------------------
# ExecGraph -> Chakra


def static_wait_targets(graph: ExecGraph) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(waiting task, waited GPU task)`` pairs: each runtime wait resolved on the recording.

    A STREAM wait waits for the last task on its stream whose launch started strictly before
    the waiting task (recorded ``ts_ns``); DEVICE does that for every stream of the device;
    EVENT for the task its record captured (the last task on the record's stream launched
    strictly before the record). Waits whose target is empty give no pair. This is what a Chakra consumer sees of
    a sync; lumos replays the waits themselves.
    """
    g, t, w = graph, graph.tasks, graph.waits
    if not len(w):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    launch_ts = t.ts_ns.copy()
    e = g.edges
    is_launch = e.kind == 2  # DepKind.LAUNCH
    launch_ts[e.dst[is_launch]] = t.ts_ns[e.src[is_launch]]
    indptr, perm = g.processor_order()
    streams_of_device: dict[int, list[int]] = {}
    for p in range(len(g.processors)):
        if g.processors.kind[p] == 1:
            streams_of_device.setdefault(int(g.processors.device[p]), []).append(p)
    src: list[int] = []
    dst: list[int] = []
    for i in range(len(w)):
        task, kind = int(w.task_idx[i]), int(w.kind[i])
        if kind == 2:  # EVENT: as of the record's start
            at, procs = int(t.ts_ns[int(w.record_task_idx[i])]), [int(w.target_processor_idx[i])]
        elif kind == 1:
            at, procs = int(t.ts_ns[task]), streams_of_device.get(int(w.device[i]), [])
        else:
            at, procs = int(t.ts_ns[task]), [int(w.target_processor_idx[i])]
        for p in procs:
            on = perm[indptr[p] : indptr[p + 1]]
            # strictly before: a launch at the same instant cannot precede the wait (it may be
            # launched by the waiting task itself, which would make a cycle)
            k = int(np.searchsorted(np.maximum.accumulate(launch_ts[on]), at, side="left"))
            if k > 0 and int(on[k - 1]) != task:
                src.append(int(on[k - 1]))
                dst.append(task)
    s_arr, d_arr = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    return _acyclic_pairs(graph, s_arr, d_arr)


def _acyclic_pairs(
    graph: ExecGraph, src: NDArray[np.int64], dst: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Drop the pairs that would close a cycle with the graph's own order.

    Recorded times can disagree with a graph's order (hand-made or edited graphs); real traces
    keep every pair. Pairs with both ends on a cycle are dropped until the whole is acyclic.
    """
    e = graph.edges
    while src.size:
        extra = Edges.create(
            src=src.astype(np.int32), dst=dst.astype(np.int32), kind=int(DepKind.SYNC), delay_ns=0
        )
        probe = graph.replace(edges=Edges.concat([e, extra]))
        order = topological_order(probe)
        if order.size == graph.num_tasks:
            break
        stuck = np.ones(graph.num_tasks, dtype=bool)
        stuck[order] = False
        keep = ~(stuck[src] & stuck[dst])
        if keep.all():  # the cycle is not made by these pairs
            break
        src, dst = src[keep], dst[keep]
    return src, dst


def dependency_pairs(graph: ExecGraph) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(src, dst)`` of the ``data_deps`` written for ``graph``: every edge and statically
    resolved wait, each pair once, sorted by destination (first appearance order within)."""
    n = graph.num_tasks
    w_src, w_dst = static_wait_targets(graph)
    src = np.concatenate([graph.edges.src.astype(np.int64), w_src])
    dst = np.concatenate([graph.edges.dst.astype(np.int64), w_dst])
    order = np.lexsort((np.arange(src.size), dst))
    src, dst = src[order], dst[order]
    _, first = np.unique(dst * max(n, 1) + src, return_index=True)
    keep = np.zeros(src.size, dtype=bool)
    keep[first] = True
    return src[keep], dst[keep]


def _node_type(graph: ExecGraph) -> NDArray[np.int8]:
    t, c = graph.tasks, graph.comms
    out = np.full(graph.num_tasks, int(NodeType.COMP_NODE), dtype=np.int8)
    has = np.isin(t.kind, _COMM_KINDS) & (t.comm_idx >= 0)
    ck = np.full(graph.num_tasks, int(CommType.UNKNOWN), dtype=np.int64)
    ck[has] = c.kind[t.comm_idx[has]]
    out[has & (ck >= 0) & (ck <= 9)] = int(NodeType.COMM_COLL_NODE)
    out[has & (ck == CommType.SEND)] = int(NodeType.COMM_SEND_NODE)
    out[has & (ck == CommType.RECV)] = int(NodeType.COMM_RECV_NODE)
    return out


def _metadata_attrs(graph: ExecGraph) -> list[Attr]:
    attrs = [
        Attr("lumos_schema", LUMOS_SCHEMA, "string_val"),
        Attr("rank", graph.rank, "int64_val"),
        Attr("world_size", graph.world_size, "int64_val"),
        Attr("lumos_names", list(graph.names), "string_list"),
        Attr("lumos_proc_label", list(graph.processors.label), "string_list"),
    ]
    tables = {
        Processors: graph.processors,
        Edges: graph.edges,
        Waits: graph.waits,
        Annotations: graph.annotations,
        Comms: graph.comms,
    }
    for prefix, cls, cols in _TABLES:
        table = tables[cls]
        attrs.append(Attr(f"{prefix}rows", len(table), "int64_val"))
        for short, col in cols:
            attrs.append(_ints(prefix + short, getattr(table, col)))
    return attrs


def _pg_node_attrs(groups: Sequence[ProcessGroup]) -> tuple[list[Attr], IOInfo | None]:
    ptr = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([len(pg.ranks) for pg in groups], out=ptr[1:])
    attrs = [
        Attr("is_cpu_op", True, "bool_val"),
        Attr("lumos_pg_name", [pg.name for pg in groups], "string_list"),
        Attr("lumos_pg_desc", [pg.desc for pg in groups], "string_list"),
        Attr("lumos_pg_backend", [pg.backend for pg in groups], "string_list"),
        _ints("lumos_pg_ranks", np.array([r for pg in groups for r in pg.ranks], dtype=np.int64)),
        _ints("lumos_pg_ranks_ptr", ptr),
    ]
    inputs = None
    if all(pg.name.isdigit() for pg in groups):
        doc = [
            {"pg_name": pg.name, "pg_desc": pg.desc, "backend_config": pg.backend,
             "pg_size": len(pg.ranks), "ranks": list(pg.ranks)}
            for pg in groups
        ]  # fmt: skip
        inputs = IOInfo(values=f"['{json.dumps(doc)}']")
    return attrs, inputs


def to_chakra(
    graph: ExecGraph,
    *,
    io: Mapping[int, tuple[IOInfo | None, IOInfo | None]] | None = None,
    task_attrs: Mapping[int, Sequence[Attr]] | None = None,
    delay_nodes: bool = False,
) -> ChakraTrace:
    """One rank's graph as a Chakra trace (see the module docstring for the mapping).

    ``delay_nodes=True`` writes each positive edge delay as a synthetic COMP node on its
    dependency (:mod:`lumos.chakra.mapping_delay`), so that a consumer that honours only
    ``data_deps`` and ``duration_micros`` (ASTRA-sim) sees CPU overhead gaps and launch
    latencies; :func:`from_chakra` folds them back. ``io`` gives ``(inputs, outputs)`` of some tasks and ``task_attrs`` extra attributes (e.g.
    ``op_schema`` from a PyTorch ET); both are written on those tasks' nodes and are not part
    of the graph that :func:`from_chakra` returns.
    """
    g, t, c = graph, graph.tasks, graph.comms
    n = g.num_tasks
    node_type = _node_type(g)
    is_cpu = np.isin(t.kind, _CPU_KINDS)
    dur_us = (t.dur_ns + 500) // 1000
    start_us = np.maximum(t.ts_ns, 0) // 1000
    dep_src, dep_dst = dependency_pairs(g)
    dep_ptr = np.searchsorted(dep_dst, np.arange(n + 1))

    has_pg = bool(g.process_groups)
    base = n + int(has_pg)  # first delay node
    delayed = np.zeros(0, dtype=np.int64)
    if delay_nodes:
        d_ns, d_kind = pair_delays(g, dep_src, dep_dst)
        delayed = np.flatnonzero(d_ns > 0)
    total = base + delayed.size

    def pad(values: NDArray[Any], fill: int = 0) -> NDArray[np.int64]:
        return np.r_[np.asarray(values, dtype=np.int64), np.full(total - n, fill, np.int64)]

    task = pad(np.ones(n, dtype=np.int64)).astype(bool)
    is_comm = pad(node_type != NodeType.COMP_NODE).astype(bool)
    ci = np.maximum(t.comm_idx, 0)
    coll = pad(node_type == NodeType.COMM_COLL_NODE).astype(bool)
    p2p = is_comm & ~coll
    send = pad(node_type == NodeType.COMM_SEND_NODE).astype(bool)
    peer = pad(c.peer_rank[ci] if len(c) else np.zeros(n))
    tag = pad(c.tag[ci] if len(c) else np.zeros(n))
    pg = pad(c.pg_idx[ci] if len(c) else np.zeros(n))
    size = pad(c.size_bytes[ci] if len(c) else np.zeros(n))
    pg_strings = ("", *(pg.name for pg in g.process_groups))
    cpu_values, cpu_mask = pad(is_cpu), task.copy()
    cpu_values[base:] = is_cpu[dep_dst[delayed]]
    cpu_mask[base:] = True
    columns = [
        AttrColumn("is_cpu_op", "bool_val", cpu_values, cpu_mask),
        AttrColumn("comm_type", "int64_val", pad(c.kind[ci] if len(c) else np.zeros(n)), coll),
        AttrColumn("comm_src", "int32_val", np.where(send, g.rank, peer), p2p),
        AttrColumn("comm_dst", "int32_val", np.where(send, peer, g.rank), p2p),
        AttrColumn("comm_tag", "int32_val", tag, p2p & (tag >= -(1 << 31)) & (tag < 1 << 31)),
        # an unknown size (-1) is left out: Chakra's comm_size is a byte count
        AttrColumn("comm_size", "int64_val", size, is_comm & (size >= 0)),
        AttrColumn("pg_name", "string_val", pg + 1, is_comm, pg_strings),
        AttrColumn("dur_ns", "int64_val", pad(t.dur_ns), task),
        AttrColumn("ts_ns", "sint64_val", pad(t.ts_ns), task),
        AttrColumn("lumos_kind", "int32_val", pad(t.kind), task),
        AttrColumn("lumos_proc", "int32_val", pad(t.processor_idx), task),
        AttrColumn("lumos_order", "int32_val", pad(t.order), task),
        AttrColumn("lumos_event_idx", "sint64_val", pad(t.event_idx, -1),
                   pad(t.event_idx, -1) != -1),
        AttrColumn("lumos_comm_idx", "int64_val", pad(t.comm_idx, -1), pad(t.comm_idx, -1) >= 0),
    ]  # fmt: skip
    extra = dict(task_attrs or {})
    io_all = dict(io or {})
    names = list(g.names)
    name_idx = pad(t.name_idx)
    types = pad(node_type)
    if has_pg:
        pg_attrs, pg_inputs = _pg_node_attrs(g.process_groups)
        extra[n] = pg_attrs
        if pg_inputs is not None:
            io_all[n] = (pg_inputs, None)
        names.append("process_group:init")
        name_idx[n] = len(names) - 1
        types[n] = NodeType.METADATA_NODE
    data_ptr = np.r_[dep_ptr, np.full(base - n, dep_ptr[-1], np.int64)]
    data_deps = dep_src
    start_us, dur_us = pad(start_us), pad(dur_us)
    if delayed.size:
        delay_ns, src = d_ns[delayed], dep_src[delayed]
        d_names = kind_names(d_kind[delayed])
        lookup = {s: k for k, s in enumerate(dict.fromkeys(d_names), start=len(names))}
        names.extend(lookup)
        name_idx[base:] = [lookup[s] for s in d_names]
        types[base:] = NodeType.COMP_NODE
        data_deps = dep_src.copy()
        data_deps[delayed] = base + np.arange(delayed.size)
        data_deps = np.r_[data_deps, src]
        data_ptr = np.r_[data_ptr, dep_ptr[-1] + 1 + np.arange(delayed.size)]
        start_us[base:] = np.maximum(t.ts_ns[src] + t.dur_ns[src], 0) // 1000
        dur_us[base:] = (delay_ns + 500) // 1000
        is_delay = np.zeros(total, dtype=bool)
        is_delay[base:] = True
        delay_col = pad(np.zeros(n))
        delay_col[base:] = delay_ns
        columns += [
            AttrColumn(DELAY_ATTR, "int64_val", delay_col, is_delay),
            AttrColumn("lumos_synthetic", "bool_val", np.ones(total, np.int64), is_delay),
        ]
    meta = ChakraMetadata.build(CHAKRA_VERSION, _metadata_attrs(g))
    return build_trace(
        meta,
        names=names,
        name_idx=name_idx,
        node_type=types.astype(np.int8),
        data_ptr=data_ptr,
        data_deps=data_deps,
        start_time_micros=start_us,
        duration_micros=dur_us,
        columns=columns,
        extra_attrs=extra,
        io=io_all,
        rank=g.rank,
    )


def workload_to_chakra(
    workload: Workload | ExecGraph, *, delay_nodes: bool = False
) -> ChakraWorkload:
    """Every rank of ``workload`` as a :class:`ChakraWorkload` (one trace per rank)."""
    w = Workload.of(workload)
    return ChakraWorkload({g.rank: to_chakra(g, delay_nodes=delay_nodes) for g in w.graphs})


# ---------------------------------------------------------------------------------------------
# Chakra -> ExecGraph


def _scalar(
    trace: ChakraTrace, name: str, default: int
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Integer (or bool) attribute ``name`` per node, and where it was present."""
    col = np.full(trace.num_nodes, default, dtype=np.int64)
    present = np.zeros(trace.num_nodes, dtype=bool)
    if name in trace.attr_names:
        rows = np.flatnonzero(trace.attr_name_idx == trace.attr_names.index(name))
        node_of = np.searchsorted(trace.attr_ptr, rows, side="right") - 1
        col[node_of] = trace.attr_int[rows]
        present[node_of] = True
    return col, present


#: Table columns a lumos ET written by an older release may lack.
_OPTIONAL_META = frozenset(
    {("lumos_comm_", "wait_ns"), ("lumos_ann_", "flops"), ("lumos_ann_", "bytes")}
)


def _meta_table(meta: dict[str, Any], where: str, prefix: str, cls: Any, cols: Any) -> Any:
    rows = int(meta.get(f"{prefix}rows", 0))
    data = {}
    for short, col in cols:
        if prefix + short not in meta and (prefix, short) in _OPTIONAL_META:
            continue  # written before the column existed: its default applies
        values = meta.get(prefix + short, [])
        if len(values) != rows:
            raise ChakraFormatError(
                where, f"metadata {prefix}{short} has {len(values)} values, expected {rows}"
            )
        data[col] = np.asarray(values, dtype=np.int64)
    if cls is Processors:
        return data
    return cls.create(**data) if rows else cls.empty()


def is_lumos_trace(trace: ChakraTrace) -> bool:
    """Whether ``trace`` was written by :func:`to_chakra` (has the lumos tables)."""
    return str(trace.metadata.get("lumos_schema", "")).startswith("lumos/")


def from_chakra(trace: ChakraTrace, *, world_size: int | None = None) -> ExecGraph:
    """One rank's graph from a Chakra trace (exact for files written by :func:`to_chakra`;
    guessed, with counted diagnostics, for others: see :mod:`lumos.chakra.mapping_foreign`)."""
    if not is_lumos_trace(trace):
        from lumos.chakra.mapping_foreign import foreign_graph

        return foreign_graph(trace, world_size=world_size)
    where = trace.path or "<chakra trace>"
    meta = {a.name: a.value for a in trace.metadata.attrs}
    diag = Diagnostics()
    is_delay = delay_rows(trace)
    is_task = (trace.node_type != NodeType.METADATA_NODE) & ~is_delay
    task_rows = np.flatnonzero(is_task)
    n = task_rows.size
    if not np.array_equal(trace.node_id[task_rows], np.arange(n, dtype=np.uint64)):
        raise ChakraFormatError(where, "lumos trace whose task node ids are not 0..n-1 in order")
    names = tuple(meta.get("lumos_names", ()))
    lookup = {s: i for i, s in enumerate(names)}
    node_name_idx = np.array([lookup.get(s, -1) for s in trace.names], dtype=np.int64)
    task_name_idx = node_name_idx[trace.name_idx[task_rows]]
    if task_name_idx.size and task_name_idx.min() < 0:
        bad = int(task_rows[np.argmin(task_name_idx)])
        raise ChakraFormatError(
            where,
            f"node id {int(trace.node_id[bad])}: name {trace.name_of(bad)!r} is not in lumos_names",
        )
    cols: dict[str, NDArray[np.int64]] = {}
    for attr_name, col, default in (("lumos_kind", "kind", -1), ("lumos_proc", "processor_idx", -1),
                                    ("lumos_order", "order", -1), ("dur_ns", "dur_ns", -1),
                                    ("ts_ns", "ts_ns", 0), ("lumos_event_idx", "event_idx", -1),
                                    ("lumos_comm_idx", "comm_idx", -1)):  # fmt: skip
        values, present = _scalar(trace, attr_name, default)
        if col in ("kind", "processor_idx", "order", "dur_ns") and not present[task_rows].all():
            bad = int(task_rows[np.flatnonzero(~present[task_rows])[0]])
            raise ChakraFormatError(where, f"node id {int(trace.node_id[bad])}: no {attr_name}")
        cols[col] = values[task_rows]
    tasks = Tasks.create(name_idx=task_name_idx, **cols)
    tables = {}
    for prefix, cls, tcols in _TABLES:
        tables[cls] = _meta_table(meta, where, prefix, cls, tcols)
    label = tuple(meta.get("lumos_proc_label", ()))
    processors = Processors(**tables[Processors], label=label)
    groups: tuple[ProcessGroup, ...] = ()
    meta_rows = np.flatnonzero(trace.node_type == NodeType.METADATA_NODE)
    for r in meta_rows.tolist():
        groups = groups + _groups_of(trace.node(r), where)
    graph = ExecGraph(
        names=names,
        processors=processors,
        tasks=tasks,
        edges=tables[Edges],
        waits=tables[Waits],
        annotations=tables[Annotations],
        comms=tables[Comms],
        process_groups=groups,
        rank=int(meta.get("rank", trace.rank or 0)),
        world_size=int(meta.get("world_size", world_size or 1)),
        diagnostics=diag,
    )
    deps, dep_delay_ns = resolve_delay_deps(trace, is_delay)
    if not _deps_match(trace, deps, task_rows, graph):
        diag.warn("chakra_deps_edited", f"{where}: data_deps differ from the lumos edge table")
        from lumos.chakra.mapping_foreign import edges_from_deps

        edges = edges_from_deps(
            trace, task_rows, graph, deps=deps, delay_ns=dep_delay_ns, folded=is_delay
        )
        graph = graph.replace(edges=edges)
    return graph


def _groups_of(node: Any, where: Any) -> tuple[ProcessGroup, ...]:
    """The process groups a lumos METADATA node lists (none without ``lumos_pg_name``); a
    list of offsets, descriptions or backends that does not fit the names is a
    :class:`ChakraFormatError` naming ``where``."""
    names = node.attr("lumos_pg_name")
    if names is None:
        return ()
    ranks, ptr = node.attr("lumos_pg_ranks", []), node.attr("lumos_pg_ranks_ptr", [0])
    descs = node.attr("lumos_pg_desc", [""] * len(names))
    backends = node.attr("lumos_pg_backend", [""] * len(names))
    ok = len(ptr) == len(names) + 1 and len(descs) == len(backends) == len(names)
    if not ok or any(not 0 <= a <= b <= len(ranks) for a, b in itertools.pairwise(ptr)):
        raise ChakraFormatError(
            where, f"process-group node {node.id}: {len(names)} names with {len(ptr)} rank "
            f"offsets (need {len(names) + 1}, rising within {len(ranks)} ranks), {len(descs)} "
            f"descriptions and {len(backends)} backends",
        )  # fmt: skip
    return tuple(
        ProcessGroup(name=nm, ranks=tuple(ranks[ptr[k] : ptr[k + 1]]), desc=descs[k],
                     backend=backends[k])
        for k, nm in enumerate(names)
    )  # fmt: skip


def _deps_match(
    trace: ChakraTrace, deps: NDArray[Any], task_rows: NDArray[Any], graph: ExecGraph
) -> bool:
    """Whether the file's ``data_deps`` (``deps``: delay nodes resolved to their sources) are
    exactly what :func:`to_chakra` writes for ``graph``."""
    src, dst = dependency_pairs(graph)
    counts = np.diff(trace.data_ptr)
    if not np.array_equal(counts[task_rows], np.bincount(dst, minlength=task_rows.size)):
        return False
    owner = np.repeat(np.arange(trace.num_nodes), counts)
    is_task = np.zeros(trace.num_nodes, dtype=bool)
    is_task[task_rows] = True
    got = deps[is_task[owner]].astype(np.int64)
    return got.size == src.size and bool(np.array_equal(got, src))


def workload_from_chakra(data: ChakraWorkload | ChakraTrace) -> Workload:
    """A :class:`Workload` with one graph per rank of ``data``."""
    traces = list(data) if isinstance(data, ChakraWorkload) else [data]
    world = max([(t.rank or 0) + 1 for t in traces] + [len(traces)])
    graphs = tuple(from_chakra(t, world_size=world) for t in traces)
    return Workload(graphs)


# ---------------------------------------------------------------------------------------------
# Equality of graphs (tests, round-trip checks)


def graph_differences(a: ExecGraph, b: ExecGraph) -> list[str]:
    """Names of the parts of ``a`` and ``b`` that differ (empty: same tables and fields).

    Diagnostics are not compared (they describe how a graph was made, not what it is), nor are
    the recorded shapes (``dims``, ``task_dims_idx``, the spans' ``dims_idx``): the what-if
    edits read them from the source trace, and the ET mapping does not carry them.
    """
    out = []
    for name in ("names", "processors", "tasks", "edges", "waits", "annotations", "comms",
                 "process_groups", "rank", "world_size"):  # fmt: skip
        x, y = getattr(a, name), getattr(b, name)
        if name == "annotations":
            x, y = (t.replace(dims_idx=np.full(len(t), -1, dtype=np.int32)) for t in (x, y))
        if x != y:
            out.append(name)
    return out
