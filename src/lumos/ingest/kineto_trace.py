"""The columnar Kineto trace: :class:`KinetoTrace` and its :class:`Events` table.

One row per duration event (``ph == "X"``) in numpy columns, times in integer nanoseconds, names
interned, every event placed on a *processor* (a CPU thread or a GPU stream). Events are sorted by
``(processor_idx, ts_ns, -dur_ns, file order)``, so on every processor a parent comes before the
children it encloses.

=================  ====================================================================
column             meaning
=================  ====================================================================
``cat``            :class:`Category` (legacy 2021 names and HIP folded in)
``name_idx``       index into ``KinetoTrace.names``
``ts_ns, dur_ns``  start and duration, integer ns (float microseconds converted once)
``processor_idx``  row of ``KinetoTrace.processors``
``correlation_id`` CUDA/HIP correlation (runtime call <-> GPU activity), -1 if none
``external_id``    Kineto "External id" (CPU op <-> its runtime calls), -1 if none
``rf_id``          "Record function id" (joins PyTorch ET ``rf_id``), -1 if none
``ev_idx``         "Ev Idx", -1 if none
``seq_id``         autograd "Sequence number", -1 if none
``fwd_thread_id``  autograd "Fwd thread id", -1 if none
``num_bytes``      bytes moved by a memcpy/memset, -1 otherwise
``stream``         the stream named in ``args`` (GPU activity, HIP runtime calls), -1 if none
=================  ====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lumos.ingest.kineto_memory import MemoryEvents
from lumos.ingest.kineto_meta import Collectives, Flows, Processors, Steps, SyncEvents, TraceMeta
from lumos.ingest.kineto_schema import Category

__all__ = ["INT_COLUMNS", "Events", "KinetoTrace"]

#: The integer identifier columns of :class:`Events` (-1 = absent).
INT_COLUMNS = (
    "correlation_id",
    "external_id",
    "rf_id",
    "ev_idx",
    "seq_id",
    "fwd_thread_id",
    "num_bytes",
    "stream",
)


@dataclass(frozen=True, eq=False)
class Events:
    """Duration events as columns (see the module docstring for each column)."""

    cat: np.ndarray
    name_idx: np.ndarray
    ts_ns: np.ndarray
    dur_ns: np.ndarray
    processor_idx: np.ndarray
    correlation_id: np.ndarray
    external_id: np.ndarray
    rf_id: np.ndarray
    ev_idx: np.ndarray
    seq_id: np.ndarray
    fwd_thread_id: np.ndarray
    num_bytes: np.ndarray
    stream: np.ndarray
    #: Row in :attr:`KinetoTrace.dims` of the event's "Input Dims" (-1 = none recorded).
    dims_idx: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @property
    def end_ns(self) -> np.ndarray:
        """End time of every event."""
        return self.ts_ns + self.dur_ns


@dataclass(frozen=True, eq=False)
class KinetoTrace:
    """One rank's Kineto trace, columnar. Built by :func:`read_kineto`; never mutated."""

    def __repr__(self) -> str:
        return (f"KinetoTrace({self.path!r}, rank {self.rank}, {len(self.events)} events, "
                f"{len(self.processors.kind)} processors, {len(self.steps.name)} steps)")  # fmt: skip

    path: str
    names: tuple[str, ...]
    events: Events
    processors: Processors
    flows: Flows
    steps: Steps
    collectives: Collectives
    sync_events: SyncEvents
    meta: TraceMeta
    category_counts: dict[str, int]
    num_raw_events: int
    diagnostics: dict[str, int] = field(default_factory=dict)
    #: Distinct "Input Dims" values, as their JSON text (see ``Events.dims_idx``).
    dims: tuple[str, ...] = ()
    #: ``event row -> (flops, bytes)`` of the ops whose recorded shapes say what they computed
    #: (see :mod:`lumos.ingest.op_work`); empty when the trace has no shapes.
    op_work: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: The ``[memory]`` events (allocations and frees; empty without ``profile_memory=True``).
    memory: MemoryEvents = field(default_factory=MemoryEvents.empty)

    @property
    def rank(self) -> int:
        """The rank from ``distributedInfo`` (0 when the trace has none)."""
        return self.meta.rank if self.meta.rank >= 0 else 0

    def name_of(self, event_idx: int) -> str:
        """The name of one event."""
        return self.names[int(self.events.name_idx[event_idx])]

    def mask(self, *cats: Category) -> np.ndarray:
        """Boolean mask of the events whose category is one of ``cats``."""
        return np.isin(self.events.cat, np.asarray([int(c) for c in cats], dtype=np.int8))

    def processor_slices(self) -> list[tuple[int, int]]:
        """``[start, stop)`` event rows of each processor (events are grouped by processor)."""
        p = self.events.processor_idx
        bounds = np.searchsorted(p, np.arange(len(self.processors) + 1), side="left")
        return [(int(bounds[i]), int(bounds[i + 1])) for i in range(len(self.processors))]
