"""What follows the parameter count when the model changes: the optimizer and the gradient
buckets.

Layers changed under a multi-tensor optimizer: its updates are not per-layer blocks to copy
(``AdamW(foreach=True)`` updates every parameter from one ``_foreach_*`` op), so its time is
re-timed by the parameter ratio; a per-parameter optimizer's per-layer blocks are copied."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.estimate.baseline import detect_baseline
from lumos.estimate.layers import OPTIMIZER_PATTERN, Group, LayerMap, find_layers, marked
from lumos.estimate.reshape import reshape_workload, scale_optimizer
from lumos.graph.kinds import AnnotationKind, DepKind, TaskKind
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload

DATA = Path(__file__).parents[1] / "data" / "whatif_pairs"


def _optimizer_ns(g) -> int:
    indptr, perm = g.processor_order()
    opt = marked(g, OPTIMIZER_PATTERN, indptr, perm)
    for x in find_layers(g).layer_groups():
        if x.phase != "optimizer":
            for b in x.blocks:
                opt[b] = False
    return int(g.tasks.dur_ns[opt].sum())


def test_a_multi_tensor_optimizer_follows_the_parameters():
    # 4 -> 8 Llama layers (bundled --arch llama, hidden 128, FFN 512, vocabulary 512): outside
    # the layers the embedding and the head, 2 x 512 x 128 = 131,072 weights; each layer four
    # 128 x 128 projections and three 128 x 512 ones, 262,144 (its RMS norms multiply in
    # plain ops, not counted). (131,072 + 8 x 262,144) / (131,072 + 4 x 262,144) = 1.8889
    workload, _ = build_workload([str(DATA / "llama_ddp_layers_x2")])
    edited, edits = reshape_workload(workload, detect_baseline(workload, None), {"layers": 8})
    opt = [e for e in edits if e.name == "optimizer re-timed"]
    assert len(opt) == 1
    assert opt[0].detail.endswith("parameters x1.889")
    ratio = (131_072 + 8 * 262_144) / (131_072 + 4 * 262_144)
    for before, after in zip(workload.graphs, edited.graphs, strict=True):
        # every optimizer op outside the layers, rounded to the nanosecond one by one
        assert abs(_optimizer_ns(after) / (_optimizer_ns(before) * ratio) - 1) < 1e-6


def test_per_layer_optimizer_blocks_are_copied_not_rescaled():
    # the GPT workload's AdamW runs per parameter: its per-layer updates are found as layer
    # blocks and copied with the layers; nothing is re-timed by the parameter ratio
    workload, _ = build_workload([str(DATA / "ddp_layers_x2")])
    base = detect_baseline(workload, None)
    assert all(
        any(x.phase == "optimizer" and x.count == lm.num_layers for x in lm.layer_groups())
        for lm in base.layer_maps
    )
    _, edits = reshape_workload(workload, base, {"layers": 8})
    assert [e.name for e in edits] == ["layers 4 -> 8", "communication re-sized"]


def test_capped_gradient_buckets_change_in_number_not_size():
    # DDP's buckets are filled to bucket_cap_mb (1 MB in the bundled workload): 1,055,232,
    # 1,056,768 and 1,057,280 bytes on rank 0, and the last, smaller one (544,768). Twice the
    # layers means twice as many buckets of that size: each traced bucket's transfer doubles
    # (x the parameter ratio), not a + c x (twice the bytes) along a line
    from lumos.estimate.reshape import _capped, resize_comms

    assert _capped(np.array([544_768, 1_055_232, 1_056_768, 1_057_280], dtype=np.float64))
    assert not _capped(np.array([100_000, 400_000, 1_600_000], dtype=np.float64))
    assert not _capped(np.array([1_000_000], dtype=np.float64))
    workload, _ = build_workload([str(DATA / "ddp_layers_x2")])
    out, edit = resize_comms(list(workload.graphs), 1.5, 1.0)
    assert edit.detail.endswith("capped gradient buckets (all_reduce) change in number, not size")
    for before, after in zip(workload.graphs, out, strict=True):
        t = np.flatnonzero(before.tasks.comm_idx >= 0)
        wait = before.comms.wait_ns[before.tasks.comm_idx[t]]
        transfer = before.tasks.dur_ns[t] - wait
        assert (after.tasks.dur_ns[t] == wait + np.rint(transfer * 1.5)).all()
        # and the op on the main thread that issued each bucket to gloo's worker recurs once
        # per bucket: c10d::allreduce_ x 1.5, every other op as it was
        issue = np.array(
            [before.task_name(i) == "c10d::allreduce_" for i in range(before.num_tasks)]
        )
        assert issue.sum() == 4 * 3  # 4 buckets a step, 3 steps
        d0, d1 = before.tasks.dur_ns, after.tasks.dur_ns
        assert (d1[issue] == np.rint(d0[issue] * 1.5)).all()
        rest = ~issue & (before.tasks.comm_idx < 0)
        assert (d1[rest] == d0[rest]).all()


def test_uncapped_collectives_are_re_timed_along_the_line_of_their_kind():
    """Two all-reduces of 2,000 and 3,000 bytes (1.5x apart: far enough for a line), recorded
    as 50 ns of waiting + 300 and 400 ns of transfer: transfer = 100 + 0.1 x bytes. Twice the
    parameters: 4,000 and 6,000 bytes, transfer 500 and 700 ns (not 600 and 800 in
    proportion), the waiting kept. A send of one size (no line): 200 ns x 3 activations."""
    from lumos.estimate.reshape import resize_comms
    from lumos.graph.model import CommType, TaskKind
    from lumos.graph.synthetic import GraphBuilder

    b = GraphBuilder(rank=0, world_size=2)
    st = b.stream(7)
    pg = b.process_group("0", (0, 1))
    for seq, (size, dur) in enumerate(((2000, 350), (3000, 450)), 1):
        c = b.comm(CommType.ALL_REDUCE, size, pg, seq_id=seq, wait_ns=50)
        b.task(st, "ncclAllReduce", dur, TaskKind.COMM, comm=c)
    c = b.comm(CommType.SEND, 1000, pg, peer_rank=1)
    b.task(st, "ncclSend", 200, TaskKind.COMM, comm=c)
    (out,), edit = resize_comms([b.build()], 2.0, 3.0)
    assert out.tasks.dur_ns.tolist() == [550, 750, 600]
    assert out.comms.size_bytes.tolist() == [4000, 6000, 3000]
    assert (edit.tasks_retimed, edit.detail) == (3, "gradient bytes x2.000, activations x3.000")


def test_re_timed_comms_stay_whole_nanoseconds_past_float_precision():
    """Durations are integer ns throughout: a send that waited 2**53 ns (past the integers
    float64 holds exactly) and took 201 ns more to transfer, with 3x the activations: transfer
    603 ns, duration exactly 2**53 + 603 (a float sum would round it to 2**53 + 604)."""
    from lumos.estimate.reshape import resize_comms
    from lumos.graph.model import CommType, TaskKind
    from lumos.graph.synthetic import GraphBuilder

    b = GraphBuilder(rank=0, world_size=2)
    c = b.comm(CommType.SEND, 1000, b.process_group("0", (0, 1)), peer_rank=1, wait_ns=2**53)
    b.task(b.stream(7), "ncclSend", 2**53 + 201, TaskKind.COMM, comm=c)
    (out,), _ = resize_comms([b.build()], 1.0, 3.0)
    assert out.tasks.dur_ns.tolist() == [2**53 + 603]
    assert out.comms.size_bytes.tolist() == [3000]


def _layer_map(opt_blocks: int, layers: int) -> LayerMap:
    """``layers`` forward layers over tasks 0 and 1 (one block each for 2, one block of both
    for 1) and an optimizer repeat of ``opt_blocks`` blocks (tasks 2, 3, 4, ...): per-layer
    work when it repeats once per layer."""

    def group(phase, blocks):
        return Group(0, tuple(np.array(b) for b in blocks), "layer", phase, 0)

    fwd = group("forward", [[0], [1]] if layers == 2 else [[0, 1]])
    opt = group("optimizer", [[t] for t in range(2, 2 + opt_blocks)])
    return LayerMap((fwd, opt), layers, 1, "by hand")


@pytest.mark.parametrize("layers", [1, 2])
def test_scale_optimizer_re_times_the_multi_tensor_update_its_overhead_and_kernels(layers):
    """Thread: two ops named like optimizer ops (``_foreach_norm``, 100 ns each) inside the
    forward layers, so not the optimizer's; ``_foreach_add_`` (300 ns, 10 ns after the
    layers), a launch (30 ns, 6 ns after it) inside the ``Optimizer.step`` span, ``mul`` (50
    ns, 4 ns after). Stream: the launched kernel (200 ns), then ``gemm`` (80 ns) launched by
    ``mul``. With 3 optimizer blocks for 1 or 2 layers (not per layer), parameters x1.25: the
    update, the launch and its kernel 300 -> 375, 30 -> 37.5 -> 38 (round half to even),
    200 -> 250 ns, the 6 ns between the two optimizer ops -> 7.5 -> 8; the overhead into and
    out of the optimizer (10, 4 ns) and the rest are kept: 3 tasks changed per such rank, 6
    for two. A rank whose optimizer repeats once per layer (first here), a ratio of 1 or a
    rank without layers is returned as it is, counting nothing."""
    b = GraphBuilder()
    th, st = b.thread(1), b.stream(7)
    b.task(th, "aten::_foreach_norm", 100)
    b.task(th, "aten::_foreach_norm", 100)
    upd = b.task(th, "aten::_foreach_add_", 300, gap_ns=10)
    launch = b.task(th, "cudaLaunchKernel", 30, TaskKind.RUNTIME, gap_ns=6)
    mul = b.task(th, "aten::mul", 50, gap_ns=4)
    b.edge(launch, b.task(st, "multi_tensor_apply_kernel", 200), DepKind.LAUNCH)
    b.edge(mul, b.task(st, "gemm", 80), DepKind.LAUNCH)
    b.annotate("Optimizer.step#AdamW.step", th, upd, launch, kind=AnnotationKind.USER)
    g = b.build().validate()
    scaled = _layer_map(3, layers)
    out, n = scale_optimizer([g, g, g], [_layer_map(layers, layers), scaled, scaled], 1.25)
    assert n == 6
    assert len(out) == 3
    assert out[0] is g
    for r in out[1:]:
        assert r.tasks.dur_ns.tolist() == [100, 100, 375, 38, 50, 250, 80]
        e = r.edges
        intra = e.kind == int(DepKind.INTRA_THREAD)
        assert e.delay_ns[intra].tolist() == [0, 10, 8, 4]
        assert (e.delay_ns[~intra] == g.edges.delay_ns[~intra]).all()
    empty = LayerMap((), 0, 1, "no repeated layers found")
    for ratio, lm in ((1.0, scaled), (1.25, empty)):
        same, n = scale_optimizer([g], [lm], ratio)
        assert n == 0
        assert same[0] is g
