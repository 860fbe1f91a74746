# cython: boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
# mypy: disable-error-code="valid-type"
"""JSON primitives for compiled scanners: whitespace, strings, numbers, object members, skipping
any value.

Each takes the payload as a ``uint8`` array, a position and the end, and returns the position
after what it read (:func:`member`: where the member's value starts), ``-1`` when the text there
is not valid JSON. They validate what they skip
as strictly as a JSON decoder would (string escapes and control characters, number grammar,
literals, nesting), so that a scanner built on them never accepts a document that the typed
decoders refuse.

Compiled (Cython, pure-Python mode: ``setup.py``); :mod:`lumos.ingest.kineto_scan` calls them in
C (``json_scan.pxd`` declares them), and its Python source imports them when it runs uncompiled.
A call from another module copies the payload's memoryview (about 200 bytes), so a scanner
walks an object with :func:`member` and :func:`after_member` (one call each per member) rather
than with the finer primitives.
"""

from __future__ import annotations

import numpy as np

try:
    import cython
except ModuleNotFoundError:  # pragma: no cover - no Cython here: the same source runs as Python
    from lumos import _cyshim as cython

__all__ = [
    "after_member",
    "as_float",
    "as_int",
    "member",
    "skip_value",
    "string_end",
    "whitespace_end",
]

# C globals, declared (a module with a .pxd ignores annotations of its globals)
_I64_DIGITS = cython.declare(cython.int, 18)  # integers of up to 18 digits always fit int64
_EXACT = cython.declare(cython.longlong, 1 << 53)
_POW10 = cython.declare(
    cython.const[cython.double][::1], np.array([10.0**k for k in range(23)], dtype=np.float64)
)

# skip_value's states, and the deepest nesting it follows
_OPEN = cython.declare(cython.int, 0)
_MEMBER = cython.declare(cython.int, 1)
_AFTER = cython.declare(cython.int, 2)
_MAX_DEPTH = cython.declare(cython.int, 62)


@cython.ccall
@cython.exceptval(check=False)
def whitespace_end(
    buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> cython.Py_ssize_t:
    """Index of the first byte from ``i`` on that is not JSON whitespace (``end`` if none)."""
    c: cython.uchar
    while i < end:
        c = buf[i]
        if c != 32 and c != 10 and c != 13 and c != 9:
            break
        i += 1
    return i


@cython.ccall
@cython.exceptval(check=False)
def string_end(
    buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> tuple[cython.Py_ssize_t, cython.int]:
    """``buf[i]`` is ``"``: (index after the closing quote, 1 if escaped else 0); (-1, 0) when
    the string is invalid (unterminated, a control character, a bad escape)."""
    c: cython.uchar
    e: cython.uchar
    h: cython.uchar
    k: cython.Py_ssize_t
    escaped: cython.int = 0
    i += 1
    while i < end:
        c = buf[i]
        if c == 34:
            return i + 1, escaped
        if c < 32:
            return -1, 0
        if c == 92:
            escaped = 1
            if i + 1 >= end:
                return -1, 0
            e = buf[i + 1]
            if e == 117:  # \uXXXX
                if i + 6 > end:
                    return -1, 0
                for k in range(i + 2, i + 6):
                    h = buf[k]
                    if not ((48 <= h <= 57) or (65 <= h <= 70) or (97 <= h <= 102)):
                        return -1, 0
                i += 6
                continue
            if not (e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110
                    or e == 114 or e == 116):  # fmt: skip
                return -1, 0
            i += 2
            continue
        i += 1
    return -1, 0


@cython.ccall
@cython.exceptval(check=False)
def member(
    buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> tuple[cython.Py_ssize_t, cython.Py_ssize_t, cython.int]:
    """At an object member (its key's opening quote): (index of its value, index after the key's
    closing quote, 1 if the key has escapes else 0); the value index is -1 when malformed."""
    j: cython.Py_ssize_t
    k: cython.Py_ssize_t
    escaped: cython.int
    if buf[i] != 34:
        return -1, 0, 0
    j, escaped = string_end(buf, i, end)
    if j < 0:
        return -1, 0, 0
    k = whitespace_end(buf, j, end)
    if k >= end or buf[k] != 58:
        return -1, 0, 0
    k = whitespace_end(buf, k + 1, end)
    if k >= end:
        return -1, 0, 0
    return k, j, escaped


@cython.ccall
@cython.exceptval(check=False)
def after_member(
    buf: cython.const[cython.uchar][::1],
    i: cython.Py_ssize_t,
    end: cython.Py_ssize_t,
    close: cython.uchar,
) -> tuple[cython.Py_ssize_t, cython.int]:
    """After a member of a container ending at ``i``: (index of the next member, 1) after a
    comma, (index after ``close``, the container's closing byte, 0) at its end; (-1, 0) when
    malformed."""
    i = whitespace_end(buf, i, end)
    if i >= end:
        return -1, 0
    if buf[i] == close:
        return i + 1, 0
    if buf[i] != 44:
        return -1, 0
    i = whitespace_end(buf, i + 1, end)
    if i >= end:
        return -1, 0
    return i, 1


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _digit(buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t) -> cython.longlong:
    """The value of the digit ``buf[i]`` (a C integer, also when the source runs as Python)."""
    return cython.cast(cython.longlong, buf[i]) - 48


@cython.cfunc
@cython.exceptval(check=False)
def _number(
    buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> tuple[cython.Py_ssize_t, cython.longlong, cython.longlong, cython.int]:
    """A JSON number at ``i``: (index after it, mantissa, decimal exponent, flags) with flags
    1 = has a fraction or exponent, 2 = not exact (more digits than fit); index -1 if invalid."""
    neg: cython.bint = False
    eneg: cython.bint
    m: cython.longlong = 0
    exp: cython.longlong = 0
    e: cython.longlong
    flags: cython.int = 0
    digits: cython.int = 0
    if i < end and buf[i] == 45:
        neg = True
        i += 1
    if i >= end or not (48 <= buf[i] <= 57):
        return -1, 0, 0, 0
    if buf[i] == 48:
        i += 1
        if i < end and 48 <= buf[i] <= 57:
            return -1, 0, 0, 0  # leading zero
    else:
        while i < end and 48 <= buf[i] <= 57:
            if digits < _I64_DIGITS:
                m = m * 10 + _digit(buf, i)
            else:
                exp += 1
                flags |= 2
            if m != 0:
                digits += 1
            i += 1
    if i < end and buf[i] == 46:
        flags |= 1
        i += 1
        if i >= end or not (48 <= buf[i] <= 57):
            return -1, 0, 0, 0
        while i < end and 48 <= buf[i] <= 57:
            if digits < _I64_DIGITS:
                m = m * 10 + _digit(buf, i)
                exp -= 1
                if m != 0:
                    digits += 1
            elif buf[i] != 48:
                flags |= 2
            i += 1
    if i < end and (buf[i] == 101 or buf[i] == 69):
        flags |= 1
        i += 1
        eneg = False
        if i < end and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        if i >= end or not (48 <= buf[i] <= 57):
            return -1, 0, 0, 0
        e = 0
        while i < end and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + _digit(buf, i)
            i += 1
        exp += -e if eneg else e
    return i, -m if neg else m, exp, flags


@cython.cfunc
@cython.exceptval(check=False)
def _scalar(
    buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> cython.Py_ssize_t:
    """Index after the string, number or literal at ``i``; -1 when there is none."""
    c: cython.uchar = buf[i]
    j: cython.Py_ssize_t
    _esc: cython.int
    _m: cython.longlong
    _exp: cython.longlong
    _flags: cython.int
    lit_ok: cython.bint
    if c == 34:
        j, _esc = string_end(buf, i, end)
        return j
    if c == 45 or (48 <= c <= 57):
        j, _m, _exp, _flags = _number(buf, i, end)
        return j
    if c == 116 or c == 110:  # true, null
        lit_ok = i + 4 <= end and (
            (c == 116 and buf[i + 1] == 114 and buf[i + 2] == 117 and buf[i + 3] == 101)
            or (c == 110 and buf[i + 1] == 117 and buf[i + 2] == 108 and buf[i + 3] == 108)
        )
        return i + 4 if lit_ok else -1
    if c == 102:  # false
        lit_ok = i + 5 <= end and buf[i + 1] == 97 and buf[i + 2] == 108 and buf[i + 3] == 115
        return i + 5 if lit_ok and buf[i + 4] == 101 else -1
    return -1


@cython.ccall
@cython.exceptval(check=False)
def skip_value(
    buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> cython.Py_ssize_t:
    """Index after the JSON value at ``i`` (any type, nested), or -1 when it is not valid (or
    nested deeper than any real trace: the full decoder then judges).

    Containers are walked with a state machine, not recursion; bit ``d`` of ``objects`` says
    whether the container at depth ``d`` is an object."""
    objects: cython.ulonglong = 0
    bit: cython.ulonglong
    depth: cython.int = 0
    state: cython.int = _OPEN
    close: cython.uchar
    _key_end: cython.Py_ssize_t
    _esc: cython.int
    more: cython.int
    if i >= end:
        return -1
    if buf[i] != 123 and buf[i] != 91:
        return _scalar(buf, i, end)
    while True:
        if state == _OPEN:  # at "{" or "["
            if depth == _MAX_DEPTH:
                return -1
            bit = cython.cast(cython.ulonglong, 1) << depth
            if buf[i] == 123:
                objects |= bit
            else:
                objects &= ~bit
            depth += 1
            i = whitespace_end(buf, i + 1, end)
            if i >= end:
                return -1
            close = 125 if (objects >> (depth - 1)) & 1 else 93
            if buf[i] == close:
                i += 1
                depth -= 1
                if depth == 0:
                    return i
                state = _AFTER
            else:
                state = _MEMBER
        elif state == _MEMBER:  # at a member (object: its key)
            if (objects >> (depth - 1)) & 1:
                i, _key_end, _esc = member(buf, i, end)
                if i < 0:
                    return -1
            if buf[i] == 123 or buf[i] == 91:
                state = _OPEN
            else:
                i = _scalar(buf, i, end)
                if i < 0:
                    return -1
                state = _AFTER
        else:  # after a member: the next one, or the container's end
            close = 125 if (objects >> (depth - 1)) & 1 else 93
            i, more = after_member(buf, i, end, close)
            if i < 0:
                return -1
            if more:
                state = _MEMBER
            else:
                depth -= 1
                if depth == 0:
                    return i


@cython.ccall
@cython.exceptval(check=False)
def as_int(
    buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> tuple[cython.Py_ssize_t, cython.longlong]:
    """(index after, value) of an integer literal that fits int64; index -1 otherwise."""
    j: cython.Py_ssize_t
    m: cython.longlong
    exp: cython.longlong
    flags: cython.int
    j, m, exp, flags = _number(buf, i, end)
    if j < 0 or flags != 0 or exp != 0:
        return -1, 0
    return j, m


@cython.ccall
@cython.exceptval(check=False)
def as_float(
    buf: cython.const[cython.uchar][::1], i: cython.Py_ssize_t, end: cython.Py_ssize_t
) -> tuple[cython.Py_ssize_t, cython.double, cython.int]:
    """(index after, value, exact) of a number; ``exact`` 0 when the value must be rounded by
    the caller from its text (more digits than a double holds); index -1 when out of range."""
    j: cython.Py_ssize_t
    m: cython.longlong
    exp: cython.longlong
    flags: cython.int
    j, m, exp, flags = _number(buf, i, end)
    if j < 0 or exp < -22 or exp > 22:
        return -1, 0.0, 0
    if flags & 2 or m > _EXACT or m < -_EXACT:
        return j, 0.0, 0
    if exp >= 0:
        return j, cython.cast(cython.double, m) * _POW10[exp], 1
    return j, cython.cast(cython.double, m) / _POW10[-exp], 1
