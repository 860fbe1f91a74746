"""Estimates against measured ground truth: pairs of configurations run in one job (lumos's own
recordings, ``tests/data/whatif_pairs``). The estimate reads the baseline's traces only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos.estimate import estimate, parse_scenario
from lumos.replay import build_workload

DATA = Path(__file__).parents[1] / "data" / "whatif_pairs"
PAIRS = {p["name"]: p for p in json.loads((DATA / "pairs.json").read_text())["pairs"]}


@pytest.mark.parametrize(
    "name, sets",
    [("ddp_layers_x2", ["layers=8"]), ("pp_microbatches_x2", ["microbatches=4"])],
)
def test_estimate_lands_within_ten_percent_of_the_measured_target(name, sets):
    pair = PAIRS[name]
    workload, _ = build_workload([str(DATA / name)])
    est = estimate(workload, [parse_scenario(sets)])
    _, target = est.rows
    measured = pair["target"]["median_ms"] * 1e6
    unchanged = pair["baseline"]["median_ms"] * 1e6
    # the pair is a real change: guessing "unchanged" is far off...
    assert abs(unchanged / measured - 1) > 0.3
    # ...and the estimate from the baseline's traces is not
    assert abs(target.step_ns / measured - 1) <= 0.10, (target.step_ns, measured)
