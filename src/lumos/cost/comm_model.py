"""``CommCost``: the simulator's cost model with communication times from the alpha-beta model.

Non-communication tasks cost what the trace recorded (through the ``fallback`` model, by
default :class:`~lumos.sim.cost.TracedCost`). A communication task, on a GPU
(``TaskKind.COMM``: NCCL, RCCL) or on the host (``TaskKind.CPU_COMM``: gloo), whose
:class:`~lumos.graph.model.Comms` row has a known kind and ``size_bytes > 0`` costs the
modelled time of that collective over its process group (:func:`collective_time`) on the
network given: for a gloo job, a description of the hosts' network (a flat link or a TOML
topology), as the presets describe GPU fabrics. Waiting for
peers is not a cost: in a multi-rank simulation the peers produce it; on a single rank (a
collective with one traced participant) the waiting the trace recorded is dropped, so a
single-rank replay with this model shows the collective as if every peer arrived together.

Group size: the ranks of the task's process group (``graph.process_groups[pg_idx].ranks``;
the world size when the trace does not list them), unless ``group_size`` names the group (by
its name or its description, e.g. ``{"dp": 16}``). A matched collective takes its kind, size and
process group from its first member (in rank order); with ``link={rank: factor}``, the bandwidth terms of a
collective are multiplied by the largest factor among its ranks (the group's ranks when known,
else its traced members): the slowest link paces a synchronous collective.

``lumos estimate`` re-times the recorded communication by this model's ratios instead
(:mod:`lumos.cost.comm_relative`), so that its rows stay comparable with the replayed baseline.

Tasks whose kind is UNKNOWN or whose size is not positive keep their traced time (the
fallback's); ``diagnostics`` counts them after each call (``comm_kept_traced_unknown_kind``,
``comm_kept_traced_unknown_size``) and the modelled ones (``comm_modelled``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lumos.cost.collectives import Link, collective_time
from lumos.cost.topology import Topology, resolve_topology
from lumos.diagnostics import Diagnostics
from lumos.errors import ConfigError, SimulationError
from lumos.graph.kinds import COMM_TASK_KINDS, CommType
from lumos.sim.cost import CostModel, TracedCost

if TYPE_CHECKING:
    from lumos.graph.algorithms import CollectiveGroups
    from lumos.graph.model import ExecGraph, Workload

__all__ = ["CommCost", "comm_model_for"]


class CommCost:
    """Modelled communication on ``network`` (a :class:`Topology` or a flat :class:`Link`),
    traced everything else. See the module docstring for the rules."""

    def __init__(
        self,
        network: Topology | Link,
        *,
        algorithm: str = "auto",
        protocol: str = "simple",
        group_size: Mapping[str, int] | None = None,
        resize_kinds: tuple[CommType, ...] | None = None,
        link: Mapping[int, float] | None = None,
        fallback: CostModel | None = None,
    ) -> None:
        self.resize_kinds = None if resize_kinds is None else {int(k) for k in resize_kinds}
        self.network = network
        self.algorithm = algorithm
        self.protocol = protocol
        self.group_size = dict(group_size or {})
        self.link = dict(link or {})
        for rank, factor in self.link.items():
            if not factor > 0:
                raise ConfigError(f"link factor of rank {rank} must be positive, got {factor}")
        for name, size in self.group_size.items():
            if size < 1:
                raise ConfigError(f"group size of {name!r} must be >= 1, got {size}")
        self.fallback: CostModel = TracedCost() if fallback is None else fallback
        self.diagnostics = Diagnostics()

    # -- one collective ------------------------------------------------------------------

    def _group(self, graph: ExecGraph, pg_idx: int, kind: int) -> tuple[int, tuple[int, ...]]:
        """(group size, the group's ranks or ()) with the overrides applied (to collectives of
        ``resize_kinds`` only, when given). A collective whose process group the trace does not
        name is job-wide: the override keyed ``""`` applies to it."""
        resize = self.resize_kinds is None or kind in self.resize_kinds
        pg = graph.process_groups[pg_idx] if 0 <= pg_idx < len(graph.process_groups) else None
        if pg is not None:
            for key in (pg.name, pg.desc):
                if resize and key and key in self.group_size:
                    return self.group_size[key], pg.ranks
            if pg.ranks:
                return len(pg.ranks), pg.ranks
        if resize and "" in self.group_size:
            return self.group_size[""], ()
        return graph.world_size, ()

    def _known(self, graph: ExecGraph, row: int) -> bool:
        kind, size = int(graph.comms.kind[row]), int(graph.comms.size_bytes[row])
        if kind == CommType.UNKNOWN:
            self.diagnostics.warn("comm_kept_traced_unknown_kind")
            return False
        if size <= 0:
            self.diagnostics.warn("comm_kept_traced_unknown_size")
            return False
        return True

    def _time(self, graph: ExecGraph, row: int, ranks: tuple[int, ...]) -> int:
        c = graph.comms
        p, pg_ranks = self._group(graph, int(c.pg_idx[row]), int(c.kind[row]))
        t = collective_time(int(c.kind[row]), int(c.size_bytes[row]), p, self.network,
                            algorithm=self.algorithm, protocol=self.protocol)  # fmt: skip
        factor = max((self.link.get(r, 1.0) for r in (pg_ranks or ranks)), default=1.0)
        self.diagnostics.warn("comm_modelled")
        return (t.with_bandwidth_scaled(factor) if factor != 1.0 else t).time_ns

    # -- the CostModel protocol ----------------------------------------------------------

    def durations(self, graph: ExecGraph) -> NDArray[np.int64]:
        """Traced durations, with each communication task of known kind and size modelled."""
        self.diagnostics = Diagnostics()
        dur = np.array(self.fallback.durations(graph), dtype=np.int64, copy=True)
        t = graph.tasks
        for task in np.flatnonzero(
            np.isin(t.kind, np.array(COMM_TASK_KINDS, np.int8)) & (t.comm_idx >= 0)
        ).tolist():
            row = int(t.comm_idx[task])
            if self._known(graph, row):
                dur[task] = self._time(graph, row, (graph.rank,))
        return dur

    def transfer_ns(
        self,
        workload: Workload,
        groups: CollectiveGroups,
        durations: tuple[NDArray[np.int64], ...],
    ) -> NDArray[np.int64]:
        """One time per participant: the modelled time of its group where the group is
        communication of known kind and size, the fallback's transfer otherwise."""
        self.diagnostics = Diagnostics()
        n_members = len(groups.member_task)
        base = np.asarray(self.fallback.transfer_ns(workload, groups, durations), dtype=np.int64)
        if base.shape == (groups.num_groups,):
            base = np.repeat(base, groups.sizes())
        if base.size != n_members:
            raise SimulationError(
                f"fallback cost model {type(self.fallback).__name__} returned {base.shape} "
                f"transfer times for {groups.num_groups} collectives with {n_members} participants"
            )
        out = np.array(base, dtype=np.int64, copy=True).reshape(n_members)
        graphs = workload.graphs
        for k in range(groups.num_groups):
            lo, hi = int(groups.indptr[k]), int(groups.indptr[k + 1])
            members = [(graphs[int(groups.member_graph[i])], int(groups.member_task[i]))
                       for i in range(lo, hi)]  # fmt: skip
            if any(g.tasks.kind[task] not in COMM_TASK_KINDS for g, task in members):
                continue
            g, task = members[0]
            row = int(g.tasks.comm_idx[task])
            if not self._known(g, row):
                continue
            out[lo:hi] = self._time(g, row, tuple(m.rank for m, _ in members))
        return out


def comm_model_for(topology: str, algorithm: str = "auto") -> Callable[..., tuple[CostModel, str]]:
    """The factory ``lumos estimate`` uses: ``(workload, scenario, recorded_dp) -> (cost model,
    name)``, a :class:`~lumos.cost.comm_relative.RelativeCommCost` on ``topology`` (a preset
    name or a TOML file).

    ``dp=N`` re-times the collectives of the data-parallel group (the recorded degree
    ``recorded_dp``, :func:`lumos.estimate.baseline.recorded_dp`) by the model's ratio of N
    ranks to the recorded degree; other collectives (a DLRM's embedding all-to-alls) keep their
    group. ``link=RANK:FACTOR`` slows that rank's network by the same ratio rule.
    """
    from lumos.cost.comm_relative import RelativeCommCost

    network = resolve_topology(topology)

    def factory(workload: Workload, scenario: Any, recorded_dp: int = 0) -> tuple[CostModel, str]:
        dp = None
        if scenario.dp is not None:
            if recorded_dp < 1:
                raise ConfigError(f"dp={scenario.dp}: the recorded data-parallel degree is "
                                  "unknown; give --baseline dp=N")  # fmt: skip
            dp = (recorded_dp, scenario.dp)
        cost = RelativeCommCost(network, algorithm=algorithm, dp=dp, link=dict(scenario.link))
        base = f" relative to dp={recorded_dp}" if dp else " relative to the recording"
        return cost, f"comm:{network.name or topology}/{algorithm}{base}"

    return factory
