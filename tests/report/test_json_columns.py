"""Rows of JSON written a column at a time (``lumos.report.json_columns``): integers as
``str(int)``, microseconds that parse to the float the Perfetto writer means (and are its
``repr`` below 2**50 ns), strings from a table; the compiled kernel and its Python source write
the same bytes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests import kernel_sides as sides

from lumos.report import json_columns as jc
from lumos.report.perfetto_structure import us_list as _us

_EDGES = [0, 1, -1, 999, 1000, 1001, -1000, 10**15, 2**50 - 1, 2**50, 2**53 - 1, 2**53,
          -(2**53), 1_700_000_000_123_456_789, -(2**63), 2**63 - 1]  # fmt: skip


def _values() -> np.ndarray:
    rng = np.random.default_rng(7)
    return np.concatenate([
        np.array(_EDGES, np.int64), rng.integers(-(2**62), 2**62, 3000),
        rng.integers(-(2**53), 2**53, 3000), rng.integers(-(10**7), 10**7, 3000),
    ])  # fmt: skip


@pytest.fixture(params=["compiled", "python source"])
def rows(request, monkeypatch):
    """``format_rows``, compiled or from the kernel's source run as Python."""
    if request.param == "python source":
        twin = sides.interpreted("lumos.report._kernels")
        monkeypatch.setattr(jc, "_format_rows", twin.format_rows)
    return jc.format_rows


def _split(text: bytes) -> list[str]:
    return text.decode().split(",")[:-1]


def test_ints_are_str_of_int(rows) -> None:
    v = _values()
    assert _split(rows([b"", b","], [(jc.INT, v)], [])) == [str(x) for x in v.tolist()]


def test_microseconds_parse_to_the_writers_float_and_are_repr_below_2_pow_50(rows) -> None:
    v = _values()
    text = _split(rows([b"", b","], [(jc.US, v)], []))
    assert [float(s) for s in text] == _us(v)
    small = np.abs(v) < 2**50
    assert [s for s, m in zip(text, small, strict=True) if m] == [repr(x) for x in _us(v[small])]
    assert text[:6] == ["0.0", "0.001", "-0.001", "0.999", "1.0", "1.001"]


def test_rows_mix_constants_numbers_and_strings(rows) -> None:
    v = _values()
    names = [json.dumps(s).encode() for s in ["a", 'q"uote\n', "", "ü"]]
    idx = np.arange(len(v)) % len(names)
    text = rows(
        [b'{"i":', b',"u":', b',"s":', b"}\n"], [(jc.INT, v), (jc.US, v), (jc.STRING, idx)], names
    )
    got = [json.loads(line) for line in text.decode().splitlines()]
    strings = ["a", 'q"uote\n', "", "ü"]
    us = _us(v)
    assert got == [{"i": int(x), "u": us[k], "s": strings[k % 4]} for k, x in enumerate(v.tolist())]


def test_no_rows_and_mismatched_constants() -> None:
    assert jc.format_rows([b"[", b"]"], [(jc.INT, np.zeros(0, np.int64))], []) == b""
    with pytest.raises(ValueError, match="one more constant"):
        jc.format_rows([b"["], [(jc.INT, np.zeros(1, np.int64))], [])


def test_many_rows_are_formatted_a_block_at_a_time_to_the_same_bytes(monkeypatch) -> None:
    v = _values()
    fields = [(jc.INT, v), (jc.US, v)]
    whole = jc.format_rows([b"<", b"|", b">"], fields, [])
    monkeypatch.setattr(jc, "_BLOCK", 1000)
    assert jc.format_rows([b"<", b"|", b">"], fields, []) == whole
    assert whole.count(b"<") == len(v)
