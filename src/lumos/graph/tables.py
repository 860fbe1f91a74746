"""The columnar tables of an execution graph: typed, equal-length, read-only numpy columns.

Each table is a frozen dataclass; :class:`~lumos.graph.model.ExecGraph` holds one of each.
Nothing here holds a Python object per task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from lumos.errors import GraphError
from lumos.graph.kinds import ProcessorKind

__all__ = [
    "Annotations",
    "Comms",
    "Edges",
    "ProcessGroup",
    "Processors",
    "Tasks",
    "Waits",
    "order_within",
]


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
                    value = np.full(n, value)  # cast (and checked to fit) like any column
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
        """Rows ``idx`` (an index or boolean mask array) with their own labels."""
        cols = {k: getattr(self, k)[idx] for k in self._COLUMNS}
        labels = np.array(self.label, dtype=object)[idx].tolist()
        return dataclasses.replace(self, **cols, label=tuple(labels))

    @classmethod
    def concat(cls, parts: Iterable[Processors]) -> Processors:
        parts = list(parts)
        if not parts:
            return cls.empty()
        cols = {k: np.concatenate([getattr(p, k) for p in parts]) for k in cls._COLUMNS}
        return cls(**cols, label=tuple(lb for p in parts for lb in p.label))


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
    dims_idx: NDArray[np.int32]  # the op's "Input Dims" in ExecGraph.dims, -1 if none
    #: Work the op asked for, from its recorded shapes (0 unknown; see lumos.ingest.op_work).
    flops: NDArray[np.int64]
    bytes: NDArray[np.int64]

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
        "dims_idx": np.int32,
        "flops": np.int64,
        "bytes": np.int64,
    }
    _DEFAULTS: ClassVar[dict[str, int]] = {
        "lead_ns": 0, "tail_ns": 0, "dims_idx": -1, "flops": 0, "bytes": 0,
    }  # fmt: skip


@dataclass(frozen=True, eq=False)
class Comms(_Table):
    """Communication operations, referenced by ``Tasks.comm_idx``.

    ``size_bytes`` is the message size as the collective defines it, one convention for every
    dialect (see :mod:`lumos.ingest.kineto_comms`): all_reduce, broadcast, reduce: the tensor;
    all_gather: the OUTPUT (gathered buffer); reduce_scatter: the INPUT (full buffer before
    scattering); all_to_all: the bytes this rank sends in total; gather/scatter: the full buffer
    at the root (shard x group size); send/recv: the message. -1 (or 0 from older writers)
    when unknown.
    """

    kind: NDArray[np.int8]  # CommType
    size_bytes: NDArray[np.int64]  # see the class docstring
    pg_idx: NDArray[np.int32]  # into ExecGraph.process_groups, -1 if unknown
    seq_id: NDArray[np.int64]  # -1 if unknown
    peer_rank: NDArray[np.int32]  # p2p peer (global rank), -1
    tag: NDArray[np.int64]  # -1
    #: Part of the recorded duration spent waiting for peers (the rest is the transfer).
    wait_ns: NDArray[np.int64]

    _COLUMNS: ClassVar[dict[str, type]] = {
        "kind": np.int8,
        "size_bytes": np.int64,
        "pg_idx": np.int32,
        "seq_id": np.int64,
        "peer_rank": np.int32,
        "tag": np.int64,
        "wait_ns": np.int64,
    }
    _DEFAULTS: ClassVar[dict[str, int]] = {
        "size_bytes": 0,
        "pg_idx": -1,
        "seq_id": -1,
        "peer_rank": -1,
        "tag": -1,
        "wait_ns": 0,
    }


@dataclass(frozen=True)
class ProcessGroup:
    """A communicator. ``name`` is the process group name ("0" = default, all ranks)."""

    name: str
    ranks: tuple[int, ...] = ()
    desc: str = ""
    backend: str = ""
