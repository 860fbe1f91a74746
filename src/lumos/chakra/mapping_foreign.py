"""Chakra files lumos did not write -> ExecGraph, with every guess counted.

Upstream-converted PyTorch ETs (``chakra.0.et``), ASTRA-sim microbenchmarks and text2et output
carry no lumos tables. :func:`foreign_graph` makes a replayable graph from what they say:

* **Tasks**: every node but METADATA. Durations from ``duration_micros`` (x1000 ns), recorded
  start from ``start_time_micros``.
* **Processors**: CPU work (``is_cpu_op`` true) on a thread named by the ``tid`` attribute
  (0 when absent); GPU work on a stream named by ``stream``, else ``tid``, else one stream for
  compute and one for communication (as ASTRA-sim runs one GPU compute and one GPU comm node at
  a time). A missing ``is_cpu_op`` means GPU work (``is_cpu_op_guessed``).
* **Kinds**: GPU COMP -> kernel (``Memcpy``/``Memset`` names -> memcpy/memset); CPU COMP ->
  CPU op; COMM nodes -> COMM (GPU) or CPU_COMM (CPU) with a Comms row (``comm_type``,
  ``comm_size``, ``pg_name``, ``comm_src``/``comm_dst``/``comm_tag``). A CPU-side COMM_COLL with
  no ``comm_type`` (upstream's ``c10d::*`` launch ops) is a plain CPU op
  (``cpu_comm_without_comm_type``); a GPU one is a collective of unknown type
  (``comm_type_missing``). A negative ``comm_size`` counts as absent
  (``comm_size_negative_as_0``), as does a communication attribute of 2**63 or more
  (``comm_attr_beyond_int64_ignored``); times whose nanoseconds overflow int64 are an error.
* **Dependencies**: ``data_deps`` are edges with delay 0; ``ctrl_deps`` too when they name
  another node (upstream writes its op-nesting parents there, often ids of nodes it removed:
  ``ctrl_dep_dangling``/``ctrl_dep_self`` are ignored). If ``ctrl_deps`` close a cycle they are
  dropped (``ctrl_deps_dropped_cycle``); a cycle in ``data_deps`` is a ``GraphError``. Edge
  kinds follow the processors (CPU->GPU launch, GPU->CPU sync, ...). A dependency on a missing
  id is ignored and counted (``data_dep_dangling``).
* **Order**: tasks are laid out in dependency order (Kahn's algorithm, ties in file order), and
  consecutive tasks of a processor get an intra-processor edge (``intra_processor_order_added``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.chakra._wire import MAX_MICROS
from lumos.chakra.deps import DepGraph, topological_order
from lumos.chakra.schema import NodeType
from lumos.chakra.trace import MISSING, ChakraTrace
from lumos.diagnostics import Diagnostics
from lumos.errors import ChakraFormatError, GraphError
from lumos.graph.model import (
    Comms,
    CommType,
    DepKind,
    Edges,
    ExecGraph,
    ProcessGroup,
    ProcessorKind,
    Processors,
    TaskKind,
    Tasks,
    order_within,
)

__all__ = ["FOREIGN_ORDER", "WORLD_SIZE_GUESSED", "edges_from_deps", "foreign_graph"]

#: Diagnostic of a foreign graph's processors ordered by lumos (file and dependency order).
FOREIGN_ORDER = "intra_processor_order_added"

#: Diagnostic of a graph whose world size no one stated (its rank + 1, at least): the files
#: of one job read together take the largest (``lumos.replay.build_workload``).
WORLD_SIZE_GUESSED = "chakra_world_size_guessed"

_COMPUTE_STREAM, _COMM_STREAM = -1, -2


def _attr_col(trace: ChakraTrace, name: str) -> NDArray[np.int64]:
    col = np.full(trace.num_nodes, MISSING, dtype=np.int64)
    if name in trace.attr_names:
        rows = np.flatnonzero(
            (trace.attr_name_idx == trace.attr_names.index(name)) & (trace.attr_kind != 0)
        )
        node_of = np.searchsorted(trace.attr_ptr, rows, side="right") - 1
        col[node_of] = trace.attr_int[rows]
    return col


def _resolve(
    trace: ChakraTrace, ptr: NDArray[np.int64], ids: NDArray[np.uint64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    owner = np.repeat(np.arange(trace.num_nodes, dtype=np.int64), np.diff(ptr))
    rows = trace.index_of(ids)
    return owner, rows, rows >= 0


def _order(n: int, src: NDArray[np.int64], dst: NDArray[np.int64]) -> tuple[NDArray, NDArray]:
    idx = np.argsort(dst, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=ptr[1:])
    empty = np.zeros((0, 2), dtype=np.int64)
    return topological_order(DepGraph(ptr, src[idx], empty, empty, np.zeros(0, np.uint64)))


def _dep_kind(p_kind: NDArray[np.int8], same: NDArray[np.bool_]) -> NDArray[np.int8]:
    """Edge kinds from (src processor kind, dst processor kind) and same-processor flag."""
    s, d = p_kind[0], p_kind[1]
    out = np.full(s.size, int(DepKind.INTER_THREAD), dtype=np.int8)
    out[(s == 0) & (d == 1)] = DepKind.LAUNCH
    out[(s == 1) & (d == 0)] = DepKind.SYNC
    out[(s == 1) & (d == 1)] = DepKind.INTER_STREAM
    out[same & (d == 0)] = DepKind.INTRA_THREAD
    out[same & (d == 1)] = DepKind.INTRA_STREAM
    return out


def foreign_graph(trace: ChakraTrace, *, world_size: int | None = None) -> ExecGraph:
    """A graph from a Chakra trace without lumos tables (see the module docstring)."""
    where = trace.path or "<chakra trace>"
    diag = Diagnostics()
    nt = trace.node_type
    is_task = nt != NodeType.METADATA_NODE
    n_nodes = trace.num_nodes
    # ---- dependencies between task nodes
    d_own, d_rows, d_ok = _resolve(trace, trace.data_ptr, trace.data_deps)
    diag.warn("data_dep_dangling", _first_missing(trace, d_own, d_ok, trace.data_deps),
              int((~d_ok).sum()))  # fmt: skip
    c_own, c_rows, c_ok = _resolve(trace, trace.ctrl_ptr, trace.ctrl_deps)
    diag.warn("ctrl_dep_dangling", _first_missing(trace, c_own, c_ok, trace.ctrl_deps),
              int((~c_ok).sum()))  # fmt: skip
    self_c = c_ok & (c_rows == c_own)
    diag.warn("ctrl_dep_self", "", int(self_c.sum()))
    d_keep = d_ok & (d_rows != d_own)
    diag.warn("data_dep_self", "", int((d_ok & (d_rows == d_own)).sum()))
    c_keep = c_ok & ~self_c
    src = np.concatenate([d_rows[d_keep], c_rows[c_keep]])
    dst = np.concatenate([d_own[d_keep], c_own[c_keep]])
    keep_task = is_task[src] & is_task[dst]
    src, dst = src[keep_task], dst[keep_task]
    n_data = int((d_keep & is_task[np.maximum(d_rows, 0)] & is_task[d_own]).sum())
    order, blocked = _order(n_nodes, src, dst)
    if blocked.size:
        if n_data < src.size:
            diag.warn("ctrl_deps_dropped_cycle", f"{where}", int(src.size - n_data))
            src, dst = src[:n_data], dst[:n_data]
            order, blocked = _order(n_nodes, src, dst)
        if blocked.size:
            raise GraphError(
                f"{where}: dependency cycle among {blocked.size} nodes, e.g. node id "
                f"{int(trace.node_id[blocked[0]])}"
            )
    rows = order[is_task[order]]  # task rows in dependency order
    n = rows.size
    task_of = np.full(n_nodes, -1, dtype=np.int64)
    task_of[rows] = np.arange(n)
    # ---- processors
    cpu_col = trace.comm.is_cpu_op[rows]
    diag.warn("is_cpu_op_guessed", "", int((cpu_col < 0).sum()))
    cpu = cpu_col == 1
    ntype = nt[rows]
    is_comm = np.isin(ntype, [NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE,
                              NodeType.COMM_RECV_NODE])  # fmt: skip
    tid = _attr_col(trace, "tid")[rows]
    stream = _attr_col(trace, "stream")[rows]
    lane = np.where(cpu, np.where(tid == MISSING, 0, tid),
                    np.where(stream != MISSING, stream,
                             np.where(tid != MISSING, tid,
                                      np.where(is_comm, _COMM_STREAM, _COMPUTE_STREAM))))  # fmt: skip
    keys = np.stack([(~cpu).astype(np.int64), lane], axis=1)
    uniq, proc_idx = np.unique(keys, axis=0, return_inverse=True)
    proc_idx = proc_idx.reshape(-1).astype(np.int32)
    p_kind = uniq[:, 0].astype(np.int8)
    labels = tuple(
        ("stream " if k else "thread ") + {_COMPUTE_STREAM: "compute", _COMM_STREAM: "comm"}.get(
            int(t), str(int(t)))
        for k, t in uniq.tolist()
    )  # fmt: skip
    processors = Processors(
        kind=p_kind, pid=np.zeros(len(uniq), np.int64), tid=uniq[:, 1],
        device=np.where(p_kind == ProcessorKind.STREAM, 0, -1).astype(np.int32), label=labels,
    )  # fmt: skip
    # ---- kinds and comms
    comm = trace.comm
    ctype = comm.comm_type[rows]
    names = trace.names
    kind = np.where(cpu, TaskKind.CPU_OP, TaskKind.KERNEL).astype(np.int8)
    name_idx = trace.name_idx[rows]
    for j, s in enumerate(names):
        low = s.lower()
        if low.startswith("memcpy") or low.startswith("memset"):
            sel = (name_idx == j) & ~cpu
            kind[sel] = TaskKind.MEMCPY if low.startswith("memcpy") else TaskKind.MEMSET
    coll = ntype == NodeType.COMM_COLL_NODE
    cpu_no_type = is_comm & cpu & coll & (ctype == MISSING)
    diag.warn("cpu_comm_without_comm_type", _example(trace, rows, cpu_no_type),
              int(cpu_no_type.sum()))  # fmt: skip
    comm_task = is_comm & ~cpu_no_type
    kind[comm_task] = np.where(cpu[comm_task], TaskKind.CPU_COMM, TaskKind.COMM)
    missing_type = comm_task & coll & (ctype == MISSING)
    diag.warn("comm_type_missing", _example(trace, rows, missing_type), int(missing_type.sum()))
    ck = np.where(
        coll,
        np.where(ctype == MISSING, CommType.UNKNOWN, ctype),
        np.where(ntype == NodeType.COMM_SEND_NODE, CommType.SEND, CommType.RECV),
    )
    ct = np.flatnonzero(comm_task)
    comm_idx = np.full(n, -1, dtype=np.int32)
    comm_idx[ct] = np.arange(ct.size)
    src_r, dst_r, tag = (comm.comm_src[rows], comm.comm_dst[rows], comm.comm_tag[rows])
    peer = np.where(ck == CommType.SEND, dst_r, np.where(ck == CommType.RECV, src_r, -1))
    pg_names = comm.pg_names
    pg_idx = comm.pg_name_idx[rows]
    size = comm.comm_size[rows]
    neg_size = comm_task & (size != MISSING) & (size < 0)
    diag.warn("comm_size_negative_as_0", _example(trace, rows, neg_size), int(neg_size.sum()))
    size = np.where(neg_size, MISSING, size)
    big = [f"node id {int(trace.node_id[r])} {name} = {v}" for r, name, v in comm.out_of_range]
    diag.warn("comm_attr_beyond_int64_ignored", big[0] if big else "", len(big))
    _check_micros(trace, rows)
    comms = Comms.create(
        kind=ck[ct].astype(np.int8),
        size_bytes=np.where(size[ct] == MISSING, 0, size[ct]),
        pg_idx=pg_idx[ct],
        peer_rank=np.where(peer[ct] == MISSING, -1, peer[ct]),
        tag=np.where(tag[ct] == MISSING, -1, tag[ct]),
    )
    tasks = Tasks(
        name_idx=name_idx,
        kind=kind,
        processor_idx=proc_idx,  # type: ignore[arg-type]
        order=order_within(proc_idx),
        dur_ns=trace.duration_micros[rows].astype(np.int64) * 1000,
        ts_ns=trace.start_time_micros[rows].astype(np.int64) * 1000,
        event_idx=np.full(n, -1, dtype=np.int64),
        comm_idx=comm_idx,
    )
    rank = trace.rank or 0
    stated = trace.metadata.get("world_size")  # ASTRA-sim-ready ETs lumos writes state it
    if world_size is None and isinstance(stated, int) and stated > rank:
        world_size = stated
    if world_size is None:
        diag.warn(WORLD_SIZE_GUESSED, f"{where}: rank {rank}, world size {rank + 1} at least")
    graph = ExecGraph(
        names=names,
        processors=processors,
        tasks=tasks,
        comms=comms,
        process_groups=tuple(ProcessGroup(name=s) for s in pg_names),
        rank=rank,
        world_size=max(world_size or 1, rank + 1),
        diagnostics=diag,
    )
    return graph.replace(edges=_edges(task_of[src], task_of[dst], graph, diag))


def _edges(src: NDArray[np.int64], dst: NDArray[np.int64], graph: ExecGraph,
           diag: Diagnostics, delay_ns: NDArray[np.int64] | None = None) -> Edges:  # fmt: skip
    """Dependency edges (``delay_ns``, 0 when not given) plus the intra-processor order the
    file did not state (delay 0)."""
    _, perm = graph.processor_order()
    p = graph.tasks.processor_idx
    same = np.flatnonzero(p[perm][1:] == p[perm][:-1])
    o_src, o_dst = perm[same].astype(np.int64), perm[same + 1].astype(np.int64)
    n = max(graph.num_tasks, 1)
    have = np.unique(dst * n + src)
    new = ~np.isin(o_dst * n + o_src, have)
    diag.warn(FOREIGN_ORDER, "", int(new.sum()))
    all_src = np.concatenate([src, o_src[new]])
    all_dst = np.concatenate([dst, o_dst[new]])
    delay = np.zeros(all_src.size, dtype=np.int64)
    if delay_ns is not None:
        delay[: src.size] = delay_ns
    pk = graph.processors.kind
    kinds = _dep_kind(np.stack([pk[p[all_src]], pk[p[all_dst]]]), p[all_src] == p[all_dst])
    return Edges.create(src=all_src, dst=all_dst, kind=kinds, delay_ns=delay)


def edges_from_deps(
    trace: ChakraTrace,
    task_rows: NDArray[np.int64],
    graph: ExecGraph,
    *,
    deps: NDArray[np.uint64] | None = None,
    delay_ns: NDArray[np.int64] | None = None,
    folded: NDArray[np.bool_] | None = None,
) -> Edges:
    """Edges from the ``data_deps`` of a lumos-written trace whose deps were edited.

    ``deps`` replaces ``trace.data_deps`` entry for entry (the delay-resolved ones,
    :func:`lumos.chakra.mapping_delay.resolve_delay_deps`) and ``delay_ns`` gives each
    entry's edge delay (0 when not given). The dependencies of the nodes in ``folded`` (the delay
    nodes, already folded into ``deps``) are skipped; every other one that does not join two
    distinct tasks is counted as ``data_dep_dangling``."""
    ids = trace.data_deps if deps is None else deps
    owner, rows, ok = _resolve(trace, trace.data_ptr, ids)
    task_of = np.full(trace.num_nodes, -1, dtype=np.int64)
    task_of[task_rows] = np.arange(task_rows.size)
    ok &= task_of[np.maximum(rows, 0)] >= 0
    ok &= task_of[owner] >= 0
    mine = np.ones(owner.size, dtype=bool) if folded is None else ~folded[owner]
    graph.diagnostics.warn("data_dep_dangling", "", int((~ok & mine).sum()))
    src, dst = task_of[rows[ok]], task_of[owner[ok]]
    delay = np.zeros(src.size, np.int64) if delay_ns is None else delay_ns[ok]
    keep = src != dst
    return _edges(src[keep], dst[keep], graph, graph.diagnostics, delay[keep])


def _first_missing(trace: ChakraTrace, owner, ok, ids) -> str:
    bad = np.flatnonzero(~ok)
    if not bad.size:
        return ""
    k = int(bad[0])
    return f"node id {int(trace.node_id[owner[k]])} -> missing id {int(ids[k])}"


def _check_micros(trace: ChakraTrace, rows: NDArray[np.int64]) -> None:
    """Refuse times whose nanoseconds overflow int64 (a trace built in memory; the reader
    refuses them in files), naming the first node."""
    for col, what in ((trace.duration_micros, "duration_micros"),
                      (trace.start_time_micros, "start_time_micros")):  # fmt: skip
        bad = np.flatnonzero(col[rows] > np.uint64(MAX_MICROS))
        if bad.size:
            r = int(rows[bad[0]])
            raise ChakraFormatError(
                trace.path,
                f"node id {int(trace.node_id[r])}: {what} {int(col[r])} us does not fit int64 "
                f"nanoseconds (at most {MAX_MICROS} us; {bad.size} nodes)",
            )


def _example(trace: ChakraTrace, rows: NDArray[np.int64], mask: NDArray[np.bool_]) -> str:
    hit = np.flatnonzero(mask)
    if not hit.size:
        return ""
    r = int(rows[hit[0]])
    return f"node id {int(trace.node_id[r])} {trace.name_of(r)!r}"
