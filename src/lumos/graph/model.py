"""The execution graph: tasks on processors, fixed dependencies, runtime waits (struct-of-arrays).

An :class:`ExecGraph` is one rank's work. Every table is a frozen dataclass of equal-length,
read-only numpy columns; strings are interned in ``ExecGraph.names``. Nothing here holds a
Python object per task, so a multi-million-task graph costs a few hundred bytes per task.

Conventions (see DESIGN.md section 3):

* ``*_idx`` columns are positions in this graph's own tables (``-1`` = none); ``*_id`` columns
  are external identifiers.
* Tasks of one processor are listed in execution order: sorting by ``(processor_idx, order)``
  gives program order. ``order`` is the 0-based position on the processor.
* Intra-processor order is *also* stored as explicit ``INTRA_THREAD`` / ``INTRA_STREAM`` edges
  between consecutive tasks (delay = CPU overhead gap on threads, 0 on streams).
* ``dur_ns`` is the intrinsic cost used in replay; ``ts_ns`` is the recorded start, kept for
  reports and validation only — the simulator never reads it.
* Edge ``(src, dst, delay_ns)``: ``dst`` may start no earlier than ``end(src) + delay_ns``.
  A delay may be negative (a kernel starting before its launch call returns) but not below
  ``-dur_ns(src)``: ``dst`` never starts before ``src`` starts (the simulator clamps there when
  a cost model shortens ``src``).
* :class:`Waits` are runtime dependencies resolved during simulation (stream / device / event
  synchronize), see :class:`WaitKind`.

Every "edit" (``with_durations``, ``drop_edges``, ``scale``...) returns a NEW graph; tables are
never mutated (their arrays are flagged read-only).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.errors import GraphError
from lumos.graph.kinds import (
    COMM_TASK_KINDS,
    CPU_TASK_KINDS,
    GPU_TASK_KINDS,
    AnnotationKind,
    CommType,
    DepKind,
    ProcessorKind,
    TaskKind,
    WaitKind,
)
from lumos.graph.memory import GraphMemory
from lumos.graph.tables import (
    Annotations,
    Comms,
    Edges,
    ProcessGroup,
    Processors,
    Tasks,
    Waits,
    order_within,
)

__all__ = [
    "COMM_TASK_KINDS",
    "CPU_TASK_KINDS",
    "GPU_TASK_KINDS",
    "AnnotationKind",
    "Annotations",
    "CommType",
    "Comms",
    "DepKind",
    "Diagnostics",
    "Edges",
    "ExecGraph",
    "ProcessGroup",
    "ProcessorKind",
    "Processors",
    "TaskKind",
    "Tasks",
    "WaitKind",
    "Waits",
    "Workload",
    "order_within",
]


# ---------------------------------------------------------------------------------------------
# The graph


@dataclass(frozen=True, eq=False)
class ExecGraph:
    """One rank's execution graph. Construct, then call :meth:`validate` for the deep checks.

    ``__post_init__`` checks what is cheap (column lengths/dtypes, index ranges of names and
    processors); :meth:`validate` checks the rest (dangling edges, cycles, processor order,
    kinds on the right processors) and raises :class:`~lumos.errors.GraphError`.
    """

    def __repr__(self) -> str:
        parts = ", ".join(f"{v} {k}" for k, v in self.summary().items())
        return f"ExecGraph(rank {self.rank} of {self.world_size}: {parts})"

    names: tuple[str, ...]
    processors: Processors
    tasks: Tasks
    edges: Edges = field(default_factory=Edges.empty)
    waits: Waits = field(default_factory=Waits.empty)
    annotations: Annotations = field(default_factory=Annotations.empty)
    comms: Comms = field(default_factory=Comms.empty)
    process_groups: tuple[ProcessGroup, ...] = ()
    rank: int = 0
    world_size: int = 1
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    #: Facts the build measured and used (``launch_latency_ns``, ``gpu_clock_offset_ns``...).
    calibration: Mapping[str, int] = field(default_factory=dict)
    #: Distinct recorded "Input Dims" (JSON text) and, per task, its row there (-1 = none);
    #: what the shape-scaling what-ifs read. ``task_dims_idx`` is None when nothing was recorded.
    dims: tuple[str, ...] = ()
    task_dims_idx: NDArray[np.int32] | None = None
    #: The training device's allocations and frees, held by the tasks that made them (see
    #: :mod:`lumos.graph.memory`); None when the trace has no ``[memory]`` events.
    memory: GraphMemory | None = None
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "process_groups", tuple(self.process_groups))
        n_names, n_proc = len(self.names), len(self.processors)
        t = self.tasks
        if len(t):
            if t.name_idx.min() < 0 or t.name_idx.max() >= n_names:
                raise GraphError(f"tasks.name_idx out of range [0, {n_names})")
            if t.processor_idx.min() < 0 or t.processor_idx.max() >= n_proc:
                raise GraphError(f"tasks.processor_idx out of range [0, {n_proc})")
        if self.task_dims_idx is not None and len(self.task_dims_idx) != len(t):
            raise GraphError(f"task_dims_idx has {len(self.task_dims_idx)} rows, tasks {len(t)}")
        if not 0 <= self.rank < max(self.world_size, 1):
            raise GraphError(f"rank {self.rank} outside world_size {self.world_size}")

    # -- sizes and cached structure ------------------------------------------------------------

    @property
    def num_tasks(self) -> int:
        return len(self.tasks)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    def task_name(self, task_idx: int) -> str:
        return self.names[int(self.tasks.name_idx[task_idx])]

    def describe_task(self, task_idx: int) -> str:
        """``"name" (kind, processor label, #order)`` for messages."""
        t = self.tasks
        kind = TaskKind(int(t.kind[task_idx])).name
        label = self.processors.label[int(t.processor_idx[task_idx])]
        return (
            f"task {task_idx} {self.task_name(task_idx)!r} ({kind} on {label} #{t.order[task_idx]})"
        )

    def _cached(self, key: str, make: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def csr_out(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(indptr, edge_idx)``: out-edges of task ``t`` are ``edge_idx[indptr[t]:indptr[t+1]]``.

        Edges of one source keep their table order. Cached; the arrays are read-only.
        """
        return self._cached("csr_out", lambda: _csr(self.edges.src, self.num_tasks))

    def csr_in(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(indptr, edge_idx)`` grouping edges by destination (like :meth:`csr_out`)."""
        return self._cached("csr_in", lambda: _csr(self.edges.dst, self.num_tasks))

    def processor_order(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(indptr, task_idx)``: tasks of processor ``p`` in execution order are
        ``task_idx[indptr[p]:indptr[p+1]]`` (sorted by ``(processor_idx, order)``). Cached."""

        def make() -> tuple[NDArray[np.int64], NDArray[np.int64]]:
            t = self.tasks
            perm = np.lexsort((t.order, t.processor_idx)).astype(np.int64)
            counts = np.bincount(t.processor_idx, minlength=len(self.processors))
            indptr = np.zeros(len(self.processors) + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            perm.flags.writeable = False
            indptr.flags.writeable = False
            return indptr, perm

        return self._cached("processor_order", make)

    # -- validation ----------------------------------------------------------------------------

    def validate(self) -> ExecGraph:
        """Raise :class:`GraphError` on any broken invariant; return ``self`` to allow chaining."""
        from lumos.graph.validate import validate_graph

        validate_graph(self)
        return self

    # -- edits (always a new graph) ------------------------------------------------------------

    def replace(self, **changes: Any) -> ExecGraph:
        """A copy with some fields replaced (caches are not carried over)."""
        return dataclasses.replace(self, **changes)

    def with_durations(self, dur_ns: NDArray[Any]) -> ExecGraph:
        """A new graph whose tasks cost ``dur_ns`` (one non-negative value per task)."""
        dur = np.asarray(dur_ns)
        if dur.shape != (self.num_tasks,):
            raise GraphError(
                f"with_durations: expected {self.num_tasks} durations, got {dur.shape}"
            )
        if dur.size and dur.min() < 0:
            raise GraphError("with_durations: negative duration")
        return self.replace(tasks=self.tasks.replace(dur_ns=dur))

    def drop_edges(self, kinds: Iterable[DepKind | int]) -> ExecGraph:
        """A new graph without the edges of the given :class:`DepKind` s (waits are kept;
        see :meth:`drop_waits`). Dropping intra-processor edges loses their delays only: the
        simulator still runs one task at a time per processor, in order."""
        keep = ~np.isin(self.edges.kind, [int(k) for k in kinds])
        return self.replace(edges=self.edges.take(keep))

    def drop_waits(self, kinds: Iterable[WaitKind | int] | None = None) -> ExecGraph:
        """A new graph without runtime waits (all, or only the given :class:`WaitKind` s)."""
        if kinds is None:
            return self.replace(waits=Waits.empty())
        drop = np.isin(self.waits.kind, [int(k) for k in kinds])
        return self.replace(waits=self.waits.take(~drop))

    def scale(self, mask: NDArray[np.bool_], factor: float) -> ExecGraph:
        """A new graph where tasks selected by ``mask`` cost ``round(dur_ns * factor)``."""
        m = np.asarray(mask, dtype=bool)
        if m.shape != (self.num_tasks,):
            raise GraphError(f"scale: mask has shape {m.shape}, expected ({self.num_tasks},)")
        if not np.isfinite(factor) or factor < 0:
            raise GraphError(f"scale: factor must be a finite number >= 0, got {factor}")
        dur = self.tasks.dur_ns.copy()
        dur[m] = np.rint(dur[m] * float(factor)).astype(np.int64)
        return self.with_durations(dur)

    def name_mask(self, predicate: Any) -> NDArray[np.bool_]:
        """Boolean task mask of tasks whose name satisfies ``predicate(name) -> bool``
        (evaluated once per distinct name)."""
        hit = np.fromiter(
            (bool(predicate(s)) for s in self.names), dtype=bool, count=len(self.names)
        )
        return hit[self.tasks.name_idx]

    def process_group_name(self, pg_idx: int) -> str:
        return self.process_groups[pg_idx].name if 0 <= pg_idx < len(self.process_groups) else ""

    def summary(self) -> Mapping[str, int]:
        """Counts for logs: tasks, edges, waits, processors, annotations, comms."""
        return {
            "tasks": self.num_tasks,
            "edges": self.num_edges,
            "waits": len(self.waits),
            "processors": len(self.processors),
            "annotations": len(self.annotations),
            "comms": len(self.comms),
        }


def _csr(key: NDArray[Any], n: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    perm = np.argsort(key, kind="stable").astype(np.int64)
    counts = np.bincount(key, minlength=n) if len(key) else np.zeros(n, dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts[:n], out=indptr[1:])
    perm.flags.writeable = False
    indptr.flags.writeable = False
    return indptr, perm


# ---------------------------------------------------------------------------------------------
# Several ranks


@dataclass(frozen=True, eq=False)
class Workload:
    """The graphs of the traced ranks of one job, sorted by rank (often a single rank).

    Collectives are matched across ranks by :meth:`collective_groups` (process group name +
    ``seq_id``; per-process-group order of appearance when seq ids are missing).
    """

    def __repr__(self) -> str:
        return (
            f"Workload({len(self.graphs)} rank(s) {list(self.ranks)[:8]}, {self.num_tasks} tasks)"
        )

    graphs: tuple[ExecGraph, ...]
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        graphs = tuple(sorted(self.graphs, key=lambda g: g.rank))
        object.__setattr__(self, "graphs", graphs)
        if not graphs:
            raise GraphError("a workload needs at least one graph")
        ranks = [g.rank for g in graphs]
        for a, b in itertools.pairwise(ranks):
            if a == b:
                raise GraphError(f"two graphs for rank {a} in one workload")

    @classmethod
    def of(cls, graph_or_workload: ExecGraph | Workload) -> Workload:
        """A workload from one graph (or the workload itself)."""
        if isinstance(graph_or_workload, Workload):
            return graph_or_workload
        return cls((graph_or_workload,))

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(g.rank for g in self.graphs)

    @property
    def num_tasks(self) -> int:
        return sum(g.num_tasks for g in self.graphs)

    def graph_for_rank(self, rank: int) -> ExecGraph:
        for g in self.graphs:
            if g.rank == rank:
                return g
        raise GraphError(f"workload has no graph for rank {rank} (ranks: {list(self.ranks)})")

    def collective_groups(self) -> Any:
        """The matched collectives (a cached :class:`lumos.graph.algorithms.CollectiveGroups`)."""
        from lumos.graph.algorithms import match_collectives

        if "groups" not in self._cache:
            self._cache["groups"] = match_collectives(self)
        return self._cache["groups"]

    def validate(self) -> Workload:
        """Validate every graph; return ``self``."""
        for g in self.graphs:
            g.validate()
        return self

    def replace_graphs(self, graphs: Iterable[ExecGraph]) -> Workload:
        """A new workload with other graphs (e.g. each edited the same way)."""
        return Workload(tuple(graphs), self.diagnostics.copy())
