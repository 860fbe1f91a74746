"""Configurations never fitted, against steps measured in the same job as a fitted one
(``tests/data/synth_configs``: the way the what-if pairs measure): one model from two
configurations of the bundled workload sampled at a third (8 layers at hidden 256: a
slow-down), and a model of the 8-layer run sampled at 4 layers (a speed-up)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lumos
from lumos.synth.fit import fit_model
from lumos.synth.sample import plan_sample, sample_workload

DATA = Path(__file__).parents[1] / "data" / "synth_configs"
MEASURED = json.loads((DATA / "measured.json").read_text())


@pytest.fixture(scope="module")
def model() -> dict[str, Any]:
    return fit_model([str(DATA / "h128_l4"), str(DATA / "h256_l4")], workers=1)


def _median_step_ms(model: dict[str, Any], config: dict[str, int]) -> float:
    """Median over steps of the slowest rank's replayed step, averaged over three seeds."""
    out = []
    for seed in (1, 2, 3):
        w = sample_workload(plan_sample(model, steps=6, seed=seed, config=config),
                            timestamps=False)  # fmt: skip
        r = lumos.simulate(w)
        per_rank = [[s["predicted_ns"] for s in r.steps(gi)] for gi in range(len(w.graphs))]
        out.append(float(np.median(np.max(per_rank, axis=0))) / 1e6)
    return float(np.mean(out))


def test_the_model_knows_both_configurations(model: dict[str, Any]) -> None:
    got = [(m["config"]["hidden"], m["config"]["ffn"], m["config"]["layers"])
           for m in model["members"]]  # fmt: skip
    assert got == [(128, 512, 4), (256, 1024, 4)]
    assert plan_sample(model, config={"hidden": 256, "layers": 8}).member == 1
    assert plan_sample(model, config={"hidden": 128, "layers": 8}).member == 0


def test_a_fitted_configuration_reproduces_its_measured_step(model: dict[str, Any]) -> None:
    got = _median_step_ms(model, {"hidden": 256})
    assert got == pytest.approx(MEASURED["h256_l4"]["median_ms"], rel=0.10)


def test_an_unseen_configuration_lands_near_its_measured_step(model: dict[str, Any]) -> None:
    """8 layers at hidden 256 were never fitted: the layer blocks of the 4-layer source are
    copied and its gradient all-reduces grow with the weights. Within the issue's 15 % of the
    step measured for it (the sample comes out short: the measured step grows x1.87 with twice
    the layers, the sample x1.74; on this CPU an op of the bigger model runs slower, which no
    trace of the smaller one shows)."""
    measured = MEASURED["h256_l8"]["median_ms"]
    got = _median_step_ms(model, {"hidden": 256, "layers": 8})
    unchanged = MEASURED["h256_l4"]["median_ms"]
    assert abs(unchanged / measured - 1) > 0.4  # a real change: "unchanged" is far off
    assert abs(got / measured - 1) <= 0.15, (got, measured)


def test_a_smaller_configuration_lands_near_its_measured_step() -> None:
    """The speed-up: a model of the 8-layer run alone (the same job's other side), sampled at 4
    layers (dropped layer blocks, smaller gradient all-reduces), against the 4-layer step
    measured in that job."""
    model = fit_model([str(DATA / "h256_l8")], workers=1)
    measured = MEASURED["h256_l4"]["median_ms"]
    got = _median_step_ms(model, {"layers": 4})
    assert abs(MEASURED["h256_l8"]["median_ms"] / measured - 1) > 0.4
    assert abs(got / measured - 1) <= 0.15, (got, measured)
