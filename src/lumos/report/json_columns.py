"""JSON text for whole columns at once: rows of integers, microseconds from integer ns and
strings, written by a compiled kernel (:mod:`lumos.report._kernels`) with no Python object per
value.

Numbers are written as Python writes them: an integer is ``str(int(v))``; microseconds are the
value ``ns / 1000`` (ns precision, 3 decimals) as a JSON number that parses to the float
:func:`lumos.report.perfetto_structure.us_list` gives: for ``|ns| < 2**53`` the exact decimal
``ns / 1000`` with trailing zeros dropped (at least one decimal), which is also ``repr`` of that
float (a shorter decimal would be at least 0.001 away, more than the float's spacing there);
beyond, the float ``ns / 1000.0`` written out exactly (it is a multiple of 2**-9 there), which
parses back to that float though it may be longer than ``repr``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lumos.report._kernels import format_rows as _format_rows

__all__ = ["INT", "STRING", "US", "format_rows"]

_BLOCK = 1 << 16
INT, US, STRING = 0, 1, 2
_WIDTH = {INT: 20, US: 30}


def format_rows(
    consts: Sequence[bytes], fields: Sequence[tuple[int, np.ndarray]], strings: Sequence[bytes]
) -> bytes:
    """Rows ``consts[0] field[0] consts[1] ... field[-1] consts[-1]``, one after another.

    Each field is ``(kind, values)``: :data:`INT` (``str(int)``), :data:`US` (microseconds of
    int64 ns, see the module docstring) or :data:`STRING` (``strings[value]``)."""
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
