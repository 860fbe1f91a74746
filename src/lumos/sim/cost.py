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
    ``transfer_ns(workload, groups, durations)``: int64 array, one value per matched collective
    group (:class:`~lumos.graph.algorithms.CollectiveGroups`): how long the collective runs
    once its last participant arrives. ``durations`` are the per-graph arrays returned by
    ``durations``.
    """

    def durations(self, graph: ExecGraph) -> NDArray[np.int64]: ...

    def transfer_ns(
        self,
        workload: Workload,
        groups: CollectiveGroups,
        durations: tuple[NDArray[np.int64], ...],
    ) -> NDArray[np.int64]: ...


class TracedCost:
    """Replay: each task costs its ``dur_ns``; a collective's transfer time is the *minimum*
    traced duration among its participants.

    Why the minimum: a traced collective kernel spans from its own start to the common end, so
    early arrivals include time spent waiting for peers; the last arrival waited least and its
    duration is the closest recorded estimate of the pure transfer. With one traced participant
    (a single-rank trace) the collective keeps its own traced duration.
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
        for gi, dur in enumerate(durations):
            sel = groups.member_graph == gi
            member_dur[sel] = dur[groups.member_task[sel]]
        return np.minimum.reduceat(member_dur, groups.indptr[:-1]).astype(np.int64)
