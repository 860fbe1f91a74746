"""One rank's answer on its layers (``lumos.estimate.layer_verdict._judge_rank``), on hand-made
ranks with hand-made layer maps: ops run back to back on one thread from 0 ns, so a block of
ops spans exactly the sum of their durations, and every expected share below is that sum over
the marked step's length."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.estimate.layer_verdict import RankLayers, _judge_rank
from lumos.estimate.layers import Group, LayerMap
from lumos.graph.model import ExecGraph
from lumos.graph.synthetic import GraphBuilder

SEARCH = "repeated op sequence (names and Input Dims)"
MODULES = "module annotations (nn.Module: Block)"
NO_STEPS = ("no steps marked (ProfilerStep): repeats of the op sequence cannot be told from "
            "repeated iterations")  # fmt: skip
NO_FORWARD = "no repeated forward layers found"


def rank_graph(
    ops: list[tuple[str, int]], steps: list[tuple[int, int]], rank: int = 0
) -> ExecGraph:
    """Task ``i`` runs ``ops[i]`` (name, ns) on one thread, right after task ``i - 1``;
    ``steps`` are ``ProfilerStep`` windows ``(start, ns)``, annotated over task 0."""
    b = GraphBuilder(rank=rank, world_size=rank + 1)
    th = b.thread(1)
    clock = 0
    for name, dur in ops:
        b.task(th, name, dur, ts_ns=clock)
        clock += dur
    for s, (ts, dur) in enumerate(steps):
        b.annotate(f"ProfilerStep#{s}", th, 0, 0, ts_ns=ts, dur_ns=dur)
    return b.build().validate()


def group(phase: str, first: int, count: int, period: int = 2, step: int = 0) -> Group:
    """``count`` blocks of ``period`` consecutive tasks from task ``first``."""
    blocks = tuple(np.arange(first + k * period, first + (k + 1) * period, dtype=np.int64)
                   for k in range(count))  # fmt: skip
    return Group(0, blocks, "layer", phase, step)


def judged(g: ExecGraph, *groups: Group, how: str = SEARCH) -> RankLayers:
    return _judge_rank(g, LayerMap(groups, 0, 1, how))


FWD = [("aten::f0", 10), ("aten::f1", 10)]  # one forward block: 20 ns
BWD = [("F1Backward0", 10), ("F0Backward0", 10)]  # one backward block: 20 ns
OPT = [("aten::_foreach_add_", 10)] * 2  # one optimizer block: a loop over one op
EMB, LOSS = [("aten::embedding", 10)], [("aten::nll_loss", 10)]


def test_without_layer_groups_a_rank_declines_naming_itself():
    g = rank_graph(EMB + FWD, [(0, 30)], rank=2)
    micro = Group(0, (np.array([0, 1, 2]),), "microbatch", "forward", 0)
    assert judged(g) == RankLayers(2, None, "no repeated layers found")
    assert judged(g, micro) == RankLayers(2, None, "no repeated layers found")


def test_module_annotations_need_no_steps_the_whole_run_is_the_step():
    """No step marked: 10 ns of embedding, 4 forward blocks (tasks 1-8, 80 ns), 10 ns of loss.
    Found from module annotations, the whole run (0-100 ns) is the step: 4 layers, 80 / 100 of
    it. Found by the op-sequence search, the rank declines: repeats could be iterations."""
    g = rank_graph(EMB + FWD * 4 + LOSS, [], rank=2)
    assert judged(g, group("forward", 1, 4), how=MODULES) == RankLayers(2, None, "", 0.8, 4)
    assert judged(g, group("forward", 1, 4)) == RankLayers(2, None, NO_STEPS)


def test_the_optimizer_s_repeats_count_in_the_share_but_never_as_layers_or_loops():
    """Per step 10 ns of embedding, 4 forward blocks (tasks 1-8), 4 backward (9-16), 4
    optimizer blocks that repeat one op (17-24: a loop, were it not the optimizer's) and 10 ns
    of loss: 4 layers, whose three groups cover 10-250 ns of the 260 ns step."""
    g = rank_graph(EMB + FWD * 4 + BWD * 4 + OPT * 4 + LOSS, [(0, 260)])
    got = judged(g, group("forward", 1, 4), group("backward", 9, 4), group("optimizer", 17, 4))
    assert got == RankLayers(0, None, "", 240 / 260, 4)


def test_an_optimizer_repeat_is_no_backward_block_per_layer():
    """4 forward blocks, 3 backward (9-14), 4 optimizer blocks (15-22): the backward decides."""
    g = rank_graph(EMB + FWD * 4 + BWD * 3 + OPT * 4 + LOSS, [(0, 240)])
    got = judged(g, group("forward", 1, 4), group("backward", 9, 3), group("optimizer", 15, 4))
    assert got == RankLayers(0, None, "forward and backward disagree: forward repeats of 4 "
                             "blocks, backward repeats of 3: no backward block per forward "
                             "layer")  # fmt: skip


def test_without_forward_repeats_in_a_step_a_rank_declines():
    """Only the optimizer's repeats (a loop of one op, but the optimizer's: no loop reason), or
    forward repeats that start before the only step: no forward layers."""
    g = rank_graph(EMB + OPT * 4 + LOSS, [(0, 100)], rank=1)
    assert judged(g, group("optimizer", 1, 4)) == RankLayers(1, None, NO_FORWARD)
    g = rank_graph(EMB + FWD * 4 + LOSS, [(90, 10)], rank=1)
    assert judged(g, group("forward", 1, 4)) == RankLayers(1, None, NO_FORWARD)


def test_forward_loops_decline_naming_the_op_they_repeat():
    """4 forward blocks of ``aten::as_strided`` twice (a loop of 1 op), 4 backward blocks."""
    loop = [("aten::as_strided", 10)] * 2
    g = rank_graph(EMB + loop * 4 + BWD * 4 + LOSS, [(0, 180)], rank=1)
    got = judged(g, group("forward", 1, 4), group("backward", 9, 4))
    assert got == RankLayers(1, None, "the forward repeats are loops, not layers (4 blocks of 2 "
                             "ops repeating aten::as_strided every 1 op); backward repeats of 4 "
                             "blocks")  # fmt: skip


def test_a_forward_loop_over_two_ops_names_both_and_counts_ops_in_the_plural():
    """4 forward blocks of 4 ops, each ``aten::as_strided aten::view`` twice: a loop whose
    unit is 2 ops (names in order of first appearance, "every 2 ops"), 4 backward blocks."""
    loop = [("aten::as_strided", 10), ("aten::view", 10)] * 2
    g = rank_graph(EMB + loop * 4 + BWD * 4 + LOSS, [(0, 260)], rank=1)
    got = judged(g, group("forward", 1, 4, period=4), group("backward", 17, 4))
    assert got == RankLayers(1, None, "the forward repeats are loops, not layers (4 blocks of 4 "
                             "ops repeating aten::as_strided aten::view every 2 ops); backward "
                             "repeats of 4 blocks")  # fmt: skip


@pytest.mark.parametrize(
    ("outside_ns", "want"),
    [
        # 80 ns of layers in an 800 ns step: exactly 10 %, accepted
        (720, RankLayers(0, None, "", 0.1, 4)),
        # 80 of 1000 ns: 8.0 %
        (920, RankLayers(0, None, "repeats cover 8.0 % of the step (a model's layers cover at "
                                  "least 10 %)", 0.08)),
    ],
)  # fmt: skip
def test_layers_must_cover_a_tenth_of_the_step(outside_ns, want):
    """An embedding of ``outside_ns``, then 4 forward blocks of 20 ns (inference)."""
    g = rank_graph([("aten::embedding", outside_ns)] + FWD * 4, [(0, outside_ns + 80)])
    assert judged(g, group("forward", 1, 4)) == want


def test_two_stacks_each_covering_a_tenth_are_declined_with_the_larger_share():
    """400 ns of embedding, 4 blocks of 20 ns (80 ns: exactly 10 % of the 800 ns step), then 2
    blocks of two 80 ns ops (320 ns: 40 %): two stacks."""
    wide = [("aten::g0", 80), ("aten::g1", 80)]
    g = rank_graph([("aten::embedding", 400)] + FWD * 4 + wide * 2, [(0, 800)])
    got = judged(g, group("forward", 1, 4), group("forward", 9, 2))
    assert got == RankLayers(0, None, "several stacks: repeats of 4 and 2 blocks each cover at "
                             "least 10 % of the step (stages of layers of different shapes, as "
                             "in a ResNet, not one stack)", 0.4)  # fmt: skip


def test_a_one_ns_step_is_covered_whole():
    """A step marked at 10 ns for 1 ns, where the first forward block starts: the layers
    cover all of it (share 1)."""
    g = rank_graph(EMB + FWD * 4, [(10, 1)])
    assert judged(g, group("forward", 1, 4)) == RankLayers(0, None, "", 1.0, 4)
