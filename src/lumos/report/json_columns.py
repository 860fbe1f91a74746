"""JSON text for whole columns at once: integers, microseconds from integer ns, and rows
assembled from them, with numpy and no Python object per value.

A *field* is ``(buf, start, length)``: ``buf`` a ``(n, W)`` uint8 matrix holding row ``i``'s
text at ``buf[i, start[i] : start[i] + length[i]]``. :func:`join_rows` concatenates, per row,
a sequence of pieces (constant bytes, fields, or entries of a string table picked by index)
into one ``bytes``: one gather over a flat source buffer, so the cost is a few vector passes
over the output bytes.

Numbers are written as Python writes them:

- :func:`int_field` is ``str(int(v))``.
- :func:`us_field` is the microsecond value ``ns / 1000`` (ns precision, 3 decimals) as a JSON
  number that parses to the float :func:`lumos.report.perfetto._us` gives: for ``|ns| < 2**53``
  the exact decimal ``ns / 1000`` with trailing zeros dropped (at least one decimal), which is
  also ``repr`` of that float (a shorter decimal would be at least 0.001 away, more than the
  float's spacing there); beyond, the float ``ns / 1000.0`` (as numpy rounds it) written out
  exactly (it is a multiple of 2**-9 there), which parses back to that float though it may be
  longer than ``repr``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lumos.report._kernels import format_rows as _format_rows

__all__ = [
    "Field", "Table", "format_rows", "int_field", "join_rows", "string_table", "us_field",
]  # fmt: skip

Field = tuple[np.ndarray, np.ndarray, np.ndarray]
Table = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # flat, offsets, lengths, index
Piece = bytes | Field | Table

_DIGITS = 20  # int64 magnitudes have at most 19 digits; one more for the sign
_EXACT_NS = 1 << 53
_FRAC_BITS = 9  # beyond 2**53 ns a float of microseconds is a multiple of 2**-9


def _digits(mag: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-aligned ASCII digits of non-negative ``mag`` (uint64) in ``(n, width)``, and the
    digit count of each (at least 1)."""
    n = mag.shape[0]
    buf = np.empty((n, width), np.uint8)
    v = mag.copy()
    count = np.ones(n, np.int64)
    for col in range(width - 1, -1, -1):
        q = v // 10
        buf[:, col] = (v - q * 10).astype(np.uint8) + 48
        v = q
        count += (v > 0) & (col > 0)
        if not v.any():
            break
    return buf, count


def int_field(values: np.ndarray) -> Field:
    """``str(int(v))`` of each int64 ``v``."""
    v = np.asarray(values, dtype=np.int64)
    neg = v < 0
    mag = np.abs(v).astype(np.uint64)  # abs(int64 min) wraps to itself: uint64 of it is right
    buf, count = _digits(mag, _DIGITS)
    start = _DIGITS - count - neg
    buf[np.flatnonzero(neg), start[neg]] = ord("-")
    return buf, start, count + neg


def us_field(ns: np.ndarray) -> Field:
    """Microseconds of int64 ``ns`` as JSON numbers (see the module docstring)."""
    v = np.asarray(ns, dtype=np.int64)
    n = v.shape[0]
    neg = v < 0
    mag = np.abs(v).astype(np.uint64)
    big = mag >= _EXACT_NS
    frac_w = _FRAC_BITS if big.any() else 3
    whole = mag // 1000
    frac = (mag - whole * 1000) * 10 ** (frac_w - 3)  # frac_w digits after the point
    if big.any():
        x = np.abs(v[big].astype(np.float64) / 1000.0)
        scaled = (x * (1 << _FRAC_BITS)).astype(np.uint64)  # exact: x is a multiple of 2**-9
        whole[big] = scaled >> np.uint64(_FRAC_BITS)
        frac[big] = (scaled & np.uint64((1 << _FRAC_BITS) - 1)) * np.uint64(5**_FRAC_BITS)
    ibuf, icount = _digits(whole, _DIGITS)
    fbuf, _ = _digits(frac, frac_w)
    # drop trailing zeros of the fraction, keeping one digit
    zeros = np.zeros(n, np.int64)
    trailing = np.ones(n, bool)
    for col in range(frac_w - 1, 0, -1):
        trailing &= fbuf[:, col] == 48
        zeros += trailing
    flen = frac_w - zeros
    buf = np.empty((n, _DIGITS + 1 + frac_w), np.uint8)
    buf[:, :_DIGITS] = ibuf
    buf[:, _DIGITS] = ord(".")
    buf[:, _DIGITS + 1 :] = fbuf
    start = _DIGITS - icount - neg
    buf[np.flatnonzero(neg), start[neg]] = ord("-")
    return buf, start, icount + neg + 1 + flen


def string_table(texts: Sequence[bytes], index: np.ndarray) -> Table:
    """A piece that is ``texts[index[i]]`` in row ``i``."""
    lengths = np.fromiter((len(t) for t in texts), np.int64, len(texts))
    offsets = np.zeros(len(texts), np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    flat = np.frombuffer(b"".join(texts), np.uint8)
    return flat, offsets, lengths, np.asarray(index, dtype=np.int64)


def join_rows(pieces: Sequence[Piece], n: int) -> bytes:
    """Per row, the pieces one after another; rows one after another."""
    sources: list[np.ndarray] = []
    starts: list[np.ndarray | int] = []
    lens: list[np.ndarray | int] = []
    base = 0
    for p in pieces:
        if isinstance(p, bytes):
            src = np.frombuffer(p, np.uint8)
            starts.append(base)
            lens.append(len(p))
        elif len(p) == 3:
            buf, start, length = p
            src = buf.reshape(-1)
            starts.append(base + np.arange(n, dtype=np.int64) * buf.shape[1] + start)
            lens.append(length)
        else:
            src, offsets, lengths, index = p
            starts.append(base + offsets[index])
            lens.append(lengths[index])
        sources.append(src)
        base += src.shape[0]
    if n == 0:
        return b""
    start_m = np.empty((n, len(pieces)), np.int64)
    len_m = np.empty((n, len(pieces)), np.int64)
    for k, (s, ln) in enumerate(zip(starts, lens, strict=True)):
        start_m[:, k] = s
        len_m[:, k] = ln
    lf, sf = len_m.reshape(-1), start_m.reshape(-1)
    out_start = np.cumsum(lf) - lf
    total = int(out_start[-1] + lf[-1])
    idx_t = np.int32 if base < (1 << 31) and total < (1 << 31) else np.int64
    idx = np.repeat((sf - out_start).astype(idx_t), lf)
    idx += np.arange(total, dtype=idx_t)
    return np.concatenate(sources)[idx].tobytes()


_BLOCK = 1 << 16
INT, US, STRING = 0, 1, 2
_WIDTH = {INT: 20, US: 30}


def format_rows(
    consts: Sequence[bytes], fields: Sequence[tuple[int, np.ndarray]], strings: Sequence[bytes]
) -> bytes:
    """Rows ``consts[0] field[0] consts[1] ... field[-1] consts[-1]``, one after another.

    Each field is ``(kind, values)``: :data:`INT` (``str(int)``), :data:`US` (microseconds of
    int64 ns, see :func:`us_field`) or :data:`STRING` (``strings[value]``): compiled
    (:mod:`lumos.report._kernels`), the same bytes :func:`join_rows` gives."""
    if len(consts) != len(fields) + 1:
        raise ValueError("format_rows: one more constant than fields")
    cols = [np.asarray(v, dtype=np.int64) for _, v in fields]
    n = cols[0].shape[0] if cols else 0
    if n == 0:
        return b""
    if n > _BLOCK:
        return b"".join(
            format_rows(
                consts,
                [(k, v[lo : lo + _BLOCK]) for (k, _), v in zip(fields, cols, strict=True)],
                strings,
            )
            for lo in range(0, n, _BLOCK)
        )
    lengths = np.fromiter((len(t) for t in strings), np.int64, len(strings))
    str_off = np.zeros(len(strings) + 1, np.int64)
    np.cumsum(lengths, out=str_off[1:])
    const_off = np.zeros(len(consts) + 1, np.int64)
    np.cumsum([len(c) for c in consts], out=const_off[1:])
    bound = n * int(const_off[-1])
    for (kind, _), v in zip(fields, cols, strict=True):
        bound += int(lengths[v].sum()) if kind == STRING else n * _WIDTH[kind]
    out = np.empty(bound, np.uint8)
    kinds = np.array([k for k, _ in fields], np.int64)
    values = np.concatenate(cols)
    flat_consts = np.frombuffer(b"".join(consts), np.uint8)
    flat_strings = np.frombuffer(b"".join(strings) or b" ", np.uint8)
    end = _format_rows(flat_consts, const_off, kinds, values, n, flat_strings, str_off, out)
    return out[:end].tobytes()


def _pieces(
    consts: Sequence[bytes],
    fields: Sequence[tuple[int, np.ndarray]],
    cols: Sequence[np.ndarray],
    strings: Sequence[bytes],
) -> list[Piece]:
    pieces: list[Piece] = [consts[0]]
    for (kind, _), v, c in zip(fields, cols, consts[1:], strict=True):
        if kind == STRING:
            pieces.append(string_table(strings, v))
        else:
            pieces.append(int_field(v) if kind == INT else us_field(v))
        pieces.append(c)
    return pieces
