"""One rank's entry in ``lumos layers`` (``lumos.estimate.layer_report._rank``), from hand-made
layer maps over ops that run back to back on one thread: every span below is the sum of its
ops' durations."""

from __future__ import annotations

import numpy as np

from lumos.estimate.layer_report import _rank
from lumos.estimate.layer_verdict import RankLayers
from lumos.estimate.layers import Group, LayerMap
from lumos.graph.model import ExecGraph
from lumos.graph.synthetic import GraphBuilder

HOW = "repeated op sequence (names and Input Dims)"


def ops(durations: list[int], steps: list[tuple[int, int]]) -> ExecGraph:
    """Task ``i`` lasts ``durations[i]`` ns, right after task ``i - 1`` (from 0 ns); ``steps``
    are ``ProfilerStep`` windows ``(start, ns)``, annotated over task 0."""
    b = GraphBuilder()
    th = b.thread(1)
    clock = 0
    for k, dur in enumerate(durations):
        b.task(th, f"op{k}", dur, ts_ns=clock)
        clock += dur
    for s, (ts, dur) in enumerate(steps):
        b.annotate(f"ProfilerStep#{s}", th, 0, 0, ts_ns=ts, dur_ns=dur)
    return b.build().validate()


def group(phase: str, first: int, count: int, period: int, step: int) -> Group:
    """``count`` blocks of ``period`` consecutive tasks from task ``first``."""
    blocks = tuple(np.arange(first + k * period, first + (k + 1) * period, dtype=np.int64)
                   for k in range(count))  # fmt: skip
    return Group(0, blocks, "layer", phase, step)


def test_a_rank_without_groups_or_steps_has_one_step_and_no_outside():
    """Nothing found, no step marked: one step of 0 ns, no layers, nothing outside them."""
    g = ops([10, 10, 10], [])
    lm = LayerMap((), 0, 1, "no repeated layers found")
    want = {"rank": 0, "layers": None, "reason": None, "share": None, "microbatches": 1,
            "steps": 1, "step_ns": 0, "phases": {}, "repeats": [], "outside_ns": None,
            "how": "no repeated layers found"}  # fmt: skip
    assert _rank(g, lm, None, False) == want
    declined = RankLayers(0, None, "no repeated layers found")
    assert _rank(g, lm, declined, True) == {**want, "reason": "no repeated layers found",
                                            "share": 0.0}  # fmt: skip


def test_accepted_layers_are_phases_and_another_count_is_a_repeat_of_each_step():
    """Two steps (121 and 122 ns: 121 on average), each: 2 forward blocks of two 10 ns ops
    (in step 1 the last op lasts 11), 3 optimizer blocks of one 7 ns op, 2 backward blocks of
    two 15 ns ops. Layers: 2. Forward spans 20, 20, 20, 21 (mean 20, 40 per step); backward 30
    each (60 per step); the optimizer's 3 blocks, once per step, are a repeat of 21 ns per
    step. Inside: 81 + 120 = 201 ns over 2 steps, 100 whole ns per step: 21 outside."""
    step = [10, 10, 10, 10, 7, 7, 7, 15, 15, 15, 15]
    last = [10, 10, 10, 11, 7, 7, 7, 15, 15, 15, 15]
    g = ops(step + last, [(0, 121), (121, 122)])
    groups = []
    for s in (0, 1):
        first = 11 * s
        groups += [group("forward", first, 2, 2, s), group("optimizer", first + 4, 3, 1, s),
                   group("backward", first + 7, 2, 2, s)]  # fmt: skip
    lm = LayerMap(tuple(groups), 2, 1, HOW)
    got = _rank(g, lm, RankLayers(0, 2, "", 0.5, 2), False)
    assert got == {
        "rank": 0, "layers": 2, "reason": None, "share": 0.5, "microbatches": 1, "steps": 2,
        "step_ns": 121,
        "phases": {
            "forward": {"layers": 2, "ops_per_layer": 2, "layer_ns": 20, "total_ns": 40,
                        "groups_per_step": 1.0},
            "backward": {"layers": 2, "ops_per_layer": 2, "layer_ns": 30, "total_ns": 60,
                         "groups_per_step": 1.0},
        },
        "repeats": [{"phase": "optimizer", "blocks": 3, "ops_per_block": 1,
                     "groups_per_step": 1.0, "total_ns": 21}],
        "outside_ns": 21, "how": HOW,
    }  # fmt: skip
    assert isinstance(got["outside_ns"], int)


def test_layers_longer_than_the_marked_step_leave_nothing_outside():
    """A 10 ns step marked over 2 forward blocks of two 10 ns ops (40 ns inside): 0 outside."""
    g = ops([10, 10, 10, 10], [(0, 10)])
    lm = LayerMap((group("forward", 0, 2, 2, 0),), 2, 1, HOW)
    got = _rank(g, lm, RankLayers(0, 2, "", 1.0, 2), False)
    assert (got["step_ns"], got["outside_ns"]) == (10, 0)


def test_declined_blocks_are_repeats_unless_given_and_without_a_verdict_the_map_decides():
    """One 40 ns step of 2 forward blocks of two 10 ns ops (20 ns each), which the map counts
    as 2 layers. Declined (share 0.123456, shown to 4 places): one repeat of 40 ns a step, all
    40 ns outside. Declined but ``--baseline layers`` given: the blocks are phases as found
    (the rank's layers stay null), nothing outside. No verdict: the map's 2 layers."""
    g = ops([10, 10, 10, 10], [(0, 40)])
    lm = LayerMap((group("forward", 0, 2, 2, 0),), 2, 1, HOW)
    declined = RankLayers(0, None, "why", 0.123456)
    fwd = {"layers": 2, "ops_per_layer": 2, "layer_ns": 20, "total_ns": 40, "groups_per_step": 1.0}
    base = {"rank": 0, "layers": None, "reason": "why", "share": 0.1235, "microbatches": 1,
            "steps": 1, "step_ns": 40, "phases": {}, "how": HOW}  # fmt: skip
    repeat = {"phase": "forward", "blocks": 2, "ops_per_block": 2, "groups_per_step": 1.0,
              "total_ns": 40}  # fmt: skip
    assert _rank(g, lm, declined, False) == {**base, "repeats": [repeat], "outside_ns": 40}
    assert _rank(g, lm, declined, True) == {
        **base, "phases": {"forward": fwd}, "repeats": [], "outside_ns": 0}  # fmt: skip
    assert _rank(g, lm, None, False) == {**base, "layers": 2, "reason": None, "share": None,
                                         "phases": {"forward": fwd}, "repeats": [],
                                         "outside_ns": 0}  # fmt: skip
