"""Interop: our files decode field by field with the protobuf runtime (run-time descriptors) and
with the real upstream package ``mlc-chakra``; files upstream writes load in ours."""

from __future__ import annotations

import io

import pytest
from chakra_testdata import astra_custom, realdata

from lumos.chakra import NodeType, attr, read_chakra, write_chakra
from lumos.chakra._pb import message_classes
from lumos.chakra.attrs import IOInfo, read_varint
from lumos.chakra.builder import ChakraTraceBuilder


def _records(raw: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(raw):
        n, pos = read_varint(raw, pos)
        out.append(raw[pos : pos + n])
        pos += n
    return out


def _sample_trace():
    b = ChakraTraceBuilder(version="0.0.4", metadata_attrs=[attr("schema", "1.0.2-chakra.0.0.4")])
    b.add_node(
        1, "aten::mm", NodeType.COMP_NODE, duration_micros=17, start_time_micros=5,
        inputs=IOInfo("[[1]]", "[[2,3]]", "['Tensor(float)']"),
        attrs=[attr("is_cpu_op", False), attr("num_ops", 1024), attr("tensor_size", 2**63 + 1, "uint64_val")],
    )  # fmt: skip
    b.add_node(
        2, "all_reduce", NodeType.COMM_COLL_NODE, data_deps=[1], ctrl_deps=[1],
        attrs=[attr("comm_type", 0), attr("comm_size", 1 << 20), attr("pg_name", "0")],
    )  # fmt: skip
    b.add_node(
        3, "send", NodeType.COMM_SEND_NODE, data_deps=[2, 1],
        attrs=[attr("comm_dst", 1, "int32_val"), attr("comm_tag", -5, "int32_val"),
               attr("comm_size", 64), attr("weights", [0.5, 0.25], "float_list")],
    )  # fmt: skip
    return b.build()


def _check_node(msg, t, i):
    assert msg.id == int(t.node_id[i])
    assert msg.name == t.name_of(i)
    assert msg.type == int(t.node_type[i])
    assert list(msg.ctrl_deps) == t.ctrl_deps_of(i).tolist()
    assert list(msg.data_deps) == t.data_deps_of(i).tolist()
    assert msg.duration_micros == int(t.duration_micros[i])
    assert msg.start_time_micros == int(t.start_time_micros[i])
    ours = t.attrs_of(i)
    assert [a.name for a in msg.attr] == [a.name for a in ours]
    for m, a in zip(msg.attr, ours, strict=True):
        assert m.WhichOneof("value") == a.kind
        v = getattr(m, a.kind)
        v = list(v.values) if a.kind.endswith("_list") else v
        assert v == a.value


def test_runtime_descriptor_decodes_our_file_field_by_field(tmp_path):
    t = _sample_trace()
    p = tmp_path / "s.0.et"
    write_chakra(t, p)
    cls = message_classes()
    recs = _records(p.read_bytes())
    meta = cls["GlobalMetadata"].FromString(recs[0])
    assert meta.version == "0.0.4" and meta.attr[0].string_val == "1.0.2-chakra.0.0.4"
    for i, rec in enumerate(recs[1:]):
        msg = cls["Node"].FromString(rec)
        _check_node(msg, t, i)
        assert msg.SerializeToString() == rec  # canonical: protobuf writes the same bytes
    assert cls["Node"].FromString(recs[1]).inputs.shapes == "[[2,3]]"


def test_runtime_descriptor_agrees_on_real_file():
    path = realdata(astra_custom(5))
    t = read_chakra(path)
    cls = message_classes()
    recs = _records(path.read_bytes())
    for i, rec in enumerate(recs[1:]):
        _check_node(cls["Node"].FromString(rec), t, i)


# ---- the real upstream package, test-only ------------------------------------------------
et_def_pb2 = pytest.importorskip(
    "chakra.schema.protobuf.et_def_pb2",
    reason="mlc-chakra not installed (pip install --no-deps mlc-chakra) - upstream interop skipped",
)
protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")


def _upstream_read(path):
    nodes = []
    with open(path, "rb") as f:
        meta = et_def_pb2.GlobalMetadata()
        protolib.decodeMessage(f, meta)
        while True:
            n = et_def_pb2.Node()
            if not protolib.decodeMessage(f, n):
                break
            nodes.append(n)
    return meta, nodes


def test_upstream_reader_loads_what_we_write(tmp_path):
    t = _sample_trace()
    p = tmp_path / "ours.0.et"
    write_chakra(t, p)
    meta, nodes = _upstream_read(p)
    assert meta.version == "0.0.4"
    assert len(nodes) == t.num_nodes
    for i, n in enumerate(nodes):
        _check_node(n, t, i)


def test_we_load_what_upstream_writes(tmp_path):
    p = tmp_path / "up.0.et"
    buf = io.BytesIO()
    protolib.encodeMessage(buf, et_def_pb2.GlobalMetadata(version="0.0.4"))
    nodes = []
    for k in range(5):
        n = et_def_pb2.Node(id=k + 10, name=f"n{k}", type=et_def_pb2.COMP_NODE, duration_micros=k)
        n.data_deps.extend(range(10, 10 + k))
        n.attr.append(et_def_pb2.AttributeProto(name="comm_src", int32_val=-k))
        n.attr.append(et_def_pb2.AttributeProto(name="tensor_size", uint64_val=2**64 - 1 - k))
        protolib.encodeMessage(buf, n)
        nodes.append(n)
    p.write_bytes(buf.getvalue())
    t = read_chakra(p)
    assert t.num_nodes == 5
    for i, n in enumerate(nodes):
        _check_node(n, t, i)
    assert t.comm.comm_src.tolist() == [0, -1, -2, -3, -4]
    write_chakra(t, tmp_path / "again.et")
    assert (tmp_path / "again.et").read_bytes() == p.read_bytes()


def test_upstream_ets_of_one_job_replay_together_whatever_their_ranks_guess():
    """Upstream's ETs state no world size (each alone would guess its rank + 1): read together
    they take the largest, so the four ranks of a microbenchmark are one job."""
    from tests.realdata import astra_micro

    from lumos.chakra.mapping_foreign import WORLD_SIZE_GUESSED
    from lumos.replay import build_workload

    w, _ = build_workload([realdata(astra_micro("all_reduce", 4))], workers=1)
    assert [g.rank for g in w.graphs] == [0, 1, 2, 3]
    assert {g.world_size for g in w.graphs} == {4}
    assert all(g.diagnostics.count(WORLD_SIZE_GUESSED) == 1 for g in w.graphs)
