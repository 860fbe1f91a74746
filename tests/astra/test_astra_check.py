"""``lumos chakra check --astra-sim``: each shape that makes ASTRA-sim abort or stall is named.

Shapes of issue #12, on the real ET sets: the default conversion of the bundled demo (METADATA
node, gloo collectives on the CPU), and ASTRA-ready sets edited the way the issue's failing
files differ (a rank's all-to-all of another size, collectives issued in another order, a
dependency on a missing node). Point-to-point has no real set here: small synthetic pairs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from tests.astra.conftest import by_rank

from lumos.chakra import NodeType, attr
from lumos.chakra.astra_check import check_astra
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.slots import simulate_slots
from lumos.chakra.trace import ChakraNode, ChakraTrace
from lumos.cli.main import main
from lumos.cost.astra_files import read_astra_network


def _edit(trace: ChakraTrace, fn: Callable[[ChakraNode], ChakraNode | None]) -> ChakraTrace:
    """A copy of ``trace`` with each node passed through ``fn`` (None drops it)."""
    b = ChakraTraceBuilder(metadata=trace.metadata, rank=trace.rank)
    for i in range(trace.num_nodes):
        node = fn(trace.node(i))
        if node is not None:
            b.add(node)
    return b.build()


def _with_attr(node: ChakraNode, name: str, value: object) -> ChakraNode:
    attrs = (*tuple(a for a in node.attrs if a.name != name), attr(name, value))
    return ChakraNode(node.id, node.name, node.type, node.ctrl_deps, node.data_deps,
                      node.start_time_micros, node.duration_micros, node.inputs, node.outputs,
                      attrs, node.unknown)  # fmt: skip


def _colls(trace: ChakraTrace) -> list[int]:
    """Ids of the collectives, in chain (node id) order."""
    return sorted(int(i) for i in trace.node_id[trace.node_type == NodeType.COMM_COLL_NODE])


def test_default_demo_conversion_names_metadata_and_cpu_collectives(demo_default, capsys):
    traces = by_rank(demo_default)
    rep = check_astra(traces)
    counts = rep.counts()
    assert not rep.ok
    assert counts["metadata_node"] == 2  # process_group:init on each rank
    assert counts["comm_on_cpu"] == 12  # 6 gloo all-reduces per rank, is_cpu_op true
    assert main(["chakra", "check", "--astra-sim", str(demo_default)]) == 1
    out = capsys.readouterr().out
    assert "metadata_node: 2" in out and "comm_on_cpu: 12" in out


def test_synthetic_astra_target_set_passes(synth_demo_astra, capsys):
    """A sample written with --target astra-sim passes the same check as a converted run."""
    assert check_astra(by_rank(synth_demo_astra)).ok
    assert main(["chakra", "check", "--astra-sim", str(synth_demo_astra)]) == 0
    capsys.readouterr()


def test_astra_target_sets_pass(demo_astra, dlrm_astra, capsys):
    for prefix, _ in (demo_astra, dlrm_astra):
        rep = check_astra(by_rank(prefix), read_astra_network(prefix.parent))
        assert rep.ok and rep.problems == ()
        assert main(["chakra", "check", "--astra-sim", str(prefix)]) == 0
    assert "ASTRA-sim: ok" in capsys.readouterr().out


def test_one_rank_with_another_all_to_all_size_stalls(dlrm_astra):
    prefix, _ = dlrm_astra
    traces = by_rank(prefix)
    net = read_astra_network(prefix.parent)
    fourth = _colls(traces[3])[3]  # the 4th all-to-all: 3,072 bytes on one rank
    assert int(traces[3].comm.comm_type[traces[3].index_of([fourth])[0]]) == 6
    traces[3] = _edit(traces[3], lambda n: _with_attr(n, "comm_size", 3072)
                      if n.id == fourth else n)  # fmt: skip
    rep = check_astra(traces, net)
    kinds = rep.counts()
    assert kinds["collective_size_differs"] == 8  # one finding per rank of the group
    assert kinds["stall"] >= 1
    res = simulate_slots(traces, net)
    assert not res.completed
    assert any("collective #3" in s and "3072" in s for s in res.stalls)


def test_collectives_issued_in_another_order_stall(dlrm_astra):
    prefix, _ = dlrm_astra
    traces = by_rank(prefix)
    net = read_astra_network(prefix.parent)
    # rank 5 issues its all-reduce of 1,576,964 bytes where the others issue an all-to-all
    first, second = _colls(traces[5])[3], _colls(traces[5])[4]
    row1, row2 = traces[5].index_of([first, second])
    t1, s1 = int(traces[5].comm.comm_type[row1]), int(traces[5].comm.comm_size[row1])
    t2, s2 = int(traces[5].comm.comm_type[row2]), int(traces[5].comm.comm_size[row2])
    assert (t1, t2) == (6, 0)

    def swap(n: ChakraNode) -> ChakraNode:
        if n.id == first:
            return _with_attr(_with_attr(n, "comm_type", t2), "comm_size", s2)
        if n.id == second:
            return _with_attr(_with_attr(n, "comm_type", t1), "comm_size", s1)
        return n

    traces[5] = _edit(traces[5], swap)
    rep = check_astra(traces, net)
    assert rep.counts()["collective_order_differs"] == 16  # positions 3 and 4, 8 ranks each
    assert not simulate_slots(traces, net).completed


def test_dangling_dependency_is_named(demo_astra):
    prefix, _ = demo_astra
    traces = by_rank(prefix)
    last = int(traces[1].node_id.max())
    traces[1] = _edit(traces[1], lambda n: ChakraNode(
        n.id, n.name, n.type, n.ctrl_deps, (*n.data_deps, 10**9), n.start_time_micros,
        n.duration_micros, n.inputs, n.outputs, n.attrs) if n.id == last else n)  # fmt: skip
    rep = check_astra(traces)
    [(rank, p)] = [(r, p) for r, p in rep.problems if p.kind == "dangling_dep"]
    assert (rank, p.node_id) == (1, last) and "1000000000" in p.detail


def _p2p(send_size: int, recv_size: int, tag: int = 7) -> dict[int, ChakraTrace]:
    out = {}
    for rank in (0, 1):
        b = ChakraTraceBuilder(version="0.0.4", rank=rank)
        if rank == 0:
            b.add_node(0, "send", NodeType.COMM_SEND_NODE, attrs=[
                attr("is_cpu_op", False), attr("comm_dst", 1, "int32_val"),
                attr("comm_tag", tag, "int32_val"), attr("comm_size", send_size)])  # fmt: skip
        else:
            b.add_node(0, "recv", NodeType.COMM_RECV_NODE, attrs=[
                attr("is_cpu_op", False), attr("comm_src", 0, "int32_val"),
                attr("comm_tag", 7, "int32_val"), attr("comm_size", recv_size)])  # fmt: skip
        out[rank] = b.build()
    return out


def test_matched_p2p_passes_and_unmatched_is_named():
    assert check_astra(_p2p(4096, 4096)).ok
    rep = check_astra(_p2p(4096, 1024))
    assert rep.counts()["unmatched_p2p"] == 2  # the send and the receive each lack a partner
    rep = check_astra(_p2p(4096, 4096, tag=8))
    assert rep.counts()["unmatched_p2p"] == 2


@pytest.mark.parametrize("typ", [NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE])
def test_comm_on_cpu_and_metadata_are_errors_without_a_real_set(typ):
    b = ChakraTraceBuilder(version="0.0.4", rank=0)
    b.add_node(0, "pg", NodeType.METADATA_NODE)
    b.add_node(1, "c", typ, attrs=[attr("is_cpu_op", True), attr("comm_type", 0),
                                   attr("comm_size", 8), attr("comm_dst", 0, "int32_val")])  # fmt: skip
    rep = check_astra({0: b.build()})
    assert {"metadata_node", "comm_on_cpu"} <= set(rep.counts())
    assert np.all([p.severity == "error" for _, p in rep.problems if p.kind != "stall"])


def _custom_ring() -> dict[int, ChakraTrace]:
    from tests.realdata import astra_custom, realdata

    return by_rank(realdata(astra_custom()) / "custom_allreduce")


def test_real_p2p_set_passes_and_a_changed_tag_is_unmatched():
    traces = _custom_ring()  # ASTRA-sim's MSCCL ring all-reduce: 14 sends, 14 receives a rank
    assert check_astra(traces).ok
    recv = int(traces[2].node_id[traces[2].node_type == NodeType.COMM_RECV_NODE][0])
    traces[2] = _edit(traces[2], lambda n: _with_attr(n, "comm_tag", 999) if n.id == recv
                      else n)  # fmt: skip
    rep = check_astra(traces)
    assert rep.counts()["unmatched_p2p"] == 2  # that receive, and the send it no longer matches
    assert rep.counts()["stall"] >= 1


@pytest.mark.parametrize("run", ["pipeline_4_stages", "gloo_pipelining_2stage"])
def test_recorded_pipelines_convert_to_sets_whose_sends_meet_their_receives(run, tmp_path):
    """Each side of a send/receive pair is written as what it is on that rank: a receive as
    COMM_RECV from its peer, a send as COMM_SEND to it (the pair's group once gave both sides
    the first member's kind, so the later stages sent where they should receive)."""
    from tests.conftest import DATA

    from lumos.convert_astra import convert_astra

    convert_astra([DATA / run], tmp_path / "pp", workers=1)
    traces = by_rank(tmp_path / "pp")
    assert check_astra(traces).ok
    for rank, t in traces.items():
        for i in np.flatnonzero(np.isin(t.node_type, (NodeType.COMM_SEND_NODE,
                                                      NodeType.COMM_RECV_NODE))).tolist():  # fmt: skip
            node = t.node(i)
            send = node.type == NodeType.COMM_SEND_NODE
            assert node.name == ("gloo:send" if send else "gloo:recv")
            assert node.attr("comm_src" if send else "comm_dst") == rank
