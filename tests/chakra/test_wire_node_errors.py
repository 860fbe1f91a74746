"""Every malformed-node branch of the node decoder, with the exact error it reports.

Each file is an empty GlobalMetadata record (byte 0: length 0), node row 0 (bytes 1-3:
length 2, ``id = 5`` as field 1 ``08 05``) and node row 1, whose record starts at byte 4 (its
length) and whose body at byte 5. Row 1 starts with ``id = 7`` (``08 07``, bytes 5-6), so its
bad field starts at byte 7 unless said otherwise. The error names the file, the node id (read
back from the record) and row, the field number and byte where the bad field starts, and the
problem (``lumos.chakra._wire.ERROR_TEXT``).
"""

from __future__ import annotations

import pytest

from lumos.chakra import read_chakra
from lumos.chakra._wire import MAX_MICROS
from lumos.chakra.attrs import varint_bytes as _v
from lumos.errors import ChakraFormatError

HEAD = b"\x00" + b"\x02\x08\x05"  # metadata record, node row 0 (id 5)
ID7 = b"\x08\x07"
TRUNC = "truncated varint (file ends inside a number)"
LONG = "varint longer than 10 bytes"
WIRE = "field has the wrong wire type for its schema type"
PAST = "a field runs past the end of its message"
TOO_LONG_VARINT = b"\xff" * 10 + b"\x01"  # eleven bytes

CASES = [
    # a tag whose varint ends with the message (field number unknown: 0)
    (ID7 + b"\x80", "node id 7 (row 1), field 0 at byte 7: " + TRUNC),
    (ID7 + TOO_LONG_VARINT, "node id 7 (row 1), field 0 at byte 7: " + LONG),
    # the id itself truncated: the record names no id, so the row only
    (b"\x08\x80", "node row 1, field 1 at byte 5: " + TRUNC),
    # type (field 3) as length-delimited (tag 0x1a): wrong wire type
    (ID7 + b"\x1a\x00", "node id 7 (row 1), field 3 at byte 7: " + WIRE),
    # type 200 (18 c8 01) does not fit the int8 column; -1 (ten bytes) does and is kept
    (ID7 + b"\x18\xc8\x01", "node id 7 (row 1), field 3 at byte 7: "
     "node type 200 is not a NodeType (0..7)"),
    (ID7 + b"\x18" + _v(-129), "node id 7 (row 1), field 3 at byte 7: "
     "node type -129 is not a NodeType (0..7)"),
    # duration (field 7, tag 0x38) one past the largest whose ns fit int64
    (ID7 + b"\x38" + _v(MAX_MICROS + 1), "node id 7 (row 1), field 7 at byte 7: "
     f"duration_micros {MAX_MICROS + 1} us does not fit int64 nanoseconds "
     f"(at most {MAX_MICROS} us)"),
    (ID7 + b"\x30" + _v(2**64 - 1), "node id 7 (row 1), field 6 at byte 7: "
     f"start_time_micros {2**64 - 1} us does not fit int64 nanoseconds "
     f"(at most {MAX_MICROS} us)"),
    # start time value truncated (tag 0x30, then 80)
    (ID7 + b"\x30\x80", "node id 7 (row 1), field 6 at byte 7: " + TRUNC),
    # packed data_deps (field 5, tag 0x2a): length truncated, too long, past the end
    (ID7 + b"\x2a\x80", "node id 7 (row 1), field 5 at byte 7: " + TRUNC),
    (ID7 + b"\x2a" + TOO_LONG_VARINT, "node id 7 (row 1), field 5 at byte 7: " + LONG),
    (ID7 + b"\x2a\x05\x01", "node id 7 (row 1), field 5 at byte 7: " + PAST),
    # a packed dep whose varint runs past the packed length (length 1, byte 80)
    (ID7 + b"\x2a\x01\x80\x01", "node id 7 (row 1), field 5 at byte 7: " + TRUNC),
    # ctrl_deps (field 4) unpacked (tag 0x20) with a truncated value; fixed64 (0x21): wrong
    (ID7 + b"\x20\x80", "node id 7 (row 1), field 4 at byte 7: " + TRUNC),
    (ID7 + b"\x21" + b"\x00" * 8, "node id 7 (row 1), field 4 at byte 7: " + WIRE),
    # name (field 2) as a varint (0x10): wrong; as a string: length truncated, past the end
    (ID7 + b"\x10\x01", "node id 7 (row 1), field 2 at byte 7: " + WIRE),
    (ID7 + b"\x12\x80", "node id 7 (row 1), field 2 at byte 7: " + TRUNC),
    (ID7 + b"\x12\x05a", "node id 7 (row 1), field 2 at byte 7: " + PAST),
    (ID7 + b"\x42\x09", "node id 7 (row 1), field 8 at byte 7: " + PAST),
    (ID7 + b"\x4a" + TOO_LONG_VARINT, "node id 7 (row 1), field 9 at byte 7: " + LONG),
    # an attribute (field 10, tag 0x52) whose name is a varint (08 01): wrong wire type
    (ID7 + b"\x52\x02\x08\x01", "node id 7 (row 1), field 10 at byte 7: "
     "attribute value has the wrong wire type for its declared kind"),
    # an attribute whose int64 value (48) is truncated
    (ID7 + b"\x52\x02\x48\x80", "node id 7 (row 1), field 10 at byte 7: " + TRUNC),
    # unknown field 99 as a group (wire type 3, tag 795 = 9b 06); as a string past the end
    (ID7 + b"\x9b\x06", "node id 7 (row 1), field 99 at byte 7: "
     "deprecated protobuf group wire type (not a Chakra message)"),
    (ID7 + b"\x9a\x06\x03", "node id 7 (row 1), field 99 at byte 7: " + PAST),
    (ID7 + b"\x99\x06\x00", "node id 7 (row 1), field 99 at byte 7: " + PAST),
    # a bad field after a good one: the byte is where the bad field starts (9)
    (ID7 + b"\x18\x04\x2a\x80", "node id 7 (row 1), field 5 at byte 9: " + TRUNC),
]  # fmt: skip


@pytest.mark.parametrize(("body", "message"), CASES)
def test_malformed_node_is_named_exactly(tmp_path, body, message):
    """Row 1's body ``body`` (after row 0) is refused with ``<path>: message``."""
    p = tmp_path / "bad.et"
    p.write_bytes(HEAD + _v(len(body)) + body)
    with pytest.raises(ChakraFormatError) as exc:
        read_chakra(p)
    assert str(exc.value) == f"{p}: {message}"


def test_the_good_prefix_decodes():
    """The files above differ from a good one only in row 1's bad field: with ``id = 7``
    alone, both nodes decode (ids 5 and 7, type 0)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "good.et"
        p.write_bytes(HEAD + b"\x02" + ID7)
        t = read_chakra(p)
        assert t.node_id.tolist() == [5, 7]
        assert t.node_type.tolist() == [0, 0]
