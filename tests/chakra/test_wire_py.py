"""The Python Chakra decoder of a first command (``lumos.chakra._wire_py``) is the compiled one.

Both decoders read the same bytes here, side by side: real files, files lumos writes, generated
traces, malformed and mutated buffers. They must agree on the record count, every column (dtype,
shape and bytes, so NaN payloads and -0.0 count) and the interned names' spans, or on the
:class:`~lumos.errors.ChakraFormatError` message. Then which one ``read_chakra`` picks.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from chakra_testdata import EVERY_KIND, NODES, Uncompiled, mutate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lumos import _jit
from lumos.chakra import NodeType, _wire, _wire_py, attr, io, io_nodes, read_chakra, write_chakra
from lumos.chakra._wire import MAX_MICROS
from lumos.chakra.attrs import IOInfo, read_varint
from lumos.chakra.attrs import varint_bytes as _v
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.errors import ChakraFormatError

DATA = Path(__file__).parents[1] / "data"  # lumos's own test data
Result = tuple[int, int, list[np.ndarray]] | str


def _decode(buf: np.ndarray, python: bool) -> Result:
    """``(records, empty node records, io_nodes.decode_node_records columns)`` by one decoder, or the
    message of the error ``read_chakra`` would raise."""
    path = Path("t.et")
    err = np.zeros(7, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    scan = _wire_py.scan_records if python else _wire.scan_records
    try:
        n = scan(buf, 0, buf.size, io.RECORD_DEFAULT, False, empty, empty, err)
        io._raise_scan(path, err, io.RECORD_DEFAULT)
        n_empty = int(err[4])
        meta_len, pos = read_varint(buf[:10].tobytes(), 0)
        cols = io_nodes.decode_node_records(path, buf, pos + meta_len, n - 1, err, python)
    except ChakraFormatError as exc:
        return str(exc)
    return n, n_empty, cols


def _same(data: bytes | np.ndarray) -> Result:
    """Decode ``data`` both ways, assert the results are identical and return them."""
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    compiled, python = _decode(buf, False), _decode(buf, True)
    if isinstance(compiled, str) or isinstance(python, str):
        assert python == compiled
        return compiled
    assert python[:2] == compiled[:2]
    assert len(python[2]) == len(compiled[2]) == 25
    for k, (a, b) in enumerate(zip(compiled[2], python[2], strict=True)):
        assert (b.dtype, b.shape) == (a.dtype, a.shape), k
        assert b.tobytes() == a.tobytes(), k
    return compiled


def test_every_real_et_decodes_the_same(realdata_dir):
    files = sorted(realdata_dir.rglob("*.et")) + sorted(DATA.rglob("*.et*"))
    assert len(files) >= 121
    for f in files:
        result = _same(io._load(f))
        assert not isinstance(result, str), f


def test_written_trace_with_every_attribute_kind(tmp_path):
    b = ChakraTraceBuilder(version="1.0.0", metadata_attrs=[attr("schema", "x")])
    b.add_node(1, "n", NodeType.COMP_NODE, attrs=EVERY_KIND, ctrl_deps=[0], data_deps=[2**64 - 1],
               start_time_micros=MAX_MICROS, duration_micros=3, inputs=IOInfo("[1]", "[[2]]", "t"),
               outputs=IOInfo(), unknown=_v(99 << 3 | 5) + b"abcd")  # fmt: skip
    b.add_node(0, "", 0)  # an empty record
    b.add_node(2, "n", NodeType.COMM_COLL_NODE, attrs=EVERY_KIND[::-1], data_deps=[1, 1, 300])
    b.add_node(3, "", -128, attrs=[attr("comm_size", 1 << 20)])
    write_chakra(b.build(), tmp_path / "a.et")
    n, n_empty, cols = _same((tmp_path / "a.et").read_bytes())  # type: ignore[misc]
    assert (n, n_empty) == (5, 1)
    assert cols[-1].shape == (len({a.name for a in EVERY_KIND} | {"comm_size"}), 2)


def test_converted_trace_decodes_the_same(tmp_path):
    """What ``lumos convert`` writes: a graph's tasks with lumos's attributes and delay nodes."""
    from lumos.chakra.mapping import to_chakra
    from lumos.examples_data import example_trace_path
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto

    trace = to_chakra(build_graph(read_kineto(example_trace_path())), delay_nodes=True)
    path = write_chakra(trace, tmp_path / "ex.0.et")[0]
    _, _, cols = _same(path.read_bytes())  # type: ignore[misc]
    assert cols[0].size == trace.num_nodes and cols[17].size > 5 * trace.num_nodes


# ---- generated traces -----------------------------------------------------------------------
def _file(nodes: list[dict]) -> bytes:
    b = ChakraTraceBuilder(version="0.0.4")
    for node in nodes:
        b.add_node(**node)
    with tempfile.TemporaryDirectory() as d:
        return write_chakra(b.build(), Path(d) / "g.et")[0].read_bytes()


@settings(max_examples=150, deadline=None)
@given(nodes=NODES)
def test_generated_traces_decode_the_same(nodes):
    result = _same(_file(nodes))
    assert not isinstance(result, str) and result[0] == len(nodes) + 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=NODES, data=st.data())
def test_mutated_traces_decode_or_fail_the_same(nodes, data):
    raw = mutate(_file(nodes), data, (1, 4), cut=8, insert=12)
    if raw:
        _same(raw)


# ---- malformed buffers ----------------------------------------------------------------------
def _rec(body: bytes) -> bytes:
    return _v(len(body)) + body


def _f(fno: int, wt: int, payload: bytes) -> bytes:
    return _v(fno << 3 | wt) + payload


def _attr(*fields: bytes) -> bytes:
    return _f(10, 2, _rec(b"".join(fields)))


META = _rec(b"")
ID = _f(1, 0, b"\x05")
LONG = b"\xff" * 10 + b"\x01"  # an 11-byte varint
MALFORMED = {
    # framing (scan_records)
    "record length truncated": META + b"\x80",
    "record past the end": META + b"\x05\x08\x01",
    "record over int32": META + _v(2**31) + b"x",
    "record length over 10 bytes": META + LONG,
    # Node fields
    "tag truncated": META + _rec(ID + b"\x80"),
    "tag over 10 bytes": META + _rec(ID + LONG),
    "id truncated": META + _rec(_f(1, 0, b"\x80")),
    "id over 10 bytes": META + _rec(_f(1, 0, LONG)),
    "id with wire type 2": META + _rec(_f(1, 2, b"\x01\x07")),
    "name with wire type 0": META + _rec(ID + _f(2, 0, b"\x01")),
    "name past the end": META + _rec(ID + _f(2, 2, b"\x05ab")),
    "name length 2**63": META + _rec(ID + _f(2, 2, _v(1 << 63)) + b"abc"),
    "type with wire type 5": META + _rec(ID + _f(3, 5, b"\x01\x00\x00\x00")),
    "type 260": META + _rec(ID + _f(3, 0, _v(260))),
    "type -129": META + _rec(ID + _f(3, 0, _v(2**64 - 129))),
    "type -128": META + _rec(ID + _f(3, 0, _v(2**64 - 128))),
    "start past int64 ns": META + _rec(ID + _f(6, 0, _v(MAX_MICROS + 1))),
    "duration 2**64-1": META + _rec(ID + _f(7, 0, _v(2**64 - 1))),
    "duration at the limit": META + _rec(ID + _f(7, 0, _v(MAX_MICROS))),
    "deps with wire type 1": META + _rec(ID + _f(5, 1, bytes(8))),
    "packed deps past the end": META + _rec(ID + _f(5, 2, b"\x09\x01")),
    "packed deps length 2**63": META + _rec(ID + _f(5, 2, _v(1 << 63))),
    "packed dep truncated": META + _rec(ID + _f(4, 2, b"\x02\x01\x80")),
    "packed dep over 10 bytes": META + _rec(ID + _f(4, 2, _rec(b"\x01" + LONG))),
    "packed dep over 10 bytes, cut": META + _rec(ID + _f(4, 2, _rec(b"\x80" * 12))),
    "unpacked dep truncated": META + _rec(ID + _f(5, 0, b"\x80")),
    "unpacked and packed deps": META + _rec(_f(5, 0, b"\x07") + _f(5, 2, b"\x02\x01\x02")
                                            + _f(4, 2, b"\x00") + _f(5, 0, _v(2**64 - 1))),
    "inputs with wire type 0": META + _rec(ID + _f(8, 0, b"\x01")),
    "outputs past the end": META + _rec(ID + _f(9, 2, b"\x07")),
    # unknown fields: kept as spans, or an error when they cannot be skipped
    "unknown fields": META + _rec(ID + _f(99, 0, LONG[1:]) + _f(0, 5, b"abcd")
                                  + _f(11, 1, bytes(8)) + _f(2**20, 2, b"\x02hi")),
    "unknown group": META + _rec(ID + _f(99, 3, b"")),
    "unknown end group": META + _rec(ID + _f(99, 4, b"")),
    "unknown wire type 6": META + _rec(ID + _f(12, 6, b"")),
    "unknown fixed64 past the end": META + _rec(ID + _f(99, 1, bytes(7))),
    "unknown varint over 10 bytes": META + _rec(ID + _f(99, 0, LONG)),
    "unknown length past the end": META + _rec(ID + _f(99, 2, _v(1 << 63))),
    # attributes
    "attribute past the end": META + _rec(ID + _f(10, 2, b"\x09\x0a")),
    "attribute with wire type 0": META + _rec(ID + _f(10, 0, b"\x01")),
    "attribute value with the wrong wire type": META + _rec(ID + _attr(_f(9, 2, b"\x00"))),
    "attribute name with wire type 0": META + _rec(ID + _attr(_f(1, 0, b"\x01"))),
    "attribute name past the end": META + _rec(ID + _attr(_f(1, 2, b"\x05ab"))),
    "attribute name length wraps": META + _rec(ID + _attr(_f(1, 2, _v(2**64 - 11)) + b"xx")),
    "attribute tag truncated": META + _rec(ID + _attr(b"\x80")),
    "attribute value over 10 bytes": META + _rec(ID + _attr(_f(9, 0, LONG))),
    "attribute value truncated": META + _rec(ID + _attr(_f(9, 0, b"\xff"))),
    "attribute fixed32 cut": META + _rec(ID + _attr(_f(19, 5, b"\x01\x02"))),
    "attribute double cut": META + _rec(ID + _attr(_f(3, 1, bytes(7)))),
    "attribute list past the end": META + _rec(ID + _attr(_f(10, 2, b"\x05"))),
    "attribute unknown group": META + _rec(ID + _attr(_f(40, 3, b""))),
    "attribute unknown fields": META + _rec(ID + _attr(_f(1, 2, b"\x01a"), _f(40, 0, b"\x01"),
                                                       _f(0, 1, bytes(8)), _f(2, 2, b"\x01d"))),
    "attribute float32 NaN payload": META + _rec(ID + _attr(_f(5, 5, b"\x01\x00\x80\x7f"))),
    "attribute int32 as a 10-byte varint": META + _rec(ID + _attr(_f(7, 0, _v(2**64 - 5)))),
    "attribute uint32 over 32 bits": META + _rec(ID + _attr(_f(11, 0, _v(2**40 + 7)))),
    "attribute bool 2": META + _rec(ID + _attr(_f(27, 0, b"\x02"))),
    "attribute two values, the last wins": META + _rec(ID + _attr(_f(9, 0, b"\x05"),
                                                                  _f(3, 1, bytes(8)))),
    "attribute list after a value": META + _rec(ID + _attr(_f(9, 0, b"\x05"), _f(10, 2, b"\x00"))),
    "attribute without a name": META + _rec(ID + _attr(_f(9, 0, b"\x05"))),
    "error in the second node": META + _rec(ID) + _rec(ID + _attr(_f(9, 5, bytes(4)))),
    "empty nodes": META + b"\x00" * 3 + _rec(ID),
}  # fmt: skip
VALID = {"type -128", "duration at the limit", "unpacked and packed deps", "unknown fields",
         "attribute unknown fields", "attribute float32 NaN payload", "empty nodes",
         "attribute int32 as a 10-byte varint", "attribute uint32 over 32 bits",
         "attribute bool 2", "attribute two values, the last wins", "attribute list after a value",
         "attribute without a name"}  # fmt: skip


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_buffers_fail_with_the_same_message(case):
    result = _same(MALFORMED[case])
    assert isinstance(result, str) == (case not in VALID), result


def test_float32_nan_payload_is_cast_as_the_compiled_decoder_casts():
    _, _, cols = _same(MALFORMED["attribute float32 NaN payload"])  # type: ignore[misc]
    assert np.isnan(cols[19][0]) and cols[17].tolist() == [5]


# ---- which decoder read_chakra uses ---------------------------------------------------------
def test_python_decoder_is_used_only_uncached_small_and_within_the_budget(monkeypatch):
    monkeypatch.setattr(_wire_py, "_compiled_only", False)  # undo tests/conftest.py
    monkeypatch.setattr(_wire_py, "_spent", {})
    monkeypatch.setattr(_wire_py, "_COMPILED", (Uncompiled(), Uncompiled()))
    monkeypatch.setattr(_jit, "cached", lambda disp: False)
    assert _wire_py.MAX_BYTES == _jit.SMALL_INPUT_BYTES
    assert not _wire_py.use_python(_wire_py.MAX_BYTES + 1)
    assert _wire_py.use_python(_wire_py.MAX_BYTES // 2)
    assert _wire_py.use_python(_wire_py.MAX_BYTES // 2)
    assert not _wire_py.use_python(1)  # this process has decoded its share
    monkeypatch.setattr(_wire_py, "_spent", {})
    with _wire_py.compiled():
        assert not _wire_py.use_python(10)
    assert _wire_py.use_python(10)
    monkeypatch.setattr(_jit, "cached", lambda disp: True)
    assert not _wire_py.use_python(10)
    monkeypatch.setattr(_jit, "cached", lambda disp: False)
    monkeypatch.setattr(_wire_py, "_COMPILED", (_wire.scan_records, _wire.decode_nodes))
    _same(MALFORMED["empty nodes"])
    assert not _wire_py.use_python(10)


def _spy(calls: list[str], module, name: str):
    real = getattr(module, name)

    def spy(*args):
        calls.append(f"{module.__name__.rpartition('.')[2]}.{name}")
        return real(*args)

    return spy


@pytest.mark.parametrize("python", [True, False])
def test_read_chakra_decodes_with_the_decoder_use_python_names(monkeypatch, tmp_path, python):
    calls: list[str] = []
    for module in (_wire, _wire_py):
        for name in ("scan_records", "decode_nodes"):
            monkeypatch.setattr(module, name, _spy(calls, module, name))
    sizes: list[int] = []
    monkeypatch.setattr(_wire_py, "use_python", lambda nbytes: sizes.append(nbytes) or python)
    raw = MALFORMED["unknown fields"]
    (tmp_path / "u.et").write_bytes(raw)
    t = read_chakra(tmp_path / "u.et")
    assert t.node_id.tolist() == [5] and len(t.node(0).unknown) == len(raw) - 4
    assert sizes == [len(raw)]
    used = "_wire_py" if python else "_wire"
    assert calls == [f"{used}.scan_records", f"{used}.decode_nodes"]
    (tmp_path / "bad.et").write_bytes(MALFORMED["type 260"])
    with pytest.raises(ChakraFormatError, match=r"bad\.et.*node id 5 \(row 0\), field 3 at byte"):
        read_chakra(tmp_path / "bad.et")
