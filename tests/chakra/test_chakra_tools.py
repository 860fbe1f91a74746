"""validate/fix, stats, exports, timeline, feeder, generate, text2et and the `lumos chakra` CLI."""

from __future__ import annotations

import json
import xml.dom.minidom

import numpy as np
import pytest
from chakra_testdata import astra_custom, astra_micro, realdata

from lumos.chakra import NodeType, attr, read_chakra, write_chakra
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.deps import critical_path
from lumos.chakra.export import write_dot, write_graphml, write_json
from lumos.chakra.feeder import ChakraFeeder
from lumos.chakra.generate import microbenchmark
from lumos.chakra.stats import trace_stats
from lumos.chakra.text2et import text_to_chakra
from lumos.chakra.timeline import schedule
from lumos.chakra.validate import fix_trace, validate_trace
from lumos.cli.main import main
from lumos.errors import ConfigError, GraphError, InputError


def _chain(dangling: bool = False, cycle: bool = False):
    b = ChakraTraceBuilder(version="0.0.4")
    b.add_node(1, "a", NodeType.COMP_NODE, duration_micros=5, attrs=[attr("is_cpu_op", True)])
    b.add_node(
        2, "b", NodeType.COMP_NODE, data_deps=[1] + ([99] if dangling else []), duration_micros=7
    )
    b.add_node(3, "c", NodeType.COMM_COLL_NODE, data_deps=[2], ctrl_deps=[3] if cycle else [],
               duration_micros=11, attrs=[attr("comm_type", 0), attr("comm_size", 8)])  # fmt: skip
    b.add_node(4, "d", NodeType.COMP_NODE, data_deps=[1], duration_micros=2)
    return b.build()


def test_validate_clean_and_broken():
    assert validate_trace(_chain()).ok
    r = validate_trace(_chain(dangling=True, cycle=True))
    assert r.counts() == {"dangling_data_dep": 1, "self_dep": 1}
    assert {p.node_id for p in r.errors} == {2, 3}


def test_fix_drops_dangling_and_self_deps():
    fixed, changes = fix_trace(_chain(dangling=True, cycle=True))
    assert changes == [
        "dropped 1 dangling data_deps from 1 nodes",
        "dropped 1 self ctrl_deps from 1 nodes",
    ]
    assert validate_trace(fixed).ok
    assert fixed.data_deps_of(1).tolist() == [1]


def test_chakra0_validate_reports_upstream_bugs(chakra0_gz):
    r = validate_trace(read_chakra(chakra0_gz))
    c = r.counts()
    assert c["dangling_ctrl_dep"] == 1277 and c["self_dep"] == 383 and c["cycle"] == 1
    assert c["cpu_collective_without_comm_type"] == 14
    assert all(p.severity == "warning" for p in r.problems if p.kind.startswith("cpu_collective"))


def test_comm_problems_detected():
    b = ChakraTraceBuilder(version="1")
    b.add_node(1, "coll", NodeType.COMM_COLL_NODE, attrs=[attr("comm_type", "ALL_REDUCE")])
    b.add_node(2, "send", NodeType.COMM_SEND_NODE)
    r = validate_trace(b.build())
    assert r.counts() == {"ill_typed_attr": 1, "missing_comm_dst": 1, "missing_comm_size": 1,
                          "missing_comm_type": 1}  # fmt: skip


def test_stats_and_critical_path():
    t = _chain()
    length, path = critical_path(t)
    assert length == 23 and t.node_id[path].tolist() == [1, 2, 3]
    s = trace_stats(t)
    assert s["nodes_by_type"] == {"COMP_NODE": 3, "COMM_COLL_NODE": 1}
    assert s["collectives_by_comm_type"] == {"ALL_REDUCE": 1}
    assert s["critical_path_micros"] == 23 and s["data_deps"] == 3
    json.dumps(s)


def test_exports_are_valid(tmp_path):
    t = read_chakra(realdata(astra_custom(0)))
    with open(tmp_path / "a.json", "w") as f:
        write_json(t, f)
    doc = json.loads((tmp_path / "a.json").read_text())
    assert len(doc["nodes"]) == 35 and doc["metadata"]["attr"][0]["value"] == "1.0.2-chakra.0.0.4"
    with open(tmp_path / "a.jsonl", "w") as f:
        write_json(t, f, jsonl=True)
    lines = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert len(lines) == 36
    with open(tmp_path / "g.graphml", "w") as f:
        write_graphml(t, f)
    xml.dom.minidom.parse(str(tmp_path / "g.graphml"))
    with open(tmp_path / "g.dot", "w") as f:
        write_dot(t, f)
    assert (tmp_path / "g.dot").read_text().count("->") == 34


def test_nan_attribute_jsonizes(tmp_path):
    b = ChakraTraceBuilder(version="1")
    b.add_node(1, "x", NodeType.COMP_NODE, attrs=[attr("v", float("nan")), attr("b", b"\x01")])
    with open(tmp_path / "n.json", "w") as f:
        write_json(b.build(), f)
    node = json.loads((tmp_path / "n.json").read_text())["nodes"][0]
    assert [a["value"] for a in node["attr"]] == ["NaN", "01"]


def test_timeline_respects_deps_and_processors():
    t = _chain()
    start, _end, proc = schedule(t)
    assert start.tolist() == [0, 5, 12, 12]  # d is ready at 5 but GPU compute is busy with b
    assert proc.tolist() == [0, 1, 2, 1]


def test_feeder_order_and_errors():
    f = ChakraFeeder(_chain())
    order = [n.id for n in f.run_in_order()]
    assert order == [1, 2, 3, 4] and f.finished  # smallest ready id first
    with pytest.raises(GraphError, match="node id 2 has data_deps on id 99"):
        ChakraFeeder(_chain(dangling=True))
    g = ChakraFeeder(_chain(cycle=True))
    with pytest.raises(GraphError, match="never become issuable"):
        list(g.run_in_order())
    h = ChakraFeeder(_chain(cycle=True), use_ctrl_deps=False)
    assert len(list(h.run_in_order())) == 4


def test_feeder_manual_protocol():
    f = ChakraFeeder(_chain())
    assert [n.id for n in f.issuable()] == [1]
    with pytest.raises(GraphError, match="not issuable"):
        f.issue(2)
    f.issue(1)
    assert f.complete(1) == [2, 4]
    with pytest.raises(GraphError, match="without being issued"):
        f.complete(4)


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
@pytest.mark.parametrize("n", [4, 8, 16])
def test_generate_is_byte_identical_to_astra_sim_examples(tmp_path, coll, n):
    files = write_chakra(microbenchmark(coll, n, "1MB"), tmp_path / coll)
    for f in files:
        assert f.read_bytes() == (realdata(astra_micro(coll, n)) / f.name).read_bytes()


def test_generate_bad_args():
    with pytest.raises(ConfigError, match="unknown collective"):
        microbenchmark("all_sum", 4, "1MB")
    with pytest.raises(ConfigError, match="size"):
        microbenchmark("all_reduce", 4, "1 parsec")


WORKLOAD = """DATA
2
conv1 -1 5000 NONE 0 5000 NONE 0 5000 ALLREDUCE 1024 10
fc    -1 7000 NONE 0 7000 NONE 0 7000 ALLREDUCE 4096 10
"""


def test_text2et_fixes_upstream_mistakes():
    w = text_to_chakra(WORKLOAD, 2, num_passes=2)
    assert w.ranks == [0, 1]
    for t in w:
        assert t.node_id[0] == 0  # ids restart in every rank file
        assert validate_trace(t).ok
        coll = t.node_type == NodeType.COMM_COLL_NODE
        assert int(coll.sum()) == 4  # NONE entries make no node
        comp = t.node_type == NodeType.COMP_NODE
        assert set(t.duration_micros[comp].tolist()) == {5, 7}  # cycles / 1000 per us
        assert set(t.comm.comm_size[coll].tolist()) == {1024, 4096}
    assert len(list(ChakraFeeder(w[1]).run_in_order())) == w[1].num_nodes


def test_text2et_bad_input():
    with pytest.raises(InputError, match="line 3: a layer needs 12 columns"):
        text_to_chakra("DATA\n1\nconv -1 5\n", 1)
    with pytest.raises(InputError, match="announces 3 layers"):
        text_to_chakra(WORKLOAD.replace("\n2\n", "\n3\n"), 1)
    with pytest.raises(InputError, match="unsupported parallelism"):
        text_to_chakra("PIPELINE\n0\n", 1)


def test_cli_tools(tmp_path, capsys, chakra0_gz):
    custom = realdata(astra_custom())
    assert main(["chakra", "validate", str(custom)]) == 0
    assert main(["chakra", "validate", str(chakra0_gz), "--fix", str(tmp_path / "f.et")]) == 1
    out = capsys.readouterr().out
    assert "dangling_ctrl_dep: 1277" in out and "dropped 1277 dangling ctrl_deps" in out
    assert main(["chakra", "stats", "--json", str(custom / "custom_allreduce.3.et")]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"] == 35
    assert (
        main(
            [
                "chakra",
                "jsonize",
                "--jsonl",
                "-o",
                str(tmp_path / "j.jsonl"),
                str(tmp_path / "f.et"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "chakra",
                "visualize",
                str(custom / "custom_allreduce.3.et"),
                "-o",
                str(tmp_path / "g.dot"),
            ]
        )
        == 0
    )
    assert main(["chakra", "timeline", str(tmp_path / "f.et"), "-o", str(tmp_path / "t.json")]) == 0
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    (tmp_path / "w.txt").write_text(WORKLOAD)
    assert (
        main(
            [
                "chakra",
                "text2et",
                str(tmp_path / "w.txt"),
                "-o",
                str(tmp_path / "w"),
                "--num-npus",
                "2",
            ]
        )
        == 0
    )
    assert (tmp_path / "w.1.et").exists()
    assert (
        main(
            [
                "chakra",
                "generate",
                "--collective",
                "all_reduce",
                "--num-npus",
                "4",
                "-o",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert (tmp_path / "all_reduce_4npus_1MB" / "all_reduce.3.et").read_bytes() == (
        realdata(astra_micro("all_reduce", 4, 3))
    ).read_bytes()
    capsys.readouterr()
    assert main(["chakra", "stats", str(tmp_path / "missing.et")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_read_fixed_file_keeps_attributes(tmp_path, chakra0_gz):
    t = read_chakra(chakra0_gz)
    fixed, _ = fix_trace(t)
    write_chakra(fixed, tmp_path / "f.et")
    back = read_chakra(tmp_path / "f.et")
    assert back.num_nodes == 3664
    assert np.array_equal(back.attr_int, t.attr_int)
