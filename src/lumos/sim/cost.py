"""Cost models: where the simulator gets task durations and collective transfer times.

A cost model is anything with the two methods of :class:`CostModel`; the simulator calls them
once per run, before simulating, so a model can be analytical, a lookup table, or a test double.
:class:`TracedCost` (the default) replays what the trace recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from lumos.graph.algorithms import CollectiveGroups
    from lumos.graph.model import ExecGraph, Workload

__all__ = ["CostModel", "TracedCost"]


@runtime_checkable
class CostModel(Protocol):
    """The simulator's one seam for time.

    ``durations(graph)``: int64 array, the intrinsic cost of every task of ``graph`` (>= 0).
    ``transfer_ns(workload, groups, durations)``: int64 array, how long a matched collective
    (:class:`~lumos.graph.algorithms.CollectiveGroups`) runs once its last participant
    arrives: one value per group (every participant ends together), or one per participant in
    ``groups.member_task`` order (a rank that finishes later, e.g. a descheduled gloo worker).
    ``durations`` are the per-graph arrays returned by ``durations``.
    """

    def durations(self, graph: ExecGraph) -> NDArray[np.int64]: ...

    def transfer_ns(
        self,
        workload: Workload,
        groups: CollectiveGroups,
        durations: tuple[NDArray[np.int64], ...],
    ) -> NDArray[np.int64]: ...


class TracedCost:
    """Replay: each task costs its ``dur_ns``; a collective's participants end when the trace
    says they ended after the rendezvous.

    A traced collective spans from its own start to its end, so early arrivals include time
    spent waiting for peers. When the ranks were traced on one clock (their recordings
    overlap), each participant's transfer is its recorded end minus the group's latest
    recorded arrival (at least 0): exact for replay, and a rank that finished late for its own
    reasons (a descheduled gloo worker) stays late. Otherwise the group's *minimum* traced
    duration is used for everyone: the last arrival waited least, so its duration is the
    closest estimate of the pure transfer. With one traced participant (a single-rank trace)
    the collective keeps its own traced duration.
    """

    def durations(self, graph: ExecGraph) -> NDArray[np.int64]:
        return graph.tasks.dur_ns

    def transfer_ns(
        self,
        workload: Workload,
        groups: CollectiveGroups,
        durations: tuple[NDArray[np.int64], ...],
    ) -> NDArray[np.int64]:
        if groups.num_groups == 0:
            return np.zeros(0, dtype=np.int64)
        member_dur = np.empty(len(groups.member_task), dtype=np.int64)
        member_ts = np.empty(len(groups.member_task), dtype=np.int64)
        recorded = np.empty(len(groups.member_task), dtype=bool)
        for gi, (g, dur) in enumerate(zip(workload.graphs, durations, strict=True)):
            sel = groups.member_graph == gi
            member_dur[sel] = dur[groups.member_task[sel]]
            member_ts[sel] = g.tasks.ts_ns[groups.member_task[sel]]
            recorded[sel] = g.tasks.event_idx[groups.member_task[sel]] >= 0
        shortest = np.minimum.reduceat(member_dur, groups.indptr[:-1]).astype(np.int64)
        # recorded times are only meaningful for tasks read from a trace, on one clock
        if not (recorded.all() and _one_clock(workload)):
            return shortest
        sizes = np.diff(groups.indptr)
        last_arrival = np.maximum.reduceat(member_ts, groups.indptr[:-1])
        tail = member_ts + member_dur - np.repeat(last_arrival, sizes)
        return np.maximum(tail, 0).astype(np.int64)


def _one_clock(workload: Workload) -> bool:
    """True when every rank's recording overlaps every other's in time (a shared clock)."""
    if len(workload.graphs) < 2:
        return False
    starts = [int(g.tasks.ts_ns.min()) for g in workload.graphs if g.num_tasks]
    ends = [int((g.tasks.ts_ns + g.tasks.dur_ns).max()) for g in workload.graphs if g.num_tasks]
    return bool(starts) and max(starts) < min(ends)
