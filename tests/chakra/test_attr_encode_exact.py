"""``encode_attr`` (and its packed-varint helper) against bytes written by protobuf's rules.

Field numbers come from ``et_def.proto``: ``AttributeProto`` has ``name = 1``, ``doc_string = 2``
and, for the k-th value type in (double, float, int32, int64, uint32, uint64, sint32, sint64,
fixed32, fixed64, sfixed32, sfixed64, bool, string, bytes), ``<type>_val = 3 + 2k`` and
``<type>_list = 4 + 2k``; each ``<Type>List`` holds ``repeated <type> values = 1`` (packed for
numbers). A tag is the varint of ``field << 3 | wire type`` (0 varint, 1 fixed 8 bytes, 2
length-delimited, 5 fixed 4 bytes); negative varints are their 64-bit two's complement (10
bytes); ``sint*`` are zigzag-encoded (``-1 -> 1``, ``1 -> 2``, ``-64 -> 127``, ``64 -> 128``).
"""

from __future__ import annotations

import numpy as np
import pytest

from lumos.chakra.attrs import Attr, decode_attr, encode_attr

NAME = b"\x0a\x01n"  # field 1, length 1, "n"
M1 = b"\xff" * 9 + b"\x01"  # -1 as a varint: 2**64 - 1 in ten 7-bit groups

CASES = [
    # int64_val is field 9 (k = 3): tag 9 << 3 = 0x48; the value is written even when 0
    (Attr("n", 1, "int64_val"), NAME + b"\x48\x01"),
    (Attr("n", 0, "int64_val"), NAME + b"\x48\x00"),
    # sint64_val field 17: tag 136 = varint 88 01; zigzag(-1) = 1
    (Attr("n", -1, "sint64_val"), NAME + b"\x88\x01\x01"),
    # no name: only the value; uint32_val field 11, tag 0x58
    (Attr("", 5, "uint32_val"), b"\x58\x05"),
    # doc_string is field 2 (0x12); bool_val field 27: tag 216 = d8 01
    (Attr("n", True, "bool_val", doc_string="d"), NAME + b"\x12\x01d\xd8\x01\x01"),
    # no kind: the name alone
    (Attr("n", None, ""), NAME),
    # double_val field 3, wire type 1: tag 0x19, then 1.5 little-endian
    (Attr("n", 1.5, "double_val"), NAME + b"\x19" + b"\x00" * 6 + b"\xf8\x3f"),
    # int64_list field 10: tag 0x52; packed 01 | ac 02 (300) | ten bytes (-1) = 13 bytes,
    # wrapped as field 1 of Int64List (0a 0d ...): 15 bytes
    (Attr("n", [1, 300, -1], "int64_list"), NAME + b"\x52\x0f\x0a\x0d\x01\xac\x02" + M1),
    # an empty list is an empty Int64List: length 0
    (Attr("n", [], "int64_list"), NAME + b"\x52\x00"),
    # sint32_list field 16: tag 130 = 82 01; zigzag 1, 2, 127, 128 = 01 02 7f 80 01
    (Attr("n", [-1, 1, -64, 64], "sint32_list"),
     NAME + b"\x82\x01\x07\x0a\x05\x01\x02\x7f\x80\x01"),
    # sint64_list field 18: tag 146 = 92 01; zigzag(-2**63) = 2**64 - 1 (ten bytes),
    # zigzag(2**63 - 1) = 2**64 - 2 (fe ff .. 01)
    (Attr("n", [-(2**63), 2**63 - 1], "sint64_list"),
     NAME + b"\x92\x01\x16\x0a\x14" + M1 + b"\xfe" + b"\xff" * 8 + b"\x01"),
    # varint sizes at each 7-bit limit: 7f | 80 01 | ff 7f | 80 80 01 | 2**63-1 in 9 bytes
    # (ff x8 7f) | -2**63 = 2**63 in 10 bytes (80 x9 01): 27 bytes, 29 with the 0a 1b header
    (Attr("n", [127, 128, 16383, 16384, 2**63 - 1, -(2**63)], "int64_list"),
     NAME + b"\x52\x1d\x0a\x1b\x7f\x80\x01\xff\x7f\x80\x80\x01" + b"\xff" * 8 + b"\x7f"
     + b"\x80" * 9 + b"\x01"),
    # a 2-D array is written flat, in C order
    (Attr("n", np.array([[1, 2], [3, 4]]), "int32_list"),
     NAME + b"\x42\x06\x0a\x04\x01\x02\x03\x04"),
    # uint64_list field 14 (tag 0x72): 2**64 - 1 does not fit int64, written by the scalar
    # path as ten bytes
    (Attr("n", [2**64 - 1], "uint64_list"), NAME + b"\x72\x0c\x0a\x0a" + M1),
    # bool_list field 28: tag 226 = e2 01
    (Attr("n", [True, False], "bool_list"), NAME + b"\xe2\x01\x04\x0a\x02\x01\x00"),
    # float_list field 6 (tag 0x32): packed fixed 4-byte 1.0 = 00 00 80 3f
    (Attr("n", [1.0], "float_list"), NAME + b"\x32\x06\x0a\x04\x00\x00\x80\x3f"),
    # string_list field 30: tag 242 = f2 01; each string its own field 1 (empty one included)
    (Attr("n", ["a", ""], "string_list"), NAME + b"\xf2\x01\x05\x0a\x01a\x0a\x00"),
    # bytes_list field 32: tag 258 = 82 02
    (Attr("n", [b"\x00"], "bytes_list"), NAME + b"\x82\x02\x03\x0a\x01\x00"),
    # string_val field 29: tag 234 = ea 01
    (Attr("n", "\u00e9", "string_val"), NAME + b"\xea\x01\x02\xc3\xa9"),
]  # fmt: skip


@pytest.mark.parametrize(("a", "data"), CASES)
def test_encode_attr_writes_protobuf_bytes(a, data):
    """Each attribute encodes to the bytes derived by hand (module docstring, comments)."""
    assert encode_attr(a) == data


def _pb_attr(pb, a: Attr):
    base, _, shape = a.kind.rpartition("_")
    if shape == "val":
        return pb.AttributeProto(name=a.name, **{a.kind: a.value})
    cls = getattr(pb, base.capitalize() + "List")
    return pb.AttributeProto(name=a.name, **{a.kind: cls(values=list(a.value))})


PB_VALUES = {
    "int32": [0, -1, 2**31 - 1, -(2**31)],
    "int64": [0, -1, 2**63 - 1, -(2**63), 300],
    "uint32": [0, 2**32 - 1, 128],
    "uint64": [0, 2**64 - 1, 2**63],
    "sint32": [0, -1, 2**31 - 1, -(2**31)],
    "sint64": [0, -1, 2**63 - 1, -(2**63)],
    "fixed32": [0, 2**32 - 1],
    "fixed64": [0, 2**64 - 1],
    "sfixed32": [-(2**31), 5],
    "sfixed64": [-(2**63), 5],
    "bool": [True, False],
    "double": [0.0, -2.5, 1e300],
    "float": [0.0, -2.5],
    "string": ["", "comm", "\u00e9"],
    "bytes": [b"", b"\x00\xff"],
}


def test_encode_attr_equals_protobuf_for_every_kind():
    """For every kind, scalar (each value) and list (all values, and empty), lumos writes the
    bytes the protobuf library writes for the same ``AttributeProto`` (mlc-chakra's compiled
    schema), and reads them back as the same value and kind."""
    pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2", reason="mlc-chakra not installed")
    for base, values in PB_VALUES.items():
        attrs = [Attr(f"{base}{k}", v, f"{base}_val") for k, v in enumerate(values)]
        attrs += [Attr(f"{base}s", values, f"{base}_list"), Attr("e", [], f"{base}_list")]
        for a in attrs:
            want = _pb_attr(pb, a).SerializeToString()
            assert encode_attr(a) == want, a
            back = decode_attr(want)
            assert (back.name, back.kind) == (a.name, a.kind)
            assert (list(back.value) if a.kind.endswith("_list") else back.value) == (
                list(a.value) if a.kind.endswith("_list") else a.value
            )


def test_read_varint_values_positions_and_refusals():
    """Protobuf varints: 7-bit groups, least significant first, the high bit saying another
    follows. ``01`` is 1, ``ac 02`` is 0x2c + (2 << 7) = 300, ten bytes ``ff``x9 ``01`` are
    2**64 - 1; the position returned is the byte after. Input ending inside a number (empty,
    or ``80``) is ``truncated varint``; an eleventh byte is ``varint longer than 10 bytes``."""
    from lumos.chakra.attrs import WireError, read_varint

    assert read_varint(b"\x01", 0) == (1, 1)
    assert read_varint(b"\x00\xac\x02\x07", 1) == (300, 3)
    assert read_varint(memoryview(M1), 0) == (2**64 - 1, 10)
    for raw, pos, message in ((b"", 0, "truncated varint"), (b"\x01\x80", 1, "truncated varint"),
                              (b"\xff" * 11, 0, "varint longer than 10 bytes")):  # fmt: skip
        with pytest.raises(WireError) as exc:
            read_varint(raw, pos)
        assert str(exc.value) == message
