"""JSON primitives for compiled scanners: whitespace, strings, numbers, skipping any value.

Each takes the payload as a ``uint8`` array, a position and the end, and returns the position
after what it read, ``-1`` when the text there is not valid JSON. They validate what they skip
as strictly as a JSON decoder would (string escapes and control characters, number grammar,
literals, nesting), so that a scanner built on them never accepts a document that the typed
decoders refuse.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["as_float", "as_int", "skip_value", "string_end", "whitespace_end"]

_I64_DIGITS = 18  # integers of up to 18 digits always fit int64
_EXACT = 1 << 53
_POW10 = np.array([10.0**k for k in range(23)], dtype=np.float64)


@numba.njit(cache=True, nogil=True)
def whitespace_end(buf: np.ndarray, i: int, end: int) -> int:  # pragma: no cover - compiled
    while i < end and (buf[i] == 32 or buf[i] == 10 or buf[i] == 13 or buf[i] == 9):
        i += 1
    return i


@numba.njit(cache=True, nogil=True)
def string_end(buf: np.ndarray, i: int, end: int) -> tuple[int, int]:  # pragma: no cover - compiled
    """``buf[i]`` is ``"``: (index after the closing quote, 1 if escaped else 0); (-1, 0) when
    the string is invalid (unterminated, a control character, a bad escape)."""
    i += 1
    escaped = 0
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


@numba.njit(cache=True, nogil=True)
def _number(buf: np.ndarray, i: int, end: int) -> tuple[int, int, int, int]:  # pragma: no cover
    """A JSON number at ``i``: (index after it, mantissa, decimal exponent, flags) with flags
    1 = has a fraction or exponent, 2 = not exact (more digits than fit); index -1 if invalid."""
    neg = False
    if i < end and buf[i] == 45:
        neg = True
        i += 1
    if i >= end or not (48 <= buf[i] <= 57):
        return -1, 0, 0, 0
    m = 0
    exp = 0
    flags = 0
    digits = 0
    if buf[i] == 48:
        i += 1
        if i < end and 48 <= buf[i] <= 57:
            return -1, 0, 0, 0  # leading zero
    else:
        while i < end and 48 <= buf[i] <= 57:
            if digits < _I64_DIGITS:
                m = m * 10 + (buf[i] - 48)
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
                m = m * 10 + (buf[i] - 48)
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
                e = e * 10 + (buf[i] - 48)
            i += 1
        exp += -e if eneg else e
    return i, -m if neg else m, exp, flags


@numba.njit(cache=True, nogil=True)
def _scalar(buf: np.ndarray, i: int, end: int) -> int:  # pragma: no cover - compiled
    """Index after the string, number or literal at ``i``; -1 when there is none."""
    c = buf[i]
    if c == 34:
        j, _ = string_end(buf, i, end)
        return j
    if c == 45 or (48 <= c <= 57):
        j, _, _, _ = _number(buf, i, end)
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


_OPEN, _MEMBER, _AFTER = 0, 1, 2
_MAX_DEPTH = 62


@numba.njit(cache=True, nogil=True)
def skip_value(buf: np.ndarray, i: int, end: int) -> int:  # pragma: no cover - compiled
    """Index after the JSON value at ``i`` (any type, nested), or -1 when it is not valid (or
    nested deeper than any real trace: the full decoder then judges).

    Containers are walked with a state machine (numba cannot cache recursive functions); bit
    ``d`` of ``objects`` says whether the container at depth ``d`` is an object."""
    if i >= end:
        return -1
    if buf[i] != 123 and buf[i] != 91:
        return _scalar(buf, i, end)
    objects = 0
    depth = 0
    state = _OPEN
    while True:
        if state == _OPEN:  # at "{" or "["
            if depth == _MAX_DEPTH:
                return -1
            if buf[i] == 123:
                objects |= 1 << depth
            else:
                objects &= ~(1 << depth)
            depth += 1
            i = whitespace_end(buf, i + 1, end)
            if i >= end:
                return -1
            if buf[i] == (125 if (objects >> (depth - 1)) & 1 else 93):
                i += 1
                depth -= 1
                if depth == 0:
                    return i
                state = _AFTER
            else:
                state = _MEMBER
        elif state == _MEMBER:  # at a member (object: its key)
            if (objects >> (depth - 1)) & 1:
                if buf[i] != 34:
                    return -1
                i, _ = string_end(buf, i, end)
                if i < 0:
                    return -1
                i = whitespace_end(buf, i, end)
                if i >= end or buf[i] != 58:
                    return -1
                i = whitespace_end(buf, i + 1, end)
                if i >= end:
                    return -1
            if buf[i] == 123 or buf[i] == 91:
                state = _OPEN
            else:
                i = _scalar(buf, i, end)
                if i < 0:
                    return -1
                state = _AFTER
        else:  # after a member: a comma or the container's end
            i = whitespace_end(buf, i, end)
            if i >= end:
                return -1
            if buf[i] == 44:
                i = whitespace_end(buf, i + 1, end)
                if i >= end:
                    return -1
                state = _MEMBER
            elif buf[i] == (125 if (objects >> (depth - 1)) & 1 else 93):
                i += 1
                depth -= 1
                if depth == 0:
                    return i
            else:
                return -1


@numba.njit(cache=True, nogil=True)
def as_int(buf: np.ndarray, i: int, end: int) -> tuple[int, int]:  # pragma: no cover - compiled
    """(index after, value) of an integer literal that fits int64; index -1 otherwise."""
    j, m, exp, flags = _number(buf, i, end)
    if j < 0 or flags != 0 or exp != 0:
        return -1, 0
    return j, m


@numba.njit(cache=True, nogil=True)
def as_float(
    buf: np.ndarray, i: int, end: int
) -> tuple[int, float, int]:  # pragma: no cover - compiled
    """(index after, value, exact) of a number; ``exact`` 0 when the value must be rounded by
    the caller from its text (more digits than a double holds); index -1 when out of range."""
    j, m, exp, flags = _number(buf, i, end)
    if j < 0 or exp < -22 or exp > 22:
        return -1, 0.0, 0
    if flags & 2 or m > _EXACT or m < -_EXACT:
        return j, 0.0, 0
    if exp >= 0:
        return j, float(m) * _POW10[exp], 1
    return j, float(m) / _POW10[-exp], 1
