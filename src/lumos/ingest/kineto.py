"""``read_kineto``: a PyTorch profiler (Kineto) Chrome-trace file -> :class:`KinetoTrace`.

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

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np

from lumos._io import read_bytes
from lumos.errors import TraceFormatError
from lumos.ingest._intern import Interner
from lumos.ingest.kineto_meta import (
    Collectives,
    Flows,
    Processors,
    Steps,
    SyncEvents,
    TraceMeta,
    build_collectives,
    build_flows,
    build_meta,
    build_steps,
    build_sync_events,
)
from lumos.ingest.kineto_schema import GPU_CATEGORIES, Category, RawEvent, RawTrace, category_of
from lumos.ingest.kineto_tolerant import decode_tolerant

__all__ = ["Events", "KinetoTrace", "read_kineto", "trace_from_bytes"]

_DECODER = msgspec.json.Decoder(RawTrace)
_LIST_DECODER = msgspec.json.Decoder(list[RawEvent])
_STREAM_RE = re.compile(r"(-?\d+)$")
_INT_COLUMNS = (
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

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @property
    def end_ns(self) -> np.ndarray:
        """End time of every event."""
        return self.ts_ns + self.dur_ns


@dataclass(frozen=True, eq=False)
class KinetoTrace:
    """One rank's Kineto trace, columnar. Built by :func:`read_kineto`; never mutated."""

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


def read_kineto(path: str | os.PathLike[str], member: str | None = None) -> KinetoTrace:
    """Read a Kineto Chrome-trace JSON file (plain, gzip, or a tar ``member``).

    Raises :class:`~lumos.errors.TraceFormatError` (naming the file) when the file is not valid
    JSON, not a trace, or has no events.

    >>> from lumos.examples_data import example_trace_path
    >>> t = read_kineto(example_trace_path())
    >>> len(t.steps) > 0
    True
    """
    where = f"{Path(path)}::{member}" if member else str(path)
    return trace_from_bytes(read_bytes(path, member), where)


def trace_from_bytes(raw: bytes, where: str) -> KinetoTrace:
    """Parse an in-memory Kineto JSON payload; ``where`` names it in errors."""
    diagnostics: dict[str, int] = {}
    head = raw[:4096].lstrip()
    if not head:
        raise TraceFormatError(where, "empty file")
    if head[:1] not in (b"{", b"["):
        raise TraceFormatError(where, "not JSON (does not start with '{' or '[')")
    top: RawTrace
    try:
        if head[:1] == b"[":
            top = RawTrace(traceEvents=_LIST_DECODER.decode(raw))
        else:
            top = _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        if "traceEvents" in str(exc) and "missing required field" in str(exc):
            raise TraceFormatError(
                where, "JSON object has no 'traceEvents': not a Kineto trace"
            ) from None
        top = decode_tolerant(raw, where, diagnostics)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(where, f"invalid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(where, f"invalid JSON: not UTF-8 text ({exc.reason})") from None
    return _build(top, where, diagnostics)


def _stream_of(v: int | str) -> int:
    if isinstance(v, int):
        return v
    try:
        return int(v, 0)
    except ValueError:
        return -1


def _tid_key(v: int | str) -> int | str:
    """A thread id as the trace wrote it; numeric strings (2021 traces) become ints."""
    return int(v) if isinstance(v, str) and v.isdigit() else v


def _proc_int(v: int | str) -> int | None:
    if isinstance(v, int):
        return v
    m = _STREAM_RE.search(v)
    return int(m.group(1)) if m else None


def _build(top: RawTrace, where: str, diagnostics: dict[str, int]) -> KinetoTrace:
    raw_events = top.traceEvents
    xs = [e for e in raw_events if e.ph == "X"]
    if not xs:
        raise TraceFormatError(where, "trace has no duration events")
    cat_counts: dict[str, int] = {}
    for e in raw_events:
        key = e.cat or f"<ph {e.ph}>"
        cat_counts[key] = cat_counts.get(key, 0) + 1

    cat_cache: dict[tuple[str, bool], int] = {}
    cats = np.empty(len(xs), dtype=np.int8)
    proc_keys: list[tuple[int, int | str, int | str]] = []
    labels: dict[tuple[int, int | str, int | str], str] = {}
    streams = np.fromiter((_stream_of(e.args.stream) for e in xs), np.int64, len(xs))
    for i, e in enumerate(xs):
        a = e.args
        has_stream = streams[i] >= 0
        ck = (e.cat, has_stream)
        c = cat_cache.get(ck)
        if c is None:
            c = cat_cache[ck] = int(category_of(e.cat, has_stream))
        cats[i] = c
        if c in _GPU_INTS:
            dev = a.device if a.device >= 0 else _proc_int(e.pid)
            stream = int(streams[i]) if has_stream or c == _SYNC else _proc_int(e.tid)
            proc_keys.append((1, -1 if dev is None else dev, -1 if stream is None else stream))
        else:
            proc_keys.append((0, e.pid, _tid_key(e.tid)))
    for e in raw_events:
        if e.ph == "M" and e.name in ("thread_name", "process_name"):
            label = e.args.thread_name
            name = msgspec.json.decode(label) if bytes(label) != b"null" else None
            if isinstance(name, str):
                k = (0, e.pid, _tid_key(e.tid) if e.name == "thread_name" else "__process__")
                labels[k] = name

    procs, proc_idx = Processors.from_keys(proc_keys, labels)

    ts = np.fromiter((e.ts for e in xs), dtype=np.float64, count=len(xs))
    dur = np.fromiter((e.dur for e in xs), dtype=np.float64, count=len(xs))
    base_us = float(np.floor(ts.min()))
    ts_ns = np.int64(base_us) * 1000 + np.rint((ts - base_us) * 1000.0).astype(np.int64)
    dur_ns = np.rint(dur * 1000.0).astype(np.int64)
    if (dur_ns < 0).any():
        diagnostics["negative_duration_clamped"] = int((dur_ns < 0).sum())
        dur_ns = np.maximum(dur_ns, 0)

    interner = Interner()
    name_idx = interner.ids(e.name for e in xs)
    cols: dict[str, np.ndarray] = {}
    args = [e.args for e in xs]
    cols["correlation_id"] = np.fromiter((a.correlation for a in args), np.int64, len(xs))
    ext = np.fromiter((a.external_id for a in args), np.int64, len(xs))
    ext_legacy = np.fromiter((a.external_id_legacy for a in args), np.int64, len(xs))
    cols["external_id"] = np.where(ext >= 0, ext, ext_legacy)
    for col, attr in (
        ("rf_id", "rf_id"),
        ("ev_idx", "ev_idx"),
        ("seq_id", "seq_id"),
        ("fwd_thread_id", "fwd_thread_id"),
        ("num_bytes", "num_bytes"),
    ):
        cols[col] = np.fromiter((getattr(a, attr) for a in args), np.int64, len(xs))

    cols["stream"] = streams
    order = np.lexsort((np.arange(len(xs)), -dur_ns, ts_ns, proc_idx))
    events = Events(
        cat=cats[order],
        name_idx=name_idx[order],
        ts_ns=ts_ns[order],
        dur_ns=dur_ns[order],
        processor_idx=proc_idx[order],
        **{k: cols[k][order] for k in _INT_COLUMNS},
    )
    sorted_args = [args[i] for i in order.tolist()]
    names = interner.table()
    meta = build_meta(top, where, diagnostics)
    return KinetoTrace(
        path=where,
        names=names,
        events=events,
        processors=procs,
        flows=build_flows(raw_events, events, procs, base_us),
        steps=build_steps(names, events, procs),
        collectives=build_collectives(names, events, sorted_args, meta, diagnostics),
        sync_events=build_sync_events(events, sorted_args),
        meta=meta,
        category_counts=dict(sorted(cat_counts.items())),
        num_raw_events=len(raw_events),
        diagnostics=diagnostics,
    )


_GPU_INTS = frozenset(int(c) for c in GPU_CATEGORIES)
_SYNC = int(Category.CUDA_SYNC)
