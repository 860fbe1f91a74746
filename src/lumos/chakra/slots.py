"""Simulate Chakra ETs the way ASTRA-sim (analytical backend, feeder v3) runs them.

Only what the Chakra schema says is read: node types, ``data_deps`` and ``ctrl_deps`` (both
enforced), ``duration_micros``, ``is_cpu_op`` (absent = false, the feeder's default) and the
communication attributes. lumos's private ``lumos_*`` attributes are ignored, so this is what
``lumos replay --chakra-only`` reports and what a consumer that knows only Chakra sees.

Per NPU (one ``.et`` per rank), as ASTRA-sim's ``HardwareResource`` and ``Workload`` do:

* three slots, each holding one node at a time: CPU (any node with ``is_cpu_op`` true), GPU
  compute (COMP nodes), GPU communication (COMM_COLL and COMM_SEND; COMM_RECV takes no slot);
* whenever a node of the NPU finishes, the dependency-free nodes are issued in node-id order,
  each one whose slot is free (the others wait for the next finish);
* a COMP node lasts ``duration_micros`` x 1000 ns, and 1 ns when that is 0; METADATA and
  INVALID nodes finish at once;
* the k-th collective an NPU issues in a communicator group (``pg_name``; "" = all NPUs of
  the set) is paired with the k-th of every other member; it ends on all of them at the last
  issue + ASTRA-sim's ring time for it on ``network`` (:func:`lumos.cost.astra.astra_time`;
  the ET's ``comm_size`` of an all-gather is one rank's input, as in ASTRA-sim). Paired nodes
  of different type or size never end: ASTRA-sim stalls on them, and so does this;
  BROADCAST replays its ``duration_micros``, as ASTRA-sim does;
* a COMM_SEND to ``comm_dst`` with ``comm_tag`` is matched in order with the COMM_RECV from
  ``comm_src`` with the same tag on the peer; the message takes ``hops x latency + size / bw``
  (hops along the ring); the send ends when it arrives, the receive at the later of its
  issue and the arrival.

Deviations, small by construction: nodes released by an instant (METADATA) finish are issued
in the same pass rather than at the next event; events at the same time are processed rank by
rank in order. A node that would make ASTRA-sim abort (a communication node on the CPU, a
collective type ASTRA-sim does not implement) is counted in ``diagnostics`` and never ends.

Against ASTRA-sim's analytical congestion-unaware binary (built from its public sources;
``LUMOS_ASTRA_SIM=... pytest tests/astra/test_astra_sim_binary.py``), per-rank finish times
agree exactly on the four 8-NPU microbenchmarks and on its custom ring all-reduce (sends and
receives), on the 2-rank demo's ``--target astra-sim`` set and on those of the two recorded
pipelines (``tests/data/pipeline_4_stages``, ``gloo_pipelining_2stage``: sends and receives
between stages), and within 0.12 % on the 8-rank DLRM sets (default, ``--compat upstream``,
``--target astra-sim``).
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lumos.chakra.deps import resolve_deps
from lumos.chakra.schema import CollectiveCommType, NodeType
from lumos.chakra.trace import MISSING, ChakraTrace
from lumos.cost.astra_files import AstraNetwork
from lumos.diagnostics import Diagnostics
from lumos.errors import ChakraFormatError

__all__ = ["SLOT_NAMES", "SlotResult", "simulate_slots"]

#: Slot of a node: 0 CPU, 1 GPU compute, 2 GPU communication, -1 none (RECV, METADATA).
SLOT_NAMES = ("cpu", "gpu_comp", "gpu_comm")
_MODELLED = {
    int(CollectiveCommType.ALL_REDUCE): "all_reduce",
    int(CollectiveCommType.ALL_GATHER): "all_gather",
    int(CollectiveCommType.REDUCE_SCATTER): "reduce_scatter",
    int(CollectiveCommType.ALL_TO_ALL): "all_to_all",
}
_BROADCAST = int(CollectiveCommType.BROADCAST)
_NEVER = -1


@dataclass(frozen=True)
class SlotResult:
    """Per rank: node start/end (ns, -1 = never), finish time (None when the rank stalls)."""

    ranks: tuple[int, ...]
    start_ns: dict[int, np.ndarray]
    end_ns: dict[int, np.ndarray]
    finish_ns: dict[int, int | None]
    stalls: tuple[str, ...] = ()
    diagnostics: Diagnostics = field(default_factory=Diagnostics)

    @property
    def completed(self) -> bool:
        """True when every node of every rank ended."""
        return all(v is not None for v in self.finish_ns.values())

    def _rank_dict(self, r: int) -> dict[str, Any]:
        end = self.end_ns[r]
        return {"rank": r, "finish_ns": self.finish_ns[r], "nodes": int(end.shape[0]),
                "unfinished_nodes": int((end < 0).sum())}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "completed": self.completed,
            "ranks": [self._rank_dict(r) for r in self.ranks],
            "stalls": list(self.stalls),
            "diagnostics": self.diagnostics.to_dict(),
        }


def _slots(trace: ChakraTrace) -> np.ndarray:
    t = trace.node_type
    cpu = trace.comm.is_cpu_op == 1
    slot = np.full(trace.num_nodes, -1, dtype=np.int8)
    slot[t == NodeType.COMP_NODE] = 1
    slot[(t == NodeType.COMM_COLL_NODE) | (t == NodeType.COMM_SEND_NODE)] = 2
    slot[cpu & (t != NodeType.COMM_RECV_NODE)] = 0
    return slot


class _Rank:
    """One NPU's state: remaining dependency counts, per-slot ready heaps (by node id)."""

    def __init__(self, rank: int, trace: ChakraTrace) -> None:
        self.rank, self.trace = rank, trace
        n = trace.num_nodes
        g = resolve_deps(trace)
        if g.dangling_data.size or g.dangling_ctrl.size:
            row, missing = (g.dangling_data if g.dangling_data.size else g.dangling_ctrl)[0]
            raise ChakraFormatError(
                trace.path or f"rank {rank}",
                f"node {int(trace.node_id[row])} depends on id {int(missing)}, which no node "
                "has (ASTRA-sim's feeder aborts; `lumos chakra validate --fix` drops it)",
            )
        owner = np.repeat(np.arange(n), np.diff(g.pred_ptr))
        pairs = np.unique(np.stack([owner, g.pred_idx]), axis=1) if owner.size else np.zeros(
            (2, 0), np.int64)  # fmt: skip
        self.waiting = np.bincount(pairs[0], minlength=n).astype(np.int64)
        order = np.argsort(pairs[1], kind="stable")
        self.succ_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(pairs[1], minlength=n), out=self.succ_ptr[1:])
        self.succ = pairs[0][order]
        self.slot = _slots(trace)
        self.busy = [False, False, False]
        self.ready: list[list[tuple[int, int]]] = [[], [], []]
        self.instant: list[tuple[int, int]] = []  # slot -1: RECV, METADATA, INVALID
        self.start = np.full(n, _NEVER, dtype=np.int64)
        self.end = np.full(n, _NEVER, dtype=np.int64)
        self.ids = trace.node_id.astype(np.int64)
        for row in np.flatnonzero(self.waiting == 0).tolist():
            self.push(row)
        self.coll_count: dict[str, int] = defaultdict(int)

    def push(self, row: int) -> None:
        s = int(self.slot[row])
        heapq.heappush(self.instant if s < 0 else self.ready[s], (int(self.ids[row]), row))


class _Sim:
    def __init__(self, traces: Mapping[int, ChakraTrace], network: AstraNetwork | None) -> None:
        self.network = network
        self.ranks = {r: _Rank(r, traces[r]) for r in sorted(traces)}
        self.diag = Diagnostics()
        self.events: list[tuple[int, int, int, int]] = []  # (time, seq, rank, row)
        self.seq = 0
        self.members = self._groups()
        self.pending: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
        self.sends: dict[tuple[int, int, int], deque[tuple[int, int, int]]] = defaultdict(deque)
        self.recvs: dict[tuple[int, int, int], deque[tuple[int, int]]] = defaultdict(deque)
        self.stalls: list[str] = []

    def _groups(self) -> dict[str, tuple[int, ...]]:
        found: dict[str, set[int]] = defaultdict(set)
        for r, st in self.ranks.items():
            c = st.trace.comm
            coll = np.flatnonzero(st.trace.node_type == NodeType.COMM_COLL_NODE)
            for idx in np.unique(c.pg_name_idx[coll]).tolist():
                name = c.pg_names[idx] if idx >= 0 else ""
                found[name].add(r)
        out = {name: tuple(sorted(rs)) for name, rs in found.items()}
        out[""] = tuple(self.ranks)
        return out

    def at(self, time: int, rank: int, row: int) -> None:
        heapq.heappush(self.events, (time, self.seq, rank, row))
        self.seq += 1

    def run(self) -> None:
        for r in self.ranks:
            self.issue(r, 0)
        while self.events:
            time, _, r, row = heapq.heappop(self.events)
            self.finish(r, row, time)
            self.issue(r, time)

    def finish(self, r: int, row: int, time: int) -> None:
        st = self.ranks[r]
        st.end[row] = time
        s = int(st.slot[row])
        if s >= 0:
            st.busy[s] = False
        for child in st.succ[st.succ_ptr[row] : st.succ_ptr[row + 1]].tolist():
            st.waiting[child] -= 1
            if st.waiting[child] == 0:
                st.push(child)

    def issue(self, r: int, time: int) -> None:
        st = self.ranks[r]
        while True:
            while st.instant:
                _, row = heapq.heappop(st.instant)
                st.start[row] = time
                if int(st.trace.node_type[row]) == NodeType.COMM_RECV_NODE:
                    self.recv(r, row, time)
                else:
                    self.finish(r, row, time)
            for s in range(3):
                if not st.busy[s] and st.ready[s]:
                    _, row = heapq.heappop(st.ready[s])
                    st.busy[s] = True
                    st.start[row] = time
                    self.start(r, row, time)
            if not st.instant:
                return

    def start(self, r: int, row: int, time: int) -> None:
        st = self.ranks[r]
        t = st.trace
        typ = int(t.node_type[row])
        dur = int(t.duration_micros[row]) * 1000 or 1
        if typ == NodeType.COMP_NODE:
            self.at(time + dur, r, row)
        elif typ in (NodeType.METADATA_NODE, NodeType.INVALID_NODE):
            self.at(time, r, row)
        elif st.slot[row] == 0:
            self.diag.warn("comm_node_on_cpu", f"rank {r} node {int(t.node_id[row])}")
        elif typ == NodeType.COMM_COLL_NODE:
            self.collective(r, row, time)
        elif typ == NodeType.COMM_SEND_NODE:
            self.send(r, row, time)

    def collective(self, r: int, row: int, time: int) -> None:
        st = self.ranks[r]
        c = st.trace.comm
        idx = int(c.pg_name_idx[row])
        pg = c.pg_names[idx] if idx >= 0 else ""
        if pg not in self.members:
            pg = ""
        k = st.coll_count[pg]
        st.coll_count[pg] += 1
        entry = self.pending.setdefault((pg, k), {})
        entry[r] = (time, row)
        members = self.members[pg]
        if len(entry) < len(members):
            return
        del self.pending[(pg, k)]
        sig = {(int(self.ranks[q].trace.comm.comm_type[w]), int(self.ranks[q].trace.comm.comm_size[w]))
               for q, (_, w) in entry.items()}  # fmt: skip
        if len(sig) > 1:
            shown = ", ".join(f"rank {q}: {self._describe(q, w)}" for q, (_, w) in
                              sorted(entry.items()))  # fmt: skip
            self.stalls.append(f"collective #{k} of group {pg or 'all'} differs across ranks "
                               f"({shown})")  # fmt: skip
            return
        kind, size = sig.pop()
        last = max(t0 for t0, _ in entry.values())
        if kind == _BROADCAST:
            end = last + (int(st.trace.duration_micros[row]) * 1000 or 1)
        elif kind in _MODELLED and size != MISSING:
            name = _MODELLED[kind]
            p = len(members)
            if self.network is None:
                end = last + max(int(st.trace.duration_micros[row]) * 1000, 1)
                self.diag.warn("collective_without_network", name)
            else:
                lumos_size = size * p if name == "all_gather" else size
                end = last + self.network.collective_ns(name, max(lumos_size, 0), p)
        else:
            self.diag.warn("unsupported_collective", self._describe(r, row))
            return
        for q, (_, w) in entry.items():
            self.at(end, q, w)

    def _describe(self, r: int, row: int) -> str:
        c = self.ranks[r].trace.comm
        kind, size = int(c.comm_type[row]), int(c.comm_size[row])
        name = CollectiveCommType(kind).name.lower() if 0 <= kind <= 9 else f"type {kind}"
        return f"{name} of {size if size != MISSING else '?'} bytes"

    def _transfer(self, src: int, dst: int, size: int) -> int:
        if self.network is None:
            return 0
        p = self.network.npus
        d = abs(dst - src) % p
        hops = max(min(d, p - d), 1)
        cfg = self.network.config()
        return hops * cfg.latency_ns + int(size / (cfg.bw_bytes_per_s / 1e9))

    def send(self, r: int, row: int, time: int) -> None:
        c = self.ranks[r].trace.comm
        dst, tag, size = int(c.comm_dst[row]), int(c.comm_tag[row]), int(c.comm_size[row])
        size = max(size, 0) if size != MISSING else 0
        arrive = time + self._transfer(r, dst, size)
        self.at(arrive, r, row)
        key = (r, dst, tag if tag != MISSING else 0)
        if self.recvs[key]:
            q_row = self.recvs[key].popleft()
            self.at(max(arrive, q_row[0]), dst, q_row[1])
        else:
            self.sends[key].append((arrive, size, row))

    def recv(self, r: int, row: int, time: int) -> None:
        c = self.ranks[r].trace.comm
        src, tag = int(c.comm_src[row]), int(c.comm_tag[row])
        key = (src, r, tag if tag != MISSING else 0)
        if self.sends[key]:
            arrive, _, _ = self.sends[key].popleft()
            self.at(max(arrive, time), r, row)
        else:
            self.recvs[key].append((time, row))


def simulate_slots(traces: Mapping[int, ChakraTrace], network: AstraNetwork | None) -> SlotResult:
    """Run ``traces`` (rank -> trace) with ASTRA-sim's semantics (module docstring).
    ``network`` None: collectives take their ``duration_micros`` (counted in diagnostics)."""
    sim = _Sim(traces, network)
    sim.run()
    finish: dict[int, int | None] = {}
    stalls = list(sim.stalls)
    for r, st in sim.ranks.items():
        left = int((st.end < 0).sum())
        if left:
            finish[r] = None
            stalls.append(f"rank {r}: {left} of {st.trace.num_nodes} nodes never ran")
        else:
            finish[r] = int(st.end.max()) if st.end.size else 0
    for (pg, k), entry in sorted(sim.pending.items()):
        waiting = ", ".join(f"rank {q}" for q in sorted(entry))
        stalls.append(f"collective #{k} of group {pg or 'all'} issued only by {waiting}")
    return SlotResult(tuple(sim.ranks), {r: s.start for r, s in sim.ranks.items()},
                      {r: s.end for r, s in sim.ranks.items()}, finish, tuple(stalls),
                      sim.diag)  # fmt: skip
