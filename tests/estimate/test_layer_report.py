"""``format_layers``: the text ``lumos layers`` prints, from a hand-written summary."""

from __future__ import annotations

from dataclasses import replace

from lumos.estimate.baseline import detect_baseline
from lumos.estimate.layer_report import format_layers, layer_summary
from lumos.graph.model import Workload
from lumos.graph.synthetic import GraphBuilder

HOW = "repeated op sequence (names and Input Dims)"
FWD = {"layers": 2, "ops_per_layer": 8, "layer_ns": 87, "total_ns": 174, "groups_per_step": 1.0}


def test_format_layers_prints_the_summary_in_milliseconds():
    """One rank, 3 steps of 2.5 ms: 2 forward layers of 5 ops, 0.25 ms each (0.5 ms a step),
    4 optimizer blocks of 3 ops (0.12 ms a step) and 1.25 ms outside the layers; ``hidden``
    not found. Every ns figure is printed divided by 10^6, to 3 decimals."""
    doc = {
        "baseline": {
            "layers": {"value": 2, "how": "repeated blocks"},
            "hidden": {"value": -1, "how": ""},
        },
        "ranks": [
            {
                "rank": 0,
                "layers": 2,
                "reason": None,
                "microbatches": 1,
                "steps": 3,
                "step_ns": 2_500_000,
                "how": "module annotations",
                "phases": {
                    "forward": {
                        "layers": 2,
                        "ops_per_layer": 5,
                        "layer_ns": 250_000,
                        "total_ns": 500_000,
                    }
                },
                "repeats": [
                    {"phase": "optimizer", "blocks": 4, "ops_per_block": 3, "total_ns": 120_000}
                ],
                "outside_ns": 1_250_000,
            }
        ],
    }
    assert format_layers(doc).split("\n") == [
        "baseline configuration found in the trace:",
        "  layers          2         repeated blocks",
        "  hidden          not found ",
        "",
        "rank 0: 2 layers, 1 micro-batch(es), 3 step(s) of 2.500 ms (module annotations)",
        "  phase       layers  ops/layer  ms/layer   ms/step",
        "  forward          2          5     0.250     0.500",
        "  other repeats (not layers): optimizer 4 x 3 ops (0.120 ms/step)",
        "  outside the layers: 1.250 ms per step "
        "(embedding, head, loss, data, collectives between layers)",
    ]


def job(fwd: int, bwd: int, steps: int) -> Workload:
    """One rank; per marked step: a 200 ns embedding, ``fwd`` forward blocks of 8 ops of 10 ns
    and ``bwd`` backward blocks of 8 ops of 20 ns, a 10 ns loss, 1 ns before each next op. A
    forward block spans 8 x 10 + 7 = 87 ns, a backward one 8 x 20 + 7 = 167 ns; a step lasts
    201 + 11 per forward op + 21 per backward op + 11 ns."""
    b = GraphBuilder()
    th = b.thread(1)
    clock = 0

    def op(name: str, dur: int) -> int:
        nonlocal clock
        t = b.task(th, name, dur, ts_ns=clock, gap_ns=1)
        clock += dur + 1
        return t

    for s in range(steps):
        start = clock
        first = op("aten::embedding", 200)
        for _ in range(fwd):
            for k in range(8):
                op(f"aten::op{k}", 10)
        for _ in range(bwd):
            for k in range(8):
                op(f"Op{k}Backward0", 20)
        last = op("aten::nll_loss", 10)
        b.annotate(f"ProfilerStep#{s}", th, first, last, ts_ns=start, dur_ns=clock - start)
    return Workload((b.build().validate(),))


def test_layer_summary_of_accepted_layers_times_each_phase():
    """2 steps of 2 forward and 2 backward blocks: steps of 201 + 16 x 11 + 16 x 21 + 11 =
    724 ns; forward 2 layers of 87 ns (174 a step), backward 2 of 167 (334 a step); outside
    724 - 508 = 216 ns; the layers cover 508 / 724 = 0.7017 of the step. Without a verdict
    (a Baseline built with none) each rank's own layer count is shown, with no reason or
    share, and the job's verdict is empty."""
    w = job(2, 2, 2)
    base = detect_baseline(w)
    rank = {"rank": 0, "layers": 2, "reason": None, "share": 0.7017, "microbatches": 1,
            "steps": 2, "step_ns": 724,
            "phases": {"forward": FWD, "backward": {**FWD, "layer_ns": 167, "total_ns": 334}},
            "repeats": [], "outside_ns": 216, "how": HOW}  # fmt: skip
    assert layer_summary(w, base) == {
        "baseline": base.to_dict(), "verdict": {"layers": 2, "reason": None}, "ranks": [rank]}  # fmt: skip
    bare = replace(base, verdict=None)
    assert layer_summary(w, bare) == {"baseline": bare.to_dict(),
                                      "verdict": {"layers": None, "reason": None},
                                      "ranks": [{**rank, "share": None}]}  # fmt: skip


def test_layer_summary_of_declined_layers_lists_them_as_repeats_unless_layers_are_given():
    """1 step of 2 forward and 3 backward blocks (201 + 16 x 11 + 24 x 21 + 11 = 892 ns): the
    verdict declines, so both repeats are listed (by phase: backward 3 x 167 = 501 ns, forward
    174 ns), no phase, all 892 ns outside, share 0. With ``--baseline layers=2`` the blocks
    are used as found: both become phases (backward 3 layers), outside 892 - 675 = 217 ns."""
    w = job(2, 3, 1)
    why = ("forward and backward disagree: forward repeats of 2 blocks, backward repeats of 3: "
           "no backward block per forward layer")  # fmt: skip
    rank = {"rank": 0, "layers": None, "reason": why, "share": 0.0, "microbatches": 1,
            "steps": 1, "step_ns": 892, "phases": {},
            "repeats": [{"phase": "backward", "blocks": 3, "ops_per_block": 8,
                         "groups_per_step": 1.0, "total_ns": 501},
                        {"phase": "forward", "blocks": 2, "ops_per_block": 8,
                         "groups_per_step": 1.0, "total_ns": 174}],
            "outside_ns": 892, "how": HOW}  # fmt: skip
    doc = layer_summary(w, detect_baseline(w))
    assert (doc["verdict"], doc["ranks"]) == ({"layers": None, "reason": why}, [rank])
    doc = layer_summary(w, detect_baseline(w, {"layers": 2}))
    back = {"layers": 3, "ops_per_layer": 8, "layer_ns": 167, "total_ns": 501,
            "groups_per_step": 1.0}  # fmt: skip
    assert doc["ranks"] == [{**rank, "phases": {"forward": FWD, "backward": back}, "repeats": [],
                             "outside_ns": 217}]  # fmt: skip
