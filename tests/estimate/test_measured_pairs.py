"""Estimates against measured ground truth: pairs of configurations run in one job (lumos's own
recordings, ``tests/data/whatif_pairs``). The estimate reads one side's traces only and predicts
the other side's measured step: a slow-down (layers x2, micro-batches x2) and a speed-up
(micro-batches / 2), and layers x2 of a second model family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos.estimate import estimate, parse_scenario
from lumos.replay import build_workload

DATA = Path(__file__).parents[1] / "data" / "whatif_pairs"
PAIRS = {p["name"]: p for p in json.loads((DATA / "pairs.json").read_text())["pairs"]}


@pytest.mark.parametrize(
    "name, folder, sets, source, goal",
    [
        ("ddp_layers_x2", "ddp_layers_x2", ["layers=8"], "baseline", "target"),
        ("pp_microbatches_x2", "pp_microbatches_x2", ["microbatches=4"], "baseline", "target"),
        ("pp_microbatches_x2", "pp_microbatches_x2_B", ["microbatches=2"], "target", "baseline"),
        # another model family (RMS norm, rotary, SwiGLU, multi-tensor AdamW)
        ("llama_ddp_layers_x2", "llama_ddp_layers_x2", ["layers=8"], "baseline", "target"),
    ],
)
def test_estimate_lands_within_ten_percent_of_the_measured_target(name, folder, sets, source, goal):
    pair = PAIRS[name]
    workload, _ = build_workload([str(DATA / folder)])
    est = estimate(workload, [parse_scenario(sets)])
    _, target = est.rows
    measured = pair[goal]["median_ms"] * 1e6
    unchanged = pair[source]["median_ms"] * 1e6
    # the pair is a real change: guessing "unchanged" is far off...
    assert abs(unchanged / measured - 1) > 0.3
    # ...and the estimate from the baseline's traces is not
    # the median over steps, as the measured side is
    assert abs(target.median_step_ns / measured - 1) <= 0.10, (target.median_step_ns, measured)
