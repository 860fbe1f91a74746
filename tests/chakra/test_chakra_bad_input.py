"""Bad Chakra input: one ChakraFormatError naming the file (and node id when known), never a crash."""

from __future__ import annotations

import contextlib
import functools
import gzip

import pytest
from chakra_testdata import astra_custom, astra_micro, mutate, realdata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.realdata import needs_realdata

from lumos.chakra import NodeType, attr, read_chakra, write_chakra
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.errors import ChakraFormatError, InputError, LumosError

# real files, read in place when a test first needs them (tests/realdata.py)
FUZZ_SOURCES = (astra_custom(2), astra_micro("all_reduce", 4, 0))


@functools.cache
def _real(rel: str) -> bytes:
    return realdata(rel).read_bytes()


def _small() -> bytes:
    """A real 35-node Chakra ET (ASTRA-sim's custom all-reduce, rank 2)."""
    return _real(FUZZ_SOURCES[0])


def _write(tmp_path, data: bytes, name: str = "bad.et"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_truncated_file_names_file_and_record(tmp_path):
    p = _write(tmp_path, _small()[:-7])
    with pytest.raises(ChakraFormatError, match=r"bad\.et.*past the end of the file"):
        read_chakra(p)


def test_length_prefix_past_eof(tmp_path):
    p = _write(tmp_path, _small() + b"\xff\x01abc")
    with pytest.raises(ChakraFormatError, match="declares 255 bytes"):
        read_chakra(p)


def test_garbage_bytes(tmp_path):
    p = _write(tmp_path, b"this is not a chakra trace at all, just text\n")
    with pytest.raises(ChakraFormatError, match=r"bad\.et"):
        read_chakra(p)


def test_empty_file(tmp_path):
    with pytest.raises(ChakraFormatError, match="empty file"):
        read_chakra(_write(tmp_path, b""))


def test_truncated_gzip(tmp_path, chakra0_gz):
    data = chakra0_gz.read_bytes()
    p = _write(tmp_path, data[: len(data) // 2], "t.et.gz")
    with pytest.raises(InputError, match="truncated gzip"):
        read_chakra(p)


def test_wrong_type_attribute_names_node_id(tmp_path):
    b = ChakraTraceBuilder(version="0.0.4")
    b.add_node(41, "ok", NodeType.COMP_NODE, attrs=[attr("comm_size", 5)])
    p = tmp_path / "w.et"
    write_chakra(b.build(), p)
    raw = bytearray(p.read_bytes())
    # int64_val (field 9, varint) rewritten as field 9 with wire type 2: 0x48 -> 0x4a
    k = raw.rindex(b"\x48\x05")
    raw[k : k + 2] = b"\x4a\x00"
    p.write_bytes(bytes(raw))
    with pytest.raises(ChakraFormatError, match=r"w\.et.*node id 41.*wrong wire type"):
        read_chakra(p)


def test_wrong_wire_type_in_node_field(tmp_path):
    # metadata (empty) + node whose field 1 (id) uses wire type 2
    p = _write(tmp_path, b"\x00" + b"\x03\x0a\x01\x07")
    with pytest.raises(ChakraFormatError, match="field 1"):
        read_chakra(p)


def test_missing_file_and_directory_without_traces(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_chakra(tmp_path / "nothing")
    with pytest.raises(InputError, match="no Chakra files"):
        read_chakra(tmp_path)


def test_unknown_fields_survive(tmp_path):
    # node with id 5 plus an unknown field 99 (varint 7): kept and written back
    node = b"\x08\x05" + b"\x98\x06\x07"
    p = _write(tmp_path, b"\x00" + bytes([len(node)]) + node)
    t = read_chakra(p)
    assert t.node_id.tolist() == [5] and t.node(0).unknown == b"\x98\x06\x07"
    write_chakra(t, tmp_path / "o.et")
    assert (tmp_path / "o.et").read_bytes() == p.read_bytes()


@needs_realdata
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    src=st.sampled_from(FUZZ_SOURCES),
    data=st.data(),
)
def test_fuzzed_real_files_read_cleanly_or_raise_lumos_error(tmp_path, src, data):
    raw = mutate(_real(src), data, (1, 6), cut=16, insert=8)
    p = tmp_path / "f.et"
    p.write_bytes(raw)
    try:
        t = read_chakra(p)
    except LumosError:
        return
    for i in range(t.num_nodes):  # a clean read must also materialize cleanly
        with contextlib.suppress(LumosError):
            t.node(i)
    _ = t.comm


def test_gzip_of_garbage(tmp_path):
    p = _write(tmp_path, gzip.compress(b"\x05abc"), "g.et.gz")
    with pytest.raises(ChakraFormatError, match=r"g\.et\.gz"):
        read_chakra(p)


def test_directory_of_several_prefixes_names_them(tmp_path):
    """A directory holding ``a.<rank>.et`` and ``b.<rank>.et`` is ambiguous: one InputError that
    names the directory and both prefixes; passing a prefix picks that one's files."""
    from lumos.chakra.io import rank_files

    for name in ("a.0.et", "a.1.et", "b.0.et"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(InputError) as err:
        rank_files(tmp_path)
    assert str(err.value) == (
        f"{tmp_path}: holds Chakra files of several prefixes (a, b); pass one prefix"
    )
    assert rank_files(tmp_path / "b") == (str(tmp_path / "b"), {0: tmp_path / "b.0.et"})
