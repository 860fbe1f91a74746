"""The Chakra reader's file layer, exactly: gzip members and chunking, every refusal's message,
and every column of a small hand-written file.

Gzip inputs are made by Python's ``gzip`` module (RFC 1952 members; several members are one
stream, RFC 1952 section 2.2). ``_gunzip`` reads ``_IN_CHUNK`` bytes at a time and inflates at
most ``_OUT_CHUNK`` at a time; shrinking both (``monkeypatch``) walks every path of its loop
(a member split across reads, one byte left over, padding between members) on files of a few
hundred bytes, where the answer is known: the concatenated contents.
"""

from __future__ import annotations

import gzip
import itertools
import zlib

import numpy as np
import pytest

from lumos.chakra import io as chakra_io
from lumos.chakra import read_chakra
from lumos.chakra.attrs import varint_bytes as _v
from lumos.errors import ChakraFormatError, InputError

DATA = bytes(range(256)) * 3  # 768 bytes that do not compress to nothing


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _file(tmp_path, data: bytes, name: str = "t.et.gz"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    ("in_chunk", "out_chunk"),
    list(itertools.product([1, 2, 3, 5, 7, 64, 1 << 20], [1, 3, 100, 4 << 20])),
)
def test_members_and_padding_give_the_concatenated_content(tmp_path, monkeypatch, in_chunk,
                                                           out_chunk):  # fmt: skip
    """Three members (the second empty), zero padding between them and after: the content is
    the members' contents in order, whatever the read and inflate chunk sizes."""
    monkeypatch.setattr(chakra_io, "_IN_CHUNK", in_chunk)
    monkeypatch.setattr(chakra_io, "_OUT_CHUNK", out_chunk)
    raw = _gz(DATA[:300]) + b"\0" * 3 + _gz(b"") + _gz(DATA[300:]) + b"\0" * 5
    assert bytes(chakra_io._gunzip(_file(tmp_path, raw), 1000.0)) == DATA
    one = _gz(DATA)
    assert bytes(chakra_io._gunzip(_file(tmp_path, one, "one.gz"), 1000.0)) == DATA


def test_a_member_after_an_output_limited_one_is_read_once(tmp_path):
    """Regression: a first member inflating past one output chunk (5 MiB of a repeating
    256-byte pattern, > the 4 MiB ``_OUT_CHUNK``, one 1 MiB read) followed by a second member
    ``tail``. zlib's ``unconsumed_tail`` still held the second member when the first ended,
    and lumos appended it to ``unused_data`` (which holds it too): ``tailtail``."""
    big = bytes(range(256)) * (5 << 12)
    p = _file(tmp_path, _gz(big) + _gz(b"tail"))
    out = bytes(chakra_io._gunzip(p, 1000.0))
    assert (len(out), out[-8:]) == (len(big) + 4, big[-4:] + b"tail")


@pytest.mark.parametrize("in_chunk", [1, 2, 3, 1 << 20])
def test_refusals_name_the_file_and_the_problem(tmp_path, monkeypatch, in_chunk):
    """Garbage after a member (one byte, or two that are not the gzip magic 1f 8b), a stream
    cut short, and bad deflate data each raise ``InputError("<path>: <problem>")``."""
    monkeypatch.setattr(chakra_io, "_IN_CHUNK", in_chunk)
    one = _gz(DATA)
    cases = [
        (one + b"x", "trailing bytes after the gzip stream"),
        (one + b"XX", "trailing bytes after the gzip stream"),
        (one + b"\x1f\x8b", "truncated gzip stream (file ends early)"),
        (one + b"\0\0x", "trailing bytes after the gzip stream"),
        (one + b"\x1fx", "trailing bytes after the gzip stream"),
        (one + b"\x1f", "trailing bytes after the gzip stream"),
        (one[:-1], "truncated gzip stream (file ends early)"),
        (one + one[:12], "truncated gzip stream (file ends early)"),
        (one[:10], "truncated gzip stream (file ends early)"),
    ]
    for raw, problem in cases:
        p = _file(tmp_path, raw)
        with pytest.raises(InputError) as exc:
            chakra_io._gunzip(p, 1000.0)
        assert str(exc.value) == f"{p}: {problem}", raw[-4:]
    # header (10 bytes) then a deflate block of reserved type 3 (first byte 0b111: BTYPE 11)
    p = _file(tmp_path, one[:10] + b"\x07" + one[11:])
    with pytest.raises(InputError) as exc:
        chakra_io._gunzip(p, 1000.0)
    assert str(exc.value) == (
        f"{p}: corrupt gzip data: Error -3 while decompressing data: invalid block type"
    )
    # not gzip at the start (zero padding before the first member, a zlib stream 78 9c)
    for raw in (b"\0" + one, zlib.compress(DATA)):
        p = _file(tmp_path, raw)
        with pytest.raises(InputError) as exc:
            chakra_io._gunzip(p, 1000.0)
        assert str(exc.value) == (
            f"{p}: corrupt gzip data: Error -3 while decompressing data: incorrect header check"
        )
    missing = tmp_path / "none.gz"
    with pytest.raises(InputError) as exc:
        chakra_io._gunzip(missing, 1000.0)
    assert str(exc.value) == f"{missing}: cannot read: No such file or directory"


def test_ratio_is_judged_only_past_the_grace_and_names_both_sizes(tmp_path, monkeypatch):
    """With the grace lowered to 1000 bytes: 1000 inflated bytes are never judged (the limit is
    "more than"); 1001 from a file of s bytes, at ratio 2, are refused naming 1001 and s (the
    whole file is one read); at ratio 1001 / s + 1 they are accepted."""
    monkeypatch.setattr(chakra_io, "_RATIO_GRACE", 1000)
    p = _file(tmp_path, _gz(b"\0" * 1000))
    assert bytes(chakra_io._gunzip(p, 2.0)) == b"\0" * 1000
    raw = _gz(b"\0" * 1001)
    p = _file(tmp_path, raw)
    with pytest.raises(InputError) as exc:
        chakra_io._gunzip(p, 2.0)
    s = len(raw)
    assert str(exc.value) == (
        f"{p}: gzip inflates more than 2 times its size (already 1001 bytes from {s}; real "
        "Chakra traces compress 13-30:1): refused as a decompression bomb; set "
        "LUMOS_MAX_COMPRESSION_RATIO higher to read it"
    )
    assert len(chakra_io._gunzip(p, 1001 / s + 1)) == 1001


def test_ratio_is_judged_after_each_inflated_chunk_on_the_bytes_read_so_far(tmp_path,
                                                                           monkeypatch):  # fmt: skip
    """20 KB of zeros in a file of s bytes, inflated 2 s bytes at a time, at ratio 2 (grace
    100): after the first chunk the output is exactly 2 s (not more than 2 s: kept), after the
    second 4 s: refused naming 4 s and s. Read 10 bytes at a time, the bytes named are those
    read so far: a multiple of 10, at least 20 (the 10-byte gzip header alone inflates to
    nothing) and fewer than the whole file."""
    raw = _gz(b"\0" * 20_000)
    s = len(raw)
    p = _file(tmp_path, raw)
    monkeypatch.setattr(chakra_io, "_RATIO_GRACE", 100)
    monkeypatch.setattr(chakra_io, "_OUT_CHUNK", 2 * s)
    with pytest.raises(InputError, match=rf"\(already {4 * s} bytes from {s};"):
        chakra_io._gunzip(p, 2.0)
    monkeypatch.setattr(chakra_io, "_OUT_CHUNK", 4 << 20)
    monkeypatch.setattr(chakra_io, "_IN_CHUNK", 10)
    with pytest.raises(InputError) as exc:
        chakra_io._gunzip(p, 2.0)
    n_in = int(str(exc.value).split(" bytes from ")[1].split(";")[0])
    assert n_in % 10 == 0 and 20 <= n_in < s


def test_gzip_of_nothing_is_an_empty_file(tmp_path):
    """A gzip member whose content is empty leaves no GlobalMetadata record."""
    p = _file(tmp_path, _gz(b""), "e.0.et.gz")
    with pytest.raises(ChakraFormatError) as exc:
        read_chakra(p)
    assert str(exc.value) == (f"{p}: empty file (after decompression): no GlobalMetadata record")


def _rec(body: bytes) -> bytes:
    return _v(len(body)) + body


# GlobalMetadata: version "0.0.4" (field 1), one attribute {name "a", int64_val 3} (field 2)
META = _rec(b"\x0a\x050.0.4" + b"\x12\x05\x0a\x01a\x48\x03")
# node id 9, name "x", type COMP (4), ctrl_deps [2], data_deps packed [1, 300], start 7,
# duration 8, inputs {values "v"}, attr {name "k", sint64_val -2}, unknown field 99 varint 1
NODE_A = _rec(
    b"\x08\x09" + b"\x12\x01x" + b"\x18\x04" + b"\x20\x02" + b"\x2a\x03\x01\xac\x02"
    + b"\x30\x07" + b"\x38\x08" + b"\x42\x03\x0a\x01v" + b"\x52\x06\x0a\x01k\x88\x01\x03"
    + b"\x98\x06\x01"
)  # fmt: skip
# node id 2, name "x" again, type COMM_COLL (7), outputs {shapes "s"}, attr {"k", int32 -1}
NODE_B = _rec(b"\x08\x02\x12\x01x\x18\x07\x4a\x03\x12\x01s\x52\x0e\x0a\x01k\x38" + b"\xff" * 9
              + b"\x01")  # fmt: skip


@pytest.mark.parametrize("compress", [False, True])
def test_every_column_of_a_hand_written_file(tmp_path, compress):
    """Two nodes written byte by byte (comments above: field numbers from ``et_def.proto``);
    the rank comes from the file name ``t.3.et``; each column has the dtype and the values the
    bytes say (attribute kinds: sint64_val 17, int32_val 7)."""
    raw = META + NODE_A + NODE_B
    p = _file(tmp_path, _gz(raw) if compress else raw, "t.3.et")
    t = read_chakra(p)
    assert (t.path, t.rank, t.metadata.version) == (str(p), 3, "0.0.4")
    assert [(a.name, a.value, a.kind) for a in t.metadata.attrs] == [("a", 3, "int64_val")]
    assert t.node_id.dtype == np.uint64 and t.node_id.tolist() == [9, 2]
    assert t.names == ("x",) and t.name_idx.dtype == np.int32 and t.name_idx.tolist() == [0, 0]
    assert t.node_type.dtype == np.int8 and t.node_type.tolist() == [4, 7]
    assert (t.ctrl_ptr.tolist(), t.ctrl_deps.tolist()) == ([0, 1, 1], [2])
    assert (t.data_ptr.tolist(), t.data_deps.tolist()) == ([0, 2, 2], [1, 300])
    assert t.data_deps.dtype == t.ctrl_deps.dtype == np.uint64
    assert t.start_time_micros.tolist() == [7, 0] and t.duration_micros.tolist() == [8, 0]
    assert t.start_time_micros.dtype == t.duration_micros.dtype == np.uint64
    assert t.inputs_len.tolist() == [3, -1] and t.outputs_len.tolist() == [-1, 3]
    assert t.node(0).inputs.values == "v" and t.node(1).outputs.shapes == "s"
    assert t.attr_ptr.tolist() == [0, 1, 2] and t.attr_names == ("k",)
    assert t.attr_kind.tolist() == [17, 7] and t.attr_int.tolist() == [-2, -1]
    assert t.attr_len.tolist() == [6, 14]
    assert [(a.value, a.kind) for k in (0, 1) for a in t.attrs_of(k)] == [
        (-2, "sint64_val"), (-1, "int32_val")]  # fmt: skip
    assert t.unk_ptr.tolist() == [0, 1, 1] and t.unk_len.tolist() == [3]
    assert t.blob[t.unk_off[0] : t.unk_off[0] + 3].tobytes() == b"\x98\x06\x01"


def test_a_file_of_mostly_empty_node_records_is_refused(tmp_path):
    """1025 empty node records (above the 1024 allowed) and one real node: refused with the
    counts; 1024 empty ones are read as nodes."""
    p = _file(tmp_path, META + b"\x00" * 1025 + NODE_A, "m.et")
    with pytest.raises(ChakraFormatError) as exc:
        read_chakra(p)
    assert str(exc.value) == (
        f"{p}: 1025 of its 1026 node records are empty (zero-length: id 0, no name, type "
        "INVALID), which no real trace holds; refused as corrupt or a decompression bomb (at "
        "most 1024, or as many as the non-empty node records)"
    )
    p = _file(tmp_path, META + b"\x00" * 1024 + NODE_A, "ok.et")
    assert read_chakra(p).num_nodes == 1025


def _named(name: bytes, attr_name: bytes) -> bytes:
    """A node record: id 1, ``name``, one attribute {``attr_name``, int64_val 1}."""
    a = b"\x0a" + _v(len(attr_name)) + attr_name + b"\x48\x01"
    return _rec(b"\x08\x01\x12" + _v(len(name)) + name + b"\x52" + _v(len(a)) + a)


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        (((b"x", b"k"), (b"\xff\xfe", b"k")), "node name of row 1 is not valid UTF-8: b'\\xff\\xfe'"),
        (((b"x", b"k"), (b"x", b"\xc3")), "attribute name of row 1 is not valid UTF-8: b'\\xc3'"),
    ],
)  # fmt: skip
def test_names_that_are_not_utf8_are_refused_naming_the_row(tmp_path, nodes, message):
    """Node and attribute names are protobuf strings (UTF-8): the second node's name ``ff fe``
    (never UTF-8) or its attribute name ``c3`` (a truncated two-byte sequence) is refused naming
    the file, which table, the first row using the name (row 1: row 0 is the first node's valid
    name) and the bytes."""
    p = _file(tmp_path, META + b"".join(_named(*n) for n in nodes), "u.et")
    with pytest.raises(ChakraFormatError) as exc:
        read_chakra(p)
    assert str(exc.value) == f"{p}: {message}"


def test_metadata_with_a_truncated_varint_is_refused_with_the_reason(tmp_path):
    """A GlobalMetadata record ``0a`` (the tag of field 1, length-delimited, then nothing):
    the length varint is cut, and the message says so."""
    p = _file(tmp_path, _rec(b"\x0a") + NODE_A, "v.et")
    with pytest.raises(ChakraFormatError) as exc:
        read_chakra(p)
    assert str(exc.value) == f"{p}: GlobalMetadata record does not decode: truncated varint"


def test_gzip_output_is_deterministic_with_a_zero_mtime(tmp_path):
    """``write_chakra(gzip=True)`` writes one RFC 1952 member whose header is fixed: magic
    ``1f 8b``, deflate (8), no flags (no file name), MTIME 0 (not the clock: the same trace
    gives the same bytes), XFL 2 (level 9) and OS 255 (unknown), as Python's ``gzip`` writes it;
    its content is the plain file."""
    t = read_chakra(_file(tmp_path, META + NODE_A + NODE_B, "t.et"))
    plain = chakra_io.write_chakra(t, tmp_path / "a.et")[0].read_bytes()
    gz = chakra_io.write_chakra(t, tmp_path / "a.et.gz", gzip=True)[0].read_bytes()
    assert gz[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    assert gzip.decompress(gz) == plain
