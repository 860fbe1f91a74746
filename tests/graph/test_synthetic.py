"""Graphs made by hand or at random (:mod:`lumos.graph.synthetic`): what each builder call
puts in the graph, and the exact structure of a small :func:`random_graph`."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from lumos.graph.model import CommType, DepKind, ProcessorKind, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder, random_graph


def test_builder_processors_take_the_pid_given_else_the_device():
    """A stream's pid is the one passed, else its device (Kineto writes a GPU's events under
    the device id); a thread's is the one passed, else 0."""
    b = GraphBuilder()
    b.thread(3, pid=5)
    b.thread(4)
    b.stream(7, device=1, pid=42)
    b.stream(8, device=1)
    b.stream(9, device=2, label="copy stream")
    p = b.build().processors
    assert p.kind.tolist() == [ProcessorKind.THREAD] * 2 + [ProcessorKind.STREAM] * 3
    assert p.pid.tolist() == [5, 0, 42, 1, 2]
    assert p.tid.tolist() == [3, 4, 7, 8, 9]
    assert p.device.tolist() == [-1, -1, 1, 1, 2]
    assert p.label == ("thread 3", "thread 4", "stream 7", "stream 8", "copy stream")


def test_builder_comms_keep_every_field_given():
    """Each keyword of :meth:`GraphBuilder.comm` lands in its column; unset ones are -1 (0
    bytes, 0 ns waited)."""
    b = GraphBuilder(rank=1, world_size=4)
    th = b.thread(1)
    pg = b.process_group("0", (0, 1, 2, 3))
    send = b.comm(CommType.SEND, 1 << 20, pg, seq_id=3, peer_rank=2, tag=9, wait_ns=50)
    ar = b.comm(CommType.ALL_REDUCE)
    b.task(th, "gloo:send", 100, TaskKind.CPU_COMM, comm=send)
    b.task(th, "gloo:all_reduce", 100, TaskKind.CPU_COMM, comm=ar)
    g = b.build().validate()
    c = g.comms
    assert c.kind.tolist() == [CommType.SEND, CommType.ALL_REDUCE]
    assert c.size_bytes.tolist() == [1 << 20, 0]
    assert c.pg_idx.tolist() == [0, -1]
    assert c.seq_id.tolist() == [3, -1]
    assert c.peer_rank.tolist() == [2, -1]
    assert c.tag.tolist() == [9, -1]
    assert c.wait_ns.tolist() == [50, 0]
    assert g.tasks.comm_idx.tolist() == [0, 1]


def test_a_small_random_graph_has_exactly_the_structure_described():
    """10 launches on 2 threads (launch ``i`` on thread ``i % 2``) and their 10 kernels
    (rows 10..19); with 2 streams each thread feeds one (thread ``t`` -> stream ``2 + t``), so:
    per thread 4 intra-thread edges and per stream 4 intra-stream edges (5 tasks in row
    order), 10 launch edges of 1 us, and no inter-stream edge (the kernels 5 launches apart
    that could get one, 4 and 9, follow kernels 2 and 7 of their own stream). Every 4th launch
    (rows 3 and 7, both thread 1) is followed by a sync on its stream (processor 3)."""
    g = random_graph(20, seed=3, n_threads=2, n_streams=2, inter_stream_every=5, sync_every=4)
    g.validate()
    p, t, e, w = g.processors, g.tasks, g.edges, g.waits
    assert p.kind.tolist() == [0, 0, 1, 1]
    assert p.tid.tolist() == [0, 1, 2, 3]
    assert p.device.tolist() == [-1, -1, 0, 0]
    assert t.kind.tolist() == [TaskKind.RUNTIME] * 10 + [TaskKind.KERNEL] * 10
    assert t.processor_idx.tolist() == [0, 1] * 5 + [2, 3] * 5
    assert [g.names[i] for i in t.name_idx[[0, 10]]] == ["cudaLaunchKernel", "kernel"]
    assert ((t.dur_ns[:10] >= 2_000) & (t.dur_ns[:10] < 8_000)).all()
    assert ((t.dur_ns[10:] >= 1_000) & (t.dur_ns[10:] < 60_000)).all()
    pairs = list(zip(e.src.tolist(), e.dst.tolist(), strict=True))
    edges = dict(zip(pairs, e.kind.tolist(), strict=True))
    want = {}
    for first in (0, 1):
        chain = list(range(first, 10, 2))
        want |= {(a, b): int(DepKind.INTRA_THREAD) for a, b in pairwise(chain)}
        want |= {(a + 10, b + 10): int(DepKind.INTRA_STREAM) for a, b in pairwise(chain)}
    want |= {(i, i + 10): int(DepKind.LAUNCH) for i in range(10)}
    assert edges == want and len(e) == 26
    delay = dict(zip(pairs, e.delay_ns.tolist(), strict=True))
    assert all(delay[k] == 1_000 for k, v in want.items() if v == DepKind.LAUNCH)
    assert all(delay[k] == 0 for k, v in want.items() if v == DepKind.INTRA_STREAM)
    assert all(0 <= delay[k] < 3_000 for k, v in want.items() if v == DepKind.INTRA_THREAD)
    assert w.task_idx.tolist() == [3, 7]
    assert w.kind.tolist() == [WaitKind.STREAM] * 2
    assert w.target_processor_idx.tolist() == [3, 3]
    again = random_graph(20, seed=3, n_threads=2, n_streams=2, inter_stream_every=5, sync_every=4)
    np.testing.assert_array_equal(again.tasks.dur_ns, t.dur_ns)  # deterministic for a seed
