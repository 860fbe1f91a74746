"""Interop: our files decode field by field with the protobuf runtime (run-time descriptors) and
with the real upstream package ``mlc-chakra``; files upstream writes load in ours."""

from __future__ import annotations

import io
import struct

import pytest
from chakra_testdata import CHAKRA0, astra_custom, astra_micro, realdata

from lumos.chakra import CollectiveCommType, NodeType, attr, read_chakra, write_chakra
from lumos.chakra._pb import message_classes
from lumos.chakra.attrs import Attr, IOInfo, read_varint
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.schema import ATTR_KIND_BY_NAME, ATTR_KIND_NAMES


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


# ---- interop by value: every attribute kind, its type and its value, both directions -----
def _same(a, b) -> bool:
    """Equal values, floats bit for bit (NaN equals NaN, -0.0 differs from 0.0)."""
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, float) or isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


#: for every oneof member: values at its edges (ns timestamps, 2**63, negative, NaN, non-ASCII)
_EXTREMES: dict[str, list] = {
    "double": [1.5, -0.0, float("-inf"), float("nan"), 1.7e308, 5e-324],
    "float": [0.25, -0.0, float("inf"), float("nan"), -3.0e38],
    "int32": [-(2**31), 2**31 - 1, -1, 0],
    "int64": [-(2**63), 2**63 - 1, 1_700_000_000_123_456_789, -5],
    "uint32": [0, 2**32 - 1, 2**31],
    "uint64": [0, 2**64 - 1, 2**63 + 1],
    "sint32": [-(2**31), 2**31 - 1, -1],
    "sint64": [-(2**63), 2**63 - 1, -1_700_000_000_123_456_789, 1_700_000_000_123_456_789],
    "fixed32": [0, 2**32 - 1],
    "fixed64": [2**64 - 1, 2**63],
    "sfixed32": [-(2**31), 2**31 - 1],
    "sfixed64": [-(2**63), 2**63 - 1, -1_700_000_000_123_456_789],
    "bool": [True, False],
    "string": ["", "héllo", "aten::mm", "\u4e2d\U0001f600"],
    "bytes": [b"", b"\x00\xff\x80", bytes(range(256))],
}
_BASES = list(_EXTREMES)


def _every_value_attrs() -> list[Attr]:
    """One scalar attribute per (kind, edge value) and one list attribute per kind."""
    out = []
    for base, values in _EXTREMES.items():
        out += [attr(f"{base}_{j}", v, f"{base}_val") for j, v in enumerate(values)]
        out.append(attr(f"{base}_list", values, f"{base}_list"))
    return out


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _upstream_value(m):
    kind = m.WhichOneof("value")
    v = getattr(m, kind)
    return kind, (list(v.values) if kind.endswith("_list") else v)


def _field(f) -> tuple:
    """What decides a field's bytes: name, number, type, repeated, packed, oneof, type name."""
    sub = f.message_type or f.enum_type
    oneof = f.containing_oneof.name if f.containing_oneof else None
    return (f.name, f.number, f.type, f.is_repeated, f.is_packed, oneof, sub and sub.name)


def test_the_wire_tables_are_upstreams_field_numbers_and_types():
    """Every message, field (name, number, label, type) and enum value lumos's codec and its
    runtime descriptor use is the same as in upstream's generated ``et_def_pb2``; the attribute
    kind table (:mod:`lumos.chakra.schema`) gives each oneof member upstream's field number."""
    up = et_def_pb2.DESCRIPTOR
    ours = message_classes()
    attr_fields = {f.name: f.number for f in up.message_types_by_name["AttributeProto"].fields}
    oneof = {k: n for k, n in attr_fields.items() if k not in ("name", "doc_string")}
    assert oneof == ATTR_KIND_BY_NAME
    assert {n: k for k, n in oneof.items()} == ATTR_KIND_NAMES
    for name, desc in up.message_types_by_name.items():
        if name == "Tensor":  # upstream declares it; no Chakra file carries one
            continue
        mine = ours[name].DESCRIPTOR
        assert [_field(f) for f in mine.fields] == [_field(f) for f in desc.fields], name
    for enum, members in (("NodeType", NodeType), ("CollectiveCommType", CollectiveCommType)):
        assert {v.name: v.number for v in up.enum_types_by_name[enum].values} == {
            m.name: int(m) for m in members
        }


def test_upstream_reads_every_kind_and_value_lumos_writes(tmp_path):
    """A node carrying every attribute kind at its edge values (and a node with ns-scale ids
    and times), written by lumos, is read by upstream with each attribute's oneof kind and value
    identical (floats bit for bit)."""
    attrs = _every_value_attrs()
    b = ChakraTraceBuilder(version="0.0.4")
    b.add_node(2**64 - 1, "every", NodeType.COMP_NODE, attrs=attrs,
               ctrl_deps=[2**63, 0], start_time_micros=1_700_000_000_123_456,
               duration_micros=2**40)  # fmt: skip
    p = tmp_path / "every.0.et"
    write_chakra(b.build(), p)
    _, nodes = _upstream_read(p)
    (n,) = nodes
    assert (n.id, list(n.ctrl_deps), n.start_time_micros, n.duration_micros) == (
        2**64 - 1, [2**63, 0], 1_700_000_000_123_456, 2**40,
    )  # fmt: skip
    assert [m.name for m in n.attr] == [a.name for a in attrs]
    for m, a in zip(n.attr, attrs, strict=True):
        kind, value = _upstream_value(m)
        assert kind == a.kind, a.name
        want = a.value
        if a.kind.startswith("float"):  # float32 on the wire: compare with what it rounds to
            want = [_f32(x) for x in want] if isinstance(want, list) else _f32(want)
        assert _same(value, want), (a.name, value, want)


def test_lumos_reads_every_kind_and_value_upstream_writes(tmp_path):
    """Every attribute kind at its edge values, written by upstream's protobuf classes, is read
    by lumos with the same oneof kind and value, and written back byte for byte."""
    buf = io.BytesIO()
    protolib.encodeMessage(buf, et_def_pb2.GlobalMetadata(version="0.0.4"))
    n = et_def_pb2.Node(id=2**64 - 2, name="every", type=et_def_pb2.COMP_NODE,
                        start_time_micros=1_700_000_000_123_456)  # fmt: skip
    expected = []
    for base, values in _EXTREMES.items():
        for j, v in enumerate(values):
            m = et_def_pb2.AttributeProto(name=f"{base}_{j}", **{f"{base}_val": v})
            n.attr.append(m)
        lst = et_def_pb2.AttributeProto(name=f"{base}_list")
        getattr(lst, f"{base}_list").values.extend(values)
        n.attr.append(lst)
    for m in n.attr:
        expected.append((m.name, *_upstream_value(m)))
    protolib.encodeMessage(buf, n)
    p = tmp_path / "up.0.et"
    p.write_bytes(buf.getvalue())
    t = read_chakra(p)
    assert (int(t.node_id[0]), int(t.start_time_micros[0])) == (2**64 - 2, 1_700_000_000_123_456)
    got = [(a.name, a.kind, a.value) for a in t.attrs_of(0)]
    assert [g[:2] for g in got] == [e[:2] for e in expected]
    for g, e in zip(got, expected, strict=True):
        assert _same(list(g[2]) if isinstance(g[2], tuple) else g[2], e[2]), (g, e)
    write_chakra(t, tmp_path / "again.0.et")
    assert (tmp_path / "again.0.et").read_bytes() == p.read_bytes()


@pytest.mark.parametrize("relpath", [CHAKRA0, astra_custom(5), astra_micro("all_to_all", 4, 1)])
def test_lumos_reads_upstream_files_as_upstream_does(relpath):
    """Upstream Chakra files (realdata, read in place): upstream's own reader and lumos's agree
    on every node's fields and every attribute's kind and value."""
    path = realdata(relpath)
    meta, nodes = _upstream_read(path)
    t = read_chakra(path)
    assert t.metadata.version == meta.version
    assert [(a.name, a.kind, a.value) for a in t.metadata.attrs] == [
        (m.name, *_upstream_value(m)) for m in meta.attr
    ]
    assert t.num_nodes == len(nodes) > 0
    for i, n in enumerate(nodes):
        _check_node(n, t, i)
