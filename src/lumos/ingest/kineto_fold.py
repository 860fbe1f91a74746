"""Fold events scanned by :mod:`lumos.ingest.kineto_scan` into an :class:`Accumulator`.

Gives the accumulator exactly what :meth:`Accumulator.add` gives it for the same events
decoded the usual way (tests compare the two on real traces of every kind, hand-written corner
cases and random traces), with the work done per *unique* string and in numpy rather than per
event in Python: names and categories are interned by the scan (:mod:`lumos._intern`) and
decoded once each, and only the events that carry metadata (collectives, shapes of the ops the
cost model reads, CUDA syncs), thread names and forward/backward flows are decoded one by one.

Everything that can fail is done before the accumulator changes: :func:`fold_scanned` raises
:class:`Unsupported` with the accumulator untouched, and the caller decodes the chunk the usual
way instead.
"""

from __future__ import annotations

import mmap
from typing import Any

import msgspec
import numpy as np

from lumos._intern import Table, grow_table, new_table
from lumos.ingest.kineto_columns import ID_COLUMNS, Accumulator, meta_name, proc_int
from lumos.ingest.kineto_scan import FLOAT_FIELDS, INT_FIELDS
from lumos.ingest.kineto_schema import (
    GPU_CATEGORIES,
    Category,
    EventMeta,
    RawArgs,
    RawEvent,
    category_of,
)

__all__ = ["ScanState", "Unsupported", "fold_scanned"]

_C = {name: i for i, name in enumerate(INT_FIELDS)}
_NF = len(FLOAT_FIELDS)
_X, _M = ord("X"), ord("M")
_FLOW_PH = np.array([ord("s"), ord("f"), ord("t")], dtype=np.int64)
_LAUNCH_FLOWS = ("ac2g", "async", "async_cpu_to_gpu")
_SYNC = int(Category.CUDA_SYNC)
_CPU_OP = int(Category.CPU_OP)
_GPU = np.array(sorted(int(c) for c in GPU_CATEGORIES), dtype=np.int8)
_I32_MIN, _I32_END = -(2**31), 2**31
#: The scanned fields of a ``[memory]`` event, in ``MEMORY_COLUMNS`` order.
_MEMORY_FIELDS = (
    "device_type", "device_id", "addr", "mem_bytes", "total_allocated", "total_reserved",
)  # fmt: skip
_FIRST_ROWS = 1 << 12  # rows of each string table at first (grown as the chunks need)


#: The payload being scanned: bytes, or a memory-mapped file.
Payload = bytes | mmap.mmap


class Unsupported(Exception):
    """The chunk holds something the fast fold does not read exactly (decode it the usual way)."""


def _meta_args() -> type[msgspec.Struct]:
    """The metadata fields of ``args`` (:class:`EventMeta`'s, as :class:`RawArgs` spells them),
    decoded to Python values at once: the scan has checked the JSON, so there is nothing to
    keep raw."""
    raw = {f.name: f for f in msgspec.structs.fields(RawArgs)}
    fields: list[tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(EventMeta):
        if f.name == "stream":  # a column of the scan
            continue
        r = raw[f.name]
        is_raw = r.type is msgspec.Raw
        fields.append((f.name, Any if is_raw else r.type, None if is_raw else r.default))
    rename = {name: raw[name].encode_name for name, _, _ in fields}
    return msgspec.defstruct("MetaArgs", fields, rename=rename, gc=False)


_MetaArgs = _meta_args()
_META = msgspec.json.Decoder(_MetaArgs)
_EVENT = msgspec.json.Decoder(RawEvent)
_NO_ARGS = _MetaArgs()


class ScanState:
    """What the scan and the fold keep between chunks: the scan's string tables
    (:func:`lumos._intern.new_table`, filled by :func:`lumos._intern.intern_span`) and their row
    counts, and per string what lumos made of it (its text, interned id)."""

    def __init__(self) -> None:
        self.tables: list[Table] = [new_table(_FIRST_ROWS) for _ in range(3)]  # cats, names, dims
        self.counts = np.zeros(3, dtype=np.int64)
        self.cat_strs: list[str] = []
        self.name_strs: list[str] = []
        # per category row: its code, and whether its flows are fwd/bwd or launch flows;
        # per name row: whether its events carry metadata (extended as strings are decoded)
        self.cat_code = np.zeros(0, dtype=np.int8)
        self.cat_fwdbwd = np.zeros(0, dtype=bool)
        self.cat_launch = np.zeros(0, dtype=bool)
        self.name_meta = np.zeros(0, dtype=bool)
        self.name_ids = np.zeros(0, dtype=np.int32)  # name row -> Interner id, for names mapped
        self.dims_ids = np.zeros(0, dtype=np.int32)  # dims row -> Interner id, -1: not yet

    def reserve(self, events: int) -> None:
        """Room in every table for the strings of ``events`` more events."""
        for k, table in enumerate(self.tables):
            used, rows = int(self.counts[k]), table[1].shape[0]
            if used + events > rows:
                self.tables[k] = grow_table(table, used, max(2 * rows, used + events))

    def arrays(self) -> list[np.ndarray]:
        """The scan's table arguments: the counts, then each table's three arrays."""
        return [self.counts, *(a for table in self.tables for a in table)]

    def span(self, k: int, row: int) -> tuple[int, int]:
        """(offset, length) of string ``row`` of table ``k`` (0 cats, 1 names, 2 dims)."""
        off, n = self.tables[k][1][row]
        return int(off), int(n)

    def decode_new(self, payload: Payload) -> None:
        """Decode the strings the scan added to the category and name tables, and classify
        them."""
        for k, strs in ((0, self.cat_strs), (1, self.name_strs)):
            for row in range(len(strs), int(self.counts[k])):
                a, n = self.span(k, row)
                strs.append(_decode_string(payload[a : a + n]))
        new_cats = self.cat_strs[self.cat_code.size :]
        lower = [c.lower() for c in new_cats]
        self.cat_code = _extend(self.cat_code, [int(category_of(c, False)) for c in new_cats])
        self.cat_fwdbwd = _extend(self.cat_fwdbwd, [c == "fwdbwd" for c in lower])
        self.cat_launch = _extend(self.cat_launch, [c in _LAUNCH_FLOWS for c in lower])
        self.name_meta = _extend(
            self.name_meta, [meta_name(n) for n in self.name_strs[self.name_meta.size :]]
        )


def _extend(column: np.ndarray, values: list[Any]) -> np.ndarray:
    return np.concatenate([column, np.asarray(values, dtype=column.dtype)]) if values else column


def _decode_string(raw: bytes) -> str:
    try:
        if b"\\" in raw:
            return str(msgspec.json.decode(b'"' + raw + b'"'))
        return raw.decode("utf-8")
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise Unsupported("a string that is not valid UTF-8") from None


def _column(rows: np.ndarray, name: str) -> np.ndarray:
    return rows[:, _C[name]]


def fold_scanned(
    acc: Accumulator, state: ScanState, payload: Payload, ints: np.ndarray, floats: np.ndarray,
    n: int,
) -> None:  # fmt: skip
    """Fold ``n`` scanned rows (``ints``/``floats`` as :data:`~lumos.ingest.kineto_scan.scan`
    wrote them) into ``acc``; raises :class:`Unsupported` with ``acc`` unchanged."""
    rows = ints[: n * len(INT_FIELDS)].reshape(n, len(INT_FIELDS))
    times = floats[: n * _NF].reshape(n, _NF)
    state.decode_new(payload)
    ph = _column(rows, "ph")
    cat_of = _column(rows, "cat_id")
    # events decoded one by one: thread names and forward/backward flows
    flow = np.isin(ph, _FLOW_PH)
    one_by_one = (ph == _M) | (flow & state.cat_fwdbwd[cat_of])
    decoded = [_decode_event(payload, rows[i]) for i in np.flatnonzero(one_by_one).tolist()]
    n_launch = int((flow & state.cat_launch[cat_of]).sum())
    x = np.flatnonzero(ph == _X)
    xrows = rows[x]
    name_of = _column(xrows, "name_id")
    streams = _column(xrows, "stream")
    xcat = state.cat_code[cat_of[x]]
    xcat[(xcat == int(Category.OTHER_CPU)) & (streams >= 0)] = int(Category.OTHER_GPU)
    wanted = np.flatnonzero((xcat == _SYNC) | state.name_meta[name_of])
    metas = [_decode_meta(payload, xrows[i], int(streams[i])) for i in wanted.tolist()]
    ts, dur = _times(payload, xrows, times[x])
    mem = np.flatnonzero(_column(rows, "is_memory") == 1)
    if mem.size:
        mrows = rows[mem]
        if ((_column(mrows, "pid_off") >= 0) | (_column(mrows, "tid_off") >= 0)).any():
            raise Unsupported("a memory event whose pid or tid is a string")
        mem_ts = _times(payload, mrows, times[mem])[0]
    # nothing below fails: commit
    acc.num_raw += n
    _count_categories(acc, state.cat_strs, cat_of, ph)
    for e in decoded:
        acc.add_other(e)
    acc.n_launch_flows += n_launch
    if mem.size:
        keys, inv = _unique_pairs(_column(mrows, "pid"), _column(mrows, "tid"))
        local = np.asarray([acc.mem_thread(k) for k in keys], dtype=np.int64)
        acc.add_memory(mem_ts, local[inv], [_column(mrows, f).copy() for f in _MEMORY_FIELDS])
    if not x.size:
        return
    known = state.name_ids.size
    if known < len(state.name_strs):
        new = acc.interner.ids(state.name_strs[known:])
        state.name_ids = np.concatenate([state.name_ids, new])
    acc.note_names()
    cols = acc.cols
    cols["cat"].append(xcat)
    cols["proc"].append(_processors(acc, payload, xrows, xcat, streams))
    cols["name_idx"].append(state.name_ids[name_of])
    cols["ts"].append(ts)
    cols["dur"].append(dur)
    cols["dims"].append(_dims(acc, state, payload, _column(xrows, "dims_id"), xcat))
    ext = _column(xrows, "external_id")
    cols["external_id"].append(np.where(ext >= 0, ext, _column(xrows, "external_id_legacy")))
    for col, field in (*ID_COLUMNS, ("stream", "stream")):
        cols[col].append(_column(xrows, field).copy())
    for i, meta in zip(wanted.tolist(), metas, strict=True):
        acc.meta[acc.num_x + i] = meta
    acc.num_x += int(x.size)


def _decode_event(payload: Payload, row: np.ndarray) -> RawEvent:
    try:
        return _EVENT.decode(payload[int(row[_C["start"]]) : int(row[_C["end"]])])
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise Unsupported("an event the typed decoder refuses") from None


def _decode_meta(payload: Payload, row: np.ndarray, stream: int) -> EventMeta:
    a, n = int(row[_C["args_off"]]), int(row[_C["args_len"]])
    try:
        m = _META.decode(payload[a : a + n]) if a >= 0 else _NO_ARGS
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise Unsupported("metadata the typed decoder refuses") from None
    return EventMeta(**msgspec.structs.asdict(m), stream=stream)


def _times(payload: Payload, xrows: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ts`` and ``dur``; numbers with more digits than a double holds are rounded by Python's
    float (correctly rounded, as the typed decoder rounds them)."""
    out = times.copy()
    inexact = _column(xrows, "inexact")
    for k, field in enumerate(FLOAT_FIELDS):
        for i in np.flatnonzero(inexact & (1 << k)).tolist():
            a, n = int(xrows[i, _C[f"{field}_off"]]), int(xrows[i, _C[f"{field}_len"]])
            out[i, k] = float(payload[a : a + n])
    return out[:, 0].copy(), out[:, 1].copy()


def _dims(
    acc: Accumulator, state: ScanState, payload: Payload, dims_of: np.ndarray, xcat: np.ndarray
) -> np.ndarray:
    """Interned "Input Dims" text of each CPU op (``null`` for other events and when absent),
    interned in the order the CPU ops first show them."""
    null = acc.dims.id(b"null")  # type: ignore[arg-type]
    out = np.full(dims_of.size, null, dtype=np.int32)
    ops = np.flatnonzero((xcat == _CPU_OP) & (dims_of >= 0))
    if not ops.size:
        return out
    n_dims = int(state.counts[2])
    if state.dims_ids.size < n_dims:
        grow = np.full(n_dims - state.dims_ids.size, -1, dtype=np.int32)
        state.dims_ids = np.concatenate([state.dims_ids, grow])
    d = dims_of[ops]
    unmapped = d[state.dims_ids[d] < 0]
    if unmapped.size:
        uniq, first = np.unique(unmapped, return_index=True)
        for k in uniq[np.argsort(first, kind="stable")].tolist():
            a, n = state.span(2, k)
            state.dims_ids[k] = acc.dims.id(payload[a : a + n])  # type: ignore[arg-type]
    out[ops] = state.dims_ids[d]
    return out


def _count_categories(
    acc: Accumulator, cats: list[str], cat_of: np.ndarray, ph: np.ndarray
) -> None:
    pairs, counts = np.unique(cat_of.astype(np.int64) * 256 + ph, return_counts=True)
    for pair, k in zip(pairs.tolist(), counts.tolist(), strict=True):
        cat, code = cats[pair // 256], pair % 256
        key = cat or f"<ph {chr(code) if code else ''}>"
        acc.cat_counts[key] = acc.cat_counts.get(key, 0) + k


def _processors(
    acc: Accumulator, payload: Payload, xrows: np.ndarray, xcat: np.ndarray, streams: np.ndarray
) -> np.ndarray:
    """Processor ids as :meth:`Accumulator.add` gives them, per unique key (events whose pid or
    tid is a string, one by one)."""
    procs = np.empty(xrows.shape[0], dtype=np.int32)
    gpu = np.isin(xcat, _GPU)
    pid, tid = _column(xrows, "pid"), _column(xrows, "tid")
    named = (_column(xrows, "pid_off") >= 0) | (_column(xrows, "tid_off") >= 0)
    for i in np.flatnonzero(named).tolist():
        procs[i] = _named_processor(acc, payload, xrows[i], bool(gpu[i]), int(xcat[i]))
    gpu &= ~named
    cpu = np.flatnonzero(~gpu & ~named)
    if cpu.size:
        keys, inv = _unique_pairs(pid[cpu], tid[cpu])
        ids = [acc.thread_id(k) for k in keys]
        procs[cpu] = np.asarray(ids, dtype=np.int32)[inv]
    g = np.flatnonzero(gpu)
    if g.size:
        device = _column(xrows, "device")[g]
        p, t, s = pid[g], tid[g], streams[g]
        dev = np.where(device >= 0, device, np.where((p >= _I32_MIN) & (p < _I32_END), p, -1))
        own = (s >= 0) | (xcat[g] == _SYNC)
        st = np.where(own, s, np.where((t >= _I32_MIN) & (t < _I32_END), t, -1))
        keys, inv = _unique_pairs(dev, st)
        index = acc.proc_index
        ids = [index.setdefault((1, d, q), len(index)) for d, q in keys]
        procs[g] = np.asarray(ids, dtype=np.int32)[inv]
    return procs


def _unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The distinct ``(a[i], b[i])`` pairs and each row's index into them (three 1-d sorts,
    much faster than ``np.unique(axis=0)``)."""
    ua, ia = np.unique(a, return_inverse=True)
    ub, ib = np.unique(b, return_inverse=True)
    uc, ic = np.unique(ia.astype(np.int64) * ub.size + ib, return_inverse=True)
    pairs = list(zip(ua[uc // ub.size].tolist(), ub[uc % ub.size].tolist(), strict=True))
    return pairs, ic.ravel()


def _named_processor(
    acc: Accumulator, payload: Payload, row: np.ndarray, gpu: bool, cat: int
) -> int:
    pid, tid = (
        str(msgspec.json.decode(payload[a : a + n])) if a >= 0 else int(v)
        for v, a, n in (
            (row[_C["pid"]], row[_C["pid_off"]], row[_C["pid_len"]]),
            (row[_C["tid"]], row[_C["tid_off"]], row[_C["tid_len"]]),
        )
    )
    if not gpu:
        return acc.thread_id((pid, tid))
    device, stream = int(row[_C["device"]]), int(row[_C["stream"]])
    dev = device if device >= 0 else proc_int(pid)
    st = stream if stream >= 0 or cat == _SYNC else proc_int(tid)
    key = (1, -1 if dev is None else dev, -1 if st is None else st)
    return acc.proc_index.setdefault(key, len(acc.proc_index))
