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
from enum import IntEnum
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from lumos.diagnostics import Diagnostics
from lumos.errors import GraphError

__all__ = [
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
]


class TaskKind(IntEnum):
    """What a task is. 0, 1 and 6 run on threads; 2-5 on streams."""

    CPU_OP = 0
    RUNTIME = 1  # CUDA/HIP runtime or driver call
    KERNEL = 2
    MEMCPY = 3
    MEMSET = 4
    COMM = 5  # communication kernel (collective or p2p) on a stream
    CPU_COMM = 6  # host-side collective span (e.g. gloo worker)


#: Task kinds that run on a GPU stream.
GPU_TASK_KINDS: tuple[TaskKind, ...] = (
    TaskKind.KERNEL,
    TaskKind.MEMCPY,
    TaskKind.MEMSET,
    TaskKind.COMM,
)
#: Task kinds that run on a CPU thread.
CPU_TASK_KINDS: tuple[TaskKind, ...] = (TaskKind.CPU_OP, TaskKind.RUNTIME, TaskKind.CPU_COMM)


class DepKind(IntEnum):
    """Why an edge exists."""

    INTRA_THREAD = 0
    INTER_THREAD = 1
    LAUNCH = 2
    INTRA_STREAM = 3
    INTER_STREAM = 4
    SYNC = 5
    COLLECTIVE = 6
    P2P = 7


class ProcessorKind(IntEnum):
    THREAD = 0
    STREAM = 1


class WaitKind(IntEnum):
    """A runtime dependency of a blocking CPU task, resolved while simulating.

    STREAM: wait for every GPU task on ``target_processor_idx`` launched before the task starts.
    DEVICE: the same for every stream of ``device``.
    EVENT:  wait for the GPU task captured by the event record ``record_task_idx`` (the last task
            launched on the record's stream, ``target_processor_idx``, before the record started).
    """

    STREAM = 0
    DEVICE = 1
    EVENT = 2


class AnnotationKind(IntEnum):
    STEP = 0  # ProfilerStep#N on a CPU thread
    USER = 1  # user annotation / module span
    GPU_STEP = 2  # gpu_user_annotation spans on a stream


class CommType(IntEnum):
    """Collective type, numbered as Chakra's ``CollectiveCommType``, plus p2p and unknown."""

    UNKNOWN = -1
    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9
    SEND = 100
    RECV = 101


# ---------------------------------------------------------------------------------------------
# Columnar tables


def _column(table: str, name: str, value: Any, dtype: np.dtype[Any]) -> NDArray[Any]:
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise GraphError(f"{table}.{name}: expected a 1-D column, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iub":
        raise GraphError(f"{table}.{name}: expected integers, got dtype {arr.dtype}")
    if arr.dtype != dtype:
        cast = arr.astype(dtype)
        if arr.size and not np.array_equal(cast, arr):
            raise GraphError(f"{table}.{name}: values do not fit in {dtype}")
        arr = cast
    else:
        arr = arr.view()
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class _Table:
    """Base of the columnar tables: typed, equal-length, read-only numpy columns.

    Subclasses list their columns in ``_COLUMNS`` (name -> dtype) and may give defaults for
    optional columns in ``_DEFAULTS`` (used by :meth:`create` and :meth:`empty`).
    """

    _COLUMNS: ClassVar[dict[str, type]] = {}
    _DEFAULTS: ClassVar[dict[str, int]] = {}

    def __post_init__(self) -> None:
        table = type(self).__name__
        n: int | None = None
        for name, dtype in self._COLUMNS.items():
            arr = _column(table, name, getattr(self, name), np.dtype(dtype))
            object.__setattr__(self, name, arr)
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise GraphError(
                    f"{table}: column {name!r} has {len(arr)} rows, expected {n} "
                    f"(like {next(iter(self._COLUMNS))!r})"
                )

    def __len__(self) -> int:
        first = next(iter(self._COLUMNS))
        return len(getattr(self, first))

    @classmethod
    def create(cls, **columns: Any) -> Self:
        """Build from columns; omitted optional columns take their default (e.g. -1)."""
        n = None
        for name in cls._COLUMNS:
            if name in columns and not isinstance(columns[name], (int, np.integer)):
                n = len(columns[name])
                break
        if n is None:
            n = 0
        full: dict[str, Any] = {}
        for name, dtype in cls._COLUMNS.items():
            if name in columns:
                value = columns.pop(name)
                if isinstance(value, (int, np.integer)):
                    value = np.full(n, value, dtype=dtype)
                full[name] = value
            elif name in cls._DEFAULTS:
                full[name] = np.full(n, cls._DEFAULTS[name], dtype=dtype)
            else:
                raise GraphError(f"{cls.__name__}.create: missing column {name!r}")
        if columns:
            raise GraphError(f"{cls.__name__}.create: unknown columns {sorted(columns)}")
        return cls(**full, **cls._extra_defaults(n))

    @classmethod
    def _extra_defaults(cls, n: int) -> dict[str, Any]:
        return {}

    @classmethod
    def empty(cls) -> Self:
        """A table with no rows."""
        return cls(
            **{k: np.zeros(0, dtype=v) for k, v in cls._COLUMNS.items()}, **cls._extra_defaults(0)
        )

    def take(self, idx: NDArray[Any]) -> Self:
        """Rows ``idx`` (an index or boolean mask array), as a new table."""
        cols = {k: getattr(self, k)[idx] for k in self._COLUMNS}
        return dataclasses.replace(self, **cols)

    def replace(self, **columns: Any) -> Self:
        """A copy with some columns replaced."""
        return dataclasses.replace(self, **columns)

    @classmethod
    def concat(cls, parts: Iterable[Self]) -> Self:
        """Rows of ``parts`` one after the other (indices are NOT re-based)."""
        parts = list(parts)
        if not parts:
            return cls.empty()
        cols = {k: np.concatenate([getattr(p, k) for p in parts]) for k in cls._COLUMNS}
        return dataclasses.replace(parts[0], **cols)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, k), getattr(other, k)) for k in self._COLUMNS
        ) and all(
            getattr(self, f.name) == getattr(other, f.name)
            for f in dataclasses.fields(self)
            if f.name not in self._COLUMNS
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class Processors(_Table):
    """CPU threads and GPU streams. ``tid`` is the thread id, or the stream id for streams."""

    kind: NDArray[np.int8]
    pid: NDArray[np.int64]
    tid: NDArray[np.int64]
    device: NDArray[np.int32]  # -1 for threads
    label: tuple[str, ...] = ()

    _COLUMNS: ClassVar[dict[str, type]] = {
        "kind": np.int8,
        "pid": np.int64,
        "tid": np.int64,
        "device": np.int32,
    }
    _DEFAULTS: ClassVar[dict[str, int]] = {"device": -1}

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.label:
            object.__setattr__(
                self,
                "label",
                tuple(
                    f"{'stream' if k == ProcessorKind.STREAM else 'thread'} {t}"
                    for k, t in zip(self.kind.tolist(), self.tid.tolist(), strict=True)
                ),
            )
        object.__setattr__(self, "label", tuple(self.label))
        if len(self.label) != len(self.kind):
            raise GraphError(
                f"Processors: {len(self.label)} labels for {len(self.kind)} processors"
            )

    def take(self, idx: NDArray[Any]) -> Processors:
        out = super().take(idx)
        labels = np.array(self.label, dtype=object)[idx].tolist() if len(self.label) else []
        return dataclasses.replace(out, label=tuple(labels))

    @classmethod
    def concat(cls, parts: Iterable[Processors]) -> Processors:
        parts = list(parts)
        out = super().concat(parts)
        return dataclasses.replace(out, label=tuple(lb for p in parts for lb in p.label))


@dataclass(frozen=True, eq=False)
class Tasks(_Table):
    """Nodes of the graph, one row per task."""

    name_idx: NDArray[np.int32]  # into ExecGraph.names
    kind: NDArray[np.int8]  # TaskKind
    processor_idx: NDArray[np.int32]
    order: NDArray[np.int32]  # position on its processor
    dur_ns: NDArray[np.int64]  # intrinsic cost used by replay
    ts_ns: NDArray[np.int64]  # recorded start: reports and validation only
    event_idx: NDArray[np.int64]  # row in the source trace, -1 if synthetic
    comm_idx: NDArray[np.int32]  # row in Comms, -1 if none

    _COLUMNS: ClassVar[dict[str, type]] = {
        "name_idx": np.int32,
        "kind": np.int8,
        "processor_idx": np.int32,
        "order": np.int32,
        "dur_ns": np.int64,
        "ts_ns": np.int64,
        "event_idx": np.int64,
        "comm_idx": np.int32,
    }
    _DEFAULTS: ClassVar[dict[str, int]] = {"ts_ns": 0, "event_idx": -1, "comm_idx": -1}

    @classmethod
    def create(cls, **columns: Any) -> Tasks:
        """Like :meth:`_Table.create`; ``order`` defaults to the row's rank on its processor."""
        if "order" not in columns and "processor_idx" in columns:
            columns["order"] = order_within(np.asarray(columns["processor_idx"]))
        return super().create(**columns)


def order_within(processor_idx: NDArray[Any]) -> NDArray[np.int32]:
    """0-based position of each row among the rows of the same processor, in row order.

    >>> order_within(np.array([1, 0, 1, 1, 0])).tolist()
    [0, 0, 1, 2, 1]
    """
    p = np.asarray(processor_idx, dtype=np.int64)
    n = len(p)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    perm = np.argsort(p, kind="stable")
    sp = p[perm]
    starts = np.r_[0, np.flatnonzero(sp[1:] != sp[:-1]) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    out = np.empty(n, dtype=np.int32)
    out[perm] = np.arange(n) - group_start
    return out


@dataclass(frozen=True, eq=False)
class Edges(_Table):
    """Fixed dependencies: ``dst`` starts no earlier than ``end(src) + delay_ns``."""

    src: NDArray[np.int32]
    dst: NDArray[np.int32]
    kind: NDArray[np.int8]  # DepKind
    delay_ns: NDArray[np.int64]

    _COLUMNS: ClassVar[dict[str, type]] = {
        "src": np.int32,
        "dst": np.int32,
        "kind": np.int8,
        "delay_ns": np.int64,
    }
    _DEFAULTS: ClassVar[dict[str, int]] = {"delay_ns": 0}


@dataclass(frozen=True, eq=False)
class Waits(_Table):
    """Runtime dependencies of blocking CPU tasks (see :class:`WaitKind`)."""

    task_idx: NDArray[np.int32]  # the CPU task that blocks
    kind: NDArray[np.int8]  # WaitKind
    target_processor_idx: NDArray[np.int32]  # stream (STREAM; the record's stream for EVENT)
    device: NDArray[np.int32]  # DEVICE
    record_task_idx: NDArray[np.int32]  # EVENT: the cudaEventRecord task

    _COLUMNS: ClassVar[dict[str, type]] = {
        "task_idx": np.int32,
        "kind": np.int8,
        "target_processor_idx": np.int32,
        "device": np.int32,
        "record_task_idx": np.int32,
    }
    _DEFAULTS: ClassVar[dict[str, int]] = {
        "target_processor_idx": -1,
        "device": -1,
        "record_task_idx": -1,
    }


@dataclass(frozen=True, eq=False)
class Annotations(_Table):
    """Reporting spans (iterations, modules) over a run of tasks on one processor.

    Predicted span = ``[sim_start(first) - lead_ns, sim_end(last) + tail_ns]`` where ``lead_ns``
    = recorded first-task start - span start and ``tail_ns`` = span end - recorded last-task end.
    """

    name_idx: NDArray[np.int32]
    kind: NDArray[np.int8]  # AnnotationKind
    processor_idx: NDArray[np.int32]
    first_task_idx: NDArray[np.int32]  # -1 if the span covers no task
    last_task_idx: NDArray[np.int32]
    ts_ns: NDArray[np.int64]  # recorded span
    dur_ns: NDArray[np.int64]
    lead_ns: NDArray[np.int64]
    tail_ns: NDArray[np.int64]

    _COLUMNS: ClassVar[dict[str, type]] = {
        "name_idx": np.int32,
        "kind": np.int8,
        "processor_idx": np.int32,
        "first_task_idx": np.int32,
        "last_task_idx": np.int32,
        "ts_ns": np.int64,
        "dur_ns": np.int64,
        "lead_ns": np.int64,
        "tail_ns": np.int64,
    }
    _DEFAULTS: ClassVar[dict[str, int]] = {"lead_ns": 0, "tail_ns": 0}


@dataclass(frozen=True, eq=False)
class Comms(_Table):
    """Communication operations, referenced by ``Tasks.comm_idx``."""

    kind: NDArray[np.int8]  # CommType
    size_bytes: NDArray[np.int64]
    pg_idx: NDArray[np.int32]  # into ExecGraph.process_groups, -1 if unknown
    seq_id: NDArray[np.int64]  # -1 if unknown
    peer_rank: NDArray[np.int32]  # p2p peer (global rank), -1
    tag: NDArray[np.int64]  # -1

    _COLUMNS: ClassVar[dict[str, type]] = {
        "kind": np.int8,
        "size_bytes": np.int64,
        "pg_idx": np.int32,
        "seq_id": np.int64,
        "peer_rank": np.int32,
        "tag": np.int64,
    }
    _DEFAULTS: ClassVar[dict[str, int]] = {
        "size_bytes": 0,
        "pg_idx": -1,
        "seq_id": -1,
        "peer_rank": -1,
        "tag": -1,
    }


@dataclass(frozen=True)
class ProcessGroup:
    """A communicator. ``name`` is the process group name ("0" = default, all ranks)."""

    name: str
    ranks: tuple[int, ...] = ()
    desc: str = ""
    backend: str = ""


# ---------------------------------------------------------------------------------------------
# The graph


@dataclass(frozen=True, eq=False)
class ExecGraph:
    """One rank's execution graph. Construct, then call :meth:`validate` for the deep checks.

    ``__post_init__`` checks what is cheap (column lengths/dtypes, index ranges of names and
    processors); :meth:`validate` checks the rest (dangling edges, cycles, processor order,
    kinds on the right processors) and raises :class:`~lumos.errors.GraphError`.
    """

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
        ks = np.array(sorted({int(k) for k in kinds}), dtype=np.int8)
        keep = ~np.isin(self.edges.kind, ks)
        return self.replace(edges=self.edges.take(keep))

    def drop_waits(self, kinds: Iterable[WaitKind | int] | None = None) -> ExecGraph:
        """A new graph without runtime waits (all, or only the given :class:`WaitKind` s)."""
        if kinds is None:
            return self.replace(waits=Waits.empty())
        ks = np.array(sorted({int(k) for k in kinds}), dtype=np.int8)
        return self.replace(waits=self.waits.take(~np.isin(self.waits.kind, ks)))

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
