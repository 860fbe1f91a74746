"""Several ranks of one job: a common time origin and each collective's waiting for peers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from lumos.graph.model import ExecGraph

if TYPE_CHECKING:
    from lumos.graph.algorithms import CollectiveGroups

__all__ = ["align_ranks", "shared_clock_origin"]


def align_ranks(graphs: Sequence[ExecGraph]) -> tuple[ExecGraph, ...]:
    """Put the ranks of one job on a common time origin.

    Each graph starts its own replay at 0 at its first recorded task. Ranks traced on one clock
    (one host, or hosts whose traces overlap in time) must keep their relative offsets, or
    collectives would see arrivals shifted by however late each rank started profiling. The
    release delays of every processor's ``<start>`` task are moved by the rank's offset from the
    earliest rank. Traces whose time ranges do not overlap (unsynchronized clocks) are left as
    they are.
    """
    if len(graphs) < 2:
        return tuple(graphs)
    shared = shared_clock_origin(graphs) is not None
    groups = None
    if shared:
        graphs, groups = _unpair_impossible_p2p(tuple(graphs))
    return _collective_waits(_common_origin(graphs), shared, groups)


#: How much earlier than its send a receive may end on a shared clock before the pair is taken
#: for two transfers (clock noise between the processes of one host).
P2P_CLOCK_TOLERANCE_NS = 50_000


def _unpair_impossible_p2p(
    graphs: tuple[ExecGraph, ...],
) -> tuple[tuple[ExecGraph, ...], CollectiveGroups | None]:
    """Each send/receive pair whose receive ended before its send began on the shared clock
    (beyond :data:`P2P_CLOCK_TOLERANCE_NS`) marked unpaired on both sides
    (:data:`lumos.graph.algorithms.P2P_UNPAIRED`): each keeps its recorded time, as a transfer
    with an untraced peer does, instead of the receive waiting in the replay for a send that
    came later. Counted on the receiving rank (``p2p_receive_ends_before_send``). The mark
    lives in the graph, so what an edit copies stays unpaired whatever times the copies get.
    Returns the graphs and, when none changed, the matching it made (still theirs)."""
    from lumos.graph.algorithms import P2P_UNPAIRED
    from lumos.graph.model import CommType, Workload

    p2p = (int(CommType.SEND), int(CommType.RECV))
    if not any(np.isin(g.comms.kind, p2p).any() for g in graphs):
        return graphs, None  # no send or receive: nothing to unpair
    w = Workload(graphs)
    groups = w.collective_groups()
    rows: dict[int, list[int]] = {}  # graph -> its comm rows to unpair
    notes: dict[int, list[str]] = {}
    for k in np.flatnonzero(groups.sizes() == 2).tolist():
        lo = int(groups.indptr[k])
        side = {}
        for gi, t in zip(groups.member_graph[lo : lo + 2].tolist(),
                         groups.member_task[lo : lo + 2].tolist(), strict=True):  # fmt: skip
            g = w.graphs[gi]
            row = int(g.tasks.comm_idx[t])
            s, e = int(g.tasks.ts_ns[t]), int(g.tasks.ts_ns[t] + g.tasks.dur_ns[t])
            side[int(g.comms.kind[row])] = (gi, row, s, e)
        send, recv = side.get(int(CommType.SEND)), side.get(int(CommType.RECV))
        if send is None or recv is None or recv[3] + P2P_CLOCK_TOLERANCE_NS >= send[2]:
            continue
        notes.setdefault(recv[0], []).append(
            f"receive from rank {w.graphs[send[0]].rank} ended {(send[2] - recv[3]) // 1000} us "
            "before its send began"
        )
        rows.setdefault(send[0], []).append(send[1])
        rows.setdefault(recv[0], []).append(recv[1])
    if not rows:
        return graphs, groups
    out = []
    index = {x.rank: i for i, x in enumerate(w.graphs)}
    for g in graphs:
        gi = index[g.rank]
        if gi not in rows:
            out.append(g)
            continue
        seq = g.comms.seq_id.copy()
        seq[rows[gi]] = P2P_UNPAIRED
        diag = g.diagnostics.copy()
        for note in notes.get(gi, []):
            diag.warn("p2p_receive_ends_before_send", note)
        out.append(g.replace(comms=g.comms.replace(seq_id=seq), diagnostics=diag))
    return tuple(out), None


def shared_clock_origin(graphs: Sequence[ExecGraph]) -> int | None:
    """The earliest recorded start when the ranks were traced on one clock (every rank's
    recording overlaps every other's in time); None otherwise, or for fewer than two ranks."""
    spans = [(int(g.tasks.ts_ns.min()), int((g.tasks.ts_ns + g.tasks.dur_ns).max()))
             for g in graphs if g.num_tasks]  # fmt: skip
    if len(spans) < 2 or max(s for s, _ in spans) >= min(e for _, e in spans):
        return None
    return min(s for s, _ in spans)


def _common_origin(graphs: Sequence[ExecGraph]) -> tuple[ExecGraph, ...]:
    """Shift each rank's anchors by its start offset on a shared clock (see align_ranks)."""
    origin = shared_clock_origin(graphs)
    if origin is None:
        return tuple(graphs)  # no common window: clocks are not comparable
    out = []
    for g in graphs:
        shift = int(g.tasks.ts_ns.min()) - origin
        if shift == 0:
            out.append(g)
            continue
        e = g.edges
        from_anchor = (g.tasks.order[e.src] == 0) & (
            np.asarray(g.names, dtype=object)[g.tasks.name_idx[e.src]] == "<start>"
        )
        delay = e.delay_ns + np.where(from_anchor, shift, 0)
        out.append(g.replace(edges=e.replace(delay_ns=delay)))
    return tuple(out)


def _collective_waits(
    graphs: tuple[ExecGraph, ...], shared: bool, groups: CollectiveGroups | None = None
) -> tuple[ExecGraph, ...]:
    """Each matched collective participant's waiting for its peers, from the recording.

    On a shared clock (``shared``: recordings that overlap in time) a participant waited from its own
    arrival to the group's last arrival; otherwise each waited its duration less the group's
    shortest (the last to arrive waited least). Stored in ``Comms.wait_ns``, so the simulator
    runs only the transfer once every participant has arrived in the simulation.
    """
    from lumos.graph.model import Workload

    w = Workload(graphs)
    groups = w.collective_groups() if groups is None else groups
    sizes = groups.sizes()
    if groups.num_groups == 0 or sizes.max() < 2:
        return graphs
    order = {g.rank: gi for gi, g in enumerate(graphs)}
    sorted_graphs = w.graphs
    ts = np.empty(len(groups.member_task), dtype=np.int64)
    dur = np.empty(len(groups.member_task), dtype=np.int64)
    for wi, g in enumerate(sorted_graphs):
        sel = groups.member_graph == wi
        ts[sel] = g.tasks.ts_ns[groups.member_task[sel]]
        dur[sel] = g.tasks.dur_ns[groups.member_task[sel]]
    if shared:
        last = np.repeat(np.maximum.reduceat(ts, groups.indptr[:-1]), sizes)
        wait = np.clip(last - ts, 0, dur)
    else:
        wait = dur - np.repeat(np.minimum.reduceat(dur, groups.indptr[:-1]), sizes)
    together = np.repeat(sizes >= 2, sizes)
    out = list(graphs)
    for wi, g in enumerate(sorted_graphs):
        sel = (groups.member_graph == wi) & together
        rows = g.tasks.comm_idx[groups.member_task[sel]]
        keep = rows >= 0
        if not keep.any():
            continue
        waits = g.comms.wait_ns.copy()
        waits[rows[keep]] = wait[sel][keep]
        out[order[g.rank]] = g.replace(comms=g.comms.replace(wait_ns=waits))
    return tuple(out)
