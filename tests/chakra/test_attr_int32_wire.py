"""Negative ``int32`` attributes on the wire, bytes written by hand from the protobuf encoding
rules (not from lumos's encoder): an ``int32`` field holds its value sign-extended to 64 bits as
a varint, so every negative value takes 10 bytes. Chakra's ``AttributeProto`` has ``int32_val``
as field 7 (varint: tag ``0x38``) and ``int32_list`` as field 8 (a message: tag ``0x42``) whose
field 1 (tag ``0x0a``) packs the values; ``name`` is field 1 (tag ``0x0a``)."""

from __future__ import annotations

import pytest

from lumos.chakra.attrs import attr, decode_attr, encode_attr

# -5 = 2**64 - 5: seven-bit groups 0x7b, then 0x7f x 8, then 0x01 (continuation bits set)
MINUS_5 = bytes.fromhex("fbffffffffffffffff01")
# -2**31 = 2**64 - 2**31: 0x00 x 4 (with continuation), 0x78, 0x7f x 4, 0x01
MINUS_2_31 = bytes.fromhex("80808080f8ffffffff01")
# 2**31 - 1: 0x7f x 4, then 0x07
MAX_INT32 = bytes.fromhex("ffffffff07")
NAME_X = bytes.fromhex("0a0178")  # name = "x"


@pytest.mark.parametrize(
    ("value", "varint"), [(-5, MINUS_5), (-(2**31), MINUS_2_31), (2**31 - 1, MAX_INT32)]
)
def test_an_int32_value_decodes_from_its_sign_extended_varint(value, varint):
    wire = NAME_X + b"\x38" + varint
    assert encode_attr(attr("x", value, "int32_val")) == wire
    got = decode_attr(wire)
    assert (got.name, got.value, got.kind) == ("x", value, "int32_val")


def test_an_int32_list_packs_negative_values_in_ten_bytes_each():
    """Packed body: 10 + 5 + 10 = 25 bytes (``0x19``), inside the list message: 2 + 25 = 27
    (``0x1b``)."""
    body = MINUS_5 + MAX_INT32 + MINUS_2_31
    wire = NAME_X + b"\x42\x1b" + b"\x0a\x19" + body
    values = [-5, 2**31 - 1, -(2**31)]
    assert encode_attr(attr("x", values, "int32_list")) == wire
    got = decode_attr(wire)
    assert (got.name, got.value, got.kind) == ("x", values, "int32_list")
