"""The Python attribute decoder of a first command (``lumos.chakra._wire_attr_py``) is the compiled one.

Both decoders read the same attribute bodies here, side by side: every attribute of the real
files, traces with every kind, generated bodies (valid, several oneof members, lists packed and
not, mutated and cut), hand-made malformed ones. They must agree on ``ptr``, ``val``,
``val_len`` and ``bad`` (dtype, shape and bytes, so NaN payloads and -0.0 count). Then which one
``AttrTable.decode`` picks.
"""

from __future__ import annotations

import numpy as np
import pytest
from chakra_testdata import ATTRS, EVERY_KIND, Uncompiled, _values, mutate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_wire_py import DATA, LONG, _f, _rec

from lumos import _jit
from lumos.chakra import (
    NodeType,
    _wire,
    _wire_attr,
    _wire_attr_py,
    _wire_py,
    attr_table,
    read_chakra,
    write_chakra,
)
from lumos.chakra._wire import (
    E_ATTR_WIRE_TYPE,
    E_FIELD_PAST_END,
    E_GROUP,
    E_TRUNCATED_VARINT,
    E_VARINT_TOO_LONG,
)
from lumos.chakra.attr_table import AttrTable
from lumos.chakra.attrs import Attr, attr, encode_attr, read_varint
from lumos.chakra.attrs import varint_bytes as _v
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.schema import ATTR_KIND_BY_NAME, ATTR_KIND_NAMES
from lumos.chakra.trace import ChakraTrace


def _same(blob: np.ndarray, off: object, ln: object) -> AttrTable:
    """Decode the bodies ``blob[off[k]:off[k]+ln[k]]`` both ways, assert the four arrays are
    identical and return the compiled table (``tests/conftest.py`` pins the compiled decoder)."""
    off = np.asarray(off, dtype=np.int64)
    ln = np.asarray(ln, dtype=np.int64)
    compiled = AttrTable.decode(blob, off, ln, np.zeros(off.size, np.int8))
    python = _wire_attr_py.decode_attr_values(blob, off, ln)
    for name, b in zip(("ptr", "val", "val_len", "bad"), python, strict=True):
        a = getattr(compiled, name)
        assert (b.dtype, b.shape) == (a.dtype, a.shape), name
        assert b.tobytes() == a.tobytes(), name
    return compiled


def _pack(bodies: list[bytes], gaps: list[bytes] | None = None) -> tuple[np.ndarray, list, list]:
    """``(blob, off, ln)`` of ``bodies`` laid out one after the other, ``gaps[k]`` before body k
    (so that string spans are read at offsets other than their body's)."""
    gaps = gaps or [b""] * len(bodies)
    blob, off, ln = b"", [], []
    for gap, body in zip(gaps, bodies, strict=True):
        blob += gap
        off.append(len(blob))
        ln.append(len(body))
        blob += body
    return np.frombuffer(blob + b"\xff", dtype=np.uint8), off, ln


# ---- real and written traces ----------------------------------------------------------------
def _trace_attrs(t: ChakraTrace) -> int:
    """Compare the node attributes and the metadata attributes of ``t``; their number."""
    nodes = _same(t.blob, t.attr_off, t.attr_len)
    assert not nodes.bad.any()
    off, ln = t.metadata._spans
    _same(np.frombuffer(t.metadata.raw, dtype=np.uint8), off, ln)
    return int(nodes.bad.size) + len(off)


def test_every_attribute_of_every_real_et_decodes_the_same(realdata_dir):
    files = sorted(realdata_dir.rglob("*.et")) + sorted(DATA.rglob("*.et*"))
    assert len(files) >= 121
    total = 0
    for f in files:
        t = read_chakra(f)
        assert isinstance(t, ChakraTrace), f
        total += _trace_attrs(t)
    assert total > 20_000  # chakra.0.et alone has 22,037


def _equal(a: object, b: object) -> bool:
    return a == b or (a != a and b != b)  # NaN is NaN


def test_written_trace_with_every_attribute_kind(tmp_path):
    b = ChakraTraceBuilder(version="1.0.0", metadata_attrs=EVERY_KIND)
    b.add_node(1, "n", NodeType.COMP_NODE, attrs=EVERY_KIND)
    b.add_node(2, "m", NodeType.COMM_COLL_NODE, attrs=EVERY_KIND[::-1])
    t = read_chakra(write_chakra(b.build(), tmp_path / "a.et")[0])
    assert isinstance(t, ChakraTrace) and _trace_attrs(t) == 3 * len(EVERY_KIND)
    python = AttrTable(t.blob, t.attr_kind, *_wire_attr_py.decode_attr_values(
        t.blob, t.attr_off.astype(np.int64), t.attr_len.astype(np.int64)))  # fmt: skip
    for k, a in enumerate(EVERY_KIND):
        got = python.value(k)
        if a.kind.endswith("_list"):
            assert len(got) == len(a.value) and all(map(_equal, got, a.value)), a
        elif a.kind == "float_val":
            assert _equal(got, float(np.float32(a.value))), a
        else:
            assert _equal(got, a.value), a


# ---- hand-made bodies -----------------------------------------------------------------------
NAME = _f(1, 2, b"\x02op")
# (body, error code): every path of the decoder, and every error it reports
BODIES = {
    "empty": (b"", 0),
    "name and doc only": (NAME + _f(2, 2, b"\x01d"), 0),
    "int32 as a 10-byte varint": (_f(7, 0, _v(2**64 - 5)), 0),
    "int32 over 32 bits": (_f(7, 0, _v(2**35 + 2**31 + 1)), 0),
    "uint32 over 32 bits": (_f(11, 0, _v(2**40 + 7)), 0),
    "int64 2**63": (_f(9, 0, _v(2**63)), 0),
    "sint32 beyond 32 bits": (_f(15, 0, _v(2**40 + 1)), 0),
    "sint64 2**64-1": (_f(17, 0, _v(2**64 - 1)), 0),
    "bool 2": (_f(27, 0, b"\x02"), 0),
    "bool 2**64-1": (_f(27, 0, _v(2**64 - 1)), 0),
    "fixed32 2**32-1": (_f(19, 5, b"\xff" * 4), 0),
    "sfixed32 -1": (_f(23, 5, b"\xff" * 4), 0),
    "fixed64 2**64-1": (_f(21, 1, b"\xff" * 8), 0),
    "double NaN payload": (_f(3, 1, b"\x01\x00\x00\x00\x00\x00\xf8\x7f"), 0),
    "float signalling NaN": (_f(5, 5, b"\x01\x00\x80\x7f"), 0),
    "float -0.0": (_f(5, 5, b"\x00\x00\x00\x80"), 0),
    "float denormal": (_f(5, 5, b"\x01\x00\x00\x00"), 0),
    "empty string": (_f(29, 2, b"\x00"), 0),
    "bytes": (_f(31, 2, b"\x03\x00\xff\x01"), 0),
    "two values, the last wins": (_f(9, 0, b"\x05") + _f(3, 1, bytes(8)), 0),
    "a list after a value": (_f(9, 0, b"\x05") + _f(10, 2, b"\x03\x0a\x01\x07"), 0),
    "a value after a list": (_f(10, 2, b"\x04\x0a\x02\x07\x08") + _f(29, 2, b"\x01s"), 0),
    "two lists": (_f(10, 2, b"\x04\x0a\x02\x07\x08") + _f(18, 2, b"\x02\x0a\x00"), 0),
    "empty list message": (_f(10, 2, b"\x00"), 0),
    "packed and unpacked": (_f(10, 2, _rec(_f(1, 2, b"\x02\x01\x02") + _f(1, 0, b"\x7f")
                                           + _f(1, 2, b"\x00") + _f(1, 0, LONG[1:]))), 0),
    "packed sint32 and bools": (_f(16, 2, _rec(_f(1, 2, b"\x02\x03\x04")))
                                + _f(28, 2, _rec(_f(1, 2, b"\x03\x00\x02\x01"))), 0),
    "packed floats": (_f(6, 2, _rec(_f(1, 2, _rec(b"\x00\x00\xc0\x7f" + b"\x01\x00\x80\xff")))), 0),
    "unpacked doubles": (_f(4, 2, _rec(_f(1, 1, bytes(8)) + _f(1, 1, b"\xff" * 8))), 0),
    "packed fixed64 and sfixed32": (_f(22, 2, _rec(_f(1, 2, _rec(b"\xff" * 16))))
                                    + _f(24, 2, _rec(_f(1, 5, b"\xfe\xff\xff\xff"))), 0),
    "string list": (_f(30, 2, _rec(_f(1, 2, b"\x01a") + _f(1, 2, b"\x00") + _f(1, 2, b"\x02bc"))), 0),
    "unknown fields in a list": (_f(10, 2, _rec(_f(2, 0, b"\x01") + _f(1, 0, b"\x05")
                                                + _f(9, 1, bytes(8)) + _f(0, 5, bytes(4)))), 0),
    "unknown fields": (_f(0, 0, b"\x01") + NAME + _f(33, 1, bytes(8)) + _f(2**20, 5, bytes(4))
                       + _f(9, 0, b"\x01") + _f(40, 2, b"\x01z"), 0),
    "tag truncated": (NAME + b"\x80", E_TRUNCATED_VARINT),
    "tag over 10 bytes": (LONG, E_VARINT_TOO_LONG),
    "value truncated": (_f(9, 0, b"\xff"), E_TRUNCATED_VARINT),
    "value over 10 bytes": (_f(9, 0, LONG), E_VARINT_TOO_LONG),
    "name with wire type 0": (_f(1, 0, b"\x01"), E_ATTR_WIRE_TYPE),
    "int64 with wire type 2": (_f(9, 2, b"\x00"), E_ATTR_WIRE_TYPE),
    "list with wire type 0": (_f(10, 0, b"\x00"), E_ATTR_WIRE_TYPE),
    "double with wire type 5": (_f(3, 5, bytes(4)), E_ATTR_WIRE_TYPE),
    "name past the end": (_f(1, 2, b"\x05ab"), E_FIELD_PAST_END),
    "name length wraps": (_f(1, 2, _v(2**64 - 11)) + b"xx", E_FIELD_PAST_END),
    "name length truncated": (_f(1, 2, b"\x85"), E_TRUNCATED_VARINT),
    "string past the end": (_f(29, 2, b"\x09ab"), E_FIELD_PAST_END),
    "fixed32 cut": (_f(19, 5, b"\x01\x02"), E_FIELD_PAST_END),
    "double cut": (_f(3, 1, bytes(7)), E_FIELD_PAST_END),
    "list past the end": (_f(10, 2, b"\x05"), E_FIELD_PAST_END),
    "list length 2**63": (_f(10, 2, _v(2**63)) + b"\x0a", E_FIELD_PAST_END),
    "list length truncated": (_f(10, 2, b"\xff"), E_TRUNCATED_VARINT),
    "list tag truncated": (_f(10, 2, b"\x01\x80"), E_TRUNCATED_VARINT),
    "packed past its list": (_f(10, 2, b"\x03\x0a\x05\x01"), E_FIELD_PAST_END),
    "packed length truncated": (_f(10, 2, b"\x02\x0a\x80"), E_TRUNCATED_VARINT),
    "packed varint cut by its end": (_f(10, 2, _rec(_f(1, 2, b"\x01\x80") + b"\x08\x01")),
                                     E_TRUNCATED_VARINT),
    "packed varint over 10 bytes": (_f(10, 2, _rec(_f(1, 2, _rec(LONG)))), E_VARINT_TOO_LONG),
    "packed fixed32 cut": (_f(20, 2, _rec(_f(1, 2, _rec(bytes(6))))), E_FIELD_PAST_END),
    "unpacked element past the list": (_f(4, 2, _rec(_f(1, 1, bytes(4)))), E_FIELD_PAST_END),
    "unpacked string past the list": (_f(30, 2, b"\x03\x0a\x05a"), E_FIELD_PAST_END),
    "list element with the wrong wire type": (_f(10, 2, _rec(_f(1, 5, bytes(4)))),
                                              E_ATTR_WIRE_TYPE),
    "list element in a group": (_f(10, 2, _rec(_f(1, 3, b""))), E_ATTR_WIRE_TYPE),
    "unknown group in a list": (_f(10, 2, _rec(_f(2, 3, b""))), E_GROUP),
    "unknown fixed64 past its list": (_f(10, 2, _rec(_f(2, 1, bytes(4)))), E_FIELD_PAST_END),
    "unknown group": (_f(40, 3, b""), E_GROUP),
    "unknown end group": (_f(0, 4, b""), E_GROUP),
    "unknown wire type 7": (_f(50, 7, b""), E_GROUP),
    "unknown fixed64 past the end": (_f(40, 1, bytes(7)), E_FIELD_PAST_END),
    "unknown length past the end": (_f(40, 2, _v(1 << 63)), E_FIELD_PAST_END),
    "an error after a good value": (_f(9, 0, b"\x05") + _f(3, 1, b""), E_FIELD_PAST_END),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BODIES))
def test_hand_made_bodies_decode_or_fail_the_same(case):
    body, code = BODIES[case]
    t = _same(*_pack([NAME + body, body], [b"\x00", b"\x01\x02"]))
    assert t.bad.tolist() == [code, code]


def test_all_hand_made_bodies_at_once():
    """One call over every body: rows after a malformed one keep their places."""
    bodies = [body for body, _ in BODIES.values()]
    t = _same(*_pack(bodies, [bytes(k % 3) for k in range(len(bodies))]))
    assert t.bad.tolist() == [code for _, code in BODIES.values()]


def test_no_bodies():
    t = _same(np.zeros(0, np.uint8), [], [])
    assert t.ptr.tolist() == [0] and t.val.size == 0


# ---- generated bodies -----------------------------------------------------------------------
def _element_bytes(kind: str, value: object) -> bytes:
    """One list element of ``kind`` as its scalar kind writes it (without the tag)."""
    scalar = kind.replace("_list", "_val")
    raw = encode_attr(Attr("", value, scalar))
    return raw[read_varint(raw, 0)[1] :]


_ELEMENT_WIRE_TYPE = {"double": 1, "fixed64": 1, "sfixed64": 1, "float": 5, "fixed32": 5,
                      "sfixed32": 5, "string": 2, "bytes": 2}  # fmt: skip


@st.composite
def _list_member(draw: st.DrawFn) -> bytes:
    """A list member whose elements come packed or not, in runs, between unknown fields."""
    kind = draw(st.sampled_from(sorted(k for k in ATTR_KIND_BY_NAME if k.endswith("_list"))))
    wt = _ELEMENT_WIRE_TYPE.get(kind.partition("_")[0], 0)
    body = b""
    for run in draw(st.lists(_values(kind), max_size=3)):
        items = [_element_bytes(kind, v) for v in run]
        if wt != 2 and draw(st.booleans()):
            body += _f(1, 2, _rec(b"".join(items)))
        else:
            body += b"".join(_f(1, wt, item) for item in items)
        body += draw(st.sampled_from([b"", _f(2, 0, b"\x01"), _f(3, 2, b"\x01x")]))
    return _f(ATTR_KIND_BY_NAME[kind], 2, _rec(body))


MEMBERS = st.one_of(
    ATTRS.map(encode_attr),
    _list_member(),
    st.sampled_from([NAME, _f(2, 2, b"\x01d"), _f(40, 0, b"\x01"), _f(0, 1, bytes(8))]),
)
BODY = st.lists(MEMBERS, max_size=4).map(b"".join)
GAPS = st.binary(max_size=3)


@settings(max_examples=300, deadline=None)
@given(bodies=st.lists(st.tuples(GAPS, BODY), max_size=6))
def test_generated_bodies_decode_the_same(bodies):
    gaps, raw = [g for g, _ in bodies], [b for _, b in bodies]
    t = _same(*_pack(raw, gaps))
    assert not t.bad.any()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies=st.lists(BODY, min_size=1, max_size=4), data=st.data())
def test_mutated_bodies_decode_or_fail_the_same(bodies, data):
    _same(*_pack([mutate(body, data, (0, 3), cut=8, insert=12) for body in bodies]))


@settings(max_examples=300, deadline=None)
@given(bodies=st.lists(st.binary(max_size=24), max_size=4))
def test_arbitrary_bytes_decode_or_fail_the_same(bodies):
    _same(*_pack(bodies))


# ---- which decoder AttrTable.decode uses ----------------------------------------------------
def test_python_decoder_is_used_only_uncached_small_and_within_the_budget(monkeypatch):
    monkeypatch.setattr(_wire_py, "_compiled_only", False)  # undo tests/conftest.py
    monkeypatch.setattr(_wire_attr_py, "_spent", {})
    monkeypatch.setattr(_wire_attr_py, "_COMPILED", (Uncompiled(),))
    monkeypatch.setattr(_jit, "cached", lambda disp: False)
    limit = _wire_attr_py.MAX_BYTES
    assert limit == _jit.SMALL_INPUT_BYTES
    assert not _wire_attr_py.use_python(limit + 1)
    assert _wire_attr_py.use_python(limit // 2)
    assert _wire_attr_py.use_python(limit // 2)
    assert not _wire_attr_py.use_python(1)  # this process has decoded its share
    monkeypatch.setattr(_wire_attr_py, "_spent", {})
    monkeypatch.setattr(_wire_py, "_spent", {})
    monkeypatch.setattr(_wire_py, "_COMPILED", (Uncompiled(), Uncompiled()))
    assert _wire_py.use_python(limit)  # the node decoder's budget is its own
    assert _wire_attr_py.use_python(10)
    with _wire_py.compiled():  # the background warmer compiles this decoder too
        assert not _wire_attr_py.use_python(10)
    assert _wire_attr_py.use_python(10)
    monkeypatch.setattr(_jit, "cached", lambda disp: True)
    assert not _wire_attr_py.use_python(10)
    monkeypatch.setattr(_jit, "cached", lambda disp: False)
    monkeypatch.setattr(_wire_attr_py, "_COMPILED", (_wire_attr.decode_attr_values,))
    blob, off, ln = _pack([encode_attr(attr("x", 1))])
    ptr, bad, none = np.zeros(2, np.int64), np.zeros(1, np.int8), np.zeros(0, np.int64)
    _wire_attr.decode_attr_values(blob, np.array(off), np.array(ln), False, ptr, none, none, bad)
    assert not _wire_attr_py.use_python(10)  # compiled in this process now


def _spy(calls: list[str], module):
    real = module.decode_attr_values

    def spy(*args):
        calls.append(module.__name__.rpartition(".")[2])
        return real(*args)

    return spy


@pytest.mark.parametrize("python", [True, False])
def test_attr_table_decodes_with_the_decoder_use_python_names(monkeypatch, python):
    calls: list[str] = []
    sizes: list[int] = []
    for module in (_wire_attr, _wire_attr_py):
        monkeypatch.setattr(module, "decode_attr_values", _spy(calls, module))
    monkeypatch.setattr(_wire_attr_py, "use_python", lambda n: sizes.append(n) or python)
    bodies = [encode_attr(a) for a in EVERY_KIND]
    blob, off, ln = _pack(bodies, [b"\x07"] * len(bodies))
    kinds = np.array([ATTR_KIND_BY_NAME.get(a.kind, 0) for a in EVERY_KIND], np.int8)
    table = attr_table.AttrTable.decode(blob, np.array(off), np.array(ln), kinds)
    assert sizes == [sum(ln)]
    assert calls == (["_wire_attr_py"] if python else ["_wire_attr", "_wire_attr"])
    assert [ATTR_KIND_NAMES.get(int(k), "") for k in table.kind] == [a.kind for a in EVERY_KIND]
    assert table.value(len(EVERY_KIND) - 1) == 7 and table.value(0) == 1.5


def test_read_chakra_attribute_values_need_no_compile_on_a_first_run(monkeypatch, tmp_path):
    """A small file's nodes and attribute values decode with neither compiled decoder."""
    monkeypatch.setattr(_wire_py, "_compiled_only", False)
    monkeypatch.setattr(_wire_py, "_spent", {})
    monkeypatch.setattr(_wire_attr_py, "_spent", {})
    monkeypatch.setattr(_wire_py, "_COMPILED", (Uncompiled(), Uncompiled()))
    monkeypatch.setattr(_wire_attr_py, "_COMPILED", (Uncompiled(),))

    def refuse(*args):
        raise AssertionError("the compiled decoder was called")

    for module, name in ((_wire, "scan_records"), (_wire, "decode_nodes"),
                         (_wire_attr, "decode_attr_values")):  # fmt: skip
        monkeypatch.setattr(module, name, refuse)
    b = ChakraTraceBuilder(version="1.0.0", metadata_attrs=[attr("schema", "x")])
    b.add_node(1, "n", NodeType.COMP_NODE, attrs=EVERY_KIND)
    t = read_chakra(write_chakra(b.build(), tmp_path / "a.et")[0])
    assert isinstance(t, ChakraTrace)
    assert [a.name for a in t.node(0).attrs] == [a.name for a in EVERY_KIND]
    assert t.node(0).attr("s") == "héllo" and t.metadata.get("schema") == "x"
