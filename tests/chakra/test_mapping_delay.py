"""to_chakra(delay_nodes=True): edge delays as synthetic nodes, folded back by from_chakra."""

from __future__ import annotations

import numpy as np
import pytest
from tests.realdata import trace

from lumos.chakra import NodeType, read_chakra, write_chakra
from lumos.chakra.deps import resolve_deps, topological_order
from lumos.chakra.mapping import from_chakra, graph_differences, to_chakra
from lumos.chakra.mapping_delay import DELAY_ATTR, delay_rows
from lumos.chakra.validate import validate_trace
from lumos.graph.build import build_graph
from lumos.ingest.kineto import read_kineto
from lumos.sim import simulate

SMALL = ["cuda_event_sync", "hip_mi250"]  # phenomenon names of tests/realdata.py


def deps_only_span_us(trace) -> int:
    """Makespan of a consumer that honours only data_deps and duration_micros (no resources)."""
    g = resolve_deps(trace)
    order, _ = topological_order(g)
    dur = trace.duration_micros.astype(np.int64)
    end = np.zeros(trace.num_nodes, dtype=np.int64)
    for v in order.tolist():
        preds = g.pred_idx[g.pred_ptr[v] : g.pred_ptr[v + 1]]
        end[v] = (end[preds].max() if preds.size else 0) + dur[v]
    return int(end.max())


@pytest.mark.parametrize("name", SMALL)
def test_delay_nodes_round_trip_exactly_and_reproduce_the_replay(name, tmp_path):
    g = build_graph(read_kineto(trace(name)))
    plain, delayed = to_chakra(g), to_chakra(g, delay_nodes=True)
    assert validate_trace(delayed).ok
    path = tmp_path / "d.0.et"
    write_chakra(delayed, path)
    back = from_chakra(read_chakra(path))
    assert graph_differences(g, back) == [] and back.diagnostics.total == 0
    r = simulate(g)
    replay_us = (r.end_ns.max() - r.start_ns.min()) / 1000
    assert deps_only_span_us(plain) < 0.9 * replay_us  # delays lost: under-predicts
    assert deps_only_span_us(delayed) == pytest.approx(replay_us, rel=0.01)


def test_delay_node_fields(tmp_path):
    g = build_graph(read_kineto(trace(SMALL[0])))
    t = to_chakra(g, delay_nodes=True)
    is_delay = delay_rows(t)
    n_extra = t.num_nodes - to_chakra(g).num_nodes
    assert n_extra == int(is_delay.sum()) == int((g.edges.delay_ns > 0).sum())
    rows = np.flatnonzero(is_delay)
    assert rows.min() > g.num_tasks - 1  # tasks keep ids 0..n-1
    for r in rows.tolist():
        node = t.node(r)
        assert node.type == NodeType.COMP_NODE and node.name.startswith("delay:")
        assert node.attr("lumos_synthetic") is True and node.attr(DELAY_ATTR) > 0
        assert len(node.data_deps) == 1
        assert node.duration_micros == (node.attr(DELAY_ATTR) + 500) // 1000
        users = [i for i in range(t.num_nodes) if node.id in t.node(i).data_deps]
        assert len(users) == 1
        dst = t.node(users[0])
        assert node.attr("is_cpu_op") == dst.attr("is_cpu_op")
        e = (g.edges.src == node.data_deps[0]) & (g.edges.dst == dst.id)
        assert node.attr(DELAY_ATTR) == int(g.edges.delay_ns[e].max())


def test_default_writes_no_delay_nodes():
    g = build_graph(read_kineto(trace(SMALL[1])))
    t = to_chakra(g)
    assert not delay_rows(t).any() and DELAY_ATTR not in t.attr_names
