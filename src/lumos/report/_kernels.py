# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""The compiled loops of the report (Cython, pure-Python mode): the critical path's walk back
through the simulation's causes (:func:`lumos.report.metrics.critical_path`) and JSON rows
written straight into a byte buffer (:func:`lumos.report.json_columns.format_rows`)."""

from __future__ import annotations

import numpy as np

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

# lumos.sim._kernel's cause kinds, as C constants for the loops (declared: an annotated module
# global, ``_X: cython.schar = 0``, would stay a Python dictionary look-up)
_CAUSE_NONE = cython.declare(cython.schar, 0)
_CAUSE_EDGE = cython.declare(cython.schar, 1)
_CAUSE_COLLECTIVE = cython.declare(cython.schar, 4)
_INT64_MIN = cython.declare(cython.longlong, -9223372036854775807 - 1)


def walk_path(
    start: cython.const[cython.longlong][::1],
    end: cython.const[cython.longlong][::1],
    cause_kind: cython.const[cython.schar][::1],
    cause_ref: cython.const[cython.longlong][::1],
    edge_src: cython.const[cython.longlong][::1],
    last: cython.longlong,
):
    """The critical path back from task ``last``: ``(path, gap, via, via_ref, k)``, each array
    holding ``k`` entries: the tasks, the time before each that its cause explains, the cause's
    kind and reference (a collective continues from its last arrival's cause)."""
    n: cython.Py_ssize_t = start.shape[0]
    path_a = np.empty(n, dtype=np.int64)
    gap_a = np.zeros(n, dtype=np.int64)
    via_a = np.zeros(n, dtype=np.int8)
    via_ref_a = np.full(n, -1, dtype=np.int64)
    path: cython.longlong[::1] = path_a
    gap: cython.longlong[::1] = gap_a
    via: cython.schar[::1] = via_a
    via_ref: cython.longlong[::1] = via_ref_a
    k: cython.Py_ssize_t = 0
    t: cython.longlong = last
    t2: cython.longlong
    p: cython.longlong
    ref: cython.longlong
    kind: cython.schar
    while t >= 0:
        path[k] = t
        kind = cause_kind[t]
        if kind == _CAUSE_COLLECTIVE:
            # same start as the last arrival: continue from *its* cause
            t2 = cause_ref[t]
            kind = cause_kind[t2]
            ref = cause_ref[t2]
        else:
            ref = cause_ref[t]
        via[k] = kind
        via_ref[k] = ref
        if kind == _CAUSE_NONE:
            gap[k] = start[t]
            k += 1
            break
        p = edge_src[ref] if kind == _CAUSE_EDGE else ref
        gap[k] = start[t] - end[p]
        k += 1
        t = p
    return path_a, gap_a, via_a, via_ref_a, k


@cython.cfunc
@cython.exceptval(check=False)
def _digits_into(
    out: cython.uchar[::1], pos: cython.Py_ssize_t, mag: cython.longlong, scratch: cython.uchar[::1]
) -> cython.Py_ssize_t:
    """Write the decimal digits of ``mag`` (>= 0) at ``out[pos]``; the position after them."""
    k: cython.Py_ssize_t = 0
    j: cython.Py_ssize_t
    q: cython.longlong
    while True:
        q = mag // 10
        scratch[k] = 48 + (mag - q * 10)
        k += 1
        mag = q
        if mag == 0:
            break
    for j in range(k):
        out[pos + j] = scratch[k - 1 - j]
    return pos + k


def format_rows(
    consts: cython.const[cython.uchar][::1],
    const_off: cython.const[cython.longlong][::1],
    kinds: cython.const[cython.longlong][::1],
    values: cython.const[cython.longlong][::1],
    n: cython.Py_ssize_t,
    strings: cython.const[cython.uchar][::1],
    str_off: cython.const[cython.longlong][::1],
    out: cython.uchar[::1],
) -> cython.Py_ssize_t:
    """Rows ``consts[0] field[0] consts[1] ... consts[-1]`` written into ``out`` (see
    :func:`lumos.report.json_columns.format_rows`); the number of bytes written. Field ``k``
    of row ``i`` is ``values[k * n + i]``, an integer (kind 0), microseconds of integer ns
    (kind 1) or an entry of the string table (kind 2)."""
    scratch: cython.uchar[::1] = np.empty(24, dtype=np.uint8)
    nf: cython.Py_ssize_t = kinds.shape[0]
    pos: cython.Py_ssize_t = 0
    i: cython.Py_ssize_t
    k: cython.Py_ssize_t
    c: cython.Py_ssize_t
    v: cython.longlong
    kind: cython.longlong
    mag: cython.longlong
    whole: cython.longlong
    frac: cython.longlong
    scaled: cython.longlong
    div: cython.longlong
    d: cython.longlong
    for i in range(n):
        for k in range(nf + 1):
            for c in range(const_off[k], const_off[k + 1]):
                out[pos] = consts[c]
                pos += 1
            if k == nf:
                break
            v = values[k * n + i]
            kind = kinds[k]
            if kind == 2:  # an entry of the string table
                for c in range(str_off[v], str_off[v + 1]):
                    out[pos] = strings[c]
                    pos += 1
                continue
            if v < 0:
                out[pos] = 45
                pos += 1
            if kind == 0:  # an integer; int64 min: its magnitude 2**63 as 2**63 - 1 plus one
                if v == _INT64_MIN:
                    pos = _digits_into(out, pos, 922337203685477580, scratch)
                    out[pos] = 56
                    pos += 1
                else:
                    pos = _digits_into(out, pos, -v if v < 0 else v, scratch)
                continue
            mag = (-v if v < 0 else v) if v > _INT64_MIN else 9223372036854775807
            if mag < 9007199254740992:  # 2**53: the exact decimal ns / 1000
                whole = mag // 1000
                frac = (mag - whole * 1000) * 1000000
            else:  # the float ns / 1000.0 written out exactly (a multiple of 2**-9)
                scaled = cython.cast(
                    cython.longlong, abs(cython.cast(cython.double, v) / 1000.0) * 512.0
                )
                whole = scaled >> 9
                frac = (scaled & 511) * 1953125
            pos = _digits_into(out, pos, whole, scratch)
            out[pos] = 46
            pos += 1
            div = 100000000
            while True:
                d = frac // div
                out[pos] = 48 + d
                pos += 1
                frac -= d * div
                div //= 10
                if frac == 0 or div == 0:
                    break
    return pos
