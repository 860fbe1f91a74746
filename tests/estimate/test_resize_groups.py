"""``resize_groups`` pinned field by field on small hand-built graphs: which old task each new
task copies, every rewired edge (kind and delay), collectives, waits, spans, the statistics and
the errors. Expected values are worked out by hand from the rules of the module docstring of
:mod:`lumos.estimate.blocks`."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.estimate.blocks import resize_groups
from lumos.estimate.layers import Group
from lumos.graph.kinds import AnnotationKind, CommType, DepKind, TaskKind, WaitKind
from lumos.graph.synthetic import GraphBuilder

TH, ST = int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)
IT, LA, SY = int(DepKind.INTER_THREAD), int(DepKind.LAUNCH), int(DepKind.SYNC)


def _edges(g):
    e = g.edges
    return list(
        zip(e.src.tolist(), e.dst.tolist(), e.kind.tolist(), e.delay_ns.tolist(), strict=True)
    )


def _spans(g):
    a = g.annotations
    return [
        (g.names[n], f, la)
        for n, f, la in zip(
            a.name_idx.tolist(), a.first_task_idx.tolist(), a.last_task_idx.tolist(), strict=True
        )
    ]


def two_layers():
    """Thread (processor 0) and stream (1). Old tasks: 0 setup, layer 0 = [1 a, 3 launch, 4 c]
    with 2 (a collective issuer, outside every block) between a and the launch, layer 1 = [5 a,
    6 launch, 7 c], 8 teardown; kernels 9 (layer 0's, a collective with seq 7; the issuer's
    seq is 3) and 10 (layer
    1's) on the stream. Block contents by position: layer 0 ``[1, 3, 4, 9]``, layer 1 ``[5, 6,
    7, 10]``. Extra edges after the launches: setup -> a0 (outside -> block, 5 ns), c0 -> a1
    (block 0 -> block 1, 3 ns), c1 -> teardown (block -> outside, 2 ns), k0 -> teardown
    (block -> outside, 0 ns). Waits: c0 on launch 3, a1 on kernel 9. Spans: the step (0..8),
    one inside layer 0 (1..4), one across the layers (4..5), 0..4 and 1..8."""
    b = GraphBuilder()
    th, stream = b.thread(1), b.stream(7)
    ar = b.comm(CommType.ALL_REDUCE, 64, seq_id=3)
    kc = b.comm(CommType.ALL_REDUCE, 32, seq_id=7)
    b.task(th, "setup", 10, ts_ns=100)
    b.task(th, "a", 10, ts_ns=200)
    b.task(th, "c10d::allreduce_", 5, ts_ns=220, comm=ar)
    b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=240)
    b.task(th, "c", 10, ts_ns=260)
    b.task(th, "a", 10, ts_ns=300)
    b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=340)
    b.task(th, "c", 10, ts_ns=360)
    b.task(th, "teardown", 10, ts_ns=400)
    b.task(stream, "ncclDevKernel", 40, ts_ns=250, comm=kc)
    b.task(stream, "gemm", 40, ts_ns=350)
    b.edge(3, 9, DepKind.LAUNCH)
    b.edge(6, 10, DepKind.LAUNCH)
    b.edge(0, 1, DepKind.INTER_THREAD, 5)
    b.edge(4, 5, DepKind.SYNC, 3)
    b.edge(7, 8, DepKind.INTER_THREAD, 2)
    b.edge(9, 8, DepKind.SYNC)
    b.wait(4, WaitKind.EVENT, stream=stream, record=3)
    b.wait(5, WaitKind.EVENT, stream=stream, record=9)
    b.annotate("ProfilerStep#1", th, 0, 8)
    b.annotate("in0", th, 1, 4, kind=AnnotationKind.USER)
    b.annotate("across", th, 4, 5, kind=AnnotationKind.USER)
    b.annotate("to_c0", th, 0, 4, kind=AnnotationKind.USER)
    b.annotate("from_a0", th, 1, 8, kind=AnnotationKind.USER)
    g = b.build().validate()
    g = g.replace(task_dims_idx=np.arange(11, dtype=np.int32) * 10)
    blocks = (np.array([1, 3, 4]), np.array([5, 6, 7]))
    return g, Group(th, blocks, "layer", "forward", 0)


def test_growing_two_layers_to_three_copies_tasks_edges_comms_waits_and_spans():
    """2 -> 3 layers: new layers copy old 0, 0, 1. On the thread layer 0's first copy keeps its
    place (the issuer stays between a and the launch) and its second copy follows c0 whole;
    on the stream k0's copy follows k0. New tasks: thread ``0 1 2 3 4 | 1 3 4 | 5 6 7 8``
    (new 0-11), stream ``9 9 10`` (new 12-14); copy numbers 1 for new 5-7 and 13. New blocks
    by position: ``[1, 3, 4, 12]``, ``[5, 6, 7, 13]``, ``[8, 9, 10, 14]``.

    Edges, in old order, then the regenerated program order: the launches go into every copy
    (3->12, 6->13, 9->14), setup -> the first copy of a0 (0->1), c0 -> a1 becomes copy j ->
    copy j+1 (4->5, 7->8), c1 -> teardown (10->11), k0's first copy -> teardown (12->11).
    Program order: thread 0->1 ... 10->11; on the stream k0 had no predecessor so its copy
    gets none (12 -/-> 13), 13->14. Times: the thread's first task keeps 100, then each adds
    its old gap (a0 100, issuer/launch/c0 20, a1/launch1 40, c1 20, teardown 40); stream 250,
    250 (k0's gap: none), 350.

    Collectives: the issuer (seq 3, outside: copy 0, 3 * 1024), k0 copies 7 * 1024 + 0 and + 1. Waits: both
    copies of c0 (new 4, 7) on launch 3's first copy (3); a1 (new 8) on k0's first (12).
    Spans: step 0..11; ``in0`` lies in layer 0: copied as 1..4 and 5..7 (after its row);
    ``across`` from c0's first instance to a1's last (4..8); ``to_c0`` to c0's last (0..7);
    ``from_a0`` from a0's first (1..11). 15 tasks for 11: 4 added, none removed."""
    g, group = two_layers()
    g2, stats = resize_groups(g, [group], [3])
    g2.validate()
    src = [0, 1, 2, 3, 4, 1, 3, 4, 5, 6, 7, 8, 9, 9, 10]
    assert g2.task_dims_idx is not None
    assert g2.task_dims_idx.tolist() == [10 * s for s in src]
    assert g2.tasks.processor_idx.tolist() == [0] * 12 + [1] * 3
    assert g2.tasks.order.tolist() == [*range(12), 0, 1, 2]
    assert g2.tasks.ts_ns.tolist() == [100, 200, 220, 240, 260, 360, 380, 400, 440, 480, 500, 540,
                                       250, 250, 350]  # fmt: skip
    assert g2.tasks.dur_ns.tolist() == g.tasks.dur_ns[src].tolist()
    assert _edges(g2) == [
        (3, 12, LA, 0), (6, 13, LA, 0), (9, 14, LA, 0), (0, 1, IT, 5), (4, 5, SY, 3),
        (7, 8, SY, 3), (10, 11, IT, 2), (12, 11, SY, 0),
        *[(i - 1, i, TH, 0) for i in range(1, 12)], (13, 14, ST, 0),
    ]  # fmt: skip
    assert g2.tasks.comm_idx.tolist() == [-1, -1, 0, *[-1] * 9, 1, 2, -1]
    assert g2.comms.seq_id.tolist() == [3 * 1024, 7 * 1024, 7 * 1024 + 1]
    assert g2.comms.size_bytes.tolist() == [64, 32, 32]
    w = g2.waits
    assert list(zip(w.task_idx.tolist(), w.record_task_idx.tolist(), strict=True)) == [
        (4, 3), (7, 3), (8, 12),
    ]  # fmt: skip
    assert _spans(g2) == [
        ("ProfilerStep#1", 0, 11), ("in0", 1, 4), ("in0", 5, 7), ("across", 4, 8),
        ("to_c0", 0, 7), ("from_a0", 1, 11),
    ]  # fmt: skip
    assert (stats.tasks_added, stats.tasks_removed, stats.spans_dropped) == (4, 0, 0)


def test_shrinking_two_layers_to_one_drops_the_second_with_its_edges_waits_and_spans():
    """2 -> 1 layer keeps layer 0 only. New tasks: thread ``0 1 2 3 4 8`` (new 0-5), stream
    ``9`` (new 6). Edges: launch 3->6 (3->12 of the old numbering), setup -> a0 (0->1), c0 ->
    a1 would go to new layer 1, which does not exist: gone; c1 -> teardown and the launch 6 ->
    10: gone with layer 1; k0 -> teardown (6->5); program order 0->1 ... 4->5 (teardown starts
    its old 40 ns gap after c0: 300). Waits: c0's (4 on 3); a1's is dropped. Spans: the
    step; ``in0`` (1..4); ``across`` now ends at a1's stand-in, the survivor before it (c0,
    new 4): 4..4; ``to_c0`` 0..4; ``from_a0`` 1..5. 4 tasks removed, no span dropped."""
    g, group = two_layers()
    g2, stats = resize_groups(g, [group], [1])
    g2.validate()
    assert g2.task_dims_idx is not None
    assert g2.task_dims_idx.tolist() == [0, 10, 20, 30, 40, 80, 90]
    assert g2.tasks.ts_ns.tolist() == [100, 200, 220, 240, 260, 300, 250]
    assert _edges(g2) == [
        (3, 6, LA, 0), (0, 1, IT, 5), (6, 5, SY, 0), *[(i - 1, i, TH, 0) for i in range(1, 6)],
    ]  # fmt: skip
    w = g2.waits
    assert list(zip(w.task_idx.tolist(), w.record_task_idx.tolist(), strict=True)) == [(4, 3)]
    assert _spans(g2) == [
        ("ProfilerStep#1", 0, 5), ("in0", 1, 4), ("across", 4, 4), ("to_c0", 0, 4),
        ("from_a0", 1, 5),
    ]  # fmt: skip
    assert g2.comms.seq_id.tolist() == [3 * 1024, 7 * 1024]
    assert (stats.tasks_added, stats.tasks_removed, stats.spans_dropped) == (0, 4, 0)


def test_a_span_inside_a_dropped_layer_is_dropped_and_counted():
    """Three layers ``[a, c]`` (old tasks 1-2, 3-4, 5-6 after setup 0, teardown 7); a span
    inside layer 1 (3..4) and one inside layer 2 (5..6). 3 -> 2 layers keeps layers 0 and 2
    (``round(j * 2 / 1)``): layer 1's span is dropped (1 counted), layer 2's follows its
    copy (new 3..4). A wait on layer 1's a is dropped; one on teardown recording layer 1's c
    records its stand-in, the next survivor (layer 2's a, new 3). Edges a_i -> c_i (1 ns)
    inside each layer are copied into the kept layers only."""
    b = GraphBuilder()
    th, stream = b.thread(1), b.stream(7)
    b.task(th, "setup", 10, ts_ns=0)
    for i in range(3):
        b.task(th, "a", 10, ts_ns=100 + 100 * i)
        b.task(th, "c", 10, ts_ns=150 + 100 * i)
    b.task(th, "teardown", 10, ts_ns=500)
    for i in range(3):
        b.edge(1 + 2 * i, 2 + 2 * i, DepKind.SYNC, 1)
    b.wait(3, WaitKind.EVENT, stream=stream, record=0)
    b.wait(7, WaitKind.EVENT, stream=stream, record=4)
    b.annotate("in1", th, 3, 4, kind=AnnotationKind.USER)
    b.annotate("in2", th, 5, 6, kind=AnnotationKind.USER)
    g = b.build().validate()
    group = Group(th, (np.array([1, 2]), np.array([3, 4]), np.array([5, 6])), "layer", "forward", 0)
    g2, stats = resize_groups(g, [group], [2])
    g2.validate()
    assert [g2.task_name(i) for i in range(g2.num_tasks)] == [
        "setup",
        "a",
        "c",
        "a",
        "c",
        "teardown",
    ]
    assert g2.tasks.dur_ns.tolist() == [10] * 6
    assert _edges(g2) == [(1, 2, SY, 1), (3, 4, SY, 1), *[(i - 1, i, TH, 0) for i in range(1, 6)]]
    w = g2.waits
    assert list(zip(w.task_idx.tolist(), w.record_task_idx.tolist(), strict=True)) == [(5, 3)]
    assert _spans(g2) == [("in2", 3, 4)]
    assert (stats.tasks_added, stats.tasks_removed, stats.spans_dropped) == (0, 2, 1)


def fwd_bwd_opt():
    """One thread: forward layers F0 = [1], F1 = [2], backward blocks B0 = [3] (layer 1's
    backward) and B1 = [4] (layer 0's), an optimizer group of one block O = [5]; setup 0 and
    teardown 6. Edges: F0 -> B1 and F1 -> B0 (each layer's forward to its own backward, 4 ns),
    F1 -> O (different block counts: 9 ns), B0 -> B1 (backward block b -> b+1, 6 ns)."""
    b = GraphBuilder()
    th = b.thread(1)
    for i, name in enumerate(["setup", "f", "f", "b", "b", "opt", "teardown"]):
        b.task(th, name, 10 + i, ts_ns=100 * i)
    b.edge(1, 4, DepKind.SYNC, 4)
    b.edge(2, 3, DepKind.SYNC, 4)
    b.edge(2, 5, DepKind.INTER_THREAD, 9)
    b.edge(3, 4, DepKind.SYNC, 6)
    g = b.build().validate()
    fwd = Group(th, (np.array([1]), np.array([2])), "layer", "forward", 0)
    bwd = Group(th, (np.array([3]), np.array([4])), "layer", "backward", 0)
    opt = Group(th, (np.array([5]),), "layer", "optimizer", 0)
    return g, [fwd, bwd, opt]


def test_edges_between_groups_follow_the_layer_index_and_the_backward_reversal():
    """Forward and backward 2 -> 3 (both copy old 0, 0, 1), optimizer 1 -> 2. New tasks: 0
    setup, 1 2 3 forward (old F0 F0 F1), 4 5 6 backward (old B0 B0 B1; backward block j runs
    layer ``3 - 1 - j``), 7 8 optimizer, 9 teardown. Forward layer j -> the backward block of layer j (block 2 - j):
    1 -> 6, 2 -> 5 (from F0's two copies), 3 -> 4 (F1). F1 -> O goes between first copies (3
    -> 7; counts 2 and 1 differ). B0 -> B1 becomes backward block j -> j + 1: 4 -> 5, 5 -> 6
    (B0's copies; 6 has no block 3). 3 added (one per new block), none removed."""
    g, groups = fwd_bwd_opt()
    g2, stats = resize_groups(g, groups, [3, 3, 2])
    g2.validate()
    assert g2.tasks.dur_ns.tolist() == [10, 11, 11, 12, 13, 13, 14, 15, 15, 16]
    assert _edges(g2) == [
        (1, 6, SY, 4), (2, 5, SY, 4), (3, 4, SY, 4), (3, 7, IT, 9), (4, 5, SY, 6), (5, 6, SY, 6),
        *[(i - 1, i, TH, 0) for i in range(1, 10)],
    ]  # fmt: skip
    assert (stats.tasks_added, stats.tasks_removed, stats.spans_dropped) == (3, 0, 0)


def test_a_shrunk_backward_group_still_pairs_each_forward_layer_with_its_backward():
    """Forward and backward 2 -> 1: forward keeps F0 (layer 0), backward keeps B0 (its block 0,
    which ran layer 1's backward: ``_src_blocks`` keeps block 0). New tasks 0 setup, 1 F0, 2
    B0, 3 O, 4 teardown. F0 -> B1 maps layer 0 to backward block ``1 - 1 - 0 = 0``: 1 -> 2.
    F1 -> B0 and F1 -> O and B0 -> B1 lose their ends (F1 and B1 are dropped)."""
    g, groups = fwd_bwd_opt()
    g2, stats = resize_groups(g, groups, [1, 1, 1])
    g2.validate()
    assert g2.tasks.dur_ns.tolist() == [10, 11, 13, 15, 16]
    assert _edges(g2) == [(1, 2, SY, 4), *[(i - 1, i, TH, 0) for i in range(1, 5)]]
    assert (stats.tasks_added, stats.tasks_removed, stats.spans_dropped) == (0, 2, 0)


def test_one_new_count_per_group_or_an_error_naming_the_function():
    g, groups = fwd_bwd_opt()
    with pytest.raises(ConfigError, match=r"^resize_groups: one new count per group$"):
        resize_groups(g, groups, [3, 3])
    with pytest.raises(ConfigError, match=r"^resize_groups: groups overlap; resize one level"):
        resize_groups(g, [groups[0], groups[0]], [2, 2])


def uneven_layers():
    """Stream (processor 0) and thread (1). Outside every block: launch 0 on the thread and its
    kernel 1 on the stream (the stream's first task), teardown 8 waiting for kernel 7. Layer 0
    = [2 a, 3 c]; layer 1 = [4 a, 5 b, 6 launch] and the kernel 7 it launches (the stream's
    last task). Contents by (processor, order): layer 0 ``[2, 3]``, layer 1 ``[7, 4, 5, 6]``;
    an edge c0 -> b1 (2 ns) goes from position 1 to position 2."""
    b = GraphBuilder()
    stream, th = b.stream(7), b.thread(1)
    b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=0)
    b.task(stream, "gemm", 40, ts_ns=50)
    for i, name in enumerate(["a", "c", "a", "b"]):
        b.task(th, name, 10, ts_ns=100 + 50 * i)
    b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=300)
    b.task(stream, "gemm", 40, ts_ns=350)
    b.task(th, "teardown", 10, ts_ns=400)
    b.edge(0, 1, DepKind.LAUNCH)
    b.edge(6, 7, DepKind.LAUNCH)
    b.edge(3, 5, DepKind.SYNC, 2)
    b.wait(8, WaitKind.EVENT, stream=stream, record=7)
    g = b.build().validate()
    return g, Group(th, (np.array([2, 3]), np.array([4, 5, 6])), "layer", "forward", 0)


def test_growing_uneven_layers_drops_an_edge_to_a_position_the_copy_lacks():
    """2 -> 3 layers copy old 0, 0, 1. New tasks: stream 1 (new 0), 7 (new 1); thread 0 (new
    2), layer 0 ``2 3`` (3, 4), its copy (5, 6), layer 1 ``4 5 6`` (7, 8, 9), teardown (10).
    New blocks: ``[3, 4]``, ``[5, 6]``, ``[1, 7, 8, 9]``. The launch outside the blocks
    reaches new task 0 (2 -> 0); layer 1's launch 9 -> 1. c0 -> b1 (position 2 of the next
    block): from new block 0 the next block is a copy of layer 0 with only 2 positions, so
    no edge; from new block 1 it is 6 -> 8. Program order: 0 -> 1 on the stream, 2 -> 3 ...
    9 -> 10 on the thread. Teardown's wait records kernel 7's copy, new 1. Times: each
    processor's first task keeps its start, the others follow their old gaps (the copy of a0
    starts 100 ns after c0, as a0 followed the launch 0)."""
    g, group = uneven_layers()
    g2, stats = resize_groups(g, [group], [3])
    g2.validate()
    assert g2.tasks.ts_ns.tolist() == [50, 350, 0, 100, 150, 250, 300, 350, 400, 450, 550]
    assert _edges(g2) == [
        (2, 0, LA, 0), (9, 1, LA, 0), (6, 8, SY, 2), (0, 1, ST, 0),
        *[(i - 1, i, TH, 0) for i in range(3, 11)],
    ]  # fmt: skip
    w = g2.waits
    assert list(zip(w.task_idx.tolist(), w.record_task_idx.tolist(), strict=True)) == [(10, 1)]
    assert (stats.tasks_added, stats.tasks_removed, stats.spans_dropped) == (2, 0, 0)


def test_a_dropped_record_without_a_later_survivor_falls_back_to_the_previous_one():
    """Thread A: setup 0, then layer 0 = [a0 1, launch 2] (its kernel k0 5 on stream S1) and
    layer 1 = [a1 3, launch 4] (k1 6 on stream S2, that stream's only task). Thread B: ``t`` 7
    waits for an event recorded by layer 1's launch (4), ``u`` 8 for one recorded by k1 (6).
    Shrinking 2 -> 1 layers drops a1, launch 4 and k1. Launch 4 was thread A's last task: no
    survivor follows it, so its stand-in is the one before it, layer 0's launch (new 2), and
    ``t`` waits for that. Stream S2 keeps no task: ``u``'s wait has nothing to record and is
    dropped (counted). The graph stays valid; 3 tasks removed, none added."""
    b = GraphBuilder()
    ta, s1, s2, tb = b.thread(1), b.stream(7), b.stream(8), b.thread(2)
    b.task(ta, "setup", 10, ts_ns=0)
    b.task(ta, "a", 10, ts_ns=100)
    b.task(ta, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=120)
    b.task(ta, "a", 10, ts_ns=200)
    b.task(ta, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=220)
    b.task(s1, "gemm", 40, ts_ns=130)
    b.task(s2, "gemm", 40, ts_ns=230)
    b.task(tb, "t", 5, ts_ns=300)
    b.task(tb, "u", 5, ts_ns=310)
    b.edge(2, 5, DepKind.LAUNCH)
    b.edge(4, 6, DepKind.LAUNCH)
    b.wait(7, WaitKind.EVENT, stream=s1, record=4)
    b.wait(8, WaitKind.EVENT, stream=s2, record=6)
    g = b.build().validate()
    group = Group(ta, (np.array([1, 2]), np.array([3, 4])), "layer", "forward", 0)
    g2, stats = resize_groups(g, [group], [1])
    g2.validate()
    names = [g2.names[i] for i in g2.tasks.name_idx.tolist()]
    assert names == ["setup", "a", "cudaLaunchKernel", "gemm", "t", "u"]
    w = g2.waits
    assert list(zip(w.task_idx.tolist(), w.record_task_idx.tolist(), strict=True)) == [(4, 2)]
    assert (stats.tasks_added, stats.tasks_removed, stats.waits_dropped) == (0, 3, 1)
