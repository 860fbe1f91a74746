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
    """Replay: each task costs its ``dur_ns``; a collective's transfer is its duration less the
    waiting for peers that the build found in the recording (``Comms.wait_ns``).

    A matched collective (two or more traced participants) starts when its last participant
    arrives in the simulation and each participant then runs its own transfer, so a rank that
    finished late for its own reasons (a descheduled gloo worker) stays late. A collective with
    one traced participant (a single-rank trace) keeps its whole duration: its peers are not
    simulated, and the waiting it recorded stands for them (a scaled collective scales only its
    transfer, see :func:`lumos.replay.apply_edits`). No recorded start time is read.
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
        member_wait = np.zeros(len(groups.member_task), dtype=np.int64)
        for gi, (g, dur) in enumerate(zip(workload.graphs, durations, strict=True)):
            sel = groups.member_graph == gi
            tasks = groups.member_task[sel]
            member_dur[sel] = dur[tasks]
            row = g.tasks.comm_idx[tasks]
            member_wait[sel] = np.where(row >= 0, g.comms.wait_ns[np.maximum(row, 0)], 0)
        together = np.repeat(groups.sizes() >= 2, groups.sizes())
        transfer = np.where(together, member_dur - member_wait, member_dur)
        return np.maximum(transfer, 0).astype(np.int64)
