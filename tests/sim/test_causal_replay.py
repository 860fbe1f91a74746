"""Causal replay predicts runs it never saw.

Ground truth comes from :mod:`tests.refmodel`, an independent model of the CUDA runtime (threads
with Python overhead, launches, streams joined by events, blocking copies, ``.item()`` syncs, a
backward thread, NCCL with waiting for peers, a polling thread, GPU work queued before the
window, a GPU clock that lags by microseconds or milliseconds, leads by 20 ms or drifts, NCCL
on the critical path fed by a backward thread) that writes a Kineto trace for a baseline and for changed runs of
the same program. lumos replays the *baseline* with ``--scale`` and must predict the changed
run's steps. Each changed run is held to a tolerance below half of what guessing "unchanged"
(the baseline's steps) would miss it by, so a model that ignores the edit fails every case but
the few listed in :data:`TRUTH_UNCHANGED`, where the changed run itself takes the baseline's
time (there the test checks that the model does not invent a change). Replaying the baseline
unchanged (:func:`test_baseline_replays_its_own_steps`) is a replay of the recording, not a
prediction.
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
    """Relative error of each predicted step of the changed run; first checks that the replay
    ran every task the change names for exactly ``round(recorded * factor)`` ns (a collective:
    its recorded wait for its peers plus its scaled transfer)."""
    g = build_graph(read_kineto(path))
    edited, _ = scale_by_name(g, scale_of(scenario, change))
    result = simulate(edited)
    t = g.tasks
    wait = np.zeros(g.num_tasks, dtype=np.int64)  # a collective's recorded wait for its peers
    if len(g.comms):
        wait = np.minimum(np.where(t.comm_idx >= 0, g.comms.wait_ns[t.comm_idx], 0), t.dur_ns)
    for pattern, factor in scale_of(scenario, change):
        named = g.name_mask(re.compile(pattern).search)
        assert named.any(), pattern
        replayed = (result.ends() - result.starts())[named]
        want = np.rint(wait[named] + (t.dur_ns[named] - wait[named]) * factor)
        assert (replayed == want).all(), pattern
    predicted = [s["predicted_ns"] for s in result.steps()]
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
#: Changed runs whose steps the change moves by under 1 % in the reference model (kernels that
#: a CPU-bound program or a lagging GPU clock hides): guessing "unchanged" is right there.
TRUTH_UNCHANGED = {
    ("cpu_bound", "kernels_x0.5"),
    ("cpu_bound", "kernels_x2"),
    ("clock_lag", "kernels_x0.5"),
}
#: Tolerance of a case whose truth does not move.
UNCHANGED_TOLERANCE = 0.002


def unchanged_miss(scenario: str, change: str) -> float:
    """How far (largest relative step error) guessing the baseline's steps misses the run."""
    base = step_durations(scenario)
    truth = step_durations(scenario, **CHANGES[change])
    return max(abs(b / t - 1) for b, t in zip(base, truth, strict=True))


def tolerance(scenario: str, change: str) -> float:
    """The largest step error a prediction may make: ``MAX_STEP_ERROR``, or half of what
    guessing "unchanged" misses by where that is less, so that guess always fails."""
    if (scenario, change) in TRUTH_UNCHANGED:
        return UNCHANGED_TOLERANCE
    return min(MAX_STEP_ERROR, unchanged_miss(scenario, change) / 2)


@pytest.mark.parametrize(("scenario", "change"), CASES)
def test_predicts_the_changed_run(baselines, scenario, change):
    """The predicted steps of the changed run are within :func:`tolerance` of the truth."""
    errors = _errors(baselines[scenario], scenario, change)
    bound = tolerance(scenario, change)
    assert max(abs(e) for e in errors) <= bound, ([f"{e:+.2%}" for e in errors], bound)


def test_mean_error_over_every_changed_run(baselines):
    errors = [abs(e) for s, c in CASES for e in _errors(baselines[s], s, c)]
    assert np.mean(errors) <= MAX_MEAN_ERROR


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_baseline_replays_its_own_steps(baselines, scenario):
    """Replay of the recording (nothing changed): the baseline's steps within 0.2 %."""
    g = build_graph(read_kineto(baselines[scenario]))
    predicted = [s["predicted_ns"] for s in simulate(g).steps()]
    truth = step_durations(scenario)
    assert np.allclose(predicted, truth, rtol=0.002)


def test_guessing_unchanged_would_fail():
    """Case by case: guessing the baseline's steps misses every changed run by more than its
    tolerance, but in the :data:`TRUTH_UNCHANGED` cases, which are exactly those the change
    moves by under 1 %."""
    for scenario, change in CASES:
        miss = unchanged_miss(scenario, change)
        assert (miss < 0.01) == ((scenario, change) in TRUTH_UNCHANGED), (scenario, change, miss)
        if (scenario, change) not in TRUTH_UNCHANGED:
            assert miss > tolerance(scenario, change), (scenario, change)


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
    answers a what-if exactly as the Kineto trace does (and the what-if moves the steps)."""
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
    assert via_kineto != [s["predicted_ns"] for s in simulate(from_kineto).steps()]
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
