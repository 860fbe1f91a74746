"""Memory in the graph: the training device's allocations and frees, held by the tasks that
made them (:class:`GraphMemory`, ``ExecGraph.memory``).

Each ``[memory]`` event of the trace (:mod:`lumos.ingest.kineto_memory`) on the rank's training
device (its GPU; host memory for a CPU-only job) hangs off an *anchor* task: the last task on
its thread that started at or before it (the op that made it, or the leaf task just before it
inside that op). It keeps its offset from the anchor's recorded start, so a replay places it
where its anchor runs, and a copied task (a copied layer) carries a copy of it. Anchors are
named by the task's source event row (``Tasks.event_idx``), which graph edits carry along.

``delta_bytes`` is what the event changed the device's allocated total by: the step of the
recorded ``Total Allocated`` where the trace has it (which also takes in allocations the
profiler did not show as events), ``Bytes`` otherwise; ``base_bytes`` is the total before the
first event (0 when not recorded: then levels are relative to the start of the recording).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.ingest.kineto_memory import MemoryEvents, device_label

__all__ = ["PHASES", "GraphMemory", "anchor_memory"]

#: Phase codes of ``GraphMemory.phase``.
PHASES = ("unknown", "forward", "backward", "optimizer")


@dataclass(frozen=True, eq=False)
class GraphMemory:
    """One rank's training-device allocations and frees, by anchor task (module docstring)."""

    event_idx: NDArray[np.int64]  # the anchor task's source event row
    offset_ns: NDArray[np.int64]  # time after the anchor's recorded start (< 0: before it)
    anchor_dur_ns: NDArray[np.int64]  # the anchor's recorded duration
    delta_bytes: NDArray[np.int64]  # change of the device's allocated bytes
    num_bytes: NDArray[np.int64]  # Bytes as recorded (> 0 allocation, < 0 free)
    alloc_row: NDArray[np.int64]  # for a free: the row of its allocation here, -1
    op_name_idx: NDArray[np.int32]  # row of op_names: the op that made it (-1: none)
    phase: NDArray[np.int8]  # PHASES code
    total_reserved: NDArray[np.int64]  # reserved bytes after it (-1: not recorded)
    #: The nearest op around it that recorded a tensor shape (``aten::empty`` records none,
    #: its caller does): its name (row of op_names) and "Input Dims" (row of shape_dims), -1.
    shape_name_idx: NDArray[np.int32]
    shape_dims_idx: NDArray[np.int32]
    op_names: tuple[str, ...]
    shape_dims: tuple[str, ...]
    device_type: int
    device_id: int
    base_bytes: int
    #: Whether the trace recorded "Total Allocated" (levels are absolute, not relative).
    levels_recorded: bool
    #: The device's capacity from ``deviceProperties`` (``totalGlobalMem``), 0 when unknown.
    capacity_bytes: int = 0

    def __len__(self) -> int:
        return int(self.event_idx.shape[0])

    @property
    def device(self) -> str:
        """``"cuda:0"``, ``"cpu"``..."""
        return device_label(self.device_type, self.device_id)

    def take(self, rows: NDArray[Any]) -> GraphMemory:
        """The rows ``rows`` (allocation links to rows left out become -1)."""
        rows = np.asarray(rows, dtype=np.int64)
        new = np.full(len(self), -1, dtype=np.int64)
        new[rows] = np.arange(rows.size)
        link = self.alloc_row[rows]
        link = np.where(link >= 0, new[np.maximum(link, 0)], -1)
        cols = {k: getattr(self, k)[rows] for k in _ROW_COLUMNS}
        return replace(self, **cols, alloc_row=link)

    def scaled(self, factor: NDArray[np.float64]) -> GraphMemory:
        """Bytes of each row multiplied by ``factor`` (a resized op allocates resized
        tensors)."""
        f = np.asarray(factor, dtype=np.float64)
        return replace(
            self,
            delta_bytes=np.rint(self.delta_bytes * f).astype(np.int64),
            num_bytes=np.rint(self.num_bytes * f).astype(np.int64),
        )


_ROW_COLUMNS = (
    "event_idx", "offset_ns", "anchor_dur_ns", "delta_bytes", "num_bytes", "op_name_idx",
    "phase", "total_reserved", "shape_name_idx", "shape_dims_idx",
)  # fmt: skip


def _phase_of(names: list[str]) -> int:
    text = " ".join(names).lower()
    if "optimizer" in text or "optim" in text:
        return 3
    if "backward" in text:
        return 2
    if "forward" in text:
        return 1
    return 0


def anchor_memory(
    mem: MemoryEvents,
    names: tuple[str, ...],
    ev_name_idx: NDArray[np.int32],
    ev_dims: tuple[NDArray[np.int32] | None, tuple[str, ...]],
    task_event_idx: NDArray[np.int64],
    task_proc: NDArray[np.int32],
    task_ts: NDArray[np.int64],
    task_dur: NDArray[np.int64],
    task_is_cpu: NDArray[np.bool_],
    graph_proc_of_trace: NDArray[np.int64],
    spans: tuple[NDArray[np.int32], NDArray[np.int64], NDArray[np.int64], list[str]],
    capacity: dict[int, int],
) -> GraphMemory | None:
    """The training device's events of ``mem`` anchored to tasks (None when there are none).

    ``task_*``: the graph's tasks (source row, processor, recorded start and duration, runs on
    a thread); ``graph_proc_of_trace``: trace processor row -> graph processor (-1);
    ``spans``: the recorded host spans (processor, start, end, name) that name a phase;
    ``capacity``: ``totalGlobalMem`` per GPU id."""
    dev = mem.training_device()
    if dev is None:
        return None
    rows = np.flatnonzero(mem.on_device(dev))
    ts = mem.ts_ns[rows]
    gp = graph_proc_of_trace[np.maximum(mem.processor_idx[rows], 0)]
    gp = np.where(mem.processor_idx[rows] >= 0, gp, -1)
    cand = np.flatnonzero(task_is_cpu & (task_event_idx >= 0))
    if cand.size == 0:
        return None
    anchor = np.full(rows.size, -1, dtype=np.int64)
    # per thread: the last of its tasks started at or before the event (else its first task)
    for p in np.unique(gp[gp >= 0]).tolist():
        mine = cand[task_proc[cand] == p]
        if not mine.size:
            continue
        mine = mine[np.argsort(task_ts[mine], kind="stable")]
        sel = np.flatnonzero(gp == p)
        k = np.searchsorted(task_ts[mine], ts[sel], side="right") - 1
        anchor[sel] = mine[np.maximum(k, 0)]
    # events on a thread with no task: the last task of any thread started before them
    lost = np.flatnonzero(anchor < 0)
    if lost.size:
        by_ts = cand[np.argsort(task_ts[cand], kind="stable")]
        k = np.searchsorted(task_ts[by_ts], ts[lost], side="right") - 1
        anchor[lost] = by_ts[np.maximum(k, 0)]
    ta = mem.total_allocated[rows]
    nb = mem.num_bytes[rows]
    recorded = bool(ta.size) and bool((ta >= 0).all())
    if recorded:
        delta = np.diff(ta, prepend=ta[0] - nb[0])
        base = int(ta[0] - nb[0])
    else:
        delta, base = nb.copy(), 0
    # the op that made each, and its phase (its own name, or a recorded span around it)
    op_name = _names_of(mem.op_idx[rows], ev_name_idx)
    shape_op = mem.shaped_op_idx[rows]
    shape_name = _names_of(shape_op, ev_name_idx)
    used = np.unique(np.concatenate([op_name, shape_name]))
    used = used[used >= 0]
    remap = np.full(len(names) + 1, -1, dtype=np.int32)
    remap[used] = np.arange(used.size, dtype=np.int32)
    op_names = tuple(names[i] for i in used.tolist())
    dims_idx, dims = ev_dims
    shape_dims_idx = np.full(rows.size, -1, dtype=np.int32)
    shape_dims: tuple[str, ...] = ()
    if dims_idx is not None:
        has = shape_op >= 0
        d = np.full(rows.size, -1, dtype=np.int64)
        d[has] = dims_idx[shape_op[has]]
        used_d = np.unique(d[d >= 0])
        remap_d = np.full(len(dims) + 1, -1, dtype=np.int32)
        remap_d[used_d] = np.arange(used_d.size, dtype=np.int32)
        shape_dims_idx = np.where(d >= 0, remap_d[np.maximum(d, 0)], -1).astype(np.int32)
        shape_dims = tuple(dims[i] for i in used_d.tolist())
    phase = _phases(ts, gp, op_name, names, spans)
    link = mem.alloc_idx[rows]
    local = np.full(len(mem), -1, dtype=np.int64)
    local[rows] = np.arange(rows.size)
    link = np.where(link >= 0, local[np.maximum(link, 0)], -1)
    return GraphMemory(
        event_idx=task_event_idx[anchor].astype(np.int64),
        offset_ns=(ts - task_ts[anchor]).astype(np.int64),
        anchor_dur_ns=task_dur[anchor].astype(np.int64),
        delta_bytes=delta.astype(np.int64),
        num_bytes=nb.astype(np.int64),
        alloc_row=link,
        op_name_idx=np.where(op_name >= 0, remap[np.maximum(op_name, 0)], -1).astype(np.int32),
        phase=phase,
        total_reserved=mem.total_reserved[rows].astype(np.int64),
        shape_name_idx=np.where(shape_name >= 0, remap[np.maximum(shape_name, 0)], -1).astype(
            np.int32
        ),
        shape_dims_idx=shape_dims_idx,
        op_names=op_names,
        shape_dims=shape_dims,
        device_type=dev[0],
        device_id=dev[1],
        base_bytes=base,
        levels_recorded=recorded,
        capacity_bytes=int(capacity.get(dev[1], 0)) if dev[0] != 0 else 0,
    )


def _names_of(op: NDArray[np.int64], ev_name_idx: NDArray[np.int32]) -> NDArray[np.int64]:
    out = np.full(op.size, -1, dtype=np.int64)
    out[op >= 0] = ev_name_idx[op[op >= 0]]
    return out


def _phases(
    ts: NDArray[np.int64],
    gp: NDArray[np.int64],
    op_name: NDArray[np.int64],
    names: tuple[str, ...],
    spans: tuple[NDArray[np.int32], NDArray[np.int64], NDArray[np.int64], list[str]],
) -> NDArray[np.int8]:
    """Per event: the phase a recorded span around it names (``forward``, ``backward``,
    ``optimizer`` in its name), else the op's own name (``...Backward``), else unknown."""
    out = np.zeros(ts.size, dtype=np.int8)
    has = op_name >= 0
    own = np.array([_phase_of([n]) for n in names] + [0], dtype=np.int8)
    out[has] = own[op_name[has]]
    s_proc, s_ts, s_end, s_names = spans
    for code in (1, 2, 3):  # later phases win where spans nest (an optimizer step in a step)
        pick = np.array([_phase_of([n]) == code for n in s_names], dtype=bool)
        for i in np.flatnonzero(pick).tolist():
            inside = (ts >= s_ts[i]) & (ts <= s_end[i])
            if int(s_proc[i]) >= 0:
                inside &= gp == int(s_proc[i])
            out[inside] = code
    return out
