"""Graph algorithms on :class:`~lumos.graph.model.ExecGraph`: topological order, collective matching.

The hot loop (:mod:`lumos.graph._order`) is compiled; the Python layer only prepares arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph._order import kahn_fifo
from lumos.graph.model import COMM_TASK_KINDS, CommType, ExecGraph, Workload

__all__ = [
    "CollectiveGroups",
    "kahn_order",
    "match_collectives",
    "processor_successor",
    "topological_order",
]


def processor_successor(g: ExecGraph) -> NDArray[np.int64]:
    """``succ[t]``: the next task on ``t``'s processor, or -1 for the last one."""
    _, perm = g.processor_order()
    succ = np.full(g.num_tasks, -1, dtype=np.int64)
    if g.num_tasks:
        same = np.diff(g.tasks.processor_idx[perm]) == 0
        succ[perm[:-1][same]] = perm[1:][same]
    return succ


def kahn_order(
    n: int,
    out_ptr: NDArray[np.int64],
    out_edge: NDArray[np.int64],
    dst: NDArray[np.int32],
    succ: NDArray[np.int64],
) -> NDArray[np.int64]:
    """Kahn's algorithm, FIFO: tasks in index order, then as they become ready.

    Edges ``e`` out of task ``t`` are ``out_edge[out_ptr[t]:out_ptr[t+1]]`` with heads
    ``dst[e]``; ``succ[t]`` (or -1) is one more successor (the next task on a processor).
    Shorter than ``n`` exactly when there is a cycle.
    """
    queue, length = kahn_fifo(
        n,
        np.ascontiguousarray(out_ptr, dtype=np.int64),
        np.ascontiguousarray(out_edge, dtype=np.int64),
        np.ascontiguousarray(dst, dtype=np.int32),
        np.ascontiguousarray(succ, dtype=np.int64),
    )
    return queue[:length]


def topological_order(g: ExecGraph) -> NDArray[np.int64]:
    """Task indices in an order compatible with edges and processor order (Kahn, FIFO).

    Shorter than ``num_tasks`` exactly when the graph has a cycle; the missing tasks are on or
    behind the cycle. Deterministic.
    """
    out_ptr, out_edge = g.csr_out()
    return kahn_order(g.num_tasks, out_ptr, out_edge, g.edges.dst, processor_successor(g))


# ---------------------------------------------------------------------------------------------
# Collectives across ranks

#: ``Comms.seq_id`` of a send or receive that matches nothing: the recording says it cannot be
#: one transfer with the peer it would pair with (:func:`lumos.graph.build_ranks.align_ranks`).
P2P_UNPAIRED = -2

_P2P = (int(CommType.SEND), int(CommType.RECV))


@dataclass(frozen=True, eq=False)
class CollectiveGroups:
    """Communication tasks of a workload matched across ranks.

    Group ``k``'s members are ``(member_graph[i], member_task[i])`` for ``i`` in
    ``indptr[k]:indptr[k+1]`` (graph position in ``Workload.graphs``, task index in that graph),
    in rank order. ``group_of[gi][t]`` is task ``t``'s group in graph ``gi`` or -1. Groups of one
    member (the peer ranks were not traced) are listed too.
    """

    indptr: NDArray[np.int64]
    member_graph: NDArray[np.int32]
    member_task: NDArray[np.int32]
    group_of: tuple[NDArray[np.int32], ...]
    keys: tuple[tuple[Any, ...], ...]
    diagnostics: Diagnostics = field(default_factory=Diagnostics)

    @property
    def num_groups(self) -> int:
        return len(self.indptr) - 1

    def sizes(self) -> NDArray[np.int64]:
        return np.diff(self.indptr)


def match_collectives(workload: Workload) -> CollectiveGroups:
    """Match COMM / CPU_COMM tasks that carry a ``comm_idx`` across the workload's ranks.

    Collectives match on ``(process group name, seq_id)``. When some participant of a process
    group (on any rank) lacks a seq id, the whole group falls back to order of appearance: the
    k-th collective of that process group on each rank, ordered by recorded start (``ts_ns``,
    then task index — a structural choice made before simulation, never a timing input).
    Point-to-point SEND on rank ``r`` to ``q`` matches the RECV on rank ``q`` from ``r`` of the
    same process group with the same ordinal; one whose ``seq_id`` is :data:`P2P_UNPAIRED` is a
    group of its own and takes no ordinal. A rank appearing twice under one key is a counted
    warning (``collective_duplicate_rank``); the later task gets its own group.
    """
    diags = Diagnostics()
    rows: list[tuple[int, int, str, int, int, int, int]] = []  # gi, task, pg, kind, seq, peer, ts
    for gi, g in enumerate(workload.graphs):
        t = g.tasks
        sel = np.flatnonzero(
            np.isin(t.kind, np.array(COMM_TASK_KINDS, np.int8)) & (t.comm_idx >= 0)
        )
        if not len(sel):
            continue
        sel = sel[np.lexsort((sel, t.ts_ns[sel]))]
        ci = t.comm_idx[sel]
        c = g.comms
        for task, kind, pg, seq, peer, ts in zip(
            sel.tolist(),
            c.kind[ci].tolist(),
            c.pg_idx[ci].tolist(),
            c.seq_id[ci].tolist(),
            c.peer_rank[ci].tolist(),
            t.ts_ns[sel].tolist(),
            strict=True,
        ):
            rows.append((gi, task, g.process_group_name(pg), kind, seq, peer, ts))

    no_seq = sorted({r[2] for r in rows if r[3] not in _P2P and r[4] < 0})
    counters: dict[tuple[Any, ...], int] = {}
    members: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    ranks_of: dict[tuple[Any, ...], set[int]] = {}  # graphs in members[key]
    order: list[tuple[Any, ...]] = []
    # rows are grouped by graph (rank order), then recorded start within the graph
    for gi, task, pg, kind, seq, peer, _ts in rows:
        rank = workload.graphs[gi].rank
        if kind in _P2P and seq == P2P_UNPAIRED:
            key: tuple[Any, ...] = ("p2p-unpaired", gi, task)
        elif kind in _P2P:
            src, dst = (rank, peer) if kind == CommType.SEND else (peer, rank)
            k = counters.get(("p2p", pg, src, dst, kind), 0)
            counters[("p2p", pg, src, dst, kind)] = k + 1
            key = ("p2p", pg, src, dst, k)
        elif pg in no_seq:
            k = counters.get(("coll", pg, rank), 0)
            counters[("coll", pg, rank)] = k + 1
            key = ("coll", pg, "order", k)
        else:
            key = ("coll", pg, "seq", seq)
        group = members.setdefault(key, [])
        ranks_in = ranks_of.setdefault(key, set())
        if not group:
            order.append(key)
        if gi in ranks_in:
            diags.warn("collective_duplicate_rank", f"rank {rank} task {task} key {key}")
            solo = ("dup", gi, task)
            members[solo] = [(gi, task)]
            order.append(solo)
            continue
        group.append((gi, task))
        ranks_in.add(gi)

    sizes = [len(members[k]) for k in order]
    indptr = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    flat = [m for k in order for m in sorted(members[k])]
    member_graph = np.array([m[0] for m in flat], dtype=np.int32)
    member_task = np.array([m[1] for m in flat], dtype=np.int32)
    group_of = [np.full(g.num_tasks, -1, dtype=np.int32) for g in workload.graphs]
    gid = np.repeat(np.arange(len(order), dtype=np.int32), sizes)
    for gi in range(len(workload.graphs)):
        sel = member_graph == gi
        group_of[gi][member_task[sel]] = gid[sel]
    for k, key in enumerate(order):
        kinds = {
            int(workload.graphs[gi].comms.kind[workload.graphs[gi].tasks.comm_idx[ti]])
            for gi, ti in members[key]
        }
        if len(kinds) > 1 and key[0] == "coll":
            diags.warn("collective_kind_mismatch", f"group {k} key {key} kinds {sorted(kinds)}")
    return CollectiveGroups(
        indptr=indptr,
        member_graph=member_graph,
        member_task=member_task,
        group_of=tuple(group_of),
        keys=tuple(order),
        diagnostics=diags,
    )
