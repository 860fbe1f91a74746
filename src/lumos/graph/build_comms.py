"""Communication tasks of a graph: which collective call each comm kernel or gloo span serves.

A communication kernel (``is_comm_kernel``) is tied to the host-side collective call whose span
(on the launching thread) encloses its launch; a gloo worker span is the ``work_event_idx`` of
its call. Kind, size, process group and sequence number come from that call. A kernel with no
call (DeepEP, NVSHMEM and custom all-reduce kernels never have one) keeps the kind its name says
(``kernel_collective``) and an unknown size, and is counted as
``comm_task_without_collective_call``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.graph.build_tasks import TaskLayout
from lumos.graph.model import COMM_TASK_KINDS, Comms, CommType, ProcessGroup, TaskKind
from lumos.ingest.comm_names import kernel_collective
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_trace import Events

__all__ = ["COMM_TYPE_OF", "build_comms", "handoffs"]

COMM_TYPE_OF: dict[str, CommType] = {
    "all_reduce": CommType.ALL_REDUCE,
    "reduce": CommType.REDUCE,
    "all_gather": CommType.ALL_GATHER,
    "gather": CommType.GATHER,
    "scatter": CommType.SCATTER,
    "broadcast": CommType.BROADCAST,
    "all_to_all": CommType.ALL_TO_ALL,
    "reduce_scatter": CommType.REDUCE_SCATTER,
    "barrier": CommType.BARRIER,
    "send": CommType.SEND,
    "recv": CommType.RECV,
}


def build_comms(
    trace: KinetoTrace, layout: TaskLayout, launcher: NDArray[np.int64], diag: Diagnostics
) -> tuple[Comms, NDArray[np.int32], tuple[ProcessGroup, ...]]:
    """Comms rows for every COMM / CPU_COMM task; returns (comms, task comm_idx, groups)."""
    ev = trace.events
    coll = trace.collectives
    groups = [ProcessGroup(name=g.name, ranks=g.ranks, desc=g.desc, backend=g.backend)
              for g in trace.meta.process_groups]  # fmt: skip
    pg_idx = {g.name: i for i, g in enumerate(groups)}
    for name, ranks, desc in zip(coll.pg_name, coll.pg_ranks, coll.pg_desc, strict=True):
        if name and name not in pg_idx:
            pg_idx[name] = len(groups)
            groups.append(ProcessGroup(name=name, ranks=ranks, desc=desc))

    calls = _CallsByThread(ev, coll.event_idx)
    by_work = {int(w): k for k, w in enumerate(coll.work_event_idx.tolist()) if w >= 0}

    comm_idx = np.full(len(layout), -1, dtype=np.int32)
    rows: list[int] = []
    kind_of_row: list[int] = []
    tasks = np.flatnonzero(np.isin(layout.kind, [int(k) for k in COMM_TASK_KINDS]))
    gp_to_trace = layout.processors
    for t in tasks.tolist():
        e = int(layout.event_idx[t])
        k = -1
        if layout.kind[t] == int(TaskKind.CPU_COMM):
            k = by_work.get(e, -1)
        elif launcher[t] >= 0:
            call = int(launcher[t])
            k = calls.enclosing(
                int(gp_to_trace[layout.processor_idx[call]]), int(layout.ts_ns[call])
            )
        if k < 0:
            diag.warn("comm_task_without_collective_call", trace.names[int(ev.name_idx[e])][:80])
            kind = kernel_collective(trace.names[int(ev.name_idx[e])])
            kind_of_row.append(int(COMM_TYPE_OF.get(kind, CommType.UNKNOWN)))
        else:
            kind_of_row.append(int(COMM_TYPE_OF.get(coll.kind[k], CommType.UNKNOWN)))
        comm_idx[t] = len(rows)
        rows.append(k)
    r = np.asarray(rows, dtype=np.int64)
    has = r >= 0
    rr = np.where(has, r, 0)

    def pick(col: NDArray[np.int64]) -> NDArray[np.int64]:
        if not len(coll):
            return np.full(r.size, -1, dtype=np.int64)
        return np.where(has, col[rr], -1)

    pg = np.array([pg_idx.get(coll.pg_name[k], -1) if k >= 0 else -1 for k in rows], dtype=np.int32)
    kinds = np.asarray(kind_of_row, dtype=np.int8)
    sizes = pick(coll.size_bytes)
    peer = pick(coll.peer_rank).astype(np.int32)
    peer = _only_peer(kinds, peer, pg, groups, trace, diag)
    comms = Comms.create(
        kind=kinds,
        size_bytes=sizes,
        pg_idx=pg,
        seq_id=pick(coll.seq_id),
        peer_rank=peer,
        tag=pick(coll.tag),
        wait_ns=waiting_ns(kinds, sizes, pg, layout.dur_ns[tasks]),
    )
    return comms, comm_idx, tuple(groups)


class _CallsByThread:
    """The collective calls of each trace thread (rows of ``Collectives``, which are in start
    order), for "which call encloses this launch": the latest-starting call that began at or
    before the launch and had not ended, found by a binary search and a walk back that a running
    maximum of the calls' ends cuts short."""

    def __init__(self, ev: Events, anchor: NDArray[np.int64]) -> None:
        self._by_thread: dict[int, tuple[NDArray[np.int64], list[int], list[int], list[int]]] = {}
        if not anchor.size:
            return
        proc = ev.processor_idx[anchor]
        ts = ev.ts_ns[anchor]
        end = ts + ev.dur_ns[anchor]
        for thread in np.unique(proc).tolist():
            ks = np.flatnonzero(proc == thread)
            ends = end[ks]
            self._by_thread[thread] = (
                ts[ks],
                ends.tolist(),
                np.maximum.accumulate(ends).tolist(),
                ks.tolist(),
            )

    def enclosing(self, thread: int, ts_ns: int) -> int:
        """The row of the call on ``thread`` that encloses ``ts_ns`` (the latest to start), -1
        if none does."""
        calls = self._by_thread.get(thread)
        if calls is None:
            return -1
        starts, ends, running_max, rows = calls
        p = int(np.searchsorted(starts, ts_ns, side="right"))
        while p > 0 and running_max[p - 1] >= ts_ns:
            p -= 1
            if ends[p] >= ts_ns:
                return rows[p]
        return -1


def _only_peer(
    kinds: NDArray[np.int8],
    peer: NDArray[np.int32],
    pg: NDArray[np.int32],
    groups: list[ProcessGroup],
    trace: KinetoTrace,
    diag: Diagnostics,
) -> NDArray[np.int32]:
    """Sends and receives whose peer the trace does not name (gloo without "Concrete
    Inputs"), in a group of two ranks: the peer is the other one (counted)."""
    unknown = np.flatnonzero(np.isin(kinds, [int(CommType.SEND), int(CommType.RECV)]) & (peer < 0))
    if not unknown.size:
        return peer
    me = trace.meta.rank if trace.meta.rank >= 0 else 0
    world = tuple(range(max(trace.meta.world_size, 1)))
    out = peer.copy()
    for i in unknown.tolist():
        ranks = groups[pg[i]].ranks if pg[i] >= 0 and groups[pg[i]].ranks else world
        others = [r for r in ranks if r != me]
        if len(ranks) == 2 and len(others) == 1:
            out[i] = others[0]
    if (out != peer).any():
        diag.warn("p2p_peer_inferred_from_group_of_two", count=int((out != peer).sum()))
    return out


def waiting_ns(
    kind: NDArray[np.int8],
    size_bytes: NDArray[np.int64],
    pg: NDArray[np.int32],
    dur_ns: NDArray[np.int64],
) -> NDArray[np.int64]:
    """How much of each communication task's recorded duration was waiting for peers.

    Instances of one collective (same kind, message size and process group) move the same
    bytes, so the shortest of them is the best estimate of the transfer alone: the rest of each
    instance's duration is waiting. A collective with no known size cannot be told apart from
    its own waiting and counts as transfer as a whole (wait 0).

    >>> waiting_ns(np.array([0, 0, 0]), np.array([64, 64, -1]), np.array([0, 0, 0]),
    ...            np.array([10, 25, 40]))
    array([ 0, 15,  0])
    """
    wait = np.zeros(kind.size, dtype=np.int64)
    known = np.flatnonzero(size_bytes > 0)
    if known.size == 0:
        return wait
    keys = np.stack([kind[known].astype(np.int64), size_bytes[known], pg[known].astype(np.int64)])
    _, group = np.unique(keys, axis=1, return_inverse=True)
    group = group.reshape(-1)
    shortest = np.full(int(group.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(shortest, group, dur_ns[known])
    wait[known] = dur_ns[known] - shortest[group]
    return wait


def handoffs(trace: KinetoTrace, layout: TaskLayout) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(call_task, comm_task)``: each gloo worker span (CPU_COMM task) and the task of the
    thread that issued it: the collective call itself when it is a task, else the last task that
    starts inside the call. A worker runs a collective when it was handed one, so this, not the
    recorded gap before it, is what releases the worker."""
    ev = trace.events
    coll = trace.collectives
    if not len(coll):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    task_of_event = np.full(len(ev), -1, dtype=np.int64)
    real = np.flatnonzero(layout.event_idx >= 0)
    task_of_event[layout.event_idx[real]] = real
    gp_of = np.full(len(trace.processors), -1, dtype=np.int64)
    gp_of[layout.processors] = np.arange(len(layout.processors))
    calls: list[int] = []
    comms: list[int] = []
    for anchor, work in zip(coll.event_idx.tolist(), coll.work_event_idx.tolist(), strict=True):
        t = int(task_of_event[work]) if work >= 0 else -1
        if t < 0 or layout.kind[t] != int(TaskKind.CPU_COMM):
            continue
        c = int(task_of_event[anchor])
        if c < 0:
            p = int(gp_of[ev.processor_idx[anchor]])
            if p < 0:
                continue
            lo, hi = int(layout.proc_ptr[p]) + 1, int(layout.proc_ptr[p + 1])
            a0, a1 = int(ev.ts_ns[anchor]), int(ev.ts_ns[anchor] + ev.dur_ns[anchor])
            k = lo + int(np.searchsorted(layout.ts_ns[lo:hi], a1, side="right")) - 1
            if k < lo or layout.ts_ns[k] < a0:
                continue
            c = k
        if layout.processor_idx[c] != layout.processor_idx[t]:
            calls.append(c)
            comms.append(t)
    return np.asarray(calls, dtype=np.int64), np.asarray(comms, dtype=np.int64)
