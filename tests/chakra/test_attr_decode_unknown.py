"""The pure-Python attribute and IOInfo decoders skip fields they do not know, of every wire
type, and refuse what protobuf cannot hold; hand-assembled bytes, exact results."""

from __future__ import annotations

import struct

import pytest

from lumos.chakra.attrs import (
    Attr,
    IOInfo,
    WireError,
    decode_attr,
    decode_io_info,
    encode_attr,
    encode_io_info,
    varint_bytes,
)


def _tag(fno: int, wt: int) -> bytes:
    return varint_bytes(fno << 3 | wt)


#: one unknown field of each wire type protobuf 3 writes: varint, 64-bit, length, 32-bit
UNKNOWN = (
    _tag(99, 0) + varint_bytes(300)
    + _tag(98, 1) + struct.pack("<d", 2.5)
    + _tag(97, 2) + varint_bytes(3) + b"xyz"
    + _tag(96, 5) + struct.pack("<f", 1.5)
)  # fmt: skip


@pytest.mark.parametrize(
    "a",
    [Attr("comm_size", -(2**40), "int64_val"), Attr("names", ["a", "bc"], "string_list"),
     Attr("w", [1.25, -3.0], "double_list"), Attr("tid", 7, "int32_val", "doc")],
)  # fmt: skip
def test_unknown_fields_before_and_after_are_skipped(a: Attr) -> None:
    body = encode_attr(a)
    assert decode_attr(UNKNOWN + body + UNKNOWN) == a
    assert decode_attr(body) == a


def test_unknown_fields_inside_a_list_are_skipped() -> None:
    items = _tag(1, 0) + varint_bytes(5) + UNKNOWN + _tag(1, 0) + varint_bytes(6)
    body = _tag(1, 2) + varint_bytes(1) + b"n" + _tag(10, 2) + varint_bytes(len(items)) + items
    assert decode_attr(body) == Attr("n", [5, 6], "int64_list")


def test_io_info_skips_unknown_fields() -> None:
    io = IOInfo("[[1, 2]]", "[[2]]", "['Tensor(float)']")
    assert decode_io_info(UNKNOWN + encode_io_info(io) + UNKNOWN) == io
    # a known field number with a wire type it never has is an unknown field too
    assert decode_io_info(_tag(1, 0) + varint_bytes(7) + encode_io_info(io)) == io


@pytest.mark.parametrize(
    "data,message",
    [(_tag(99, 3), "unsupported wire type 3"), (_tag(99, 4), "unsupported wire type 4"),
     (_tag(99, 2) + varint_bytes(10) + b"abc", "field past end of message"),
     (_tag(99, 1) + b"1234567", "field past end of message"),
     (_tag(99, 5) + b"123", "field past end of message")],
)  # fmt: skip
def test_what_cannot_be_skipped_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_attr(data)
    with pytest.raises(WireError, match=message):
        decode_io_info(data)


def test_a_field_ending_exactly_at_the_end_is_whole() -> None:
    assert decode_attr(_tag(99, 5) + b"1234") == Attr("", None, "", "")
    assert decode_attr(_tag(99, 1) + b"12345678") == Attr("", None, "", "")
