"""Node and attribute views (``iter_nodes``, ``node``) and the compiled attribute table."""

from __future__ import annotations

import numpy as np

from lumos.chakra import NodeType, attr, read_chakra, write_chakra
from lumos.chakra.attr_table import AttrTable
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.trace import ChakraMetadata


def test_views_equal_materialized_nodes_on_upstream_file(chakra0_plain):
    t = read_chakra(chakra0_plain)
    views = list(t.iter_nodes())
    assert len(views) == t.num_nodes == 3664
    for row in (0, 1, 1000, 3663):
        v, m = views[row], t.materialize(row)
        assert (v.id, v.name, v.type, v.ctrl_deps, v.data_deps, v.start_time_micros,
                v.duration_micros, v.inputs, v.outputs, v.unknown, v.row) == (
            m.id, m.name, m.type, m.ctrl_deps, m.data_deps, m.start_time_micros,
            m.duration_micros, m.inputs, m.outputs, m.unknown, row)  # fmt: skip
        assert [(a.name, a.kind, a.value, a.doc_string) for a in v.attrs] == [
            (a.name, a.kind, a.value, a.doc_string) for a in m.attrs
        ]
    assert views[0].id == 216 and views[0].attr("is_cpu_op") is True
    assert views[0].attr("no_such", 7) == 7


def test_list_attributes_decode_to_arrays_and_values(tmp_path):
    b = ChakraTraceBuilder(version="1.0.0")
    b.add_node(1, "a", NodeType.COMP_NODE, attrs=[attr("ranks", [0, 5, -3]),
                                                 attr("w", [0.5, 0.25], "float_list"),
                                                 attr("big", [2**64 - 1], "uint64_list"),
                                                 attr("tags", ["x", "", "yz"])])  # fmt: skip
    b.add_node(2, "b", NodeType.COMM_COLL_NODE, data_deps=[1], attrs=[attr("flags", [True, False])])
    p = tmp_path / "l.et"
    write_chakra(b.build(), p)
    t = read_chakra(p)
    table = t.attr_values
    assert table.ptr.tolist() == [0, 3, 5, 6, 9, 11]
    assert table.array(0).tolist() == [0, 5, -3] and table.array(0).dtype == np.int64
    assert table.array(1).tolist() == [0.5, 0.25]
    assert table.array(2).dtype == np.uint64 and table.array(2).tolist() == [2**64 - 1]
    assert table.array(3).tolist() == ["x", "", "yz"]
    assert table.array(4).tolist() == [True, False]
    n = t.node(1)
    assert (n.id, n.type, n.data_deps, n.attr("flags")) == (2, NodeType.COMM_COLL_NODE, (1,),
                                                           [True, False])  # fmt: skip


def test_last_oneof_member_wins_and_a_bad_row_fails_alone():
    # row 0: an int64 list then an int64 scalar (the scalar wins); row 1: a list that runs
    # past its message; row 2: fine
    lst = b"\x52\x04\x0a\x02\x01\x02"  # int64_list {values: [1, 2]}
    rows = [b"\x0a\x01a" + lst + b"\x48\x07", b"\x0a\x01b\x52\x09\x0a\x02", b"\x0a\x01c\x48\x03"]
    blob = np.frombuffer(b"".join(rows), dtype=np.uint8)
    off = np.cumsum([0] + [len(r) for r in rows])[:-1]
    t = AttrTable.decode(blob, off, np.array([len(r) for r in rows]), np.array([9, 10, 9]))
    assert t.value(0) == 7 and t.value(2) == 3
    assert t.bad.tolist() == [0, 5, 0]


def test_metadata_lists_decode_in_one_pass():
    big = list(range(-50_000, 50_000))
    meta = ChakraMetadata.build("1.0.0", [attr("xs", big, "sint64_list"), attr("s", ["p", "q"])])
    back = ChakraMetadata.decode(meta.raw)
    assert back.get("xs") == big and back.get("s") == ["p", "q"] and back.version == "1.0.0"
