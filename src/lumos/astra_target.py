"""The ASTRA-sim target: a replayed workload -> one Chakra ET per rank that ASTRA-sim runs to
completion and schedules the way lumos simulated it.

ASTRA-sim gives each NPU one CPU slot, one GPU compute slot and one GPU communication slot and
knows nothing of threads, streams, edge delays or runtime waits (see
:mod:`lumos.chakra.slots`). :func:`to_astra` therefore writes, per rank, three chains, one per
slot, ordered as lumos's replay (``result``) ran them:

* **CPU chain**: CPU ops and runtime calls of every thread, by simulated start; **compute
  chain**: kernels, copies and memsets of every stream. Where two threads (streams) overlapped,
  the later task is clipped to what is left of it after the busy span before it (a task wholly
  inside it becomes a 0-length node), so each chain keeps the busy time of the union, not
  the sum. The chain order is a ``ctrl_dep`` on the previous node of the chain.
* **communication chain**: every collective (GPU kernel or host-side, e.g. gloo) as a
  COMM_COLL node with ``is_cpu_op`` false, in ONE order shared by all ranks (by the time its
  last participant reached it in the replay), so ASTRA-sim pairs the k-th collective of every
  rank. A collective's ``comm_size`` is the same on all participants: the largest of its
  participants' sizes (in ASTRA-sim's convention: one rank's input for an all-gather), counted
  in ``diagnostics`` where they differed (``astra_comm_size_folded``). Sizes the trace does not
  give are the size for which the network model takes the collective's traced transfer time
  (``astra_comm_size_from_time``). Collective types ASTRA-sim does not model become BROADCAST,
  which it replays for ``duration_micros`` = the traced transfer (``astra_replayed_as_broadcast``).
  Sends are COMM_SEND on the chain; receives COMM_RECV (they take no slot), both with the tag of
  their matched pair.
* **dependencies**: every edge of the graph between tasks of different chains, and between
  communication nodes, is a ``data_dep`` (edges within the CPU or the compute chain hold by its
  order), and each runtime wait (synchronize) a ``data_dep`` on the GPU task it waited for. No
  METADATA node.
* **durations**: ASTRA-sim starts a node when its slot is free and its dependencies are done;
  the time lumos's replay left between that moment and the node's start is overhead (CPU time
  between ops, launch latency): it is added to the node's ``duration_micros``, which is then
  ``round(end) - round(ready)`` in whole microseconds of the replay's clock, so rounding does
  not accumulate along a chain. Communication nodes take their time from ASTRA-sim's network.

Node ids are positions in the replay's start order. ``GlobalMetadata``: version ``0.0.4`` and
``rank``, ``world_size``, ``lumos_target = "astra-sim"``, ``lumos_comm_size_rule = "max"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lumos.chakra.attrs import attr
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.mapping import static_wait_targets
from lumos.chakra.schema import CollectiveCommType, NodeType
from lumos.chakra.trace import ChakraTrace
from lumos.cost.astra_files import AstraNetwork, CommSample
from lumos.diagnostics import Diagnostics
from lumos.errors import GraphError
from lumos.graph.algorithms import match_collectives, topological_order
from lumos.graph.kinds import CommType, TaskKind
from lumos.graph.model import Workload
from lumos.sim.result import SimResult

__all__ = ["AstraTarget", "comm_samples", "to_astra"]

_CPU = (TaskKind.CPU_OP, TaskKind.RUNTIME)
_GPU = (TaskKind.KERNEL, TaskKind.MEMCPY, TaskKind.MEMSET)
_COMM = (TaskKind.COMM, TaskKind.CPU_COMM)
_MODELLED = {
    int(CommType.ALL_REDUCE): CollectiveCommType.ALL_REDUCE,
    int(CommType.ALL_GATHER): CollectiveCommType.ALL_GATHER,
    int(CommType.REDUCE_SCATTER): CollectiveCommType.REDUCE_SCATTER,
    int(CommType.REDUCE_SCATTER_BLOCK): CollectiveCommType.REDUCE_SCATTER,
    int(CommType.ALL_TO_ALL): CollectiveCommType.ALL_TO_ALL,
}
_P2P = (int(CommType.SEND), int(CommType.RECV))


@dataclass(frozen=True)
class AstraTarget:
    """The written ETs (rank -> trace), the communicator groups that are not the whole world
    (``pg_name`` -> ranks, for ASTRA-sim's ``--comm-group-configuration``) and what was done."""

    traces: dict[int, ChakraTrace]
    comm_groups: dict[str, tuple[int, ...]]
    diagnostics: Diagnostics = field(default_factory=Diagnostics)


def _transfer_ns(g: Any, task: int) -> int:
    row = int(g.tasks.comm_idx[task])
    wait = int(g.comms.wait_ns[row]) if row >= 0 else 0
    return max(int(g.tasks.dur_ns[task]) - wait, 0)


def _group_size(g: Any, row: int) -> int:
    pg = int(g.comms.pg_idx[row])
    if 0 <= pg < len(g.process_groups) and g.process_groups[pg].ranks:
        return len(g.process_groups[pg].ranks)
    return int(g.world_size)


def comm_samples(workload: Workload) -> list[CommSample]:
    """Every collective of known kind and size: its traced transfer (for fitting the network)."""
    out = []
    for g in workload.graphs:
        t = g.tasks
        for task in np.flatnonzero(np.isin(t.kind, np.array(_COMM, np.int8)) & (t.comm_idx >= 0)):
            row = int(t.comm_idx[task])
            kind, size = int(g.comms.kind[row]), int(g.comms.size_bytes[row])
            if kind in _MODELLED and size > 0:
                name = CommType(kind).name.lower().replace("_block", "")
                out.append(CommSample(name, size, _group_size(g, row), _transfer_ns(g, int(task))))
    return out


def _size_for_time(net: AstraNetwork, kind: str, p: int, time_ns: int) -> int:
    """Smallest size (lumos convention) whose ASTRA-sim time reaches ``time_ns``."""
    lo, hi = 1, 1 << 40
    if net.collective_ns(kind, hi, p) < time_ns:
        return hi
    while lo < hi:
        mid = (lo + hi) // 2
        if net.collective_ns(kind, mid, p) >= time_ns:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _us(ns: np.ndarray) -> np.ndarray:
    """Nanoseconds -> whole microseconds, rounded half up."""
    return (ns + 500) // 1000


def _us1(ns: int) -> int:
    return (int(ns) + 500) // 1000


class _Rank:
    """Chains and node rows of one rank."""

    def __init__(self, gi: int, workload: Workload, result: SimResult) -> None:
        g = workload.graphs[gi]
        self.g = g
        self.start = np.asarray(result.starts(gi), dtype=np.int64)
        self.end = np.asarray(result.ends(gi), dtype=np.int64)
        topo = topological_order(g)
        if topo.shape[0] != g.num_tasks:
            raise GraphError(f"rank {g.rank}: the graph has a cycle; cannot order its chains")
        self.topo_pos = np.empty(g.num_tasks, dtype=np.int64)
        self.topo_pos[topo] = np.arange(g.num_tasks)
        kind = g.tasks.kind
        self.chain = np.full(g.num_tasks, -1, dtype=np.int8)
        self.chain[np.isin(kind, np.array(_CPU, np.int8))] = 0
        self.chain[np.isin(kind, np.array(_GPU, np.int8))] = 1
        self.chain[np.isin(kind, np.array(_COMM, np.int8))] = 2
        self.eff_start = self.start.copy()
        self.eff_end = self.end.copy()

    def order(self, members: np.ndarray) -> np.ndarray:
        return members[np.lexsort((self.topo_pos[members], self.end[members],
                                   self.start[members]))]  # fmt: skip

    def clip(self, chain: np.ndarray) -> None:
        """Clip overlapping tasks of one chain to what is left after the union before them."""
        busy_until = np.iinfo(np.int64).min
        for t in chain.tolist():
            s = max(int(self.start[t]), busy_until)
            e = max(int(self.end[t]), s)
            if int(self.end[t]) <= busy_until:
                e = s
            self.eff_start[t], self.eff_end[t] = s, e
            busy_until = max(busy_until, e)


def to_astra(workload: Workload, result: SimResult, network: AstraNetwork) -> AstraTarget:
    """Every rank of ``workload`` (replayed as ``result``) as an ASTRA-sim-ready Chakra trace;
    see the module docstring for the rules. ``network`` turns sizes the trace lacks into sizes
    with the traced transfer time."""
    diag = Diagnostics()
    graphs = workload.graphs
    ranks = [_Rank(gi, workload, result) for gi in range(len(graphs))]
    groups = match_collectives(workload)
    world = tuple(sorted(g.rank for g in graphs))
    # one order of groups for all ranks: when the last participant reached it in the replay
    n_groups = groups.num_groups
    reach = np.zeros(n_groups, dtype=np.int64)
    done = np.zeros(n_groups, dtype=np.int64)
    comm_type: dict[int, int] = {}
    comm_size: dict[int, int] = {}
    pg_of: dict[int, str] = {}
    comm_groups: dict[str, tuple[int, ...]] = {}
    tag_of: dict[int, int] = {}
    for k in range(n_groups):
        lo, hi = int(groups.indptr[k]), int(groups.indptr[k + 1])
        mg, mt = groups.member_graph[lo:hi], groups.member_task[lo:hi]
        reach[k] = max(int(ranks[gi].start[t]) for gi, t in zip(mg, mt, strict=True))
        done[k] = max(int(ranks[gi].end[t]) for gi, t in zip(mg, mt, strict=True))
        g0, t0 = graphs[int(mg[0])], int(mt[0])
        row = int(g0.tasks.comm_idx[t0])
        kind = int(g0.comms.kind[row])
        p = _group_size(g0, row)
        members = tuple(sorted(graphs[int(gi)].rank for gi in mg))
        if kind in _P2P:
            comm_type[k] = kind
            sizes = [int(graphs[int(gi)].comms.size_bytes[graphs[int(gi)].tasks.comm_idx[t]])
                     for gi, t in zip(mg, mt, strict=True)]  # fmt: skip
            comm_size[k] = max(max(sizes), 0)
            tag_of[k] = k
            continue
        if kind in _MODELLED:
            ctype = int(_MODELLED[kind])
            name = CommType(kind).name.lower().replace("_block", "")
            sizes = [int(graphs[int(gi)].comms.size_bytes[graphs[int(gi)].tasks.comm_idx[t]])
                     for gi, t in zip(mg, mt, strict=True)]  # fmt: skip
            size = max(sizes)
            if size <= 0:
                transfer = max(_transfer_ns(graphs[int(gi)], int(t))
                               for gi, t in zip(mg, mt, strict=True))  # fmt: skip
                size = _size_for_time(network, name, p, transfer)
                diag.warn("astra_comm_size_from_time", f"{name} of {transfer} ns -> {size} bytes")
            elif len(set(sizes)) > 1:
                diag.warn("astra_comm_size_folded", f"{name} sizes {min(sizes)}..{max(sizes)} "
                                                    f"-> {size} (max)")  # fmt: skip
            if ctype == CollectiveCommType.ALL_GATHER:
                size = max(size // p, 1)
            comm_type[k], comm_size[k] = ctype, max(size, 1)
        else:
            comm_type[k], comm_size[k] = int(CollectiveCommType.BROADCAST), 1
            diag.warn("astra_replayed_as_broadcast", CommType(kind).name.lower())
        if members == world or len(members) <= 1:
            pg_of[k] = ""
        else:
            found = next((n for n, rs in comm_groups.items() if rs == members), None)
            if found is None:
                found = str(len(comm_groups) + 1)
                comm_groups[found] = members
            pg_of[k] = found
    group_rank = np.empty(n_groups, dtype=np.int64)
    group_rank[np.lexsort((np.arange(n_groups), done, reach))] = np.arange(n_groups)
    traces = {}
    for gi, st in enumerate(ranks):
        traces[st.g.rank] = _write_rank(gi, st, groups, group_rank, comm_type, comm_size,
                                        pg_of, tag_of, diag)  # fmt: skip
    return AstraTarget(traces, comm_groups, diag)


def _write_rank(gi: int, st: _Rank, groups: Any, group_rank: np.ndarray,
                comm_type: Mapping[int, int], comm_size: Mapping[int, int],
                pg_of: Mapping[int, str], tag_of: Mapping[int, int],
                diag: Diagnostics) -> ChakraTrace:  # fmt: skip
    g = st.g
    n = g.num_tasks
    gof = groups.group_of[gi]
    chains: list[np.ndarray] = []
    for c in (0, 1):
        chain = st.order(np.flatnonzero(st.chain == c))
        st.clip(chain)
        chains.append(chain)
    comm = np.flatnonzero(st.chain == 2)
    # a send or receive with no partner (the peer untraced, or the recording contradicting
    # the pairing) would leave ASTRA-sim waiting: it is its traced time, as compute
    alone = np.zeros(comm.shape[0], dtype=bool)
    has = gof[comm] >= 0
    alone[has] = (groups.sizes()[gof[comm[has]]] == 1) & np.isin(
        g.comms.kind[g.tasks.comm_idx[comm[has]]], _P2P
    )
    if alone.any():
        diag.warn("astra_p2p_without_partner_as_compute",
                  g.names[g.tasks.name_idx[comm[alone][0]]], int(alone.sum()))  # fmt: skip
    no_row = comm[~has]
    if no_row.size:  # no comm row: it is compute time on the GPU (or CPU) it ran on
        diag.warn("astra_comm_without_kind_as_compute", g.names[g.tasks.name_idx[no_row[0]]],
                  int(no_row.size))  # fmt: skip
    unmatched = comm[~has | alone]
    if unmatched.size:
        st.chain[unmatched] = np.where(g.tasks.kind[unmatched] == TaskKind.CPU_COMM, 0, 1)
        for c in (0, 1):
            chains[c] = st.order(np.flatnonzero(st.chain == c))
            st.clip(chains[c])
        comm = comm[(gof[comm] >= 0) & ~alone]
    # a point-to-point group's type is its first member's: each side's own kind says which
    own = g.comms.kind[g.tasks.comm_idx[comm]] if comm.size else np.zeros(0, np.int8)
    is_recv = own == int(CommType.RECV)
    if is_recv.any():  # a receive takes no slot: outside every chain, ordered by its edges
        st.chain[comm[is_recv]] = 3
        comm = comm[~is_recv]
    chains.append(comm[np.argsort(group_rank[gof[comm]], kind="stable")])
    # dependencies: edges across chains, waits, chain order
    preds: list[set[int]] = [set() for _ in range(n)]
    ctrl: list[int] = [-1] * n
    e = g.edges
    for s, d in zip(e.src.tolist(), e.dst.tolist(), strict=True):
        if st.chain[s] != st.chain[d] or st.chain[d] >= 2:  # the comm chain keeps its edges
            preds[d].add(s)
    waited, waiting = static_wait_targets(g)
    for s, d in zip(waited.tolist(), waiting.tolist(), strict=True):
        if st.chain[s] != st.chain[d]:
            preds[d].add(s)
    for chain in chains:
        for a, b in zip(chain[:-1].tolist(), chain[1:].tolist(), strict=True):
            ctrl[b] = a
    # durations: from the moment ASTRA-sim may start the node (slot free, deps done) to its end
    end_us = _us(st.eff_end)
    node_order = np.lexsort((st.topo_pos, st.eff_start))
    node_id = np.empty(n, dtype=np.int64)
    node_id[node_order] = np.arange(n)
    b = ChakraTraceBuilder(version="0.0.4", rank=g.rank, metadata_attrs=[
        attr("rank", g.rank), attr("world_size", g.world_size),
        attr("lumos_target", "astra-sim"), attr("lumos_comm_size_rule", "max")])  # fmt: skip
    for t in node_order.tolist():
        deps = sorted(preds[t])
        ready = max([int(st.eff_end[p]) for p in deps] + ([int(st.eff_end[ctrl[t]])]
                                                           if ctrl[t] >= 0 else [0]))  # fmt: skip
        name = g.names[g.tasks.name_idx[t]]
        data = [int(node_id[p]) for p in deps]
        cdeps = [int(node_id[ctrl[t]])] if ctrl[t] >= 0 else []
        if st.chain[t] in (0, 1):
            dur = max(int(end_us[t]) - _us1(ready), 0)
            b.add_node(int(node_id[t]), name, NodeType.COMP_NODE, ctrl_deps=cdeps,
                       data_deps=data, duration_micros=dur,
                       attrs=[attr("is_cpu_op", bool(st.chain[t] == 0))])  # fmt: skip
            continue
        k = int(gof[t])
        ctype = comm_type[k]
        if ctype in _P2P:
            row = int(g.tasks.comm_idx[t])
            peer = int(g.comms.peer_rank[row])
            send = int(g.comms.kind[row]) == CommType.SEND  # this side's, not the group's
            src, dst = (g.rank, peer) if send else (peer, g.rank)
            b.add_node(int(node_id[t]), name,
                       NodeType.COMM_SEND_NODE if send else NodeType.COMM_RECV_NODE,
                       ctrl_deps=cdeps, data_deps=data,
                       attrs=[attr("is_cpu_op", False), attr("comm_src", src, "int32_val"),
                              attr("comm_dst", dst, "int32_val"),
                              attr("comm_tag", tag_of[k], "int32_val"),
                              attr("comm_size", comm_size[k])])  # fmt: skip
            continue
        dur_us = _us1(_transfer_ns(g, t))
        attrs = [attr("is_cpu_op", False), attr("comm_type", ctype),
                 attr("comm_size", comm_size[k])]  # fmt: skip
        if pg_of[k]:
            attrs.append(attr("pg_name", pg_of[k]))
        b.add_node(int(node_id[t]), name, NodeType.COMM_COLL_NODE, ctrl_deps=cdeps,
                   data_deps=data, duration_micros=dur_us, attrs=attrs)  # fmt: skip
    return b.build()
