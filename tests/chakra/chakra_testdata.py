"""Chakra test data: real files read in place from the realdata folder (tests/realdata.py),
every attribute kind, and strategies for generated traces (hypothesis).

Names of real files are realdata paths (strings), resolved inside the tests with
:func:`realdata`, so the tests are collected, and skipped with a reason, where the folder is
absent. The gzipped ``chakra.0.et`` is made in a temporary folder by the ``chakra0_gz`` fixture
(conftest.py).
"""

from __future__ import annotations

from hypothesis import strategies as st
from tests.realdata import TRACES, astra_custom, astra_micro, astra_micro_files, realdata

from lumos.chakra import attr
from lumos.chakra._wire import (
    E_ATTR_WIRE_TYPE,
    E_FIELD_PAST_END,
    E_GROUP,
    E_TRUNCATED_VARINT,
    E_VARINT_TOO_LONG,
    MAX_MICROS,
)
from lumos.chakra.attrs import Attr, IOInfo
from lumos.chakra.attrs import varint_bytes as _v
from lumos.chakra.schema import ATTR_KIND_NAMES

__all__ = [
    "ATTRS",
    "BODIES",
    "CHAKRA0",
    "EVERY_KIND",
    "LONG",
    "MALFORMED",
    "NAMES",
    "NODES",
    "UNKNOWN",
    "VALID",
    "astra_custom",
    "astra_micro",
    "astra_micro_files",
    "attr_field",
    "field",
    "mutate",
    "realdata",
    "rec",
]

#: upstream's PyTorch-converted Chakra ET (plain, as upstream ships it)
CHAKRA0 = TRACES["chakra_pytorch_converted"]

# every oneof member, with the values that each decode step treats apart
EVERY_KIND = [
    attr("d", 1.5), attr("dnan", float("nan")), attr("dneg0", -0.0), attr("dinf", float("-inf")),
    attr("f", 0.25, "float_val"), attr("fnan", float("nan"), "float_val"),
    attr("i32", -3, "int32_val"), attr("i32max", 2**31 - 1, "int32_val"),
    attr("i64", -(2**40)), attr("u32", 2**32 - 1, "uint32_val"),
    attr("u64", 2**64 - 1, "uint64_val"), attr("s32", -7, "sint32_val"),
    attr("s64", -(2**63), "sint64_val"), attr("fx32", 2**32 - 1, "fixed32_val"),
    attr("fx64", 2**64 - 1, "fixed64_val"), attr("sfx32", -9, "sfixed32_val"),
    attr("sfx64", -(2**63), "sfixed64_val"), attr("b", True), attr("b0", False),
    attr("s", "héllo"), attr("by", b"\x00\xff"), attr("dl", [1.0, 2.5]), attr("il", [1, -2, 3]),
    attr("fl", [0.5], "float_list"), attr("u64l", [0, 2**63], "uint64_list"),
    attr("bl", [True, False]), attr("sl", ["a", "", "c"]), attr("byl", [b"x"]),
    attr("empty", [], "int64_list"), Attr("doc", 5, "int64_val", "a doc string"),
    Attr("nokind", None, ""), attr("", 7),
]  # fmt: skip


def _values(kind: str) -> st.SearchStrategy:
    base, _, shape = kind.rpartition("_")
    i32, i64 = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)
    u32, u64 = (0, 2**32 - 1), (0, 2**64 - 1)
    bounds = {"int32": i32, "int64": i64, "uint32": u32, "uint64": u64, "sint32": i32,
              "sint64": i64, "fixed32": u32, "fixed64": u64, "sfixed32": i32,
              "sfixed64": i64}  # fmt: skip
    one: st.SearchStrategy
    if base in bounds:
        one = st.integers(*bounds[base])
    elif base in ("double", "float"):
        one = st.floats(width=64 if base == "double" else 32)
    else:
        one = {"bool": st.booleans(), "string": st.text(max_size=6),
               "bytes": st.binary(max_size=6)}[base]  # fmt: skip
    return one if shape == "val" else st.lists(one, max_size=4)


NAMES = st.sampled_from(["", "a", "op", "é", "aten::mm"])
ATTRS = st.sampled_from(sorted(ATTR_KIND_NAMES.values())).flatmap(
    lambda kind: st.builds(Attr, NAMES, _values(kind), st.just(kind))
)
UNKNOWN = st.sampled_from(
    [b"", _v(100 << 3) + _v(2**64 - 1), _v(99 << 3 | 1) + bytes(8), _v(11 << 3 | 2) + b"\x01z",
     b"\x05\x00\x00\x00\x00"]  # the last one: field 0, fixed32
)  # fmt: skip
#: keyword arguments of ``ChakraTraceBuilder.add_node`` for up to 8 nodes
NODES = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(0, 2**64 - 1), "name": NAMES, "type": st.integers(-128, 127)},
        optional={
            "ctrl_deps": st.lists(st.integers(0, 2**64 - 1), max_size=4),
            "data_deps": st.lists(st.integers(0, 2**64 - 1), max_size=4),
            "start_time_micros": st.integers(0, MAX_MICROS),
            "duration_micros": st.integers(0, MAX_MICROS),
            "inputs": st.builds(IOInfo, st.text(max_size=4), st.text(max_size=4)),
            "outputs": st.builds(IOInfo, st.text(max_size=4)),
            "attrs": st.lists(ATTRS, max_size=5),
            "unknown": UNKNOWN,
        },
    ),
    max_size=8,
)


def mutate(raw: bytes, data: st.DataObject, ops: tuple[int, int], cut: int, insert: int) -> bytes:
    """``raw`` after a number of edits in ``ops`` (inclusive) drawn from ``data``: a byte
    overwritten, up to ``cut`` bytes cut, or up to ``insert`` random bytes inserted."""
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(*ops))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        pos = data.draw(st.integers(0, len(out)))
        if op == "flip" and pos < len(out):
            out[pos] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del out[pos : pos + data.draw(st.integers(1, cut))]
        else:
            out[pos:pos] = data.draw(st.binary(min_size=1, max_size=insert))
    return bytes(out)


# ---- hand-made malformed Chakra files -------------------------------------------------------
def rec(body: bytes) -> bytes:
    """``body`` with its varint length before it (a record, or a length-delimited value)."""
    return _v(len(body)) + body


def field(fno: int, wt: int, payload: bytes) -> bytes:
    """A protobuf field: the tag of field ``fno`` with wire type ``wt``, then ``payload``."""
    return _v(fno << 3 | wt) + payload


def attr_field(*fields: bytes) -> bytes:
    """A Node's ``attr`` field holding an AttributeProto made of ``fields``."""
    return field(10, 2, rec(b"".join(fields)))


META = rec(b"")
ID = field(1, 0, b"\x05")
LONG = b"\xff" * 10 + b"\x01"  # an 11-byte varint
#: Chakra files (a GlobalMetadata and Node records) that every decoder must read alike, most of
#: them malformed; those in :data:`VALID` decode.
MALFORMED = {
    # framing (scan_records)
    "record length truncated": META + b"\x80",
    "record past the end": META + b"\x05\x08\x01",
    "record over int32": META + _v(2**31) + b"x",
    "record length over 10 bytes": META + LONG,
    # Node fields
    "tag truncated": META + rec(ID + b"\x80"),
    "tag over 10 bytes": META + rec(ID + LONG),
    "id truncated": META + rec(field(1, 0, b"\x80")),
    "id over 10 bytes": META + rec(field(1, 0, LONG)),
    "id with wire type 2": META + rec(field(1, 2, b"\x01\x07")),
    "name with wire type 0": META + rec(ID + field(2, 0, b"\x01")),
    "name past the end": META + rec(ID + field(2, 2, b"\x05ab")),
    "name length 2**63": META + rec(ID + field(2, 2, _v(1 << 63)) + b"abc"),
    "type with wire type 5": META + rec(ID + field(3, 5, b"\x01\x00\x00\x00")),
    "type 260": META + rec(ID + field(3, 0, _v(260))),
    "type -129": META + rec(ID + field(3, 0, _v(2**64 - 129))),
    "type -128": META + rec(ID + field(3, 0, _v(2**64 - 128))),
    "start past int64 ns": META + rec(ID + field(6, 0, _v(MAX_MICROS + 1))),
    "duration 2**64-1": META + rec(ID + field(7, 0, _v(2**64 - 1))),
    "duration at the limit": META + rec(ID + field(7, 0, _v(MAX_MICROS))),
    "deps with wire type 1": META + rec(ID + field(5, 1, bytes(8))),
    "packed deps past the end": META + rec(ID + field(5, 2, b"\x09\x01")),
    "packed deps length 2**63": META + rec(ID + field(5, 2, _v(1 << 63))),
    "packed dep truncated": META + rec(ID + field(4, 2, b"\x02\x01\x80")),
    "packed dep over 10 bytes": META + rec(ID + field(4, 2, rec(b"\x01" + LONG))),
    "packed dep over 10 bytes, cut": META + rec(ID + field(4, 2, rec(b"\x80" * 12))),
    "unpacked dep truncated": META + rec(ID + field(5, 0, b"\x80")),
    "unpacked and packed deps": META + rec(field(5, 0, b"\x07") + field(5, 2, b"\x02\x01\x02")
                                            + field(4, 2, b"\x00") + field(5, 0, _v(2**64 - 1))),
    "inputs with wire type 0": META + rec(ID + field(8, 0, b"\x01")),
    "outputs past the end": META + rec(ID + field(9, 2, b"\x07")),
    # unknown fields: kept as spans, or an error when they cannot be skipped
    "unknown fields": META + rec(ID + field(99, 0, LONG[1:]) + field(0, 5, b"abcd")
                                  + field(11, 1, bytes(8)) + field(2**20, 2, b"\x02hi")),
    "unknown group": META + rec(ID + field(99, 3, b"")),
    "unknown end group": META + rec(ID + field(99, 4, b"")),
    "unknown wire type 6": META + rec(ID + field(12, 6, b"")),
    "unknown fixed64 past the end": META + rec(ID + field(99, 1, bytes(7))),
    "unknown varint over 10 bytes": META + rec(ID + field(99, 0, LONG)),
    "unknown length past the end": META + rec(ID + field(99, 2, _v(1 << 63))),
    # attributes
    "attribute past the end": META + rec(ID + field(10, 2, b"\x09\x0a")),
    "attribute with wire type 0": META + rec(ID + field(10, 0, b"\x01")),
    "attribute value with the wrong wire type": META + rec(ID + attr_field(field(9, 2, b"\x00"))),
    "attribute name with wire type 0": META + rec(ID + attr_field(field(1, 0, b"\x01"))),
    "attribute name past the end": META + rec(ID + attr_field(field(1, 2, b"\x05ab"))),
    "attribute name length wraps": META + rec(ID + attr_field(field(1, 2, _v(2**64 - 11)) + b"xx")),
    "attribute tag truncated": META + rec(ID + attr_field(b"\x80")),
    "attribute value over 10 bytes": META + rec(ID + attr_field(field(9, 0, LONG))),
    "attribute value truncated": META + rec(ID + attr_field(field(9, 0, b"\xff"))),
    "attribute fixed32 cut": META + rec(ID + attr_field(field(19, 5, b"\x01\x02"))),
    "attribute double cut": META + rec(ID + attr_field(field(3, 1, bytes(7)))),
    "attribute list past the end": META + rec(ID + attr_field(field(10, 2, b"\x05"))),
    "attribute unknown group": META + rec(ID + attr_field(field(40, 3, b""))),
    "attribute unknown fields": META + rec(ID + attr_field(field(1, 2, b"\x01a"), field(40, 0, b"\x01"),
                                                       field(0, 1, bytes(8)), field(2, 2, b"\x01d"))),
    "attribute float32 NaN payload": META + rec(ID + attr_field(field(5, 5, b"\x01\x00\x80\x7f"))),
    "attribute int32 as a 10-byte varint": META + rec(ID + attr_field(field(7, 0, _v(2**64 - 5)))),
    "attribute uint32 over 32 bits": META + rec(ID + attr_field(field(11, 0, _v(2**40 + 7)))),
    "attribute bool 2": META + rec(ID + attr_field(field(27, 0, b"\x02"))),
    "attribute two values, the last wins": META + rec(ID + attr_field(field(9, 0, b"\x05"),
                                                                  field(3, 1, bytes(8)))),
    "attribute list after a value": META + rec(ID + attr_field(field(9, 0, b"\x05"), field(10, 2, b"\x00"))),
    "attribute without a name": META + rec(ID + attr_field(field(9, 0, b"\x05"))),
    "error in the second node": META + rec(ID) + rec(ID + attr_field(field(9, 5, bytes(4)))),
    "empty nodes": META + b"\x00" * 3 + rec(ID),
}  # fmt: skip
VALID = {"type -128", "duration at the limit", "unpacked and packed deps", "unknown fields",
         "attribute unknown fields", "attribute float32 NaN payload", "empty nodes",
         "attribute int32 as a 10-byte varint", "attribute uint32 over 32 bits",
         "attribute bool 2", "attribute two values, the last wins", "attribute list after a value",
         "attribute without a name"}  # fmt: skip


# ---- hand-made AttributeProto bodies --------------------------------------------------------
NAME = field(1, 2, b"\x02op")
#: AttributeProto bodies and the error code of each (0: it decodes): every path of the value
#: decoder, and every error it reports.
BODIES = {
    "empty": (b"", 0),
    "name and doc only": (NAME + field(2, 2, b"\x01d"), 0),
    "int32 as a 10-byte varint": (field(7, 0, _v(2**64 - 5)), 0),
    "int32 over 32 bits": (field(7, 0, _v(2**35 + 2**31 + 1)), 0),
    "uint32 over 32 bits": (field(11, 0, _v(2**40 + 7)), 0),
    "int64 2**63": (field(9, 0, _v(2**63)), 0),
    "sint32 beyond 32 bits": (field(15, 0, _v(2**40 + 1)), 0),
    "sint64 2**64-1": (field(17, 0, _v(2**64 - 1)), 0),
    "bool 2": (field(27, 0, b"\x02"), 0),
    "bool 2**64-1": (field(27, 0, _v(2**64 - 1)), 0),
    "fixed32 2**32-1": (field(19, 5, b"\xff" * 4), 0),
    "sfixed32 -1": (field(23, 5, b"\xff" * 4), 0),
    "fixed64 2**64-1": (field(21, 1, b"\xff" * 8), 0),
    "double NaN payload": (field(3, 1, b"\x01\x00\x00\x00\x00\x00\xf8\x7f"), 0),
    "float signalling NaN": (field(5, 5, b"\x01\x00\x80\x7f"), 0),
    "float -0.0": (field(5, 5, b"\x00\x00\x00\x80"), 0),
    "float denormal": (field(5, 5, b"\x01\x00\x00\x00"), 0),
    "empty string": (field(29, 2, b"\x00"), 0),
    "bytes": (field(31, 2, b"\x03\x00\xff\x01"), 0),
    "two values, the last wins": (field(9, 0, b"\x05") + field(3, 1, bytes(8)), 0),
    "a list after a value": (field(9, 0, b"\x05") + field(10, 2, b"\x03\x0a\x01\x07"), 0),
    "a value after a list": (field(10, 2, b"\x04\x0a\x02\x07\x08") + field(29, 2, b"\x01s"), 0),
    "two lists": (field(10, 2, b"\x04\x0a\x02\x07\x08") + field(18, 2, b"\x02\x0a\x00"), 0),
    "empty list message": (field(10, 2, b"\x00"), 0),
    "packed and unpacked": (field(10, 2, rec(field(1, 2, b"\x02\x01\x02") + field(1, 0, b"\x7f")
                                           + field(1, 2, b"\x00") + field(1, 0, LONG[1:]))), 0),
    "packed sint32 and bools": (field(16, 2, rec(field(1, 2, b"\x02\x03\x04")))
                                + field(28, 2, rec(field(1, 2, b"\x03\x00\x02\x01"))), 0),
    "packed floats": (field(6, 2, rec(field(1, 2, rec(b"\x00\x00\xc0\x7f" + b"\x01\x00\x80\xff")))), 0),
    "unpacked doubles": (field(4, 2, rec(field(1, 1, bytes(8)) + field(1, 1, b"\xff" * 8))), 0),
    "packed fixed64 and sfixed32": (field(22, 2, rec(field(1, 2, rec(b"\xff" * 16))))
                                    + field(24, 2, rec(field(1, 5, b"\xfe\xff\xff\xff"))), 0),
    "string list": (field(30, 2, rec(field(1, 2, b"\x01a") + field(1, 2, b"\x00") + field(1, 2, b"\x02bc"))), 0),
    "unknown fields in a list": (field(10, 2, rec(field(2, 0, b"\x01") + field(1, 0, b"\x05")
                                                + field(9, 1, bytes(8)) + field(0, 5, bytes(4)))), 0),
    "unknown fields": (field(0, 0, b"\x01") + NAME + field(33, 1, bytes(8)) + field(2**20, 5, bytes(4))
                       + field(9, 0, b"\x01") + field(40, 2, b"\x01z"), 0),
    "tag truncated": (NAME + b"\x80", E_TRUNCATED_VARINT),
    "tag over 10 bytes": (LONG, E_VARINT_TOO_LONG),
    "value truncated": (field(9, 0, b"\xff"), E_TRUNCATED_VARINT),
    "value over 10 bytes": (field(9, 0, LONG), E_VARINT_TOO_LONG),
    "name with wire type 0": (field(1, 0, b"\x01"), E_ATTR_WIRE_TYPE),
    "int64 with wire type 2": (field(9, 2, b"\x00"), E_ATTR_WIRE_TYPE),
    "list with wire type 0": (field(10, 0, b"\x00"), E_ATTR_WIRE_TYPE),
    "double with wire type 5": (field(3, 5, bytes(4)), E_ATTR_WIRE_TYPE),
    "name past the end": (field(1, 2, b"\x05ab"), E_FIELD_PAST_END),
    "name length wraps": (field(1, 2, _v(2**64 - 11)) + b"xx", E_FIELD_PAST_END),
    "name length truncated": (field(1, 2, b"\x85"), E_TRUNCATED_VARINT),
    "string past the end": (field(29, 2, b"\x09ab"), E_FIELD_PAST_END),
    "fixed32 cut": (field(19, 5, b"\x01\x02"), E_FIELD_PAST_END),
    "double cut": (field(3, 1, bytes(7)), E_FIELD_PAST_END),
    "list past the end": (field(10, 2, b"\x05"), E_FIELD_PAST_END),
    "list length 2**63": (field(10, 2, _v(2**63)) + b"\x0a", E_FIELD_PAST_END),
    "list length truncated": (field(10, 2, b"\xff"), E_TRUNCATED_VARINT),
    "list tag truncated": (field(10, 2, b"\x01\x80"), E_TRUNCATED_VARINT),
    "packed past its list": (field(10, 2, b"\x03\x0a\x05\x01"), E_FIELD_PAST_END),
    "packed length truncated": (field(10, 2, b"\x02\x0a\x80"), E_TRUNCATED_VARINT),
    "packed varint cut by its end": (field(10, 2, rec(field(1, 2, b"\x01\x80") + b"\x08\x01")),
                                     E_TRUNCATED_VARINT),
    "packed varint over 10 bytes": (field(10, 2, rec(field(1, 2, rec(LONG)))), E_VARINT_TOO_LONG),
    "packed fixed32 cut": (field(20, 2, rec(field(1, 2, rec(bytes(6))))), E_FIELD_PAST_END),
    "unpacked element past the list": (field(4, 2, rec(field(1, 1, bytes(4)))), E_FIELD_PAST_END),
    "unpacked string past the list": (field(30, 2, b"\x03\x0a\x05a"), E_FIELD_PAST_END),
    "list element with the wrong wire type": (field(10, 2, rec(field(1, 5, bytes(4)))),
                                              E_ATTR_WIRE_TYPE),
    "list element in a group": (field(10, 2, rec(field(1, 3, b""))), E_ATTR_WIRE_TYPE),
    "unknown group in a list": (field(10, 2, rec(field(2, 3, b""))), E_GROUP),
    "unknown fixed64 past its list": (field(10, 2, rec(field(2, 1, bytes(4)))), E_FIELD_PAST_END),
    "unknown group": (field(40, 3, b""), E_GROUP),
    "unknown end group": (field(0, 4, b""), E_GROUP),
    "unknown wire type 7": (field(50, 7, b""), E_GROUP),
    "unknown fixed64 past the end": (field(40, 1, bytes(7)), E_FIELD_PAST_END),
    "unknown length past the end": (field(40, 2, _v(1 << 63)), E_FIELD_PAST_END),
    "an error after a good value": (field(9, 0, b"\x05") + field(3, 1, b""), E_FIELD_PAST_END),
}  # fmt: skip
