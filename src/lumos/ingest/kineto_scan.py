"""Scan Kineto events straight from JSON bytes into fixed-width rows, in compiled code.

Big traces spend most of their ingest time turning decoded events into columns one Python
attribute at a time. :data:`scan` walks the ``traceEvents`` array itself and writes, per event,
the fields lumos reads into two row-major arrays: integers (:data:`INT_FIELDS`) and floats
(``ts``, ``dur``). Strings are interned as they are met (:mod:`lumos._spans`: hash tables over
byte spans of the payload, compared byte for byte): an event's
``cat``, and a duration event's ``name`` and ``Input Dims`` text, become ids numbered in the
order they first appear, and the caller decodes each distinct string once.

The scan accepts only what it can read exactly as the typed decoder
(:class:`~lumos.ingest.kineto_schema.RawEvent`) would: an event with anything else (a hex
``stream``, a float where an integer belongs, an escaped key or ``pid``, a ``ph`` of more than
one letter, an ``args`` that is not an object) marks its chunk *unsupported*, and the caller
decodes that chunk the usual way. Invalid JSON marks it *malformed*: the caller then lets the
full decoder report the precise error.
"""

from __future__ import annotations

import numba
import numpy as np

from lumos._jit import INT64, Kernel, array, borrow
from lumos._spans import intern_span
from lumos.ingest.json_scan import as_float, as_int, skip_value, string_end, whitespace_end

__all__ = [
    "ARG_FIELDS",
    "FLOAT_FIELDS",
    "INT_FIELDS",
    "MALFORMED",
    "OK",
    "UNSUPPORTED",
    "scan",
]

#: Integer fields of a scanned row, in order: byte spans (``*_off``/``*_len``, or ``start``/
#: ``end``) in the payload, interned string ids, ``ph``'s letter, ``inexact`` (bit 0: ``ts``,
#: bit 1: ``dur`` has more digits than a double holds), then the integer ``args``; ``-1`` when
#: absent.
INT_FIELDS = (
    "start", "end", "ph", "cat_id", "name_id", "dims_id", "pid", "tid",
    "args_off", "args_len", "inexact", "ts_off", "ts_len", "dur_off", "dur_len",
    "pid_off", "pid_len", "tid_off", "tid_len",
    "correlation", "external_id", "external_id_legacy", "rf_id", "ev_idx", "seq_id",
    "fwd_thread_id", "device", "stream", "num_bytes",
    "wait_on_stream", "wait_on_event_record_corr_id", "wait_on_event_id",
)  # fmt: skip
#: Float fields of a scanned row.
FLOAT_FIELDS = ("ts", "dur")
#: The integer ``args`` keys, as the trace spells them, in :data:`INT_FIELDS` order from
#: ``correlation`` on.
ARG_FIELDS = (
    "correlation", "External id", "external id", "Record function id", "Ev Idx",
    "Sequence number", "Fwd thread id", "device", "stream", "bytes",
    "wait_on_stream", "wait_on_cuda_event_record_corr_id", "wait_on_cuda_event_id",
)  # fmt: skip
NI = len(INT_FIELDS)
_F = {name: i for i, name in enumerate(INT_FIELDS)}
_F_START, _F_END, _F_PH = _F["start"], _F["end"], _F["ph"]
_F_CAT, _F_NAME, _F_DIMS = _F["cat_id"], _F["name_id"], _F["dims_id"]
_F_PID, _F_ARGS_OFF, _F_ARGS_LEN = _F["pid"], _F["args_off"], _F["args_len"]
_F_INEXACT, _F_TS_OFF, _F_PID_OFF = _F["inexact"], _F["ts_off"], _F["pid_off"]
_F_ARG0, _F_DEVICE = _F["correlation"], _F["device"]

OK, UNSUPPORTED, MALFORMED = 0, 1, 2
_X = ord("X")

# keys: the top level's, then the integer args, then the other args read
_TOP = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "bp")
_KEYS = (*_TOP, *ARG_FIELDS, "cuda_sync_kind", "Input Dims")
_K_ARGS0 = len(_TOP)
_K_SYNC_KIND = len(_TOP) + len(ARG_FIELDS)
_K_DIMS = _K_SYNC_KIND + 1
_KEY_BYTES = np.frombuffer(b"".join(k.encode() for k in _KEYS), dtype=np.uint8).copy()
_KEY_OFF = np.zeros(len(_KEYS) + 1, dtype=np.int64)
_KEY_OFF[1:] = np.cumsum([len(k) for k in _KEYS])
#: The one key of each (length, first byte), or -1: keys are told apart by both (checked here).
_KEY_AT = np.full(64 * 256, -1, dtype=np.int64)
for _k, _name in enumerate(_KEYS):
    _slot = len(_name) * 256 + _name.encode()[0]
    assert _KEY_AT[_slot] == -1, _name
    _KEY_AT[_slot] = _k


@numba.njit(cache=True, nogil=True)
def _key(buf: np.ndarray, s: int, e: int) -> int:  # pragma: no cover - compiled
    """Index of the key ``buf[s:e]`` in ``_KEYS``, -1 for any other key."""
    n = e - s
    if n == 0 or n >= 64:
        return -1
    k = _KEY_AT[n * 256 + buf[s]]
    if k < 0:
        return -1
    a = _KEY_OFF[k]
    for j in range(1, n):
        if buf[s + j] != _KEY_BYTES[a + j]:
            return -1
    return k


@numba.njit(cache=True, nogil=True)
def _value_start(buf: np.ndarray, i: int, end: int) -> tuple[int, int]:  # pragma: no cover
    """At a key's opening quote: (key index, index of its value); key index -2 for an escaped
    key, value index -1 when malformed."""
    j, escaped = string_end(buf, i, end)
    if j < 0:
        return -1, -1
    k = -2 if escaped else _key(buf, i + 1, j - 1)
    j = whitespace_end(buf, j, end)
    if j >= end or buf[j] != 58:
        return -1, -1
    j = whitespace_end(buf, j + 1, end)
    if j >= end:
        return -1, -1
    return k, j


@numba.njit(cache=True, nogil=True)
def _args(
    buf: np.ndarray, i: int, end: int, ints: np.ndarray, base: int
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """Read an ``args`` object at ``i``: (index after it, span of "Input Dims" or -1 -1); the
    index is -1 when malformed, -2 when unsupported."""
    dims_s = dims_e = -1
    if buf[i] != 123:
        return -2, dims_s, dims_e
    ints[base + _F_ARGS_OFF] = i
    start = i
    i = whitespace_end(buf, i + 1, end)
    if i < end and buf[i] == 125:
        ints[base + _F_ARGS_LEN] = i + 1 - start
        return i + 1, dims_s, dims_e
    while i < end:
        if buf[i] != 34:
            return -1, dims_s, dims_e
        k, j = _value_start(buf, i, end)
        if j < 0:
            return -1, dims_s, dims_e
        if k == -2:
            return -2, dims_s, dims_e
        if _K_ARGS0 <= k < _K_SYNC_KIND:
            i, v = as_int(buf, j, end)
            field = k - _K_ARGS0 + _F_ARG0
            if i < 0 or (field == _F_DEVICE and not (-(2**31) <= v < 2**31)):
                return -2, dims_s, dims_e
            ints[base + field] = v
        elif k == _K_SYNC_KIND:
            if buf[j] != 34:
                return -2, dims_s, dims_e
            i, _ = string_end(buf, j, end)
        else:
            i = skip_value(buf, j, end)
            if k == _K_DIMS:
                dims_s, dims_e = j, i
        if i < 0:
            return -1, dims_s, dims_e
        i = whitespace_end(buf, i, end)
        if i >= end:
            return -1, dims_s, dims_e
        if buf[i] == 125:
            ints[base + _F_ARGS_LEN] = i + 1 - start
            return i + 1, dims_s, dims_e
        if buf[i] != 44:
            return -1, dims_s, dims_e
        i = whitespace_end(buf, i + 1, end)
    return -1, dims_s, dims_e


@numba.njit(cache=True, nogil=True)
def _event(
    buf: np.ndarray,
    i: int,
    end: int,
    ints: np.ndarray,
    floats: np.ndarray,
    row: int,
    counts: np.ndarray,
    cats_tab: np.ndarray,
    cats_rep: np.ndarray,
    cats_hash: np.ndarray,
    names_tab: np.ndarray,
    names_rep: np.ndarray,
    names_hash: np.ndarray,
    dims_tab: np.ndarray,
    dims_rep: np.ndarray,
    dims_hash: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Read the event object at ``i`` into ``row``: index after it; -1 malformed, -2 unsupported.
    Its strings are interned only once the whole event has been read."""
    base = row * NI
    for f in range(NI):
        ints[base + f] = -1
    ints[base + _F_PH] = 0
    ints[base + _F_PID] = 0
    ints[base + _F_PID + 1] = 0
    ints[base + _F_INEXACT] = 0
    floats[2 * row] = 0.0
    floats[2 * row + 1] = 0.0
    ints[base + _F_START] = i
    cat_s = cat_e = name_s = name_e = dims_s = dims_e = 0
    i = whitespace_end(buf, i + 1, end)
    closed = i < end and buf[i] == 125
    while i < end and not closed:
        if buf[i] != 34:
            return -1
        k, j = _value_start(buf, i, end)
        if j < 0:
            return -1
        c = buf[j]
        if k == -2:
            return -2
        if k == 0:  # ph: one letter
            if c != 34:
                return -2
            i, esc = string_end(buf, j, end)
            if i != j + 3 or esc:
                return -2 if i >= 0 else -1
            ints[base + _F_PH] = buf[j + 1]
        elif k == 1 or k == 2 or k == 9:  # cat, name, bp: strings
            if c != 34:
                return -2
            i, _ = string_end(buf, j, end)
            if k == 1:
                cat_s, cat_e = j + 1, i - 1
            elif k == 2:
                name_s, name_e = j + 1, i - 1
        elif k == 3 or k == 4:  # pid, tid: an integer, or a string kept as its span
            field = _F_PID + k - 3
            if c == 34:
                i, esc = string_end(buf, j, end)
                if esc:
                    return -2
                ints[base + _F_PID_OFF + 2 * (k - 3)] = j
                ints[base + _F_PID_OFF + 2 * (k - 3) + 1] = i - j
            else:
                i, v = as_int(buf, j, end)
                if i < 0:
                    return -2
                ints[base + field] = v
        elif k == 5 or k == 6:  # ts, dur
            if not (c == 45 or (48 <= c <= 57)):
                return -2
            i, x, exact = as_float(buf, j, end)
            if i < 0:
                return -2
            floats[2 * row + k - 5] = x
            ints[base + _F_TS_OFF + 2 * (k - 5)] = j
            ints[base + _F_TS_OFF + 2 * (k - 5) + 1] = i - j
            if not exact:
                ints[base + _F_INEXACT] |= 1 << (k - 5)
        elif k == 7:
            i, dims_s, dims_e = _args(buf, j, end, ints, base)
            if i == -2:
                return -2
        elif k == 8:  # id: an integer, a string or null
            if c == 34 or c == 110:
                i = skip_value(buf, j, end)
            else:
                i, _ = as_int(buf, j, end)
                if i < 0:
                    return -2
        else:
            i = skip_value(buf, j, end)
        if i < 0:
            return -1
        i = whitespace_end(buf, i, end)
        if i >= end:
            return -1
        if buf[i] == 125:
            closed = True
        elif buf[i] != 44:
            return -1
        else:
            i = whitespace_end(buf, i + 1, end)
    if not closed:
        return -1
    ints[base + _F_END] = i + 1
    # a full table (the caller reserves room, so never) sends the chunk the usual way
    r, counts[0] = intern_span(buf, cat_s, cat_e - cat_s, cats_tab, cats_rep, cats_hash, counts[0])
    if r < 0:
        return -2
    ints[base + _F_CAT] = r
    if ints[base + _F_PH] == _X:
        r, counts[1] = intern_span(
            buf, name_s, name_e - name_s, names_tab, names_rep, names_hash, counts[1]
        )
        if r < 0:
            return -2
        ints[base + _F_NAME] = r
        if dims_e > dims_s:
            r, counts[2] = intern_span(
                buf, dims_s, dims_e - dims_s, dims_tab, dims_rep, dims_hash, counts[2]
            )
            if r < 0:
                return -2
            ints[base + _F_DIMS] = r
    return i + 1


@numba.njit(cache=True, nogil=True)
def _scan_chunk(
    buf: np.ndarray,
    pos: int,
    max_events: int,
    ints: np.ndarray,
    floats: np.ndarray,
    counts: np.ndarray,
    cats_tab: np.ndarray,
    cats_rep: np.ndarray,
    cats_hash: np.ndarray,
    names_tab: np.ndarray,
    names_rep: np.ndarray,
    names_hash: np.ndarray,
    dims_tab: np.ndarray,
    dims_rep: np.ndarray,
    dims_hash: np.ndarray,
) -> tuple[int, int, int, int]:  # pragma: no cover - compiled
    """Read up to ``max_events`` elements of ``traceEvents`` from ``pos`` (an element's first
    byte, or the closing ``]``): (events read, index of the separator after the last one, status,
    done). ``done`` 1 when that separator is the array's ``]``."""
    # helpers get the arrays without reference counts (see lumos._jit.borrow): the counts'
    # atomic updates on every helper call took half the scan's time
    buf, ints, floats, counts = borrow(buf), borrow(ints), borrow(floats), borrow(counts)
    cats_tab, cats_rep, cats_hash = borrow(cats_tab), borrow(cats_rep), borrow(cats_hash)
    names_tab, names_rep, names_hash = borrow(names_tab), borrow(names_rep), borrow(names_hash)
    dims_tab, dims_rep, dims_hash = borrow(dims_tab), borrow(dims_rep), borrow(dims_hash)
    end = len(buf)
    status = OK
    n = 0
    i = whitespace_end(buf, pos, end)
    if i < end and buf[i] == 93:
        return 0, i, status, 1
    while i < end:
        j = -2
        if buf[i] == 123:
            j = _event(buf, i, end, ints, floats, n, counts, cats_tab, cats_rep, cats_hash,
                       names_tab, names_rep, names_hash, dims_tab, dims_rep, dims_hash)  # fmt: skip
        if j == -2:  # read the usual way; here only find where it ends
            status = UNSUPPORTED
            j = skip_value(buf, i, end)
        if j < 0:
            return n, i, MALFORMED, 0
        n += 1
        i = whitespace_end(buf, j, end)
        if i >= end:
            break
        if buf[i] == 93:
            return n, i, status, 1
        if buf[i] != 44:
            break
        if n == max_events:
            return n, i, status, 0
        i = whitespace_end(buf, i + 1, end)
    return n, i, MALFORMED, 0


_TABLE = (array(np.int32, writes=True), array(np.int64, writes=True, ndim=2),
          array(np.uint64, writes=True))  # fmt: skip
#: ``scan(buf, pos, max_events, ints, floats, counts, *cats, *names, *dims, work=...)``
#: (compiled only: a Python loop over bytes is slow, and it runs only on payloads big enough to
#: be worth compiling for). ``counts`` holds the three tables' row counts; each table
#: (:func:`lumos._spans.new_table`) has room for ``max_events`` more rows.
scan = Kernel(
    _scan_chunk,
    (array(np.uint8), INT64, INT64, array(np.int64, writes=True),
     array(np.float64, writes=True), array(np.int64, writes=True), *_TABLE, *_TABLE, *_TABLE),
    max_interpreted=0,
)  # fmt: skip
