# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""Scan Kineto events straight from JSON bytes into fixed-width rows, in compiled code.

Big traces spend most of their ingest time turning decoded events into columns one Python
attribute at a time. :func:`scan` walks the ``traceEvents`` array itself and writes, per event,
the fields lumos reads into two row-major arrays: integers (:data:`INT_FIELDS`) and floats
(``ts``, ``dur``). Strings are interned as they are met (:mod:`lumos._intern`: hash tables over
byte spans of the payload, compared byte for byte): an event's ``cat``, and a duration event's
``name`` and ``Input Dims`` text, become ids numbered in the order they first appear, and the
caller decodes each distinct string once.

The scan accepts only what it can read exactly as the typed decoder
(:class:`~lumos.ingest.kineto_schema.RawEvent`) would: an event with anything else (a hex
``stream``, a float where an integer belongs, an escaped key or ``pid``, a ``ph`` of more than
one letter, an ``args`` that is not an object) marks its chunk *unsupported*, and the caller
decodes that chunk the usual way. Invalid JSON marks it *malformed*: the caller then lets the
full decoder report the precise error.

Compiled (Cython, pure-Python mode: ``setup.py``); it calls :mod:`lumos.ingest.json_scan` and
:func:`lumos._intern.intern_span` in C (``kineto_scan.pxd`` cimports them). Run as Python, the
same source gives the same rows, slowly.
"""

from __future__ import annotations

import numpy as np

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

if not cython.compiled:
    from lumos._intern import intern_span
    from lumos.ingest.json_scan import (
        after_member,
        as_float,
        as_int,
        member,
        skip_value,
        string_end,
        whitespace_end,
    )

__all__ = [
    "ARG_FIELDS",
    "FLOAT_FIELDS",
    "INT_FIELDS",
    "MALFORMED",
    "NI",
    "OK",
    "UNSUPPORTED",
    "scan",
]

#: Integer fields of a scanned row, in order: byte spans (``*_off``/``*_len``, or ``start``/
#: ``end``) in the payload, interned string ids, ``ph``'s letter, ``inexact`` (bit 0: ``ts``,
#: bit 1: ``dur`` has more digits than a double holds), then the integer ``args``, then ``is_memory`` (1: a ``[memory]`` instant event); ``-1`` when
#: absent.
INT_FIELDS = (
    "start", "end", "ph", "cat_id", "name_id", "dims_id", "pid", "tid",
    "args_off", "args_len", "inexact", "ts_off", "ts_len", "dur_off", "dur_len",
    "pid_off", "pid_len", "tid_off", "tid_len",
    "correlation", "external_id", "external_id_legacy", "rf_id", "ev_idx", "seq_id",
    "fwd_thread_id", "device", "stream", "num_bytes",
    "wait_on_stream", "wait_on_event_record_corr_id", "wait_on_event_id",
    "device_type", "device_id", "addr", "mem_bytes", "total_allocated", "total_reserved",
    "is_memory",
)  # fmt: skip
#: Float fields of a scanned row.
FLOAT_FIELDS = ("ts", "dur")
#: The integer ``args`` keys, as the trace spells them, in :data:`INT_FIELDS` order from
#: ``correlation`` on.
ARG_FIELDS = (
    "correlation", "External id", "external id", "Record function id", "Ev Idx",
    "Sequence number", "Fwd thread id", "device", "stream", "bytes",
    "wait_on_stream", "wait_on_cuda_event_record_corr_id", "wait_on_cuda_event_id",
    "Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved",
)  # fmt: skip
#: Integer fields per scanned row.
NI = len(INT_FIELDS)
_F = {name: i for i, name in enumerate(INT_FIELDS)}
#: The status of a scanned chunk: every event read, some event unsupported, invalid JSON.
OK, UNSUPPORTED, MALFORMED = 0, 1, 2

# the same as C globals for the loop (the names above are what Python code reads); declared,
# not annotated: a module with a .pxd (see kineto_scan.pxd) ignores annotations of its globals
_NI = cython.declare(cython.Py_ssize_t, NI)
_F_START = cython.declare(cython.Py_ssize_t, _F["start"])
_F_END = cython.declare(cython.Py_ssize_t, _F["end"])
_F_PH = cython.declare(cython.Py_ssize_t, _F["ph"])
_F_CAT = cython.declare(cython.Py_ssize_t, _F["cat_id"])
_F_NAME = cython.declare(cython.Py_ssize_t, _F["name_id"])
_F_DIMS = cython.declare(cython.Py_ssize_t, _F["dims_id"])
_F_PID = cython.declare(cython.Py_ssize_t, _F["pid"])
_F_ARGS_OFF = cython.declare(cython.Py_ssize_t, _F["args_off"])
_F_ARGS_LEN = cython.declare(cython.Py_ssize_t, _F["args_len"])
_F_INEXACT = cython.declare(cython.Py_ssize_t, _F["inexact"])
_F_TS_OFF = cython.declare(cython.Py_ssize_t, _F["ts_off"])
_F_PID_OFF = cython.declare(cython.Py_ssize_t, _F["pid_off"])
_F_ARG0 = cython.declare(cython.Py_ssize_t, _F["correlation"])
_F_DEVICE = cython.declare(cython.Py_ssize_t, _F["device"])
_F_IS_MEMORY = cython.declare(cython.Py_ssize_t, _F["is_memory"])
_OK = cython.declare(cython.int, OK)
_UNSUPPORTED = cython.declare(cython.int, UNSUPPORTED)
_MALFORMED = cython.declare(cython.int, MALFORMED)
_X = cython.declare(cython.longlong, ord("X"))
_I = cython.declare(cython.longlong, ord("i"))
_I_OLD = cython.declare(cython.longlong, ord("I"))
_I32_MIN = cython.declare(cython.longlong, -(2**31))
_I32_END = cython.declare(cython.longlong, 2**31)

# keys: the top level's, then the integer args, then the other args read
_TOP = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "bp")
_KEYS = (*_TOP, *ARG_FIELDS, "cuda_sync_kind", "Input Dims")
_K_ARGS0 = cython.declare(cython.Py_ssize_t, len(_TOP))
_K_SYNC_KIND = cython.declare(cython.Py_ssize_t, len(_TOP) + len(ARG_FIELDS))
_K_DIMS = cython.declare(cython.Py_ssize_t, len(_TOP) + len(ARG_FIELDS) + 1)


def _key_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The keys' bytes one after another, where each starts, and the one key of each (length,
    first byte), or -1: keys are told apart by both (checked here)."""
    key_bytes = np.frombuffer(b"".join(k.encode() for k in _KEYS), dtype=np.uint8).copy()
    key_off = np.zeros(len(_KEYS) + 1, dtype=np.int64)
    key_off[1:] = np.cumsum([len(k) for k in _KEYS])
    key_at = np.full(64 * 256, -1, dtype=np.int64)
    for k, name in enumerate(_KEYS):
        slot = len(name) * 256 + name.encode()[0]
        assert key_at[slot] == -1, name
        key_at[slot] = k
    return key_bytes, key_off, key_at


_KEY_TABLES = _key_tables()
_MEMORY_NAME = cython.declare(
    cython.const[cython.uchar][::1], np.frombuffer(b"[memory]", dtype=np.uint8).copy()
)
_KEY_BYTES = cython.declare(cython.const[cython.uchar][::1], _KEY_TABLES[0])
_KEY_OFF = cython.declare(cython.const[cython.longlong][::1], _KEY_TABLES[1])
_KEY_AT = cython.declare(cython.const[cython.longlong][::1], _KEY_TABLES[2])


@cython.cfunc
@cython.exceptval(check=False)
def _key(
    buf: cython.const[cython.uchar][::1], s: cython.Py_ssize_t, e: cython.Py_ssize_t
) -> cython.Py_ssize_t:
    """Index of the key ``buf[s:e]`` in ``_KEYS``, -1 for any other key."""
    n: cython.Py_ssize_t = e - s
    k: cython.Py_ssize_t
    a: cython.Py_ssize_t
    j: cython.Py_ssize_t
    if n == 0 or n >= 64:
        return -1
    k = cython.cast(cython.Py_ssize_t, _KEY_AT[n * 256 + cython.cast(cython.Py_ssize_t, buf[s])])
    if k < 0:
        return -1
    a = cython.cast(cython.Py_ssize_t, _KEY_OFF[k])
    for j in range(1, n):
        if buf[s + j] != _KEY_BYTES[a + j]:
            return -1
    return k


@cython.cfunc
@cython.exceptval(check=False)
def _args(
    buf: cython.const[cython.uchar][::1],
    i: cython.Py_ssize_t,
    end: cython.Py_ssize_t,
    ints: cython.longlong[::1],
    base: cython.Py_ssize_t,
) -> tuple[cython.Py_ssize_t, cython.Py_ssize_t, cython.Py_ssize_t]:
    """Read an ``args`` object at ``i``: (index after it, span of "Input Dims" or -1 -1); the
    index is -1 when malformed, -2 when unsupported."""
    dims_s: cython.Py_ssize_t = -1
    dims_e: cython.Py_ssize_t = -1
    start: cython.Py_ssize_t = i
    k: cython.Py_ssize_t
    j: cython.Py_ssize_t
    key_end: cython.Py_ssize_t
    field: cython.Py_ssize_t
    v: cython.longlong
    esc: cython.int
    more: cython.int = 1
    if buf[i] != 123:
        return -2, dims_s, dims_e
    ints[base + _F_ARGS_OFF] = i
    i = whitespace_end(buf, i + 1, end)
    if i >= end:
        return -1, dims_s, dims_e
    if buf[i] == 125:
        i += 1
        more = 0
    while more:
        j, key_end, esc = member(buf, i, end)
        if j < 0:
            return -1, dims_s, dims_e
        if esc:
            return -2, dims_s, dims_e
        k = _key(buf, i + 1, key_end - 1)
        if _K_ARGS0 <= k < _K_SYNC_KIND:
            i, v = as_int(buf, j, end)
            field = k - _K_ARGS0 + _F_ARG0
            if i < 0 or (field == _F_DEVICE and not (_I32_MIN <= v < _I32_END)):
                return -2, dims_s, dims_e
            ints[base + field] = v
        elif k == _K_SYNC_KIND:
            if buf[j] != 34:
                return -2, dims_s, dims_e
            i, esc = string_end(buf, j, end)
        else:
            i = skip_value(buf, j, end)
            if k == _K_DIMS:
                dims_s, dims_e = j, i
        if i < 0:
            return -1, dims_s, dims_e
        i, more = after_member(buf, i, end, 125)
        if i < 0:
            return -1, dims_s, dims_e
    ints[base + _F_ARGS_LEN] = i - start
    return i, dims_s, dims_e


@cython.cfunc
@cython.exceptval(check=False)
def _intern(
    buf: cython.const[cython.uchar][::1],
    s: cython.Py_ssize_t,
    e: cython.Py_ssize_t,
    counts: cython.longlong[::1],
    t: cython.Py_ssize_t,
    tab: cython.int[::1],
    rep: cython.longlong[:, ::1],
    rep_hash: cython.ulonglong[::1],
) -> cython.longlong:
    """The row of ``buf[s:e]`` in table ``t`` (counted in ``counts[t]`` when new); -1 when the
    table is full."""
    r: cython.longlong = intern_span(buf, s, e - s, tab, rep, rep_hash, counts[t])
    if r >= 0 and r == counts[t]:
        counts[t] += 1
    return r


@cython.cfunc
@cython.exceptval(check=False)
def _event(
    buf: cython.const[cython.uchar][::1],
    i: cython.Py_ssize_t,
    end: cython.Py_ssize_t,
    ints: cython.longlong[::1],
    floats: cython.double[::1],
    row: cython.Py_ssize_t,
    counts: cython.longlong[::1],
    cats_tab: cython.int[::1],
    cats_rep: cython.longlong[:, ::1],
    cats_hash: cython.ulonglong[::1],
    names_tab: cython.int[::1],
    names_rep: cython.longlong[:, ::1],
    names_hash: cython.ulonglong[::1],
    dims_tab: cython.int[::1],
    dims_rep: cython.longlong[:, ::1],
    dims_hash: cython.ulonglong[::1],
) -> cython.Py_ssize_t:
    """Read the event object at ``i`` into ``row``: index after it; -1 malformed, -2 unsupported.
    Its strings are interned only once the whole event has been read."""
    base: cython.Py_ssize_t = row * _NI
    f: cython.Py_ssize_t
    k: cython.Py_ssize_t
    j: cython.Py_ssize_t
    key_end: cython.Py_ssize_t
    c: cython.uchar
    esc: cython.int
    exact: cython.int
    more: cython.int = 1
    v: cython.longlong
    x: cython.double
    r: cython.longlong
    cat_s: cython.Py_ssize_t = 0
    cat_e: cython.Py_ssize_t = 0
    name_s: cython.Py_ssize_t = 0
    name_e: cython.Py_ssize_t = 0
    dims_s: cython.Py_ssize_t = 0
    dims_e: cython.Py_ssize_t = 0
    for f in range(_NI):
        ints[base + f] = -1
    ints[base + _F_PH] = 0
    ints[base + _F_PID] = 0
    ints[base + _F_PID + 1] = 0
    ints[base + _F_INEXACT] = 0
    floats[2 * row] = 0.0
    floats[2 * row + 1] = 0.0
    ints[base + _F_START] = i
    i = whitespace_end(buf, i + 1, end)
    if i >= end:
        return -1
    if buf[i] == 125:
        i += 1
        more = 0
    while more:
        j, key_end, esc = member(buf, i, end)
        if j < 0:
            return -1
        if esc:
            return -2
        k = _key(buf, i + 1, key_end - 1)
        c = buf[j]
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
            i, esc = string_end(buf, j, end)
            if k == 1:
                cat_s, cat_e = j + 1, i - 1
            elif k == 2:
                name_s, name_e = j + 1, i - 1
        elif k == 3 or k == 4:  # pid, tid: an integer, or a string kept as its span
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
                ints[base + _F_PID + k - 3] = v
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
                i, v = as_int(buf, j, end)
                if i < 0:
                    return -2
        else:
            i = skip_value(buf, j, end)
        if i < 0:
            return -1
        i, more = after_member(buf, i, end, 125)
        if i < 0:
            return -1
    ints[base + _F_END] = i
    # a full table (the caller reserves room, so never) sends the chunk the usual way
    r = _intern(buf, cat_s, cat_e, counts, 0, cats_tab, cats_rep, cats_hash)
    if r < 0:
        return -2
    ints[base + _F_CAT] = r
    if ints[base + _F_PH] == _X:
        r = _intern(buf, name_s, name_e, counts, 1, names_tab, names_rep, names_hash)
        if r < 0:
            return -2
        ints[base + _F_NAME] = r
        if dims_e > dims_s:
            r = _intern(buf, dims_s, dims_e, counts, 2, dims_tab, dims_rep, dims_hash)
            if r < 0:
                return -2
            ints[base + _F_DIMS] = r
    elif (ints[base + _F_PH] == _I or ints[base + _F_PH] == _I_OLD) and _is_memory(
        buf, name_s, name_e
    ):
        ints[base + _F_IS_MEMORY] = 1
    return i


@cython.cfunc
@cython.exceptval(check=False)
def _is_memory(
    buf: cython.const[cython.uchar][::1], s: cython.Py_ssize_t, e: cython.Py_ssize_t
) -> cython.int:
    """Whether ``buf[s:e]`` is ``[memory]``, the name of the profiler's allocation events."""
    j: cython.Py_ssize_t
    if e - s != 8:
        return 0
    for j in range(8):
        if buf[s + j] != _MEMORY_NAME[j]:
            return 0
    return 1


def scan(
    buf: cython.const[cython.uchar][::1],
    pos: cython.Py_ssize_t,
    max_events: cython.Py_ssize_t,
    ints: cython.longlong[::1],
    floats: cython.double[::1],
    counts: cython.longlong[::1],
    cats_tab: cython.int[::1],
    cats_rep: cython.longlong[:, ::1],
    cats_hash: cython.ulonglong[::1],
    names_tab: cython.int[::1],
    names_rep: cython.longlong[:, ::1],
    names_hash: cython.ulonglong[::1],
    dims_tab: cython.int[::1],
    dims_rep: cython.longlong[:, ::1],
    dims_hash: cython.ulonglong[::1],
) -> tuple[int, int, int, int]:
    """Read up to ``max_events`` elements of ``traceEvents`` from ``pos`` (an element's first
    byte, or the closing ``]``) of ``buf`` (``uint8``) into rows of ``ints`` (:data:`NI` per
    event, ``int64``) and ``floats`` (two per event): (events read, index of the separator after
    the last one, status, done). ``done`` 1 when that separator is the array's ``]``.

    ``counts`` (``int64``) holds the three string tables' row counts (categories, names, shapes);
    each table (:func:`lumos._intern.new_table`: ``int32`` slots, ``int64`` row spans, ``uint64``
    row hashes) has room for ``max_events`` more rows."""
    end: cython.Py_ssize_t = buf.shape[0]
    status: cython.int = _OK
    n: cython.Py_ssize_t = 0
    i: cython.Py_ssize_t = whitespace_end(buf, pos, end)
    j: cython.Py_ssize_t
    if i < end and buf[i] == 93:
        return 0, i, status, 1
    while i < end:
        j = -2
        if buf[i] == 123:
            j = _event(buf, i, end, ints, floats, n, counts, cats_tab, cats_rep, cats_hash,
                       names_tab, names_rep, names_hash, dims_tab, dims_rep, dims_hash)  # fmt: skip
        if j == -2:  # read the usual way; here only find where it ends
            status = _UNSUPPORTED
            j = skip_value(buf, i, end)
        if j < 0:
            return n, i, _MALFORMED, 0
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
    return n, i, _MALFORMED, 0
