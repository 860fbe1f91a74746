"""``RelativeCommCost``: recorded communication re-timed by the network model's ratio.

What a data-parallel or network what-if changes is how long each collective's transfer takes,
and the network model (:func:`~lumos.cost.collectives.collective_time`) says by how much; what
it cannot say is how far the recorded run was from the model (protocol, contention, a slower
NIC than the preset's). So the recorded transfer (its duration less the waiting for peers the
build found, ``Comms.wait_ns``) is multiplied by the model's ratio, new configuration over the
recorded one, and everything else is replayed as traced (:class:`~lumos.sim.cost.TracedCost`):

====================  =======================================================================
scenario              factor of a collective's transfer
====================  =======================================================================
``dp=N``              ``t(kind, bytes, N) / t(kind, bytes, D)`` for the collectives of the
                      data-parallel group (:data:`DP_KINDS` in a group of the recorded degree
                      ``D`` ranks); other collectives keep their group
``link=RANK:F``       the bandwidth terms of ``t`` x ``F`` (the largest ``F`` among the
                      collective's ranks: its group's, or the rank and its peer for a send)
====================  =======================================================================

so ``dp`` equal to the recorded degree (and ``link=R:1``) reproduces the replay exactly, and a
collective's time follows the model's in N (non-decreasing for ring and tree algorithms). A
single-rank trace keeps its recorded waiting for the peers it does not show; a matched
collective's waiting is produced by the simulation. Collectives of unknown kind or size, and
those the model cannot time, keep their traced time and are counted (:meth:`summary`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from lumos.cost.collectives import Link, collective_time
from lumos.cost.topology import Topology
from lumos.errors import ConfigError
from lumos.graph.kinds import COMM_TASK_KINDS, CommType
from lumos.sim.cost import TracedCost

if TYPE_CHECKING:
    from lumos.graph.algorithms import CollectiveGroups
    from lumos.graph.model import ExecGraph, Workload

__all__ = ["DP_KINDS", "RelativeCommCost", "RetimeSummary", "dp_collectives", "group_size"]

#: Collectives of the data-parallel group whose data is the model's, whatever the degree:
#: gradient all-reduces (DDP), parameter all-gathers and gradient reduce-scatters (FSDP),
#: buffer broadcasts (DDP). All-to-alls (embeddings, experts) exchange per-rank data: kept.
DP_KINDS = (CommType.ALL_REDUCE, CommType.ALL_GATHER, CommType.REDUCE_SCATTER,
            CommType.BROADCAST)  # fmt: skip
_P2P = (int(CommType.SEND), int(CommType.RECV))


def group_ranks(graph: ExecGraph, row: int) -> tuple[int, ...]:
    """The ranks of the process group of ``graph.comms`` row ``row`` the trace lists, else ()."""
    pg_idx = int(graph.comms.pg_idx[row])
    if 0 <= pg_idx < len(graph.process_groups):
        return graph.process_groups[pg_idx].ranks
    return ()


def group_size(graph: ExecGraph, row: int, degree: int) -> int:
    """The size of that group: its listed ranks; a group the trace does not list is the whole
    job: the world size, or the data-parallel ``degree`` where the trace states no world."""
    ranks = group_ranks(graph, row)
    return len(ranks) if ranks else (graph.world_size if graph.world_size > 1 else degree)


def dp_collectives(workload: Workload, degree: int) -> tuple[int, int]:
    """Communication tasks of ``workload`` in a data-parallel group of ``degree`` ranks
    (:data:`DP_KINDS`): ``(of known size, of unknown size)``; a ``dp`` what-if re-times the
    first."""
    known = unknown = 0
    for g in workload.graphs:
        t, c = g.tasks, g.comms
        comm = np.isin(t.kind, np.array(COMM_TASK_KINDS, np.int8)) & (t.comm_idx >= 0)
        for row in t.comm_idx[comm].tolist():
            if int(c.kind[row]) in DP_KINDS and group_size(g, row, degree) == degree:
                known += int(c.size_bytes[row]) > 0
                unknown += int(c.size_bytes[row]) <= 0
    return known, unknown


@dataclass(frozen=True)
class RetimeSummary:
    """What a :class:`RelativeCommCost` changes on a workload: collectives re-timed per kind,
    the smallest and largest factor, and the ones kept as traced, by reason."""

    retimed: dict[str, int]
    factor_min: float
    factor_max: float
    kept: dict[str, int]

    @property
    def count(self) -> int:
        return sum(self.retimed.values())

    def describe(self) -> str:
        """``15 collectives (all_reduce 15) x1.000-x3.412; 6 kept as traced (size unknown)``."""
        kinds = ", ".join(f"{k} {n}" for k, n in self.retimed.items())
        text = (f"{self.count} collectives ({kinds}) x{self.factor_min:.3f}-x{self.factor_max:.3f}"
                if self.count else "no collective re-timed")  # fmt: skip
        if self.kept:
            text += "; kept as traced: " + ", ".join(f"{n} ({w})" for w, n in self.kept.items())
        return text


class RelativeCommCost:
    """Traced durations with the transfers of some collectives scaled (see the module
    docstring). ``dp=(recorded, new)`` resizes the data-parallel group; ``link`` maps a rank
    to its slow-down factor."""

    def __init__(
        self,
        network: Topology | Link,
        *,
        algorithm: str = "auto",
        protocol: str = "simple",
        dp: tuple[int, int] | None = None,
        link: Mapping[int, float] | None = None,
    ) -> None:
        self.network = network
        self.algorithm = algorithm
        self.protocol = protocol
        self.dp = dp
        self.link = dict(link or {})
        if dp is not None and (dp[0] < 1 or dp[1] < 1):
            raise ConfigError(f"data-parallel degrees must be >= 1, got {dp}")
        for rank, factor in self.link.items():
            if not factor > 0:
                raise ConfigError(f"link factor of rank {rank} must be positive, got {factor}")
        self._traced = TracedCost()

    # -- per task -------------------------------------------------------------------------

    def factors(
        self, graph: ExecGraph
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_], Counter[str]]:
        """Per task of ``graph``: its transfer's factor (1.0 where unchanged) and whether the
        scenario covers it (``dp`` at the recorded degree covers its group at x1); and the
        communication tasks kept as traced, counted by reason."""
        out = np.ones(graph.num_tasks, dtype=np.float64)
        covered = np.zeros(graph.num_tasks, dtype=bool)
        kept: Counter[str] = Counter()
        t, c = graph.tasks, graph.comms
        comm_tasks = np.isin(t.kind, np.array(COMM_TASK_KINDS, np.int8)) & (t.comm_idx >= 0)
        cache: dict[tuple[int, int, int, int, float], float] = {}
        for task in np.flatnonzero(comm_tasks).tolist():
            row = int(t.comm_idx[task])
            kind, size = int(c.kind[row]), int(c.size_bytes[row])
            p_old = p_new = group_size(graph, row, self.dp[0] if self.dp else 1)
            in_dp = self.dp is not None and kind in DP_KINDS and p_old == self.dp[0]
            if in_dp and self.dp is not None:
                p_new = self.dp[1]
            peer = int(c.peer_rank[row])
            ranks = ((graph.rank, peer) if kind in _P2P and peer >= 0
                     else group_ranks(graph, row) or range(p_old))  # fmt: skip
            slow = max((self.link.get(r, 1.0) for r in ranks), default=1.0)
            if not in_dp and slow == 1.0:
                continue
            if kind == int(CommType.UNKNOWN) or size <= 0:
                kept["kind or size unknown"] += 1
                continue
            key = (kind, size, p_old, p_new, slow)
            if key not in cache:
                cache[key] = self._ratio(kind, size, p_old, p_new, slow)
            if cache[key] < 0:
                kept["the model cannot time it"] += 1
                continue
            out[task] = cache[key]
            covered[task] = True
        return out, covered, kept

    def _ratio(self, kind: int, size: int, p_old: int, p_new: int, slow: float) -> float:
        """``t(new) / t(old)``, or -1.0 when the model cannot time the recorded collective."""
        try:
            old = collective_time(kind, size, p_old, self.network, algorithm=self.algorithm,
                                  protocol=self.protocol)  # fmt: skip
            new = collective_time(kind, size, p_new, self.network, algorithm=self.algorithm,
                                  protocol=self.protocol)  # fmt: skip
        except ConfigError:
            return -1.0
        new_ns = (new.with_bandwidth_scaled(slow) if slow != 1.0 else new).time_ns
        if old.time_ns <= 0:
            return -1.0 if new_ns > 0 else 1.0
        return new_ns / old.time_ns

    # -- the CostModel protocol -------------------------------------------------------------

    def durations(self, graph: ExecGraph) -> NDArray[np.int64]:
        """Traced durations; each re-timed task keeps its waiting and scales its transfer."""
        dur = np.array(graph.tasks.dur_ns, dtype=np.int64, copy=True)
        factor, _, _ = self.factors(graph)
        sel = np.flatnonzero(factor != 1.0)
        if len(sel):
            wait = np.minimum(graph.comms.wait_ns[graph.tasks.comm_idx[sel]], dur[sel])
            dur[sel] = wait + np.rint((dur[sel] - wait) * factor[sel]).astype(np.int64)
        return dur

    def transfer_ns(
        self,
        workload: Workload,
        groups: CollectiveGroups,
        durations: tuple[NDArray[np.int64], ...],
    ) -> NDArray[np.int64]:
        """As traced, from the re-timed durations: a matched collective's transfer is its
        (scaled) duration less its recorded waiting."""
        return self._traced.transfer_ns(workload, groups, durations)

    # -- what it did ----------------------------------------------------------------------

    def summary(self, workload: Workload) -> RetimeSummary:
        """The collectives of ``workload`` this model re-times (at x1 too), and those it keeps."""
        retimed: Counter[str] = Counter()
        kept: Counter[str] = Counter()
        factors: list[float] = []
        for g in workload.graphs:
            factor, covered, k = self.factors(g)
            kept.update(k)
            sel = np.flatnonzero(covered)
            factors += factor[sel].tolist()
            for row in g.tasks.comm_idx[sel].tolist():
                retimed[CommType(int(g.comms.kind[row])).name.lower()] += 1
        return RetimeSummary(dict(sorted(retimed.items())), min(factors, default=1.0),
                             max(factors, default=1.0), dict(sorted(kept.items())))  # fmt: skip
