"""``resize_memory``: each memory row scaled by its shape op's output, new over old, in the
context of the task carrying its anchor event (outside a layer, inside one, a parameter op),
frees by their allocation's ratio; on a hand-built graph whose expected bytes are worked out
below from :class:`~lumos.estimate.shapes.Dims` quantities."""

from __future__ import annotations

import dataclasses

import numpy as np

from lumos.estimate.memory_edit import resize_memory
from lumos.estimate.shapes import Dims
from lumos.graph.memory import GraphMemory
from lumos.graph.model import ExecGraph
from lumos.graph.synthetic import GraphBuilder

#: Quantities old -> new: tokens 16 -> 16, h 64 -> 128, 3h 192 -> 384, f 256 -> 768, head
#: width hd 16 -> 32, vocab 192 -> 192 (it equals the old 3h: which one a 192 is depends on
#: the context, 3h inside a layer, the vocabulary outside).
OLD = Dims(microbatch_size=2, seq=8, hidden=64, ffn=256, heads=4, vocab=192)
NEW = Dims(microbatch_size=2, seq=8, hidden=128, ffn=768, heads=4, vocab=192)

#: Task event rows (unsorted) and context: t0 event 14 a parameter op (outside a layer); t1
#: event 16 inside a layer; t2 event 10 and t3 event 12 outside. t4-t7 carry the same events
#: again (as copies do), with t1's context for t5 but none for t4: a row's context is that of
#: the first task carrying its event (t0's for event 14). t8, a parameter op, alone carries
#: the last event, 20.
EVENTS = [14, 16, 10, 12] * 2 + [20]
INSIDE = np.array([False, True, False, False, False, True, False, False, False])
PARAMS = np.array([True, False, False, False, False, False, False, False, True])

A, B = "[[16, 192]]", "[[16, 64]]"
#: The product's dims first: row 0 of ``shape_dims`` under op row 1 (``aten::mm``).
SHAPES = ("[[16, 64], [64, 256]]", A, B, "oops", "[]", "5")
#: (anchor event, shape op, shape dims, bytes, allocation row of a free)
ROWS = [
    (10, "aten::add", A, 1000, -1),  # r0  outside: 16 tokens, 192 the vocab: x1
    (16, "aten::add", A, 1000, -1),  # r1  inside: 192 is 3h -> 384: x2
    (14, "aten::add", B, 300, -1),  # r2  params: 16 is hd -> 32, 64 -> 128: x4
    (16, "aten::add", B, 100, -1),  # r3  inside: tokens kept, 64 -> 128: x2
    (12, "", "", -300, 2),  # r4  free of r2, no shape: r2's ratio
    (99, "aten::add", A, 1000, -1),  # r5  no task has event 99 (past the last): outside, x1
    (13, "aten::add", A, 1000, -1),  # r6  none has 13 (next is t2's 14): outside, x1
    (16, "aten::add", "oops", 500, -1),  # r7  dims not JSON: x1
    (16, "aten::add", "[]", 70, -1),  # r8  no tensor, 0 elements: x1
    (16, "aten::mm", "[[16, 64], [64, 256]]", 40, -1),  # r9  16 x 256 -> 16 x 768: x3
    (16, "aten::add", B, -1000, 0),  # r10 free of r0 by an op that would give x2: x1
    (16, "aten::add", "5", 9, -1),  # r11 dims JSON but no list: x1
    (20, "aten::add", A, 10, -1),  # r12 params (t8): 16 is hd -> 32, 192 is 3h -> 384: x4
]


def graph(rows=ROWS, shapes=SHAPES) -> ExecGraph:
    """Nine tasks on one thread with :data:`EVENTS` and a memory table of ``rows`` (their
    dims rows of ``shapes``)."""
    b = GraphBuilder()
    th = b.thread(1)
    for i in range(len(EVENTS)):
        b.task(th, "aten::add", 10, ts_ns=20 * i)
    g = b.build()
    g = g.replace(tasks=dataclasses.replace(g.tasks, event_idx=np.array(EVENTS, dtype=np.int64)))
    names = ("aten::add", "aten::mm")
    n = len(rows)

    def col(values, dtype=np.int64):
        return np.array(values, dtype=dtype)

    mem = GraphMemory(
        event_idx=col([r[0] for r in rows]),
        offset_ns=col([0] * n),
        anchor_dur_ns=col([10] * n),
        delta_bytes=col([r[3] for r in rows]),
        num_bytes=col([r[3] for r in rows]),
        alloc_row=col([r[4] for r in rows]),
        op_name_idx=col([-1] * n, np.int32),
        phase=col([0] * n, np.int8),
        total_reserved=col([-1] * n),
        shape_name_idx=col([names.index(r[1]) if r[1] else -1 for r in rows], np.int32),
        shape_dims_idx=col([shapes.index(r[2]) if r[2] else -1 for r in rows], np.int32),
        op_names=names,
        shape_dims=shapes,
        device_type=1,
        device_id=0,
        base_bytes=0,
        levels_recorded=False,
    )
    return g.replace(memory=mem)


def test_rows_are_resized_in_their_anchor_tasks_context_and_frees_follow_their_allocation():
    """The per-row ratios of :data:`ROWS` (its comments): x1, x2, x4, x2, x4 (r2's), x1, x1,
    x1, x1, x3, x1 (r0's), x1, x4; 6 rows change. Both the bytes and the level changes scale."""
    out, changed = resize_memory(graph(), OLD, NEW, INSIDE, PARAMS)
    want = [1000, 2000, 1200, 200, -1200, 1000, 1000, 500, 70, 120, -1000, 9, 40]
    assert out.memory.num_bytes.tolist() == want
    assert out.memory.delta_bytes.tolist() == want
    assert changed == 6


def test_without_parameter_context_a_parameter_ops_row_is_an_activation():
    """``params`` None: t0 is an op outside a layer, so r2's ``[16, 64]`` keeps its 16
    tokens, 64 -> 128: x2 (not x4), and its free r4 follows: -600; r12's t8 is outside a
    layer too: 192 is the vocabulary there, x1. 5 rows change."""
    out, changed = resize_memory(graph(), OLD, NEW, INSIDE, None)
    assert out.memory.num_bytes.tolist() == [
        1000, 2000, 600, 200, -600, 1000, 1000, 500, 70, 120, -1000, 9, 10]  # fmt: skip
    assert changed == 5


def test_unchanged_sizes_resize_nothing():
    """New = old: every ratio is 1, no row changes, the bytes are the recorded ones."""
    out, changed = resize_memory(graph(), OLD, OLD, INSIDE, PARAMS)
    assert out.memory.num_bytes.tolist() == [r[3] for r in ROWS]
    assert changed == 0


def test_a_graph_without_memory_rows_is_returned_as_is():
    """No memory table, or an empty one: the same graph, 0 rows resized."""
    g = graph()
    bare = g.replace(memory=None)
    assert resize_memory(bare, OLD, NEW, INSIDE, PARAMS) == (bare, 0)
    empty = g.replace(memory=g.memory.take(np.array([], dtype=np.int64)))
    out, changed = resize_memory(empty, OLD, NEW, INSIDE, PARAMS)
    assert out is empty and changed == 0


def test_without_a_vocabulary_a_3h_wide_tensor_is_3h_everywhere():
    """The vocabulary unknown (and no embedding table to read it from): 192 is only 3h, so
    ``[16, 192]`` is x2 outside a layer too (r0, r5, r6 and r0's free r10); the rest as in
    :data:`ROWS`. 10 rows change."""
    old, new = (dataclasses.replace(d, vocab=-1) for d in (OLD, NEW))
    out, changed = resize_memory(graph(), old, new, INSIDE, PARAMS)
    assert out.memory.num_bytes.tolist() == [
        2000, 2000, 1200, 200, -1200, 2000, 2000, 500, 70, 120, -2000, 9, 40]  # fmt: skip
    assert changed == 10


def test_a_one_element_tensor_is_resized_too():
    """A ``[1]`` tensor (one value per sample) with micro-batch size 1 -> 3: 1 is no feature
    quantity, so it is read as the next kind, token-like: b. 1 element before, 3 after: x3
    (a ``[1, 1]`` would be x9, each of its dimensions b)."""
    old, new = Dims(microbatch_size=1, seq=8, hidden=64), Dims(microbatch_size=3, seq=8, hidden=64)
    out, changed = resize_memory(
        graph([(10, "aten::add", "[[1]]", 8, -1)], ("[[1]]",)), old, new, INSIDE, PARAMS
    )
    assert (out.memory.num_bytes.tolist(), changed) == ([24], 1)


def test_a_shape_what_if_counts_the_allocations_it_resized_on_every_rank():
    """The bundled run (2 ranks), each rank given one 1000-byte allocation made by its first
    ``aten::gelu`` of layer 0 (``[8, 64, 512]``: inside a layer 512 is the FFN width), then
    hidden 128 -> 256 (FFN 512 -> 1024): each allocation doubles to 2000 bytes, and the edit's
    detail counts both ranks' rows, 1 + 1 = 2 allocations resized."""
    from lumos.estimate.baseline import detect_baseline
    from lumos.estimate.layers import find_layers
    from lumos.estimate.reshape import reshape_workload
    from lumos.examples_data import example_run_dir
    from lumos.replay import build_workload

    workload, _ = build_workload([str(example_run_dir())])
    base = detect_baseline(workload)
    dims = "[[8, 64, 512], []]"
    graphs = []
    for g in workload.graphs:
        layer = find_layers(g).task_layer(g.num_tasks)
        gelu = (np.array(g.names)[g.tasks.name_idx] == "aten::gelu") & (layer == 0)
        ev = int(g.tasks.event_idx[np.flatnonzero(gelu)[0]])
        assert g.dims[g.task_dims_idx[np.flatnonzero(gelu)[0]]] == dims

        def col(v, dtype=np.int64):
            return np.array([v], dtype=dtype)

        mem = GraphMemory(
            event_idx=col(ev), offset_ns=col(0), anchor_dur_ns=col(10), delta_bytes=col(1000),
            num_bytes=col(1000), alloc_row=col(-1), op_name_idx=col(-1, np.int32),
            phase=col(0, np.int8), total_reserved=col(-1), shape_name_idx=col(0, np.int32),
            shape_dims_idx=col(0, np.int32), op_names=("aten::gelu",), shape_dims=(dims,),
            device_type=1, device_id=0, base_bytes=0, levels_recorded=False,
        )  # fmt: skip
        graphs.append(g.replace(memory=mem))
    wide, edits = reshape_workload(workload.replace_graphs(graphs), base, {"hidden": 256})
    assert [g.memory.num_bytes.tolist() for g in wide.graphs] == [[2000], [2000]]
    (shape_edit,) = [e for e in edits if e.name == "hidden 128 -> 256"]
    assert "; 2 allocations resized; " in shape_edit.detail
