"""The tables a :class:`~lumos.ingest.kineto.KinetoTrace` carries beside its events.

Processors (threads and streams), fwd/bwd flows, ProfilerStep spans, CUDA sync events and the
trace-level metadata (``distributedInfo``, ``deviceProperties``). Collectives live in
:mod:`lumos.ingest.kineto_comms`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lumos.ingest.kineto_comms import Collectives, build_collectives
from lumos.ingest.kineto_schema import Category, EventMeta

if TYPE_CHECKING:
    from lumos.ingest.kineto import Events
    from lumos.ingest.kineto_schema import RawTrace

__all__ = [
    "Collectives",
    "FlowEnd",
    "Flows",
    "ProcessGroupInfo",
    "Processors",
    "Steps",
    "SyncEvents",
    "TraceMeta",
    "build_collectives",
    "build_flows",
    "build_meta",
    "build_steps",
    "build_sync_events",
]

ProcKey = tuple[int, "int | str", "int | str"]


@dataclass(frozen=True, eq=False)
class Processors:
    """Where events run: CPU threads (``kind`` 0) and GPU streams (``kind`` 1).

    For threads ``pid``/``tid`` are the OS ids (-1 when the trace used a string label); for
    streams ``device`` and ``tid`` (the stream id) are set and ``pid`` equals ``device``.
    """

    kind: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    device: np.ndarray
    label: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    def is_stream(self, idx: int) -> bool:
        """True when processor ``idx`` is a GPU stream."""
        return bool(self.kind[idx] == 1)

    @staticmethod
    def from_keys(
        keys: list[tuple[int, int | str, int | str]], labels: dict[Any, str]
    ) -> tuple[Processors, np.ndarray]:
        """Deduplicate per-event processor keys; returns the table and each event's row."""
        unique = sorted(set(keys), key=lambda k: (k[0], _sortable(k[1]), _sortable(k[2])))
        index = {k: i for i, k in enumerate(unique)}
        proc_idx = np.fromiter((index[k] for k in keys), dtype=np.int32, count=len(keys))
        kind = np.array([k[0] for k in unique], dtype=np.int8)
        pid = np.array([k[1] if isinstance(k[1], int) else -1 for k in unique], dtype=np.int64)
        tid = np.array([k[2] if isinstance(k[2], int) else -1 for k in unique], dtype=np.int64)
        device = np.array([k[1] if k[0] == 1 else -1 for k in unique], dtype=np.int32)
        names: list[str] = []
        for k in unique:
            if k[0] == 1:
                names.append(f"GPU {k[1]} stream {k[2]}")
            else:
                names.append(labels.get(k) or f"thread {k[2]} (pid {k[1]})")
        return Processors(kind, pid, tid, device, tuple(names)), proc_idx


def _sortable(v: int | str) -> tuple[int, int, str]:
    return (1, 0, v) if isinstance(v, str) else (0, v, "")


@dataclass(frozen=True, eq=False)
class Flows:
    """Forward->backward flows (``cat == "fwdbwd"``) bound to the events they connect.

    ``src_event_idx`` is the forward op, ``dst_event_idx`` the backward op (-1 when a flow end
    could not be bound). Launch flows (``ac2g``) are not stored: correlation ids carry them.
    """

    flow_id: np.ndarray
    src_event_idx: np.ndarray
    dst_event_idx: np.ndarray
    num_launch_flows: int

    def __len__(self) -> int:
        return int(self.flow_id.shape[0])


@dataclass(frozen=True, eq=False)
class Steps:
    """``ProfilerStep#N`` iteration spans, in time order.

    ``ts_ns``/``dur_ns`` are the CPU-side span; ``gpu_ts_ns``/``gpu_dur_ns`` the GPU-side
    ``gpu_user_annotation`` of the same name when the trace has one (-1 otherwise).
    """

    name: tuple[str, ...]
    step_num: np.ndarray
    event_idx: np.ndarray
    processor_idx: np.ndarray
    ts_ns: np.ndarray
    dur_ns: np.ndarray
    gpu_ts_ns: np.ndarray
    gpu_dur_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.name)


@dataclass(frozen=True, eq=False)
class SyncEvents:
    """``cuda_sync`` events (traces taken with ``enable_cuda_sync_events``).

    ``kind``: 0 stream synchronize, 1 event synchronize, 2 context/device synchronize,
    3 stream wait event, 4 other. ``wait_on_stream`` and ``record_correlation_id`` say what
    the sync waited for (-1 when unknown).
    """

    event_idx: np.ndarray
    kind: np.ndarray
    stream: np.ndarray
    wait_on_stream: np.ndarray
    record_correlation_id: np.ndarray
    cuda_event_id: np.ndarray

    def __len__(self) -> int:
        return int(self.event_idx.shape[0])


@dataclass(frozen=True)
class ProcessGroupInfo:
    """One entry of ``distributedInfo.pg_config``."""

    name: str
    desc: str
    backend: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class TraceMeta:
    """Trace-level metadata; ``rank``/``world_size`` are -1 when the trace does not say."""

    rank: int
    world_size: int
    backend: str
    process_groups: tuple[ProcessGroupInfo, ...]
    devices: tuple[dict[str, Any], ...]
    distributed_info: dict[str, Any]
    schema_version: Any
    base_time_ns: int | None

    @property
    def device_name(self) -> str:
        """The first GPU's name from ``deviceProperties`` ("" for CPU-only traces)."""
        return str(self.devices[0].get("name", "")) if self.devices else ""


_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: ``Steps.step_num`` of a step whose number does not fit 64 bits (the span is still a step).
STEP_NUM_UNKNOWN = -1
_INT64_MAX = 2**63 - 1
_SYNC_KINDS = {"stream sync": 0, "event sync": 1, "context sync": 2, "stream wait event": 3}


def build_steps(
    names: tuple[str, ...],
    events: Events,
    procs: Processors,
    diagnostics: dict[str, int] | None = None,
) -> Steps:
    """Find ``ProfilerStep#N`` spans (CPU side) and their GPU-side twins.

    A step number beyond 64 bits keeps its span as a step, with ``step_num``
    :data:`STEP_NUM_UNKNOWN`, counted in ``diagnostics`` as ``step_number_out_of_range``.
    """
    cpu_cats = np.isin(events.cat, [int(Category.USER_ANNOTATION), int(Category.CPU_OP)])
    gpu_cat = events.cat == int(Category.GPU_USER_ANNOTATION)
    step_name_ids = [i for i, n in enumerate(names) if _STEP_RE.match(n)]
    is_step = np.isin(events.name_idx, step_name_ids)
    best: dict[int, int] = {}
    for i in np.flatnonzero(is_step & cpu_cats).tolist():
        n = int(events.name_idx[i])
        if n not in best or events.dur_ns[i] > events.dur_ns[best[n]]:
            best[n] = i
    rows = sorted(best.values(), key=lambda i: (int(events.ts_ns[i]), i))
    gpu_span: dict[int, tuple[int, int]] = {}
    for i in np.flatnonzero(is_step & gpu_cat).tolist():
        n = int(events.name_idx[i])
        s, e = int(events.ts_ns[i]), int(events.ts_ns[i] + events.dur_ns[i])
        if n in gpu_span:
            s, e = min(s, gpu_span[n][0]), max(e, gpu_span[n][1])
        gpu_span[n] = (s, e)
    name = tuple(names[int(events.name_idx[i])] for i in rows)
    spans = [gpu_span.get(int(events.name_idx[i]), (-1, -1)) for i in rows]
    nums = [int(n.split("#", 1)[1]) for n in name]
    too_big = sum(1 for k in nums if k > _INT64_MAX)
    if too_big and diagnostics is not None:
        diagnostics["step_number_out_of_range"] = too_big
    return Steps(
        name=name,
        step_num=np.array([k if k <= _INT64_MAX else STEP_NUM_UNKNOWN for k in nums], np.int64),
        event_idx=np.array(rows, dtype=np.int64),
        processor_idx=events.processor_idx[rows].astype(np.int32),
        ts_ns=events.ts_ns[rows].copy(),
        dur_ns=events.dur_ns[rows].copy(),
        gpu_ts_ns=np.array([s for s, _ in spans], dtype=np.int64),
        gpu_dur_ns=np.array([e - s if s >= 0 else -1 for s, e in spans], dtype=np.int64),
    )


def build_sync_events(events: Events, args: Mapping[int, EventMeta]) -> SyncEvents:
    """Collect ``cuda_sync`` events with what each one waited on."""
    rows = np.flatnonzero(events.cat == int(Category.CUDA_SYNC))
    a = [args[i] for i in rows.tolist()]
    return SyncEvents(
        event_idx=rows.astype(np.int64),
        kind=np.array([_SYNC_KINDS.get(x.sync_kind.lower(), 4) for x in a], dtype=np.int8),
        stream=np.array([x.stream for x in a], dtype=np.int64),
        wait_on_stream=np.array([x.wait_on_stream for x in a], dtype=np.int64),
        record_correlation_id=np.array([x.wait_on_event_record_corr_id for x in a], dtype=np.int64),
        cuda_event_id=np.array([x.wait_on_event_id for x in a], dtype=np.int64),
    )


FlowEnd = tuple[str, "int | str", "int | str", float, Any]  # (ph, pid, tid, ts_us, id)


def build_flows(
    flows: list[FlowEnd], n_launch: int, events: Events, procs: Processors, base_us: float
) -> Flows:
    """Bind fwd/bwd flow ends to events: start -> the op starting there, end -> enclosing op."""
    thread_of = {
        (int(procs.pid[i]), int(procs.tid[i])): i
        for i in range(len(procs))
        if procs.kind[i] == 0 and procs.pid[i] >= 0
    }
    starts: dict[Any, int] = {}
    ends: dict[Any, int] = {}
    bounds = np.searchsorted(events.processor_idx, np.arange(len(procs) + 1))
    for ph, pid, tid, ts_us, flow_id in flows:
        if isinstance(tid, str) and tid.isdigit():
            tid = int(tid)
        p = thread_of.get((pid, tid)) if isinstance(pid, int) and isinstance(tid, int) else None
        if p is None:
            continue
        ts_ns = int(base_us) * 1000 + round((ts_us - base_us) * 1000.0)
        lo, hi = int(bounds[p]), int(bounds[p + 1])
        idx = _bind(events, lo, hi, ts_ns, enclosing=(ph == "f"))
        (starts if ph == "s" else ends)[flow_id] = idx
    ids = sorted(set(starts) | set(ends), key=_sortable_id)
    return Flows(
        flow_id=np.array([i if isinstance(i, int) else -1 for i in ids], dtype=np.int64),
        src_event_idx=np.array([starts.get(i, -1) for i in ids], dtype=np.int64),
        dst_event_idx=np.array([ends.get(i, -1) for i in ids], dtype=np.int64),
        num_launch_flows=n_launch,
    )


def _sortable_id(v: Any) -> tuple[int, int, str]:
    return (0, v, "") if isinstance(v, int) else (1, 0, str(v))


def _bind(events: Events, lo: int, hi: int, ts_ns: int, enclosing: bool) -> int:
    """Row of the op a flow end belongs to on one thread, or -1."""
    ts = events.ts_ns[lo:hi]
    j = int(np.searchsorted(ts, ts_ns, side="left"))
    if not enclosing:
        while j < len(ts) and ts[j] == ts_ns:
            if events.cat[lo + j] == int(Category.CPU_OP):
                return lo + j
            j += 1
        return -1
    k = int(np.searchsorted(ts, ts_ns, side="right")) - 1
    while k >= 0:
        if ts[k] + events.dur_ns[lo + k] >= ts_ns and events.cat[lo + k] == int(Category.CPU_OP):
            return lo + k
        if ts_ns - ts[k] > 10_000_000_000:
            break
        k -= 1
    return -1


def build_meta(top: RawTrace, where: str, diagnostics: dict[str, int]) -> TraceMeta:
    """Read ``distributedInfo``/``deviceProperties`` tolerantly (missing fields -> -1/empty)."""
    info = top.distributedInfo if isinstance(top.distributedInfo, dict) else {}
    if top.distributedInfo is not None and not isinstance(top.distributedInfo, dict):
        diagnostics["distributed_info_not_an_object"] = 1
    groups: list[ProcessGroupInfo] = []
    for pg in info.get("pg_config") or []:
        if not isinstance(pg, dict):
            diagnostics["pg_config_entry_not_an_object"] = (
                diagnostics.get("pg_config_entry_not_an_object", 0) + 1
            )
            continue
        ranks = pg.get("ranks") or []
        groups.append(
            ProcessGroupInfo(
                name=str(pg.get("pg_name", "")),
                desc=str(pg.get("pg_desc", "")),
                backend=str(pg.get("backend_config", "")),
                ranks=tuple(int(r) for r in ranks if isinstance(r, int)),
            )
        )
    devices = top.deviceProperties if isinstance(top.deviceProperties, list) else []
    base = top.baseTimeNanoseconds if isinstance(top.baseTimeNanoseconds, int) else None
    return TraceMeta(
        rank=_int(info.get("rank")),
        world_size=_int(info.get("world_size")),
        backend=str(info.get("backend", "")),
        process_groups=tuple(groups),
        devices=tuple(d for d in devices if isinstance(d, dict)),
        distributed_info=info,
        schema_version=top.schemaVersion,
        base_time_ns=base,
    )


def _int(v: Any) -> int:
    if isinstance(v, bool):
        return -1
    if isinstance(v, str) and v.lstrip("-").isdigit() and len(v) < 20:
        v = int(v)
    if isinstance(v, int) and -(2**31) <= v < 2**31:
        return v
    return -1  # absent, not an integer, or out of range (treated as absent)
