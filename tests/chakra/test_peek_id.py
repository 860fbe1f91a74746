"""``io_nodes._peek_id``: the node id an error message names, read from a node record that
failed to decode, past fields of every wire type; None where it cannot be read."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from lumos.chakra.attrs import varint_bytes
from lumos.chakra.io_nodes import _peek_id


def _tag(fno: int, wt: int) -> bytes:
    return varint_bytes(fno << 3 | wt)


OTHERS = (
    _tag(2, 2) + varint_bytes(4) + b"name"
    + _tag(3, 0) + varint_bytes(2**40)
    + _tag(30, 1) + struct.pack("<q", -1)
    + _tag(31, 5) + struct.pack("<i", 7)
)  # fmt: skip


def _peek(record: bytes, pad: int = 3) -> int | None:
    buf = np.frombuffer(b"\xff" * pad + record + b"\xff" * pad, dtype=np.uint8)
    return _peek_id(buf, pad, len(record))


@pytest.mark.parametrize(
    "record,node_id",
    [(_tag(1, 0) + varint_bytes(5), 5),
     (OTHERS + _tag(1, 0) + varint_bytes(2**64 - 1), 2**64 - 1),
     (OTHERS + _tag(1, 0) + varint_bytes(300) + _tag(1, 0) + varint_bytes(9), 300),  # first
     (_tag(1, 2) + varint_bytes(1) + b"x" + _tag(1, 0) + varint_bytes(8), 8),  # id as bytes: not it
     (OTHERS, None),  # no id
     (_tag(3, 3) + _tag(1, 0) + varint_bytes(5), None),  # a group: cannot be skipped
     (_tag(3, 2) + varint_bytes(50) + b"ab", None),  # runs past the record
     (_tag(3, 0) + b"\x80\x80", None),  # truncated varint
     (b"", None)],
)  # fmt: skip
def test_peek_id(record: bytes, node_id: int | None) -> None:
    assert _peek(record) == node_id


def test_the_record_is_read_only_within_its_span() -> None:
    inner = _tag(3, 0) + varint_bytes(1)
    # the id after the record's end belongs to the next record
    buf = np.frombuffer(inner + _tag(1, 0) + varint_bytes(42), dtype=np.uint8)
    assert _peek_id(buf, 0, len(inner)) is None
    assert _peek_id(buf, 0, buf.size) == 42
