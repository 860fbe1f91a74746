"""read_chakra / write_chakra on real upstream files: counts, byte-exact round trips, framing."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from chakra_testdata import astra_custom, astra_micro, astra_micro_files, realdata

from lumos.chakra import (
    MISSING,
    ChakraTrace,
    ChakraWorkload,
    CollectiveCommType,
    NodeType,
    attr,
    read_chakra,
    write_chakra,
)
from lumos.chakra.builder import ChakraTraceBuilder

# realdata paths of every ASTRA-sim file (resolved in the test: skips where the folder is absent)
REAL_FILES = astra_micro_files() + [astra_custom(r) for r in range(8)]


def test_chakra0_counts(chakra0_gz):
    t = read_chakra(chakra0_gz)
    assert isinstance(t, ChakraTrace)
    assert t.num_nodes == 3664
    counts = np.bincount(t.node_type, minlength=8)
    assert counts[NodeType.COMP_NODE] == 3643
    assert counts[NodeType.COMM_COLL_NODE] == 21
    assert len(t.data_deps) == 181_878
    assert int((t.duration_micros > 0).sum()) == 3507
    assert t.metadata.version == ""
    assert t.metadata.get("schema") == "1.0.1"
    coll = t.node_type == NodeType.COMM_COLL_NODE
    has_type = t.comm.comm_type != MISSING
    assert int((coll & has_type).sum()) == 7
    assert int((coll & ~has_type).sum()) == 14
    kinds = {CollectiveCommType(int(v)).name for v in t.comm.comm_type[coll & has_type]}
    assert kinds == {"ALL_REDUCE", "BROADCAST"}
    sizes = t.comm.comm_size[coll & has_type]
    assert sizes.min() == 424 and sizes.max() > 30_000_000
    assert t.comm.ill_typed == ()


def test_chakra0_node_view(chakra0_plain):
    t = read_chakra(chakra0_plain)
    n = t.node(0)
    assert (n.id, n.name, n.type) == (216, "aten::flatten_dense_tensors(0)", NodeType.COMP_NODE)
    assert n.ctrl_deps == (3,) and n.duration_micros == 318
    assert n.attr("is_cpu_op") is True and n.attr("seq_id") == -1
    assert n.outputs is not None and n.outputs.shapes == "[[53120]]"


def test_chakra0_plain_round_trip_is_byte_exact(chakra0_plain, tmp_path):
    out = tmp_path / "out.et"
    write_chakra(read_chakra(chakra0_plain), out)
    assert out.read_bytes() == chakra0_plain.read_bytes()


@pytest.mark.parametrize("rel", REAL_FILES, ids=lambda p: "/".join(p.split("/")[-2:]))
def test_astra_sim_files_round_trip_byte_exact(rel, tmp_path):
    path = realdata(rel)
    out = tmp_path / path.name
    write_chakra(read_chakra(path), out)
    assert out.read_bytes() == path.read_bytes()


def test_gzip_write_reads_back(tmp_path, chakra0_plain):
    t = read_chakra(chakra0_plain)
    write_chakra(t, tmp_path / "x.et.gz", gzip=True)
    assert gzip.decompress((tmp_path / "x.et.gz").read_bytes()) == chakra0_plain.read_bytes()


def test_workload_from_dir_and_prefix():
    d = realdata(astra_micro("all_reduce", 8))
    w = read_chakra(d)
    assert isinstance(w, ChakraWorkload)
    assert w.ranks == list(range(8))
    assert all(t.num_nodes == 1 for t in w)
    w2 = read_chakra(d / "all_reduce")
    assert isinstance(w2, ChakraWorkload) and w2.ranks == w.ranks
    assert w[3].rank == 3


def test_workload_write(tmp_path):
    custom = realdata(astra_custom())
    w = read_chakra(custom)
    assert isinstance(w, ChakraWorkload)
    files = write_chakra(w, tmp_path / "custom_allreduce")
    assert [f.name for f in files] == [f"custom_allreduce.{r}.et" for r in range(8)]
    for f in files:
        assert f.read_bytes() == (custom / f.name).read_bytes()


def test_custom_collectives_comm_columns():
    t = read_chakra(realdata(astra_custom(1)))
    assert isinstance(t, ChakraTrace)
    counts = np.bincount(t.node_type, minlength=8)
    assert (counts[4], counts[5], counts[6]) == (7, 14, 14)
    send = t.node_type == NodeType.COMM_SEND_NODE
    assert set(t.comm.comm_dst[send].tolist()) == {2}
    assert set(t.comm.comm_src[t.node_type == NodeType.COMM_RECV_NODE].tolist()) == {0}
    assert t.node_id[0] == 0  # id 0 is absent on the wire


def test_zero_length_record_is_an_empty_node(tmp_path):
    b = ChakraTraceBuilder(version="0.0.4")
    b.add_node(0, "", 0)
    b.add_node(7, "x", NodeType.COMP_NODE, duration_micros=3)
    p = tmp_path / "z.et"
    write_chakra(b.build(), p)
    raw = p.read_bytes()
    assert b"\x00" in raw  # the empty node's record is a single zero length byte
    t = read_chakra(p)
    assert t.num_nodes == 2 and t.node_id.tolist() == [0, 7]


def test_every_attribute_kind_round_trips(tmp_path):
    attrs = [
        attr("d", 1.5), attr("f", 0.25, "float_val"), attr("i32", -3, "int32_val"),
        attr("i64", -(2**40)), attr("u32", 2**32 - 1, "uint32_val"),
        attr("u64", 2**64 - 1, "uint64_val"), attr("s32", -7, "sint32_val"),
        attr("s64", -(2**50), "sint64_val"), attr("fx32", 9, "fixed32_val"),
        attr("fx64", 2**60, "fixed64_val"), attr("sfx32", -9, "sfixed32_val"),
        attr("sfx64", -(2**60), "sfixed64_val"), attr("b", True), attr("s", "héllo"),
        attr("by", b"\x00\xff"), attr("dl", [1.0, 2.5]), attr("il", [1, -2, 3]),
        attr("u64l", [0, 2**63], "uint64_list"), attr("bl", [True, False]),
        attr("sl", ["a", "", "c"]), attr("byl", [b"x"]), attr("empty", [], "int64_list"),
    ]  # fmt: skip
    b = ChakraTraceBuilder(version="1.0.0")
    b.add_node(1, "n", NodeType.COMP_NODE, attrs=attrs)
    p = tmp_path / "a.et"
    write_chakra(b.build(), p)
    back = read_chakra(p).node(0).attrs
    assert [(a.name, a.kind, a.value) for a in back] == [(a.name, a.kind, a.value) for a in attrs]


def test_decoder_regrows_every_array_and_name_table_mid_file(tmp_path):
    # Sparse first part, dense second part: the first capacity guesses are too small, so the
    # one-pass decoder must stop, grow and resume for deps, attributes, unknown fields and both
    # name tables (more than 1024 names, more than 64 attribute names) without losing a node.
    b = ChakraTraceBuilder(version="0.0.4")
    expected = []
    for i in range(1, 6001):
        dense = i > 3000
        k = 1 + (i % 7 if dense else 0)
        name = f"op_{i % 2500}" if dense else "op"
        attrs = [attr(f"a{(i * 3 + j) % 150}", i + j) for j in range(k if dense else 0)]
        data = list(range(max(1, i - k), i)) if dense else []
        unknown = b"\xa0\x06" + bytes([i % 100]) if dense else b""  # field 100, varint
        b.add_node(i, name, NodeType.COMP_NODE, data_deps=data, ctrl_deps=data[:1],
                   attrs=attrs, unknown=unknown, duration_micros=i)  # fmt: skip
        expected.append((i, name, tuple(data), [(a.name, a.value) for a in attrs]))
    p = tmp_path / "grow.et"
    write_chakra(b.build(), p)
    t = read_chakra(p)
    assert t.num_nodes == 6000
    for row in (0, 2999, 3000, 3001, 4567, 5999):
        i, name, data, attrs = expected[row]
        n = t.node(row)
        assert (n.id, n.name, n.data_deps, [(a.name, a.value) for a in n.attrs]) == (
            i, name, data, attrs)  # fmt: skip
        assert n.unknown == (b"\xa0\x06" + bytes([i % 100]) if row >= 3000 else b"")
    assert len(t.names) == 2501 and len(t.attr_names) == 150
    assert sorted(t.names) == sorted(set(t.names))
    write_chakra(t, tmp_path / "again.et")
    assert (tmp_path / "again.et").read_bytes() == p.read_bytes()
