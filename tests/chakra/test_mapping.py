"""ExecGraph <-> Chakra mapping: exact round trips, the conventions other tools read, foreign files."""

from __future__ import annotations

import numpy as np
import pytest
from chakra_testdata import astra_custom, realdata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.property.strategies import exec_graphs
from tests.realdata import ASTRA_MICRO, trace

from lumos.chakra import NodeType, read_chakra, write_chakra
from lumos.chakra.attrs import encode_attr
from lumos.chakra.mapping import (
    WAIT_DEP_KIND,
    from_chakra,
    graph_differences,
    static_wait_targets,
    to_chakra,
    workload_from_chakra,
)
from lumos.chakra.validate import validate_trace
from lumos.graph.build import build_graph
from lumos.graph.model import (
    AnnotationKind,
    Annotations,
    Comms,
    CommType,
    ExecGraph,
    ProcessGroup,
    TaskKind,
)
from lumos.ingest.kineto import read_kineto
from lumos.sim import simulate

REAL = ["cuda_event_sync", "sendrecv_5streams_rank1", "hip_mi250", "backward_thread"]


def _roundtrip(g: ExecGraph, tmp_path) -> ExecGraph:
    path = tmp_path / f"g.{g.rank}.et"
    write_chakra(to_chakra(g), path)
    return from_chakra(read_chakra(path))


@pytest.fixture(scope="module")
def nccl_graph() -> ExecGraph:
    """The 2-rank NCCL A100 trace (rank 0): 21 collectives, syncs, process groups."""
    return build_graph(read_kineto(trace("nccl_a100")))


def test_example_trace_round_trips_exactly(nccl_graph, tmp_path):
    back = _roundtrip(nccl_graph, tmp_path)
    assert graph_differences(nccl_graph, back) == []
    assert back.diagnostics.total == 0
    assert [s["predicted_ns"] for s in simulate(back).steps()] == [
        s["predicted_ns"] for s in simulate(nccl_graph).steps()
    ]


@pytest.mark.parametrize("name", REAL)
def test_real_traces_round_trip_exactly(name, tmp_path):
    g = build_graph(read_kineto(trace(name)))
    assert graph_differences(g, _roundtrip(g, tmp_path)) == []


def test_node_table_follows_chakra_conventions(nccl_graph):
    t = to_chakra(nccl_graph)
    g = nccl_graph
    n = g.num_tasks
    assert t.num_nodes == n + 1  # + the process-group METADATA node
    assert t.node_type[n] == NodeType.METADATA_NODE
    kinds = g.tasks.kind
    comm = t.comm
    cpu = np.isin(kinds, [TaskKind.CPU_OP, TaskKind.RUNTIME, TaskKind.CPU_COMM])
    assert (comm.is_cpu_op[:n] == cpu).all()
    coll = t.node_type[:n] == NodeType.COMM_COLL_NODE
    assert int(coll.sum()) == 21
    assert (kinds[coll] == TaskKind.COMM).all()
    assert (comm.comm_size[:n][coll] > 0).all()
    assert set(comm.comm_type[:n][coll].tolist()) <= set(range(10))
    assert comm.pg_names and (comm.pg_name_idx[:n][coll] >= 0).all()
    # durations in whole microseconds, the exact ns kept
    assert (t.duration_micros[:n].astype(np.int64) == (g.tasks.dur_ns + 500) // 1000).all()
    assert validate_trace(t).ok


def test_every_edge_is_a_unique_data_dep(nccl_graph):
    t = to_chakra(nccl_graph)
    e = nccl_graph.edges
    owner = np.repeat(np.arange(t.num_nodes), np.diff(t.data_ptr))
    pairs = set(zip(owner.tolist(), t.data_deps.astype(np.int64).tolist(), strict=True))
    assert len(pairs) == t.data_deps.size  # no repeated id within a node
    assert set(zip(e.dst.tolist(), e.src.tolist(), strict=True)) <= pairs
    assert t.ctrl_deps.size == 0
    # the syncs are visible to Chakra-only consumers as deps on the waited GPU task
    w_src, w_dst = static_wait_targets(nccl_graph)
    assert w_src.size >= 17
    assert set(zip(w_dst.tolist(), w_src.tolist(), strict=True)) <= pairs
    assert WAIT_DEP_KIND not in e.kind


def test_attributes_encode_as_upstream_writers_do(nccl_graph):
    t = to_chakra(nccl_graph)
    for i in [*range(0, t.num_nodes, 997), t.num_nodes - 1]:
        lo, hi = int(t.attr_ptr[i]), int(t.attr_ptr[i + 1])
        for k, a in zip(range(lo, hi), t.attrs_of(i), strict=True):
            span = t.blob[int(t.attr_off[k]) : int(t.attr_off[k] + t.attr_len[k])].tobytes()
            assert span == encode_attr(a)


def test_metadata_node_has_astra_sim_process_groups(nccl_graph):
    import json

    t = to_chakra(nccl_graph)
    node = t.node(t.num_nodes - 1)
    assert node.name == "process_group:init"
    assert node.inputs is not None and node.inputs.values.startswith("['")
    groups = json.loads(node.inputs.values[2:-2])
    assert [g["pg_name"] for g in groups] == [pg.name for pg in nccl_graph.process_groups]


# ---- property: random valid graphs with comms, steps and process groups ----------------------


@st.composite
def rich_graphs(draw: st.DrawFn) -> ExecGraph:
    g = draw(exec_graphs())
    n = g.num_tasks
    n_pg = draw(st.integers(0, 3))
    groups = tuple(
        ProcessGroup(name=draw(st.sampled_from(["0", "1", "tp", ""])) + str(k),
                     ranks=tuple(draw(st.lists(st.integers(0, 7), max_size=4))),
                     desc=draw(st.sampled_from(["", "default_pg"])), backend="nccl")
        for k in range(n_pg)
    )  # fmt: skip
    is_comm = np.flatnonzero(g.tasks.comm_idx.size and g.tasks.kind == TaskKind.COMM)
    kinds = [int(k) for k in CommType]
    ck = [draw(st.sampled_from(kinds)) for _ in is_comm]
    comms = Comms.create(
        kind=np.array(ck, dtype=np.int8),
        size_bytes=np.array([draw(st.integers(0, 1 << 40)) for _ in is_comm], dtype=np.int64),
        pg_idx=np.array([draw(st.integers(-1, n_pg - 1)) for _ in is_comm], dtype=np.int32),
        seq_id=np.array([draw(st.integers(-1, 9)) for _ in is_comm], dtype=np.int64),
        peer_rank=np.array([draw(st.integers(-1, 7)) for _ in is_comm], dtype=np.int32),
        tag=np.array([draw(st.integers(-(1 << 40), 1 << 40)) for _ in is_comm], dtype=np.int64),
    )
    comm_idx = np.full(n, -1, dtype=np.int32)
    comm_idx[is_comm] = np.arange(is_comm.size)
    ts = np.cumsum(np.array([draw(st.integers(-5_000, 9_000)) for _ in range(n)], dtype=np.int64))
    event = np.array([draw(st.integers(-4, 1 << 33)) for _ in range(n)], dtype=np.int64)
    tasks = g.tasks.replace(comm_idx=comm_idx, ts_ns=ts, event_idx=event)
    ann = Annotations.empty()
    if n:
        p = int(g.tasks.processor_idx[0])
        on = np.flatnonzero(g.tasks.processor_idx == p)
        ann = Annotations.create(
            name_idx=np.array([0], dtype=np.int32),
            kind=np.array([AnnotationKind.STEP], dtype=np.int8),
            processor_idx=np.array([p], dtype=np.int32),
            first_task_idx=np.array([on[0]], dtype=np.int32),
            last_task_idx=np.array([on[-1]], dtype=np.int32),
            ts_ns=np.array([draw(st.integers(-100, 100))], dtype=np.int64),
            dur_ns=np.array([draw(st.integers(0, 10**6))], dtype=np.int64),
            lead_ns=np.array([3], dtype=np.int64),
            tail_ns=np.array([-2], dtype=np.int64),
        )
    world = draw(st.integers(1, 8))
    names = (*g.names, *draw(st.lists(st.text(max_size=5), max_size=3, unique=True)))
    names = tuple(dict.fromkeys(names))
    return g.replace(tasks=tasks, comms=comms, annotations=ann, process_groups=groups,
                     rank=draw(st.integers(0, world - 1)), world_size=world,
                     names=names)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rich_graphs())
def test_random_graphs_round_trip_exactly(g):
    g.validate()
    t = to_chakra(g)
    assert validate_trace(t).ok
    back = from_chakra(t)
    assert graph_differences(g, back) == []
    assert back.diagnostics.total == 0


# ---- foreign files --------------------------------------------------------------------------


def test_upstream_converted_et_becomes_a_replayable_graph(chakra0_gz):
    t = read_chakra(chakra0_gz)
    g = from_chakra(t)
    g.validate()
    assert g.num_tasks == 3664
    d = g.diagnostics
    assert d.count("cpu_comm_without_comm_type") == 14
    assert d.count("ctrl_dep_dangling") > 0
    kinds = np.bincount(g.tasks.kind, minlength=7)
    assert kinds[TaskKind.COMM] == 7
    assert kinds[TaskKind.CPU_OP] == 2448
    want = np.sort(t.duration_micros.astype(np.int64) * 1000)
    assert (np.sort(g.tasks.dur_ns) == want).all()
    r = simulate(g)
    assert r.makespan_ns > 0


@pytest.mark.parametrize("folder", ["all_reduce", "all_to_all"])
def test_astra_sim_microbenchmark_workload_replays(folder):
    """ASTRA-sim's 16-NPU microbenchmark (the first folder by name): 16 ranks of one 1 MiB
    collective each, matched into one group of 16; the files record no times (ASTRA-sim computes
    them), so the traced replay ends at exactly 0 ns."""
    found = sorted(realdata(f"{ASTRA_MICRO}/{folder}").rglob("*.0.et"))
    assert found[0].parent.name == "16npus_1MB"
    prefix = str(found[0])[: -len(".0.et")]
    w = workload_from_chakra(read_chakra(prefix))
    assert w.ranks == tuple(range(16))
    for g in w.graphs:
        g.validate()
        assert g.tasks.kind.tolist() == [int(TaskKind.COMM)]
        assert g.comms.size_bytes.tolist() == [1 << 20]
        assert g.diagnostics.count("is_cpu_op_guessed") == 0
    groups = w.collective_groups()
    assert groups.num_groups == 1 and groups.sizes().tolist() == [16]
    assert simulate(w).makespan_ns == 0


def test_custom_collectives_read(tmp_path):
    w = workload_from_chakra(read_chakra(realdata(astra_custom()) / "custom_allreduce"))
    assert w.ranks == tuple(range(8))


def test_edited_deps_fall_back_to_data_deps(nccl_graph):
    t = to_chakra(nccl_graph)
    # a tool that drops every dependency of node 5
    ptr = t.data_ptr.copy()
    k = int(ptr[6] - ptr[5])
    deps = np.delete(t.data_deps, np.arange(ptr[5], ptr[6]))
    ptr[6:] -= k
    g = from_chakra(t.with_deps(t.ctrl_ptr, t.ctrl_deps, ptr, deps))
    assert g.diagnostics.count("chakra_deps_edited") == 1
    g.validate()
