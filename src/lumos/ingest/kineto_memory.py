"""The ``[memory]`` instant events of a Kineto trace, as columns: :class:`MemoryEvents`.

PyTorch's profiler, run with ``profile_memory=True``, writes one instant event (``ph`` "i",
name ``[memory]``) per allocation and per free, on the host thread that made it, inside the op
that made it. Its ``args``: ``Device Type`` (c10's DeviceType code: 0 CPU, 1 CUDA (ROCm builds
write their GPUs as CUDA too), 6 HIP...), ``Device Id`` (-1 for host memory), ``Addr``,
``Bytes`` (negative for a free), and since PyTorch 1.10 ``Total Allocated`` / ``Total Reserved``
(the allocator's totals on that device just after the event). 2021 traces carry only the first
three and ``Bytes``.

One row per event, sorted by ``(ts_ns, file order)``:

=================  ====================================================================
column             meaning
=================  ====================================================================
``ts_ns``          when (integer ns, the trace's clock)
``processor_idx``  the host thread (a row of ``KinetoTrace.processors``), -1 when that thread
                   has no duration event
``device_type``    c10 DeviceType code (:data:`CPU`, :data:`CUDA`, :data:`HIP`, ...)
``device_id``      device index (-1: host memory)
``addr``           address (-1 when not recorded)
``num_bytes``      bytes allocated (> 0) or freed (< 0)
``total_allocated``  the device's allocated bytes after the event (-1 when not recorded)
``total_reserved``   its reserved (cached) bytes after the event (-1 when not recorded)
``op_idx``         the innermost duration event on the same thread enclosing it (the op that
                   made it), -1 when none does
``shaped_op_idx``  the innermost enclosing op whose recorded "Input Dims" hold a tensor shape
                   (``aten::empty`` records none: its caller does), -1 when none does
``alloc_idx``      for a free: the row of the allocation it frees (same device and address,
                   the latest allocation before it), -1 when that allocation is not in the
                   window or no address was recorded; -1 for allocations
=================  ====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.ingest._enclose import enclosing_events

__all__ = [
    "CPU",
    "CUDA",
    "GPU_DEVICE_TYPES",
    "HIP",
    "MEMORY_COLUMNS",
    "MemoryEvents",
    "build_memory",
    "device_label",
    "pair_frees",
]

#: c10 DeviceType codes the profiler writes (``Device Type``).
CPU, CUDA, HIP = 0, 1, 6
#: Device types that are a GPU's memory (ROCm builds report their GPUs as CUDA; HIP is 6).
GPU_DEVICE_TYPES = (CUDA, HIP)
_TYPE_NAMES = {CPU: "cpu", CUDA: "cuda", HIP: "hip"}

#: The raw columns an ingest path gathers per memory event (besides ``ts`` and the thread).
MEMORY_COLUMNS = (
    "device_type",
    "device_id",
    "addr",
    "num_bytes",
    "total_allocated",
    "total_reserved",
)


def device_label(device_type: int, device_id: int) -> str:
    """``"cuda:0"``, ``"cpu"``... for a (type, id) pair."""
    name = _TYPE_NAMES.get(device_type, f"type{device_type}")
    return name if device_id < 0 else f"{name}:{device_id}"


@dataclass(frozen=True, eq=False)
class MemoryEvents:
    """Allocations and frees of one trace as columns (see the module docstring)."""

    ts_ns: NDArray[np.int64]
    processor_idx: NDArray[np.int32]
    device_type: NDArray[np.int8]
    device_id: NDArray[np.int32]
    addr: NDArray[np.int64]
    num_bytes: NDArray[np.int64]
    total_allocated: NDArray[np.int64]
    total_reserved: NDArray[np.int64]
    op_idx: NDArray[np.int64]
    shaped_op_idx: NDArray[np.int64]
    alloc_idx: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @classmethod
    def empty(cls) -> MemoryEvents:
        i64 = np.zeros(0, dtype=np.int64)
        return cls(
            ts_ns=i64, processor_idx=np.zeros(0, dtype=np.int32),
            device_type=np.zeros(0, dtype=np.int8), device_id=np.zeros(0, dtype=np.int32),
            addr=i64, num_bytes=i64, total_allocated=i64, total_reserved=i64, op_idx=i64,
            shaped_op_idx=i64, alloc_idx=i64,
        )  # fmt: skip

    def devices(self) -> list[tuple[int, int]]:
        """The distinct ``(device_type, device_id)`` pairs, sorted."""
        if not len(self):
            return []
        pairs = np.unique(np.stack([self.device_type, self.device_id]).T.astype(np.int64), axis=0)
        return [(int(t), int(i)) for t, i in pairs.tolist()]

    def training_device(self) -> tuple[int, int] | None:
        """The device the job trains on: the GPU with the most events, else host memory;
        None when there are no events."""
        if not len(self):
            return None
        gpu = np.isin(self.device_type, GPU_DEVICE_TYPES)
        rows = np.flatnonzero(gpu) if gpu.any() else np.arange(len(self))
        pairs = np.stack([self.device_type[rows], self.device_id[rows]]).T.astype(np.int64)
        uniq, counts = np.unique(pairs, axis=0, return_counts=True)
        t, i = uniq[int(np.argmax(counts))].tolist()
        return int(t), int(i)

    def on_device(self, device: tuple[int, int]) -> NDArray[np.bool_]:
        """Mask of the events of one ``(device_type, device_id)``."""
        return (self.device_type == device[0]) & (self.device_id == device[1])


def pair_frees(
    device_type: NDArray[np.int8], device_id: NDArray[np.int32], addr: NDArray[np.int64],
    num_bytes: NDArray[np.int64],
) -> NDArray[np.int64]:  # fmt: skip
    """``alloc_idx`` for rows in time order: a free's allocation is the event just before it
    at the same device and address, when that event is an allocation."""
    n = addr.shape[0]
    out = np.full(n, -1, dtype=np.int64)
    has = np.flatnonzero(addr >= 0)
    if has.size < 2:
        return out
    order = has[np.lexsort((has, addr[has], device_id[has], device_type[has]))]
    same = (
        (addr[order[1:]] == addr[order[:-1]])
        & (device_id[order[1:]] == device_id[order[:-1]])
        & (device_type[order[1:]] == device_type[order[:-1]])
    )
    prev, cur = order[:-1], order[1:]
    hit = same & (num_bytes[cur] < 0) & (num_bytes[prev] > 0)
    out[cur[hit]] = prev[hit]
    return out


def build_memory(
    raw: dict[str, NDArray[np.int64]],
    ts_ns: NDArray[np.int64],
    processor_idx: NDArray[np.int32],
    ev_proc: NDArray[np.int32],
    ev_ts: NDArray[np.int64],
    ev_end: NDArray[np.int64],
    host: NDArray[np.bool_],
    shaped: NDArray[np.bool_],
) -> MemoryEvents:
    """Sort the gathered events by time (file order among equals), tie each to its op (the
    innermost *host* event enclosing it on its thread; ``host`` masks the trace's events that
    may be one; ``shaped`` those whose recorded dims hold a tensor shape) and pair frees with
    allocations."""
    if ts_ns.shape[0] == 0:
        return MemoryEvents.empty()
    order = np.lexsort((np.arange(ts_ns.shape[0]), ts_ns))
    cols = {k: np.ascontiguousarray(raw[k][order]) for k in MEMORY_COLUMNS}
    ts = ts_ns[order]
    proc = processor_idx[order]
    # only the threads that allocated; queries by (thread, time), one compiled sweep
    rows = np.flatnonzero(host & np.isin(ev_proc, np.unique(proc)))
    by_thread = np.lexsort((ts, proc))
    inner, near = enclosing_events(
        np.ascontiguousarray(ev_proc[rows], dtype=np.int32),
        np.ascontiguousarray(ev_ts[rows], dtype=np.int64),
        np.ascontiguousarray(ev_end[rows], dtype=np.int64),
        np.ascontiguousarray(shaped[rows], dtype=np.uint8),
        np.ascontiguousarray(proc[by_thread], dtype=np.int32),
        np.ascontiguousarray(ts[by_thread], dtype=np.int64),
    )
    op_idx = np.full(ts.shape[0], -1, dtype=np.int64)
    shaped_op_idx = np.full(ts.shape[0], -1, dtype=np.int64)
    op_idx[by_thread] = np.where(inner >= 0, rows[np.maximum(inner, 0)], -1) if rows.size else -1
    shaped_op_idx[by_thread] = (
        np.where(near >= 0, rows[np.maximum(near, 0)], -1) if rows.size else -1
    )
    device_type = cols["device_type"].astype(np.int8)
    device_id = cols["device_id"].astype(np.int32)
    return MemoryEvents(
        ts_ns=ts,
        processor_idx=proc.astype(np.int32),
        device_type=device_type,
        device_id=device_id,
        addr=cols["addr"],
        num_bytes=cols["num_bytes"],
        total_allocated=cols["total_allocated"],
        total_reserved=cols["total_reserved"],
        op_idx=op_idx,
        shaped_op_idx=shaped_op_idx,
        alloc_idx=pair_frees(device_type, device_id, cols["addr"], cols["num_bytes"]),
    )
