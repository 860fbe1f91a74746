"""Layer detection (repeated blocks) and copying/dropping blocks, with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos.errors import ConfigError
from lumos.estimate.blocks import resize_groups
from lumos.estimate.layers import (
    Group,
    LayerMap,
    _groups_of_step,
    find_layers,
    find_repeat,
    forward_layer_spans,
)
from lumos.examples_data import example_run_dir
from lumos.graph.model import DepKind, TaskKind, WaitKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload
from lumos.sim import simulate
from lumos.sim.cost import TracedCost


@pytest.fixture(scope="module")
def example():
    workload, _ = build_workload([str(example_run_dir())])
    return workload


def test_find_repeat_known_answers():
    assert find_repeat(np.array([9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 8]), min_period=3) == (1, 3, 3)
    assert find_repeat(np.array([1, 2, 3, 4, 5, 6, 7]), min_period=3)[2] == 0
    # periods below the minimum are not layers
    assert find_repeat(np.array([1, 2, 1, 2, 1, 2]), min_period=3)[2] == 0
    assert find_repeat(np.array([9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 8]))[2] == 0  # MIN_PERIOD 8
    # one op in 30 differing (in-place accumulation) does not split the repeat
    block = list(range(30))
    other = [*block[:15], 99, *block[16:]]
    assert find_repeat(np.array([7, *block, *other, 8])) == (1, 30, 2)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=4, max_size=14),
    st.integers(2, 6),
    st.lists(st.integers(100, 120), max_size=5),
)
def test_find_repeat_finds_planted_blocks(block, count, noise):
    """A block of distinct-enough ops repeated ``count`` times is found with its full cover."""
    block = [*block, 1000, 1001, 1002, 1003]  # a tail that appears nowhere else
    seq = np.array([*noise, *(block * count), 2000])
    _, period, found = find_repeat(seq)
    assert period * found >= len(block) * count


def test_the_bundled_example_has_two_layers_forward_backward_and_optimizer(example):
    """The bundled run (2 layers, DDP, gloo): per step, the forward of a layer is 62 ops, its
    backward 132 (on the same thread), AdamW's per-parameter updates of a layer 180."""
    for g in example.graphs:
        lm = find_layers(g)
        assert lm.num_layers == 2 and lm.num_microbatches == 1
        by_phase = {(x.step, x.phase): (x.count, x.period) for x in lm.layer_groups()}
        assert by_phase == {(s, p): v for s in range(3) for p, v in
                            (("forward", (2, 62)), ("backward", (2, 132)),
                             ("optimizer", (2, 180)))}  # fmt: skip


def _replay_ns(workload: Workload) -> list[int]:
    result = simulate(workload, TracedCost())
    return [int(result.ends(gi).max()) for gi in range(len(workload.graphs))]


def test_resizing_to_the_same_counts_changes_nothing(example):
    edited = []
    for g in example.graphs:
        groups = find_layers(g).layer_groups()
        g2, stats = resize_groups(g, groups, [x.count for x in groups])
        assert (stats.tasks_added, stats.tasks_removed) == (0, 0)
        edited.append(g2.validate())
    assert _replay_ns(example.replace_graphs(edited)) == _replay_ns(example)


def serial_layers(n_layers: int, gpu: bool):
    """A thread: 100 ns of set-up, ``n_layers`` layers of ops a (10), b (20), c (30) with 1 ns of
    overhead before each, then 50 ns; with ``gpu``, b launches a 40 ns kernel instead of running
    20 ns itself (the thread goes on, the kernels queue on one stream)."""
    b = GraphBuilder()
    th = b.thread(1)
    stream = b.stream(7) if gpu else -1
    first = b.task(th, "setup", 100)
    blocks = []
    for _ in range(n_layers):
        a = b.task(th, "a", 10, gap_ns=1)
        if gpu:
            mid = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, gap_ns=1)
            k = b.task(stream, "gemm", 40)
            b.edge(mid, k, DepKind.LAUNCH)
        else:
            mid = b.task(th, "b", 20, gap_ns=1)
        c = b.task(th, "c", 30, gap_ns=1)
        blocks.append(np.array([a, mid, c], dtype=np.int64))
    last = b.task(th, "teardown", 50, gap_ns=1)
    b.annotate("ProfilerStep#1", th, first, last)
    g = b.build().validate()
    return g, Group(th, tuple(blocks), "layer", "forward", 0)


@pytest.mark.parametrize("n_layers, new", [(3, 6), (4, 2), (3, 1), (2, 5)])
def test_resizing_serial_layers_changes_the_step_by_whole_layers(n_layers, new):
    """Layers that run one after another: each one added or dropped adds or removes exactly
    one layer's time (63 ns: three ops and three 1 ns overheads)."""
    g, group = serial_layers(n_layers, gpu=False)
    g2, _ = resize_groups(g, [group], [new])
    g2.validate()
    assert g2.num_tasks == g.num_tasks + 3 * (new - n_layers)
    before, after = _replay_ns(Workload.of(g))[0], _replay_ns(Workload.of(g2))[0]
    assert after - before == 63 * (new - n_layers)


def test_doubling_layers_copies_the_kernels_they_launch():
    """With kernels, each layer's launch and kernel are copied; the launch edges follow."""
    g, group = serial_layers(3, gpu=True)
    g2, _ = resize_groups(g, [group], [6])
    g2.validate()
    kernels = np.flatnonzero(g2.tasks.kind == int(TaskKind.KERNEL))
    assert len(kernels) == 6
    launch = g2.edges.kind == int(DepKind.LAUNCH)
    assert sorted(g2.edges.dst[launch].tolist()) == sorted(kernels.tolist())


def numbered_layers(n_layers: int):
    """A thread: set-up, then ``n_layers`` layers of ops a, b, c where layer ``i``'s a runs
    ``1000 + i`` ns (so a copy shows which layer it copies), then tear-down."""
    b = GraphBuilder()
    th = b.thread(1)
    first = b.task(th, "setup", 100)
    blocks = []
    for i in range(n_layers):
        a = b.task(th, "a", 1000 + i, gap_ns=1)
        mid = b.task(th, "b", 20, gap_ns=1)
        c = b.task(th, "c", 30, gap_ns=1)
        blocks.append(np.array([a, mid, c], dtype=np.int64))
    last = b.task(th, "teardown", 50, gap_ns=1)
    b.annotate("ProfilerStep#1", th, first, last)
    return b.build().validate(), Group(th, tuple(blocks), "layer", "forward", 0)


@pytest.mark.parametrize(
    ("n_layers", "new", "copied"),
    [
        (8, 4, [0, 2, 5, 7]),  # round(j * 7 / 3): 0, 2.33, 4.67, 7
        (4, 3, [0, 2, 3]),  # round(j * 3 / 2): 0, 1.5 -> 2 (half to even), 3
        (5, 1, [0]),
        (3, 6, [0, 0, 1, 1, 2, 2]),  # j * 3 // 6
        (2, 3, [0, 0, 1]),  # j * 2 // 3
    ],
)
def test_resized_layers_copy_the_layers_the_module_docstring_names(n_layers, new, copied):
    """Growing repeats each layer in turn (new layer ``j`` copies ``j * count // new``);
    shrinking keeps the first and the last and spreads the rest (``round(j * (count - 1) /
    (new - 1))``, as ``_src_blocks`` documents). Read off the thread in program order: the
    a-op of each new layer runs ``1000 + i`` ns, ``i`` the layer it copies."""
    g, group = numbered_layers(n_layers)
    g2, stats = resize_groups(g, [group], [new])
    g2.validate()
    t = g2.tasks
    ops = np.argsort(t.order, kind="stable")
    a_ops = [i for i in ops.tolist() if g2.task_name(i) == "a"]
    assert [int(t.dur_ns[i]) - 1000 for i in a_ops] == copied
    assert (stats.tasks_added, stats.tasks_removed) == (
        3 * max(new - n_layers, 0),
        3 * (n_layers - len(set(copied))),
    )


def test_groups_that_share_a_task_are_refused():
    """A second group holding the first group's layer 1 again: resizing both at once would
    copy those tasks twice over, so it is refused, whichever group comes first."""
    g, group = serial_layers(3, gpu=False)
    other = Group(group.processor_idx, group.blocks[1:2], "layer", "forward", 0)
    for groups in ([group, other], [other, group]):
        with pytest.raises(ConfigError, match="groups overlap; resize one level at a time"):
            resize_groups(g, groups, [2, 2])


def test_launch_edges_are_copied_when_a_stream_is_the_first_processor():
    """``serial_layers(3, gpu=True)`` with its stream created before its thread: the stream's
    first kernel becomes task 0 of the resized graph. Doubling to 6 layers gives 6 launches
    and 6 kernels, and the n-th launch on the thread launches the n-th kernel on the stream,
    task 0 included (an edge inside one block is copied into every copy of the block)."""
    b = GraphBuilder()
    stream = b.stream(7)
    th = b.thread(1)
    first = b.task(th, "setup", 100)
    blocks = []
    for _ in range(3):
        a = b.task(th, "a", 10, gap_ns=1)
        mid = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, gap_ns=1)
        k = b.task(stream, "gemm", 40)
        b.edge(mid, k, DepKind.LAUNCH)
        c = b.task(th, "c", 30, gap_ns=1)
        blocks.append(np.array([a, mid, c], dtype=np.int64))
    last = b.task(th, "teardown", 50, gap_ns=1)
    b.annotate("ProfilerStep#1", th, first, last)
    g = b.build().validate()
    g2, _ = resize_groups(g, [Group(th, tuple(blocks), "layer", "forward", 0)], [6])
    g2.validate()
    t = g2.tasks

    def in_order(sel):
        idx = np.flatnonzero(sel)
        return idx[np.argsort(t.order[idx], kind="stable")].tolist()

    kernels = in_order(t.kind == int(TaskKind.KERNEL))
    launches = in_order(t.kind == int(TaskKind.RUNTIME))
    assert kernels[0] == 0 and len(kernels) == len(launches) == 6
    launch = g2.edges.kind == int(DepKind.LAUNCH)
    pairs = sorted(zip(g2.edges.src[launch].tolist(), g2.edges.dst[launch].tolist(), strict=True))
    assert pairs == sorted(zip(launches, kernels, strict=True))


def test_resized_tasks_keep_their_starts_gaps_and_event_waits():
    """A stream created first holds one kernel (new task 0); the thread runs setup (100 ns),
    the kernel's launch (120), an event record (140), layers ``[a 200, b 300]``, ``[a 400,
    b 500]`` and tear-down (600); ``b`` of layer 0 waits for the event. Growing to 3 layers
    copies layer 0 twice (``j * 2 // 3``: 0, 0, 1). The thread's first task keeps its start
    and each later one starts its old gap after the task before it: a copy of ``a`` 60 ns
    after ``b`` (as ``a`` followed the record), layer 1's ``a`` 100 ns after a ``b``. Both
    copies of ``b`` wait for the record, which is new task 3."""
    b = GraphBuilder()
    stream = b.stream(7)
    th = b.thread(1)
    b.task(th, "setup", 10, ts_ns=100)
    launch = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME, ts_ns=120)
    k = b.task(stream, "gemm", 40, ts_ns=250)
    b.edge(launch, k, DepKind.LAUNCH)
    record = b.task(th, "cudaEventRecord", 2, TaskKind.RUNTIME, ts_ns=140)
    blocks = []
    for i in range(2):
        a = b.task(th, "a", 10, ts_ns=200 + 200 * i)
        c = b.task(th, "b", 10, ts_ns=300 + 200 * i)
        blocks.append(np.array([a, c], dtype=np.int64))
    b.wait(int(blocks[0][1]), WaitKind.EVENT, stream=stream, record=record)
    last = b.task(th, "teardown", 10, ts_ns=600)
    b.annotate("ProfilerStep#1", th, 0, last)
    g = b.build().validate()
    g2, _ = resize_groups(g, [Group(th, tuple(blocks), "layer", "forward", 0)], [3])
    g2.validate()
    names = ["gemm", "setup", "cudaLaunchKernel", "cudaEventRecord", *["a", "b"] * 3, "teardown"]
    assert [g2.task_name(i) for i in range(g2.num_tasks)] == names
    assert g2.tasks.ts_ns.tolist() == [250, 100, 120, 140, 200, 300, 360, 460, 560, 660, 760]
    w = g2.waits
    assert list(zip(w.task_idx.tolist(), w.record_task_idx.tolist(), strict=True)) == [
        (5, 3),
        (7, 3),
    ]


def test_forward_layer_spans_mark_each_forward_block_from_its_first_task_to_its_last():
    """Thread 1 runs tasks 0-5 (added in time order), thread 2 tasks 6-8. Forward blocks
    (1, 3) and (4, 5) on thread 1, the second starting right after the first, mark 1, 2 (left
    out of the block, but between its tasks), 3, 4 and 5; the forward block (7,) on thread 2
    marks 7; the backward block (0,) and the empty block mark nothing. A map with no forward
    block gives None."""
    b = GraphBuilder()
    t1, t2 = b.thread(1), b.thread(2)
    for k in range(6):
        b.task(t1, f"a{k}", 5, ts_ns=10 * k)
    for k in range(3):
        b.task(t2, f"b{k}", 5, ts_ns=10 * k)
    g = b.build().validate()

    def group(th: int, phase: str, *blocks: list[int]) -> Group:
        return Group(th, tuple(np.array(x, dtype=np.int64) for x in blocks), "layer", phase, 0)

    back = group(t1, "backward", [0])
    lm = LayerMap((group(t1, "forward", [1, 3], [4, 5], []), group(t2, "forward", [7]), back), 2,
                  1, "by hand")  # fmt: skip
    inside = forward_layer_spans(g, lm)
    assert inside is not None and inside.dtype == np.bool_
    assert inside.tolist() == [False, True, True, True, True, True, False, True, False]
    assert forward_layer_spans(g, LayerMap((back,), 1, 1, "by hand")) is None


def _planted(b: GraphBuilder, th: int) -> list[np.ndarray]:
    """Four copies of eight distinct ops ``op0`` .. ``op7`` on thread ``th``."""
    return [
        np.array([b.task(th, f"op{k}", 10 + k, gap_ns=1) for k in range(8)], dtype=np.int64)
        for _ in range(4)
    ]


def _groups(g, th, tasks, module):
    no_marks = np.zeros(g.num_tasks, dtype=bool)
    out: list[Group] = []
    _groups_of_step(
        g, th, tasks, 0, np.zeros(len(g.names), dtype=bool), (no_marks, no_marks), out, [module]
    )
    return out


def test_a_module_block_is_left_out_of_the_search_but_tasks_outside_the_step_are_ignored():
    """``_groups_of_step`` on one thread, no point-to-point ops (so no micro-batch blocks): set-up,
    four copies of eight distinct ops, tear-down, and one module block from annotations: the
    set-up op plus a task of another thread (outside this step, ignored). Expected from the
    function's contract: the module block as a top-level forward layer group of step 0 (not
    placed in any micro-batch), then the search over the tasks the module left (positions
    1..33 of the step) finds the four planted copies, each a block of its eight tasks, in
    order. Were the other thread's task read as a position of this step, position 1 (the first
    copy's ``op0``) would be left out too, and the copies found would shift."""
    b = GraphBuilder()
    th = b.thread(1)
    other = b.thread(2)
    setup = b.task(th, "setup", 100)
    planted = _planted(b, th)
    last = b.task(th, "teardown", 50, gap_ns=1)
    away = b.task(other, "elsewhere", 10)
    b.annotate("ProfilerStep#1", th, setup, last)
    g = b.build().validate()
    tasks = np.array([setup, *np.concatenate(planted), last], dtype=np.int64)
    module = np.array([setup, away], dtype=np.int64)
    out = _groups(g, th, tasks, module)
    assert [(x.processor_idx, x.level, x.phase, x.step, x.parent) for x in out] == [
        (th, "layer", "forward", 0, (-1, -1)),
        (th, "layer", "forward", 0, (-1, -1)),
    ]
    assert [blk.tolist() for blk in out[0].blocks] == [module.tolist()]
    assert [blk.tolist() for blk in out[1].blocks] == [p.tolist() for p in planted]


def test_a_module_block_sits_in_the_micro_batch_that_holds_its_first_task():
    """Two micro-batches, each a ``recv`` (a run of two identical receives marks the blocks:
    positions 0..33 and 34..67), an op ``mod``, and four copies of eight distinct ops; the
    module block is the first micro-batch's ``mod``. Expected: the micro-batch group (index 0,
    top level) with the two blocks; the module block as a forward layer group of step 0 inside
    micro-batch block (0, 0); the first micro-batch's four copies, also in (0, 0); the second's
    four, in (0, 1). Nothing is left outside the micro-batches, so nothing more is searched."""
    b = GraphBuilder()
    th = b.thread(1)
    parts = []
    for _ in range(2):
        recv = b.task(th, "nccl:recv", 5, gap_ns=1)
        mod = b.task(th, "mod", 7, gap_ns=1)
        parts.append((recv, mod, _planted(b, th)))
    b.annotate("ProfilerStep#1", th, parts[0][0], int(parts[1][2][-1][-1]))
    g = b.build().validate()
    tasks = np.array(
        [t for recv, mod, planted in parts for t in (recv, mod, *np.concatenate(planted))],
        dtype=np.int64,
    )
    module = np.array([parts[0][1]], dtype=np.int64)
    out = _groups(g, th, tasks, module)
    assert [(x.processor_idx, x.level, x.phase, x.step, x.parent) for x in out] == [
        (th, "microbatch", "forward", 0, (-1, -1)),
        (th, "layer", "forward", 0, (0, 0)),
        (th, "layer", "forward", 0, (0, 0)),
        (th, "layer", "forward", 0, (0, 1)),
    ]
    assert [blk.tolist() for blk in out[0].blocks] == [tasks[:34].tolist(), tasks[34:].tolist()]
    assert [blk.tolist() for blk in out[1].blocks] == [module.tolist()]
    assert [blk.tolist() for blk in out[2].blocks] == [p.tolist() for p in parts[0][2]]
    assert [blk.tolist() for blk in out[3].blocks] == [p.tolist() for p in parts[1][2]]
