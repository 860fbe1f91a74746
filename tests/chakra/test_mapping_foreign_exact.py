"""``foreign_graph`` on one hand-made foreign trace that exercises every rule of its module
docstring, every output column pinned (mutation testing found most of its mutants surviving
tests that checked counts and a few columns).

The trace, in file order (ids; ``gpu``/``cpu`` is ``is_cpu_op``):

====  ==================  ==========  ===========================================  ============
id    name                type        attributes                                   deps
====  ==================  ==========  ===========================================  ============
10    meta                METADATA
2     kernel_x            COMP        gpu, stream 3                                data 1, ctrl 9
1     cpu_a               COMP        cpu, tid 7                                   ctrl 99, 1
3     Memcpy HtoD         COMP        (no is_cpu_op: GPU, guessed)                 data 2, 3
4     memset_z            COMP        gpu, tid 5                                   data 1, 77
5     allreduce           COMM_COLL   gpu, comm_type 0, 4096 B, pg0                data 2
6     c10d::allreduce_    COMM_COLL   cpu, tid 7, no comm_type                     data 1
7     gpu_coll_untyped    COMM_COLL   gpu, no comm_type, comm_size -5
8     send                COMM_SEND   cpu, tid 8, dst 1, tag 9, 100 B
9     recv                COMM_RECV   gpu, stream 3, src 1, 100 B                  data 2
====  ==================  ==========  ===========================================  ============

Worked by hand: ctrl 99 is dangling and ctrl 1 names itself (both ignored); data 77 dangling,
data 3 self; ``kernel_x``'s ctrl 9 closes a cycle with ``recv``'s data 2, so the ctrl edges go.
Kahn's order, a queue seeded and fed in file order: the roots 1, 7, 8, then 1's dependents
2, 4, 6, then 2's 3, 5, 9. Processors sorted by (GPU?, lane): threads 7 and 8, then the
streams: comm (-2: communication with neither stream nor tid), compute (-1), 3, and 5 (a GPU
node's tid)."""

from __future__ import annotations

from lumos.chakra import NodeType as N
from lumos.chakra import attr
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.mapping_foreign import foreign_graph
from lumos.graph.model import CommType, DepKind, ProcessorKind, TaskKind


def _trace(**builder):
    b = ChakraTraceBuilder(**builder)
    cpu, gpu = attr("is_cpu_op", True), attr("is_cpu_op", False)
    b.add_node(10, "meta", N.METADATA_NODE)
    b.add_node(
        2,
        "kernel_x",
        N.COMP_NODE,
        data_deps=[1],
        ctrl_deps=[9],
        start_time_micros=106,
        duration_micros=10,
        attrs=[gpu, attr("stream", 3)],
    )
    b.add_node(
        1,
        "cpu_a",
        N.COMP_NODE,
        ctrl_deps=[99, 1],
        start_time_micros=100,
        duration_micros=5,
        attrs=[cpu, attr("tid", 7)],
    )
    b.add_node(
        3, "Memcpy HtoD", N.COMP_NODE, data_deps=[2, 3], start_time_micros=120, duration_micros=2
    )
    b.add_node(
        4,
        "memset_z",
        N.COMP_NODE,
        data_deps=[1, 77],
        start_time_micros=107,
        duration_micros=1,
        attrs=[gpu, attr("tid", 5)],
    )
    b.add_node(
        5,
        "allreduce",
        N.COMM_COLL_NODE,
        data_deps=[2],
        start_time_micros=117,
        duration_micros=30,
        attrs=[gpu, attr("comm_type", 0), attr("comm_size", 4096), attr("pg_name", "pg0")],
    )
    b.add_node(
        6,
        "c10d::allreduce_",
        N.COMM_COLL_NODE,
        data_deps=[1],
        start_time_micros=106,
        duration_micros=3,
        attrs=[cpu, attr("tid", 7)],
    )
    b.add_node(
        7,
        "gpu_coll_untyped",
        N.COMM_COLL_NODE,
        start_time_micros=150,
        duration_micros=4,
        attrs=[gpu, attr("comm_size", -5)],
    )
    b.add_node(
        8,
        "send",
        N.COMM_SEND_NODE,
        start_time_micros=101,
        duration_micros=6,
        attrs=[
            cpu,
            attr("tid", 8),
            attr("comm_dst", 1),
            attr("comm_tag", 9),
            attr("comm_size", 100),
        ],
    )
    b.add_node(
        9,
        "recv",
        N.COMM_RECV_NODE,
        data_deps=[2],
        start_time_micros=130,
        duration_micros=7,
        attrs=[gpu, attr("stream", 3), attr("comm_src", 1), attr("comm_size", 100)],
    )
    return b.build()  # fmt: skip


def test_every_column_of_the_foreign_graph():
    g = foreign_graph(_trace())
    t, p, c, e = g.tasks, g.processors, g.comms, g.edges
    assert [g.task_name(i) for i in range(g.num_tasks)] == [
        "cpu_a", "gpu_coll_untyped", "send", "kernel_x", "memset_z", "c10d::allreduce_",
        "Memcpy HtoD", "allreduce", "recv"]  # fmt: skip
    K = TaskKind
    assert t.kind.tolist() == [K.CPU_OP, K.COMM, K.CPU_COMM, K.KERNEL, K.MEMSET, K.CPU_OP,
                               K.MEMCPY, K.COMM, K.COMM]  # fmt: skip
    assert t.processor_idx.tolist() == [0, 2, 1, 4, 5, 0, 3, 2, 4]
    assert t.order.tolist() == [0, 0, 0, 0, 0, 1, 0, 1, 1]
    assert t.dur_ns.tolist() == [5000, 4000, 6000, 10000, 1000, 3000, 2000, 30000, 7000]
    assert t.ts_ns.tolist() == [100000, 150000, 101000, 106000, 107000, 106000, 120000,
                                117000, 130000]  # fmt: skip
    assert t.comm_idx.tolist() == [-1, 0, 1, -1, -1, -1, -1, 2, 3]
    assert t.event_idx.tolist() == [-1] * 9

    T, S = ProcessorKind.THREAD, ProcessorKind.STREAM
    assert p.kind.tolist() == [T, T, S, S, S, S]
    assert p.tid.tolist() == [7, 8, -2, -1, 3, 5]
    assert p.pid.tolist() == [0] * 6 and p.device.tolist() == [-1, -1, 0, 0, 0, 0]
    assert p.label == ("thread 7", "thread 8", "stream comm", "stream compute", "stream 3",
                       "stream 5")  # fmt: skip

    assert c.kind.tolist() == [CommType.UNKNOWN, CommType.SEND, CommType.ALL_REDUCE,
                               CommType.RECV]  # fmt: skip
    assert c.size_bytes.tolist() == [0, 100, 4096, 100]
    assert c.pg_idx.tolist() == [-1, -1, 0, -1]
    assert c.peer_rank.tolist() == [-1, 1, -1, 1] and c.tag.tolist() == [-1, 9, -1, -1]
    assert [pg.name for pg in g.process_groups] == ["pg0"]
    assert (g.rank, g.world_size) == (0, 1)

    D = DepKind
    assert list(zip(e.src.tolist(), e.dst.tolist(), e.kind.tolist(), strict=True)) == [
        (0, 3, D.LAUNCH), (3, 6, D.INTER_STREAM), (0, 4, D.LAUNCH), (3, 7, D.INTER_STREAM),
        (0, 5, D.INTRA_THREAD), (3, 8, D.INTRA_STREAM),
        (1, 7, D.INTRA_STREAM),  # the comm stream's order, which the file did not state
    ]  # fmt: skip
    assert e.delay_ns.tolist() == [0] * 7

    assert g.diagnostics.to_dict() == {
        "data_dep_dangling": {"count": 1, "example": "node id 4 -> missing id 77"},
        "ctrl_dep_dangling": {"count": 1, "example": "node id 1 -> missing id 99"},
        "ctrl_dep_self": {"count": 1, "example": ""},
        "data_dep_self": {"count": 1, "example": ""},
        "ctrl_deps_dropped_cycle": {"count": 1, "example": "<chakra trace>"},
        "is_cpu_op_guessed": {"count": 1, "example": ""},
        "cpu_comm_without_comm_type": {"count": 1, "example": "node id 6 'c10d::allreduce_'"},
        "comm_type_missing": {"count": 1, "example": "node id 7 'gpu_coll_untyped'"},
        "comm_size_negative_as_0": {"count": 1, "example": "node id 7 'gpu_coll_untyped'"},
        "chakra_world_size_guessed": {"count": 1,
                                      "example": "<chakra trace>: rank 0, world size 1 at least"},
        "intra_processor_order_added": {"count": 1, "example": ""},
    }  # fmt: skip


def test_a_stated_world_size_and_rank_are_taken():
    g = foreign_graph(_trace(), world_size=4)
    assert (g.rank, g.world_size) == (0, 4)
    assert "chakra_world_size_guessed" not in g.diagnostics
    stated = foreign_graph(_trace(metadata_attrs=[attr("world_size", 8)], rank=3))
    assert (stated.rank, stated.world_size) == (3, 8)
    assert "chakra_world_size_guessed" not in stated.diagnostics
    # a world size that cannot hold the rank is not taken: the rank + 1, said
    small = foreign_graph(_trace(metadata_attrs=[attr("world_size", 3)], rank=3))
    assert (small.rank, small.world_size) == (3, 4)
    assert small.diagnostics.example("chakra_world_size_guessed") == (
        "<chakra trace>: rank 3, world size 4 at least"
    )


def test_cpu_work_without_a_tid_runs_on_thread_0_and_gpu_work_on_its_tid():
    b = ChakraTraceBuilder()
    b.add_node(1, "cpu_op", N.COMP_NODE, duration_micros=2, attrs=[attr("is_cpu_op", True)])
    b.add_node(2, "kernel", N.COMP_NODE, data_deps=[1], duration_micros=3,
               attrs=[attr("is_cpu_op", False), attr("tid", 4)])  # fmt: skip
    g = foreign_graph(b.build())
    assert g.processors.label == ("thread 0", "stream 4")
    assert g.processors.tid.tolist() == [0, 4]
    assert g.edges.kind.tolist() == [DepKind.LAUNCH]


def test_dep_kind_of_every_processor_pair():
    """Edge kinds from (src, dst) processor kinds (0 thread, 1 stream) and whether both ends are
    the same processor (possible only when the kinds agree): thread -> other thread
    INTER_THREAD, same thread INTRA_THREAD, thread -> stream LAUNCH, stream -> thread SYNC,
    stream -> other stream INTER_STREAM, same stream INTRA_STREAM."""
    import numpy as np

    from lumos.chakra.mapping_foreign import _dep_kind

    pk = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 1, 0, 1, 1]], dtype=np.int8)
    same = np.array([False, True, False, False, False, True])
    out = _dep_kind(pk, same)
    assert out.dtype == np.int8
    assert out.tolist() == [DepKind.INTER_THREAD, DepKind.INTRA_THREAD, DepKind.LAUNCH,
                            DepKind.SYNC, DepKind.INTER_STREAM, DepKind.INTRA_STREAM]  # fmt: skip
