"""Several ranks of one job: a common time origin and each collective's waiting for peers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from lumos.graph.model import ExecGraph

if TYPE_CHECKING:
    from lumos.graph.algorithms import CollectiveGroups

__all__ = ["CLOCK_AGREE_NS", "align_ranks", "rank_clock_offsets", "shared_clock_origin"]


def align_ranks(graphs: Sequence[ExecGraph]) -> tuple[ExecGraph, ...]:
    """Put the ranks of one job on a common time origin.

    Each graph starts its own replay at 0 at its first recorded task. Ranks traced on one clock
    (one host, or hosts whose traces overlap in time) must keep their relative offsets, or
    collectives would see arrivals shifted by however late each rank started profiling. Hosts
    whose clocks disagree are put on one clock first (:func:`rank_clock_offsets`: the members
    of a collective end together). The release delays of every processor's ``<start>`` task are
    moved by the rank's offset from the earliest rank. Traces whose time ranges still do not
    overlap (no collective to align them by) are left as they are.
    """
    if len(graphs) < 2:
        return tuple(graphs)
    graphs = _on_one_clock(tuple(graphs))
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


#: Rank clock offsets all within this of each other are the noise of one clock: left alone.
CLOCK_AGREE_NS = 50_000


def rank_clock_offsets(graphs: Sequence[ExecGraph]) -> dict[int, tuple[int, int]] | None:
    """Per rank, how far its recorded clock runs ahead of the lowest rank's, and from how many
    collectives; None when the recorded clocks need no correction: no two ranks share a
    collective, or the ranks' collectives already overlap in time as they must on one clock
    (every member ends after every member began), or the offsets found do not make them.

    The members of a collective end together (an all-reduce, an all-to-all, a send and its
    receive complete when the last data arrives, within microseconds on every rank), whatever
    their arrivals. A rank's offset is the median, over its collectives, of its end less the
    group's median end, found twice (the second time on the ends the first corrected).
    """
    from lumos.graph.model import Workload

    w = Workload(tuple(graphs))
    groups = w.collective_groups()
    sizes = groups.sizes()
    multi = np.repeat(sizes >= 2, sizes)
    if not multi.any():
        return None
    gi = groups.member_graph[multi].astype(np.int64)
    group = np.repeat(np.arange(groups.num_groups), sizes)[multi]
    start = np.empty(gi.size, dtype=np.int64)
    end = np.empty(gi.size, dtype=np.int64)
    for k, g in enumerate(w.graphs):
        sel = gi == k
        t = groups.member_task[multi][sel]
        start[sel] = g.tasks.ts_ns[t]
        end[sel] = g.tasks.ts_ns[t] + g.tasks.dur_ns[t]
    before = _apart(group, start, end, groups.num_groups)
    if before == 0:
        return None
    off = np.zeros(len(w.graphs), dtype=np.int64)
    for _ in range(2):
        fixed = end - off[gi]
        order = np.lexsort((fixed, group))
        med = np.zeros(groups.num_groups, dtype=np.int64)
        for k in np.unique(group).tolist():
            vals = fixed[order][group[order] == k]
            med[k] = int(np.median(vals))
        resid = end - med[group]
        off = np.array([int(np.median(resid[gi == k])) if (gi == k).any() else 0
                        for k in range(len(w.graphs))], dtype=np.int64)  # fmt: skip
    off -= off[0]
    after = _apart(group, start - off[gi], end - off[gi], groups.num_groups)
    if 10 * after > np.unique(group).size or after >= before:
        return None  # the clocks do not explain it (collectives matched wrongly, sampled traces)
    counts = np.bincount(gi, minlength=len(w.graphs))
    return {g.rank: (int(off[k]), int(counts[k])) for k, g in enumerate(w.graphs)}


def _apart(
    group: NDArray[np.int64], start: NDArray[np.int64], end: NDArray[np.int64], n: int
) -> int:
    """How many collectives have a member that ended before another began (beyond the
    recording's microsecond)."""
    latest_start = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    first_end = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.maximum.at(latest_start, group, start)
    np.minimum.at(first_end, group, end)
    seen = np.unique(group)
    return int((latest_start[seen] > first_end[seen] + 1_000).sum())


def _on_one_clock(graphs: tuple[ExecGraph, ...]) -> tuple[ExecGraph, ...]:
    """The graphs, each rank's recorded times moved onto the lowest rank's clock when some
    ranks' clocks disagree by more than :data:`CLOCK_AGREE_NS` (counted per moved rank as
    ``rank_clock_moved``)."""
    offsets = rank_clock_offsets(graphs)
    if offsets is None or max(abs(o) for o, _ in offsets.values()) <= CLOCK_AGREE_NS:
        return graphs
    out = []
    for g in graphs:
        off, n = offsets[g.rank]
        if off == 0:
            out.append(g)
            continue
        diag = g.diagnostics.copy()
        diag.warn("rank_clock_moved", f"rank {g.rank}'s clock moved {-off / 1e3:+.1f} us onto "
                  f"the job's (median end of its {n} collectives)")  # fmt: skip
        a = g.annotations
        out.append(g.replace(tasks=g.tasks.replace(ts_ns=g.tasks.ts_ns - off),
                             annotations=a.replace(ts_ns=a.ts_ns - off), diagnostics=diag))  # fmt: skip
    return tuple(out)


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
