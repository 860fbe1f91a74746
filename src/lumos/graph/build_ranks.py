"""Several ranks of one job: a common time origin and each collective's waiting for peers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lumos.graph.model import ExecGraph

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
    return _collective_waits(_common_origin(graphs))


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


def _collective_waits(graphs: tuple[ExecGraph, ...]) -> tuple[ExecGraph, ...]:
    """Each matched collective participant's waiting for its peers, from the recording.

    On a shared clock (recordings that overlap in time) a participant waited from its own
    arrival to the group's last arrival; otherwise each waited its duration less the group's
    shortest (the last to arrive waited least). Stored in ``Comms.wait_ns``, so the simulator
    runs only the transfer once every participant has arrived in the simulation.
    """
    from lumos.graph.model import Workload

    groups = Workload(graphs).collective_groups()
    sizes = groups.sizes()
    if groups.num_groups == 0 or sizes.max() < 2:
        return graphs
    order = {g.rank: gi for gi, g in enumerate(graphs)}
    sorted_graphs = Workload(graphs).graphs
    ts = np.empty(len(groups.member_task), dtype=np.int64)
    dur = np.empty(len(groups.member_task), dtype=np.int64)
    for wi, g in enumerate(sorted_graphs):
        sel = groups.member_graph == wi
        ts[sel] = g.tasks.ts_ns[groups.member_task[sel]]
        dur[sel] = g.tasks.dur_ns[groups.member_task[sel]]
    if shared_clock_origin(graphs) is not None:
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
        w = g.comms.wait_ns.copy()
        w[rows[keep]] = wait[sel][keep]
        out[order[g.rank]] = g.replace(comms=g.comms.replace(wait_ns=w))
    return tuple(out)
