"""Causal replay predicts runs it never saw.

Ground truth comes from :mod:`tests.refmodel`, an independent model of the CUDA runtime (threads
with Python overhead, launches, streams joined by events, blocking copies, ``.item()`` syncs, a
backward thread, NCCL with waiting for peers, a polling thread, GPU work queued before the
window, a GPU clock that lags by microseconds or milliseconds, leads by 20 ms or drifts, NCCL
on the critical path fed by a backward thread) that writes a Kineto trace for a baseline and for changed runs of
the same program. lumos replays the *baseline* with ``--scale`` and must predict the changed
run's steps. Guessing "unchanged" fails these tests (checked below), so they can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from tests.refmodel import CHANGES, SCENARIOS, build_program, generate, step_durations, write_trace
from tests.refmodel.program import Op, is_cpu_only, iter_nodes

from lumos.cli.main import main
from lumos.graph.build import build_graph
from lumos.graph.edits import scale_by_name
from lumos.ingest.kineto import read_kineto
from lumos.sim import simulate

#: Compute kernels of the reference model (its NCCL kernels, copies and sets do not match).
KERNELS = r"^(void |sm[0-9]+_)"
NCCL = r"^nccl"
MAX_STEP_ERROR = 0.05
MAX_MEAN_ERROR = 0.02


def cpu_only_pattern(scenario: str) -> str:
    """A regex matching exactly the ops the model's ``cpu_scale`` multiplies."""
    program = build_program(scenario, 0)
    yes: set[str] = set()
    no: set[str] = set()
    for thread in program.threads:
        for node in iter_nodes(thread.body):
            if isinstance(node, Op):
                (yes if is_cpu_only(node) else no).add(node.name)
    return "^(" + "|".join(re.escape(n) for n in sorted(yes - no)) + ")$"


def scale_of(scenario: str, change: str) -> list[tuple[str, float]]:
    factors = CHANGES[change]
    out = []
    if "kernel_scale" in factors:
        out.append((KERNELS, factors["kernel_scale"]))
    if "cpu_scale" in factors:
        out.append((cpu_only_pattern(scenario), factors["cpu_scale"]))
    if "nccl_scale" in factors:
        out.append((NCCL, factors["nccl_scale"]))
    return out


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("refmodel")
    out = {}
    for scenario in SCENARIOS:
        out[scenario] = d / f"{scenario}.base.json.gz"
        write_trace(generate(scenario), out[scenario])
    return out


def _errors(path: Path, scenario: str, change: str) -> list[float]:
    g = build_graph(read_kineto(path))
    edited, _ = scale_by_name(g, scale_of(scenario, change))
    predicted = [s["predicted_ns"] for s in simulate(edited).steps()]
    truth = step_durations(scenario, **CHANGES[change])
    assert len(predicted) == len(truth)
    return [p / t - 1 for p, t in zip(predicted, truth, strict=True)]


def has_nccl(scenario: str) -> bool:
    """Whether the scenario runs NCCL kernels (``nccl_x3`` changes nothing otherwise)."""
    program = build_program(scenario, 0)
    return any(
        isinstance(n, Op) and n.name == "record_param_comms"
        for th in program.threads
        for n in iter_nodes(th.body)
    )


CASES = [
    (s, c) for s in SCENARIOS for c in CHANGES if c != "base" and (c != "nccl_x3" or has_nccl(s))
]


@pytest.mark.parametrize(("scenario", "change"), CASES)
def test_predicts_the_changed_run(baselines, scenario, change):
    errors = _errors(baselines[scenario], scenario, change)
    assert max(abs(e) for e in errors) <= MAX_STEP_ERROR, [f"{e:+.2%}" for e in errors]


def test_mean_error_over_every_changed_run(baselines):
    errors = [abs(e) for s, c in CASES for e in _errors(baselines[s], s, c)]
    assert np.mean(errors) <= MAX_MEAN_ERROR


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_baseline_replays_its_own_steps(baselines, scenario):
    g = build_graph(read_kineto(baselines[scenario]))
    predicted = [s["predicted_ns"] for s in simulate(g).steps()]
    truth = step_durations(scenario)
    assert np.allclose(predicted, truth, rtol=0.002)


def test_guessing_unchanged_would_fail():
    """The changes are large enough that a model which never speeds up fails the tests."""
    for scenario, change in (("gpu_bound", "kernels_x0.5"), ("mixed", "nccl_x3"),
                             ("cpu_bound", "cpu_x2"), ("polling_thread", "kernels_x0.5"),
                             ("gpu_clock_lags_ms", "kernels_x0.5"),
                             ("nccl_critical_path", "nccl_x3")):  # fmt: skip
        base = step_durations(scenario)
        changed = step_durations(scenario, **CHANGES[change])
        assert max(abs(c / b - 1) for b, c in zip(base, changed, strict=True)) > 0.2


def test_cli_predicts_a_speed_up(baselines, tmp_path):
    """The user's path: ``lumos replay BASE --scale REGEX=0.5``."""
    import json

    out = tmp_path / "r"
    assert main(["replay", str(baselines["gpu_bound"]), "-o", str(out),
                 "--scale", f"{KERNELS}=0.5"]) == 0  # fmt: skip
    doc = json.loads((out / "replay.json").read_text())
    predicted = [s["predicted_ns"] for s in doc["steps"]]
    truth = step_durations("gpu_bound", kernel_scale=0.5)
    for p, t in zip(predicted, truth, strict=True):
        assert abs(p / t - 1) < 0.01


def test_a_scale_that_matches_nothing_is_an_error(baselines, capsys, tmp_path):
    assert main(["replay", str(baselines["cpu_bound"]), "-o", str(tmp_path / "r"),
                 "--scale", "no_such_kernel=0.5"]) == 1  # fmt: skip
    assert "matches no task" in capsys.readouterr().err


def test_a_converted_et_predicts_the_same_changed_run(baselines, tmp_path):
    """``lumos convert`` writes the waits as data dependencies: the Chakra ET, read back,
    answers a what-if exactly as the Kineto trace does."""
    from lumos.chakra.io import read_chakra
    from lumos.chakra.mapping import from_chakra
    from lumos.convert import convert

    convert([baselines["mixed"]], tmp_path / "et", workers=1)
    (et,) = sorted(tmp_path.glob("et.*.et"))
    from_et = from_chakra(read_chakra(et))
    from_kineto = build_graph(read_kineto(baselines["mixed"]))
    scale = scale_of("mixed", "kernels_x0.5")
    via_et = [s["predicted_ns"] for s in simulate(scale_by_name(from_et, scale)[0]).steps()]
    via_kineto = [s["predicted_ns"] for s in simulate(scale_by_name(from_kineto, scale)[0]).steps()]
    assert via_et == via_kineto
    assert not from_et.diagnostics.count("chakra_deps_edited")


RECORDERS = ("no_flows", "no_stream_args", "reordered", "gpu_lags_20ms", "gpu_leads_20ms")


@pytest.mark.parametrize("recorder", RECORDERS)
@pytest.mark.parametrize("scenario", ["mixed", "nccl_critical_path", "item_syncs"])
def test_a_run_recorded_differently_predicts_the_same(scenario, recorder, tmp_path):
    """The baseline rewritten as another recorder or clock would have written it
    (``tests/perturb.py``) predicts the changed runs as well as the original does."""
    from tests.perturb import perturb

    path = write_trace(perturb(generate(scenario), recorder), tmp_path / "t.json.gz")
    for change in ("kernels_x0.5", "kernels_x2"):
        errors = _errors(path, scenario, change)
        assert max(abs(e) for e in errors) <= MAX_STEP_ERROR, (
            change,
            [f"{e:+.2%}" for e in errors],
        )
