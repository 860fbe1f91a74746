"""Fold decoded Kineto events, chunk by chunk, into the columns of a :class:`KinetoTrace`.

Per chunk, the work is done per *unique* value (category string, thread, name) rather than per
event where it can be; metadata is decoded only for the few events that carry it, so a chunk's
decoded structs can be freed as soon as it is folded in.
"""

from __future__ import annotations

import re
from collections import Counter
from operator import attrgetter
from typing import Any

import numpy as np

from lumos.errors import TraceFormatError
from lumos.ingest._intern import Interner
from lumos.ingest.kineto_memory import MEMORY_COLUMNS, MemoryEvents, build_memory
from lumos.ingest.kineto_meta import (
    FlowEnd,
    Processors,
    build_collectives,
    build_flows,
    build_meta,
    build_steps,
    build_sync_events,
)
from lumos.ingest.kineto_schema import (
    GPU_CATEGORIES,
    Category,
    EventMeta,
    RawArgs,
    RawEvent,
    RawTrace,
    category_of,
    decode_raw,
    meta_of,
)
from lumos.ingest.kineto_trace import INT_COLUMNS, Events, KinetoTrace
from lumos.ingest.op_work import WORK_OPS, op_work

__all__ = ["ID_COLUMNS", "Accumulator", "meta_name", "proc_int"]

_STREAM_RE = re.compile(r"(-?\d+)$")
_SHAPE = re.compile(rb"\[\d")  # recorded dims that hold a tensor's shape
#: ``Events`` integer columns taken as they are from ``args`` (column, :class:`RawArgs` field);
#: ``external_id`` (two spellings) and ``stream`` (HIP's hex strings) have their own rules.
ID_COLUMNS = (
    ("correlation_id", "correlation"),
    ("rf_id", "rf_id"),
    ("ev_idx", "ev_idx"),
    ("seq_id", "seq_id"),
    ("fwd_thread_id", "fwd_thread_id"),
    ("num_bytes", "num_bytes"),
)
_META_PREFIXES = ("record_param_comms", "c10d::", "nccl:", "gloo:", "rccl:")


def meta_name(name: str) -> bool:
    """Whether events of this name carry metadata lumos reads (collectives, shapes of the ops
    the cost model re-times)."""
    return name.startswith(_META_PREFIXES) or name in WORK_OPS


def _stream_of(v: int | str) -> int:
    if isinstance(v, int):
        return v
    try:
        return int(v, 0)
    except ValueError:
        return -1


def _tid_key(v: int | str) -> int | str:
    """A thread id as the trace wrote it; numeric strings (2021 traces) become ints."""
    return int(v) if isinstance(v, str) and v.isdigit() and len(v) < 19 else v


def proc_int(v: int | str) -> int | None:
    """A device or stream number from a pid/tid (``"stream 7"`` -> 7); None when there is none
    or it does not fit int32."""
    if isinstance(v, str):
        m = _STREAM_RE.search(v)
        if m is None or len(m.group(1)) > 10:
            return None
        v = int(m.group(1))
    return v if -(2**31) <= v < 2**31 else None


_GPU_INTS = frozenset(int(c) for c in GPU_CATEGORIES)
_GPU_LIST = np.array(sorted(_GPU_INTS), dtype=np.int8)
_SYNC = int(Category.CUDA_SYNC)
_CPU_OP = int(Category.CPU_OP)
_CATS = attrgetter("cat")
_PH = attrgetter("ph")
_STREAM = attrgetter("stream")
_TS = attrgetter("ts")
_DUR = attrgetter("dur")
_NAME = attrgetter("name")
_ARGS = attrgetter("args")
_DIMS = attrgetter("input_dims")
#: ``RawArgs`` fields of a ``[memory]`` event, in :data:`MEMORY_COLUMNS` order.
MEMORY_ARGS = ("device_type", "device_id", "addr", "mem_bytes", "total_allocated", "total_reserved")
MEMORY_NAME = "[memory]"


class Accumulator:
    """Folds decoded event chunks into columns; ``finish`` sorts and builds the tables."""

    def __init__(self, diagnostics: dict[str, int]) -> None:
        self.diagnostics = diagnostics
        self.interner = Interner()
        self.proc_index: dict[tuple[int, Any, Any], int] = {}
        self.labels: dict[Any, str] = {}
        self.cat_counts: dict[str, int] = {}
        self.cat_code: dict[str, int] = {}
        self.thread_ids: dict[tuple[Any, Any], int] = {}
        self.meta_name: list[bool] = []  # per interned name: does it carry metadata?
        self.dims = Interner()  # "Input Dims" as raw JSON text (b"null" when absent)
        self.cols: dict[str, list[np.ndarray]] = {
            k: [] for k in (*INT_COLUMNS, "cat", "name_idx", "proc", "ts", "dur", "dims")
        }
        self.meta: dict[int, EventMeta] = {}
        self.flows: list[FlowEnd] = []
        self.n_launch_flows = 0
        self.num_raw = 0
        self.num_x = 0
        # [memory] instant events: times, host thread (a key of mem_threads), args
        self.mem_cols: dict[str, list[np.ndarray]] = {
            k: [] for k in ("ts", "thread", *MEMORY_COLUMNS)
        }
        self.mem_threads: dict[tuple[Any, Any], int] = {}

    def add(self, events: list[RawEvent]) -> None:
        self.num_raw += len(events)
        phs = list(map(_PH, events))
        cat_strs = list(map(_CATS, events))
        counts = self.cat_counts
        for (cat, ph), k in Counter(zip(cat_strs, phs, strict=True)).items():
            key = cat or f"<ph {ph}>"
            counts[key] = counts.get(key, 0) + k
        xs = [e for e, ph in zip(events, phs, strict=True) if ph == "X"]
        mems = []
        for e, ph in zip(events, phs, strict=True):
            if ph == "X":
                continue
            if ph in ("i", "I") and e.name == MEMORY_NAME:
                mems.append(e)
            else:
                self.add_other(e)
        if mems:
            self._add_memory(mems)
        if not xs:
            return
        n = len(xs)
        args = list(map(_ARGS, xs))
        try:
            streams = np.fromiter(map(_STREAM, args), np.int64, n)
        except (TypeError, ValueError):  # HIP writes stream handles as hex strings
            streams = np.fromiter(map(_stream_of, map(_STREAM, args)), np.int64, n)
        cats = self._categories(xs, streams)
        procs = self._processors(xs, args, cats, streams)
        name_idx = self.interner.ids(map(_NAME, xs))
        cols = self.cols
        cols["cat"].append(cats)
        cols["proc"].append(procs)
        cols["name_idx"].append(name_idx)
        cols["ts"].append(np.fromiter(map(_TS, xs), np.float64, n))
        cols["dur"].append(np.fromiter(map(_DUR, xs), np.float64, n))
        cols["stream"].append(streams)
        # shapes (CPU ops' "Input Dims") are kept as interned raw text: the what-if cost model
        # decodes the few distinct ones
        dims = np.full(n, self.dims.id(b"null"), dtype=np.int32)  # type: ignore[arg-type]
        ops = np.flatnonzero(cats == _CPU_OP)
        if ops.size:
            raw = (bytes(_DIMS(args[i])) for i in ops.tolist())
            dims[ops] = self.dims.ids(raw)  # type: ignore[arg-type]
        cols["dims"].append(dims)
        ext = np.fromiter(map(attrgetter("external_id"), args), np.int64, n)
        ext_legacy = np.fromiter(map(attrgetter("external_id_legacy"), args), np.int64, n)
        cols["external_id"].append(np.where(ext >= 0, ext, ext_legacy))
        for col, attr in ID_COLUMNS:
            cols[col].append(np.fromiter(map(attrgetter(attr), args), np.int64, n))
        # metadata, decoded now for the few events that carry it (chunks are then freed)
        self.note_names()
        wanted = np.flatnonzero((cats == _SYNC) | np.asarray(self.meta_name, dtype=bool)[name_idx])
        for i in wanted.tolist():
            self.meta[self.num_x + i] = meta_of(args[i], int(streams[i]))
        self.num_x += n

    def add_other(self, e: RawEvent) -> None:
        """Take in an event that is not a duration event (thread names, flows)."""
        if e.ph == "M":
            self._label(e)
        elif e.ph in ("s", "f", "t"):
            flow_cat = e.cat.lower()
            if flow_cat == "fwdbwd":
                self.flows.append((e.ph, e.pid, e.tid, e.ts, e.id))
            elif flow_cat in ("ac2g", "async", "async_cpu_to_gpu"):
                self.n_launch_flows += 1

    def _add_memory(self, mems: list[RawEvent]) -> None:
        n = len(mems)
        args = list(map(_ARGS, mems))
        threads = [self.mem_thread((e.pid, e.tid)) for e in mems]
        self.add_memory(
            np.fromiter(map(_TS, mems), np.float64, n),
            np.asarray(threads, dtype=np.int64),
            [np.fromiter(map(attrgetter(a), args), np.int64, n) for a in MEMORY_ARGS],
        )

    def mem_thread(self, key: tuple[Any, Any]) -> int:
        """The local id of the host thread ``(pid, tid)`` a memory event was written on."""
        i = self.mem_threads.get(key)
        if i is None:
            i = self.mem_threads[key] = len(self.mem_threads)
        return i

    def add_memory(self, ts: np.ndarray, threads: np.ndarray, cols: list[np.ndarray]) -> None:
        """Take in memory events: times (float us), thread ids (:meth:`mem_thread`) and the
        :data:`MEMORY_COLUMNS`."""
        self.mem_cols["ts"].append(ts)
        self.mem_cols["thread"].append(threads)
        for k, col in zip(MEMORY_COLUMNS, cols, strict=True):
            self.mem_cols[k].append(col)

    def _memory(
        self, base_us: float, remap: np.ndarray, events: Events, cats: np.ndarray
    ) -> MemoryEvents:
        """The memory events as :class:`MemoryEvents` on the trace's clock and processors."""
        if not self.mem_cols["ts"]:
            return MemoryEvents.empty()
        raw = {k: np.concatenate(v) for k, v in self.mem_cols.items()}
        ts = raw["ts"]
        ok = np.isfinite(ts) & (np.abs(ts) < _MAX_US)
        if not ok.all():
            self.diagnostics["memory_events_with_out_of_range_ts_dropped"] = int((~ok).sum())
            raw = {k: v[ok] for k, v in raw.items()}
            ts = raw["ts"]
        ts_ns = np.int64(base_us) * 1000 + np.rint((ts - base_us) * 1000.0).astype(np.int64)
        # local thread id -> trace processor row (-1: a thread with no duration event)
        local = np.full(max(len(self.mem_threads), 1), -1, dtype=np.int32)
        for key, i in self.mem_threads.items():
            pi = self.proc_index.get((0, key[0], _tid_key(key[1])))
            if pi is not None:
                local[i] = remap[pi]
        proc = local[raw["thread"]]
        host = ~np.isin(cats, _GPU_LIST)
        table = [t if isinstance(t, bytes) else str(t).encode() for t in self.dims.table()]
        with_shape = np.array([bool(_SHAPE.search(t)) for t in table] + [False], dtype=np.bool_)
        di = events.dims_idx if events.dims_idx is not None else np.full(len(events), -1)
        shaped = with_shape[np.where(di >= 0, di, len(table))]
        return build_memory(
            raw, ts_ns, proc, events.processor_idx, events.ts_ns, events.end_ns, host, shaped
        )

    def note_names(self) -> None:
        """Extend the per-name metadata flags to the names interned since the last call."""
        names = self.interner.table_view()
        self.meta_name.extend(meta_name(n) for n in names[len(self.meta_name) :])

    def thread_id(self, key: tuple[Any, Any]) -> int:
        """The processor id of a host thread ``(pid, tid)`` as the trace wrote them."""
        i = self.thread_ids.get(key)
        if i is None:
            pk = (0, key[0], _tid_key(key[1]))
            i = self.thread_ids[key] = self.proc_index.setdefault(pk, len(self.proc_index))
        return i

    def _categories(self, xs: list[RawEvent], streams: np.ndarray) -> np.ndarray:
        """Category codes; an unknown category counts as GPU work when it names a stream."""
        cat_strs = list(map(_CATS, xs))
        codes = self.cat_code
        for c in set(cat_strs) - codes.keys():
            codes[c] = int(category_of(c, False))
        cats = np.fromiter(map(codes.__getitem__, cat_strs), np.int8, len(xs))
        cats[(cats == int(Category.OTHER_CPU)) & (streams >= 0)] = int(Category.OTHER_GPU)
        return cats

    def _processors(
        self, xs: list[RawEvent], args: list[RawArgs], cats: np.ndarray, streams: np.ndarray
    ) -> np.ndarray:
        """Processor ids: (pid, tid) threads for host events, (device, stream) for GPU ones."""
        n = len(xs)
        procs = np.empty(n, dtype=np.int32)
        index = self.proc_index
        gpu = np.isin(cats, _GPU_LIST)
        cpu_rows = np.flatnonzero(~gpu).tolist()
        if cpu_rows:
            thread_ids = self.thread_ids
            keys = [(xs[i].pid, xs[i].tid) for i in cpu_rows]
            for k in set(keys) - thread_ids.keys():
                self.thread_id(k)
            procs[cpu_rows] = np.fromiter(map(thread_ids.__getitem__, keys), np.int32, len(keys))
        for i in np.flatnonzero(gpu).tolist():
            e, a = xs[i], args[i]
            has_stream = streams[i] >= 0
            dev = a.device if a.device >= 0 else proc_int(e.pid)
            stream = int(streams[i]) if has_stream or cats[i] == _SYNC else proc_int(e.tid)
            pk = (1, -1 if dev is None else dev, -1 if stream is None else stream)
            procs[i] = index.setdefault(pk, len(index))
        return procs

    def _label(self, e: RawEvent) -> None:
        if e.name not in ("thread_name", "process_name"):
            return
        name = decode_raw(e.args.thread_name)
        if isinstance(name, str):
            k = (0, e.pid, _tid_key(e.tid) if e.name == "thread_name" else "__process__")
            self.labels[k] = name

    def finish(self, top: RawTrace, where: str) -> KinetoTrace:
        if self.num_x == 0:
            raise TraceFormatError(where, "trace has no duration events")
        cols = {k: np.concatenate(v) for k, v in self.cols.items()}
        diagnostics = self.diagnostics
        meta = self.meta
        keep = _far_from_the_rest(cols["ts"])
        if keep is not None:
            diagnostics["events_with_out_of_range_ts_dropped"] = int((~keep).sum())
            cols = {k: v[keep] for k, v in cols.items()}
            new_row = np.cumsum(keep) - 1
            meta = {int(new_row[i]): m for i, m in meta.items() if keep[i]}
        num_x = int(cols["ts"].shape[0])
        keys = list(self.proc_index)
        procs, remap = Processors.from_keys(keys, self.labels)
        proc_idx = remap[cols["proc"]]
        ts = cols["ts"]
        _check_time_range(ts, cols["dur"], where)
        base_us = float(np.floor(ts.min()))
        ts_ns = np.int64(base_us) * 1000 + np.rint((ts - base_us) * 1000.0).astype(np.int64)
        dur_ns = np.rint(cols["dur"] * 1000.0).astype(np.int64)
        if (dur_ns < 0).any():
            diagnostics["negative_duration_clamped"] = int((dur_ns < 0).sum())
            dur_ns = np.maximum(dur_ns, 0)
        _count_duplicate_correlations(cols["cat"], cols["correlation_id"], diagnostics)
        cols["cat"] = _uncategorized_as_cpu_ops(cols["cat"], diagnostics)
        order = np.lexsort((np.arange(num_x), -dur_ns, ts_ns, proc_idx))
        events = Events(
            cat=cols["cat"][order],
            name_idx=cols["name_idx"][order],
            ts_ns=ts_ns[order],
            dur_ns=dur_ns[order],
            processor_idx=proc_idx[order].astype(np.int32),
            **{k: cols[k][order] for k in INT_COLUMNS},
            dims_idx=_dims_idx(cols["dims"][order], self.dims.table()),
        )
        rank_of = np.empty(num_x, dtype=np.int64)
        rank_of[order] = np.arange(num_x)
        rows = np.fromiter(meta, dtype=np.int64, count=len(meta))
        meta = dict(zip(rank_of[rows].tolist(), meta.values(), strict=True))
        names = self.interner.table()
        tmeta = build_meta(top, where, diagnostics)
        return KinetoTrace(
            path=where,
            names=names,
            events=events,
            processors=procs,
            flows=build_flows(self.flows, self.n_launch_flows, events, procs, base_us),
            steps=build_steps(names, events, procs, diagnostics),
            collectives=build_collectives(names, events, meta, tmeta, diagnostics),
            sync_events=build_sync_events(events, meta),
            meta=tmeta,
            category_counts=dict(sorted(self.cat_counts.items())),
            num_raw_events=self.num_raw,
            diagnostics=diagnostics,
            dims=tuple(b.decode("utf-8", "replace") for b in self.dims.table()),  # type: ignore[attr-defined]
            op_work=_op_work(names, events, meta),
            memory=self._memory(base_us, remap, events, events.cat),
        )


def _uncategorized_as_cpu_ops(cat: np.ndarray, diagnostics: dict[str, int]) -> np.ndarray:
    """The autograd profiler before Kineto (PyTorch <= 1.7) wrote its ops with no category: in a
    trace where no event has one, host events are CPU ops (counted as
    ``uncategorized_events_as_cpu_ops``); elsewhere an unknown category stays unknown."""
    other = cat == int(Category.OTHER_CPU)
    if (
        not other.any()
        or not np.isin(cat, [int(Category.OTHER_CPU), int(Category.OTHER_GPU)]).all()
    ):
        return cat
    diagnostics["uncategorized_events_as_cpu_ops"] = int(other.sum())
    return np.where(other, np.int8(int(Category.CPU_OP)), cat).astype(cat.dtype)


def _op_work(
    names: tuple[str, ...], events: Events, meta: dict[int, EventMeta]
) -> dict[int, tuple[int, int]]:
    """``row -> (flops, bytes)`` for the events of :data:`WORK_OPS` with usable shapes."""
    out = {}
    for row in sorted(meta):
        name = names[int(events.name_idx[row])]
        if name in WORK_OPS:
            work = op_work(name, meta[row].input_dims, meta[row].input_type)
            if work != (0, 0):
                out[row] = work
    return out


#: Microseconds beyond which a time no longer fits int64 nanoseconds (with margin).
_MAX_US = 9.0e15
#: No trace spans 100 days.
_MAX_SPAN_US = 100 * 86400 * 1e6


_HOST_CALLS = np.array([int(Category.RUNTIME), int(Category.DRIVER)], dtype=np.int8)


def _count_duplicate_correlations(
    cats: np.ndarray, corr: np.ndarray, diagnostics: dict[str, int]
) -> None:
    """Count runtime/driver calls whose correlation id another call also has (each call gets its
    own id, so the kernels they launched cannot be told apart; the linker takes one)."""
    ids = corr[np.isin(cats, _HOST_CALLS) & (corr >= 0)]
    if ids.size < 2:
        return
    ids = np.sort(ids)
    dup = ids[1:] == ids[:-1]
    if dup.any():
        shared = np.zeros(ids.size, dtype=bool)
        shared[1:] |= dup
        shared[:-1] |= dup
        diagnostics["duplicate_correlation_ids"] = int(shared.sum())


#: Events further than this beyond the bulk of the trace (or 10x its span) are outliers.
_FAR_US = 60e6


def _far_from_the_rest(ts: np.ndarray) -> np.ndarray | None:
    """The rows to keep when a few events (at most 1 %, at least one allowed) have a time that
    cannot be (not finite, beyond int64 ns) or lie far outside the span of all the others
    (``ts`` of 1e12 among times near 0); None when there is nothing to drop or too much (then
    :func:`_check_time_range` refuses the trace)."""
    n = ts.shape[0]
    allowed = max(1, n // 100)
    usable = np.isfinite(ts) & (np.abs(ts) < _MAX_US)
    far = ~usable
    good = ts[usable]
    if good.size > 2 * allowed and float(good.max() - good.min()) > _FAR_US:
        # the bulk: all but the `allowed` lowest and highest times
        part = np.partition(good, (allowed, good.size - 1 - allowed))
        lo, hi = float(part[allowed]), float(part[good.size - 1 - allowed])
        width = max(10.0 * (hi - lo), _FAR_US)
        far |= usable & ((ts < lo - width) | (ts > hi + width))
    n_far = int(far.sum())
    if n_far == 0 or n_far > allowed or n_far == n:
        return None
    return ~far


def _check_time_range(ts: np.ndarray, dur: np.ndarray, where: str) -> None:
    """Refuse timestamps or durations that are not finite or do not fit int64 nanoseconds
    (one clear error instead of an overflowing cast)."""
    bad = ~(np.isfinite(ts) & np.isfinite(dur) & (np.abs(ts) < _MAX_US) & (np.abs(dur) < _MAX_US))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(
            where,
            f"{int(bad.sum())} event{'s have' if bad.sum() > 1 else ' has'} a timestamp or "
            "duration out of range "
            f"(e.g. ts={float(ts[i])!r} us, dur={float(dur[i])!r} us)",
        )
    if ts.size and float(ts.max() - ts.min()) >= _MAX_SPAN_US:
        raise TraceFormatError(where, "timestamps span more than 100 days: not one trace")


def _dims_idx(ids: np.ndarray, table: tuple[object, ...]) -> np.ndarray:
    """Interned "Input Dims" ids with the absent value (JSON ``null``) as -1."""
    out = ids.astype(np.int32)
    if b"null" in table:
        out[out == table.index(b"null")] = -1
    return out
