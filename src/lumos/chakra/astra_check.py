"""``lumos chakra check --astra-sim``: what makes ASTRA-sim abort or stall on a set of ETs.

ASTRA-sim (analytical backend, feeder v3) is stricter than the Chakra schema. Each finding is a
:class:`~lumos.chakra.validate.Problem` with the rank it concerns; all are errors (ASTRA-sim
aborts or never finishes), except where said:

==========================  =====================================================================
kind                        what ASTRA-sim does
==========================  =====================================================================
metadata_node               a METADATA node: its statistics layer aborts
                            (``Statistics.cc get_operator_type: Assertion 'false'``)
comm_on_cpu                 a communication node with ``is_cpu_op`` true: "Comm node should not
                            be on CPU"
unsupported_collective      a collective type other than all-reduce, all-gather,
                            reduce-scatter, all-to-all, broadcast: "Unsupported collective"
missing_comm_attr           a collective without ``comm_type``/``comm_size``, a send without
                            ``comm_dst``, a receive without ``comm_src``
dangling_dep                ``data_deps``/``ctrl_deps`` naming no node: the feeder aborts
collective_size_differs     the k-th collectives of a group have the same type but different
                            ``comm_size`` on different ranks: messages never pair, it stalls
collective_order_differs    the k-th collectives of a group differ in type across ranks (ranks
                            issue their collectives in different orders): it stalls
collective_count_differs    a rank of a group issues fewer collectives than the others: stalls
unmatched_p2p               a COMM_SEND with no COMM_RECV of the same (src, dst, tag, size) on
                            the peer, or the reverse: it stalls
pg_name_needs_comm_group    (warning) a collective names a process group: ASTRA-sim needs it in
                            a ``--comm-group-configuration`` file, else it exits
stall                       the simulation with ASTRA-sim's semantics (:mod:`lumos.chakra.slots`)
                            did not finish (the detail says where)
==========================  =====================================================================

The collective order compared across ranks is the order each rank ISSUES them under ASTRA-sim's
rules (one communication slot, dependency-free nodes in id order), found by simulating the set
(:func:`~lumos.chakra.slots.simulate_slots`); where that simulation cannot run (dangling deps)
the order is by node id.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lumos.chakra.deps import resolve_deps
from lumos.chakra.schema import CollectiveCommType, NodeType
from lumos.chakra.slots import simulate_slots
from lumos.chakra.trace import MISSING, ChakraTrace
from lumos.chakra.validate import Problem
from lumos.cost.astra_files import AstraNetwork

__all__ = ["AstraCheckReport", "check_astra"]

_SUPPORTED = {int(k) for k in (CollectiveCommType.ALL_REDUCE, CollectiveCommType.ALL_GATHER,
                               CollectiveCommType.REDUCE_SCATTER, CollectiveCommType.ALL_TO_ALL,
                               CollectiveCommType.BROADCAST)}  # fmt: skip
_COMM = (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)


@dataclass(frozen=True)
class AstraCheckReport:
    """Findings per rank (``problems`` holds ``(rank, Problem)`` in rank then node order)."""

    ranks: tuple[int, ...]
    problems: tuple[tuple[int, Problem], ...]

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for _, p in self.problems)

    def counts(self) -> dict[str, int]:
        """Findings per kind, sorted by kind."""
        return dict(sorted(Counter(p.kind for _, p in self.problems).items()))


def _type_name(kind: int) -> str:
    return CollectiveCommType(kind).name.lower() if 0 <= kind <= 9 else f"type {kind}"


def _node_problems(trace: ChakraTrace) -> list[Problem]:
    out: list[Problem] = []
    t, c, ids = trace.node_type, trace.comm, trace.node_id
    for row in np.flatnonzero(t == NodeType.METADATA_NODE).tolist():
        out.append(Problem("metadata_node", int(ids[row]),
                           f"{trace.name_of(row)!r} is a METADATA node"))  # fmt: skip
    comm = np.isin(t, np.array(_COMM, dtype=t.dtype))
    for row in np.flatnonzero(comm & (c.is_cpu_op == 1)).tolist():
        out.append(Problem("comm_on_cpu", int(ids[row]),
                           f"{trace.name_of(row)!r} has is_cpu_op true"))  # fmt: skip
    coll = t == NodeType.COMM_COLL_NODE
    for row in np.flatnonzero(coll).tolist():
        kind, size = int(c.comm_type[row]), int(c.comm_size[row])
        if kind == MISSING or size == MISSING:
            what = "comm_type" if kind == MISSING else "comm_size"
            out.append(Problem("missing_comm_attr", int(ids[row]),
                               f"{trace.name_of(row)!r} has no {what}"))  # fmt: skip
        elif kind not in _SUPPORTED:
            out.append(Problem("unsupported_collective", int(ids[row]),
                               f"{trace.name_of(row)!r} is a {_type_name(kind)}"))  # fmt: skip
        idx = int(c.pg_name_idx[row])
        if idx >= 0 and c.pg_names[idx] not in ("",):
            out.append(Problem("pg_name_needs_comm_group", int(ids[row]),
                               f"pg_name {c.pg_names[idx]!r}", "warning"))  # fmt: skip
    for typ, col, what in ((NodeType.COMM_SEND_NODE, c.comm_dst, "comm_dst"),
                           (NodeType.COMM_RECV_NODE, c.comm_src, "comm_src")):  # fmt: skip
        for row in np.flatnonzero((t == typ) & (col == MISSING)).tolist():
            out.append(Problem("missing_comm_attr", int(ids[row]),
                               f"{trace.name_of(row)!r} has no {what}"))  # fmt: skip
    g = resolve_deps(trace)
    for dang in (g.dangling_data, g.dangling_ctrl):
        for row, missing in dang.tolist():
            out.append(Problem("dangling_dep", int(ids[row]), f"depends on id {missing}, "
                               "which no node has"))  # fmt: skip
    return out


def _collectives_in_order(trace: ChakraTrace, start: np.ndarray | None) -> list[int]:
    coll = np.flatnonzero(trace.node_type == NodeType.COMM_COLL_NODE)
    if start is None:
        return coll[np.argsort(trace.node_id[coll], kind="stable")].tolist()
    issued = coll[start[coll] >= 0]
    never = coll[start[coll] < 0]
    key = np.lexsort((trace.node_id[issued], start[issued]))
    return issued[key].tolist() + never[np.argsort(trace.node_id[never], kind="stable")].tolist()


def _pg(trace: ChakraTrace, row: int) -> str:
    idx = int(trace.comm.pg_name_idx[row])
    return trace.comm.pg_names[idx] if idx >= 0 else ""


def _order_problems(traces: Mapping[int, ChakraTrace],
                    starts: Mapping[int, np.ndarray] | None) -> list[tuple[int, Problem]]:  # fmt: skip
    seqs: dict[str, dict[int, list[int]]] = defaultdict(dict)
    for r, tr in traces.items():
        rows = _collectives_in_order(tr, None if starts is None else starts[r])
        by_pg: dict[str, list[int]] = defaultdict(list)
        for row in rows:
            by_pg[_pg(tr, row)].append(row)
        for pg, lst in by_pg.items():
            seqs[pg][r] = lst
    out: list[tuple[int, Problem]] = []
    for pg, per_rank in sorted(seqs.items()):
        members = sorted(traces) if pg == "" else sorted(per_rank)
        for r in members:
            per_rank.setdefault(r, [])
        lengths = {r: len(v) for r, v in per_rank.items()}
        most = max(lengths.values())
        for r in members:
            if lengths[r] < most:
                out.append((r, Problem("collective_count_differs", None,
                                       f"group {pg or 'all'}: {lengths[r]} collectives, "
                                       f"other ranks up to {most}")))  # fmt: skip
        for k in range(min(lengths.values())):
            sig = {r: (int(traces[r].comm.comm_type[v[k]]), int(traces[r].comm.comm_size[v[k]]))
                   for r, v in per_rank.items()}  # fmt: skip
            types = {s[0] for s in sig.values()}
            if len(set(sig.values())) == 1:
                continue
            kind = "collective_order_differs" if len(types) > 1 else "collective_size_differs"
            shown = ", ".join(f"rank {r}: {_type_name(a)} {b}" for r, (a, b) in sorted(sig.items()))
            for r in members:
                row = per_rank[r][k]
                out.append((r, Problem(kind, int(traces[r].node_id[row]),
                                       f"group {pg or 'all'} collective #{k}: {shown}")))  # fmt: skip
    return out


def _p2p_problems(traces: Mapping[int, ChakraTrace]) -> list[tuple[int, Problem]]:
    sends: Counter[tuple[int, int, int, int]] = Counter()
    recvs: Counter[tuple[int, int, int, int]] = Counter()
    where: dict[tuple[str, tuple[int, int, int, int]], tuple[int, int]] = {}
    for r, tr in traces.items():
        c = tr.comm
        for typ, bag, label in ((NodeType.COMM_SEND_NODE, sends, "send"),
                                (NodeType.COMM_RECV_NODE, recvs, "recv")):  # fmt: skip
            for row in np.flatnonzero(tr.node_type == typ).tolist():
                src = r if label == "send" else int(c.comm_src[row])
                dst = int(c.comm_dst[row]) if label == "send" else r
                key = (src, dst, int(c.comm_tag[row]), int(c.comm_size[row]))
                bag[key] += 1
                where.setdefault((label, key), (r, int(tr.node_id[row])))
    out = []
    for label, mine, other in (("send", sends, recvs), ("recv", recvs, sends)):
        for key, n in sorted(mine.items()):
            extra = n - other.get(key, 0)
            if extra > 0:
                r, nid = where[(label, key)]
                src, dst, tag, size = key
                peer = "receive" if label == "send" else "send"
                out.append((r, Problem("unmatched_p2p", nid,
                                       f"{extra} {label}(s) {src}->{dst} tag {tag} size {size} "
                                       f"without a matching {peer}")))  # fmt: skip
    return out


def check_astra(traces: Mapping[int, ChakraTrace],
                network: AstraNetwork | None = None) -> AstraCheckReport:  # fmt: skip
    """Every finding of the module docstring's table for ``traces`` (rank -> trace)."""
    found: list[tuple[int, Problem]] = []
    for r in sorted(traces):
        found.extend((r, p) for p in _node_problems(traces[r]))
    starts = None
    if not any(p.kind == "dangling_dep" for _, p in found):
        res = simulate_slots(traces, network)
        starts = res.start_ns
        for s in res.stalls:
            found.append((-1, Problem("stall", None, s)))
    found.extend(_order_problems(traces, starts))
    found.extend(_p2p_problems(traces))
    found.sort(key=lambda rp: (rp[0], rp[1].kind))
    return AstraCheckReport(tuple(sorted(traces)), tuple(found))
