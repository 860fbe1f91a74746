"""Synthetic workloads against their sources: fit a model on a real trace, sample it with the
source's configuration, and compare what a user would compare (replayed step, four-way
breakdown, op-class mix, communication bytes), plus determinism, name-freedom and the files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lumos
from lumos.cli.main import main
from lumos.errors import ConfigError, InputError
from lumos.graph.model import Workload
from lumos.replay import build_workload
from lumos.synth.classes import CLASSES
from lumos.synth.fidelity import compare
from lumos.synth.files import read_model, write_model
from lumos.synth.fit import fit_model
from lumos.synth.sample import plan_sample, sample_workload
from realdata import trace

DEMO = Path(lumos.example_trace_path()).parent


def _step_ms(w: Workload) -> float:
    """Mean replayed step over ranks and steps (ms)."""
    r = lumos.simulate(w)
    steps = [s["predicted_ns"] for gi in range(len(w.graphs)) for s in r.steps(gi)]
    return float(np.mean(steps)) / 1e6


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(lambda: trace("nccl_a100"), id="nccl_data"),
        pytest.param(lambda: trace("v100_stream_wait_event"), id="df_index_resolver"),
        pytest.param(lambda: trace("dlrm_kineto_8rank"), id="dlrm_8rank"),
        pytest.param(lambda: DEMO, id="bundled_demo"),
    ],
)
def test_a_sample_with_the_source_configuration_replays_like_the_source(source) -> None:
    """Step time within 5 %, breakdown shares within 5 points, op-class counts within 5 %,
    communication bytes within 2 % (:func:`lumos.synth.fidelity.compare`'s bounds), for three
    seeds."""
    path = str(source())
    model = fit_model([path], workers=1)
    src, _ = build_workload([path], workers=1)
    for seed in (1, 2, 3):
        fid = compare(src, sample_workload(plan_sample(model, seed=seed)))
        assert fid.ok, fid.failures()


@pytest.fixture(scope="module")
def demo_model() -> dict[str, Any]:
    return fit_model([str(DEMO)], workers=1)


def test_the_model_holds_no_name_from_its_source(demo_model: dict[str, Any]) -> None:
    """Every string in the model is schema vocabulary; the trace's op names are not there."""
    text = json.dumps(demo_model)
    strings = set(re.findall(r'"((?:[^"\\]|\\.)*)"', text))
    vocab = set(CLASSES) | {"lumos-synth-model", "forward", "backward", "optimizer", "layer"}
    vocab |= {"gloo", "nccl", "cpu:gloo,cuda:gloo", "cpu:gloo,cuda:nccl"}  # backends
    keys = {k for k in strings if re.fullmatch(r"[a-z_]+", k)}  # section and column names
    assert strings - vocab - keys == set()
    for name in ("aten::addmm", "ProfilerStep", "cudaLaunchKernel", "gloo:all_reduce", "Linear"):
        assert name not in text
    assert demo_model["fitted_on"] == {
        "sources": 1, "ranks": 2, "steps": 6, "tasks": 5820, "symbols": 126,
    }  # fmt: skip


def test_same_seed_same_workload_other_seed_same_structure(demo_model: dict[str, Any]) -> None:
    a = sample_workload(plan_sample(demo_model, seed=7))
    b = sample_workload(plan_sample(demo_model, seed=7))
    c = sample_workload(plan_sample(demo_model, seed=8))
    for ga, gb, gc in zip(a.graphs, b.graphs, c.graphs, strict=True):
        assert np.array_equal(ga.tasks.dur_ns, gb.tasks.dur_ns)
        assert np.array_equal(ga.edges.delay_ns, gb.edges.delay_ns)
        assert not np.array_equal(ga.tasks.dur_ns, gc.tasks.dur_ns)
        assert np.array_equal(ga.tasks.kind, gc.tasks.kind)
        assert ga.num_edges == gc.num_edges


def test_steps_and_ranks(demo_model: dict[str, Any]) -> None:
    one = sample_workload(plan_sample(demo_model, steps=1))
    four = sample_workload(plan_sample(demo_model, steps=4, ranks=4))
    assert [g.rank for g in four.graphs] == [0, 1, 2, 3]
    assert {g.world_size for g in four.graphs} == {4}
    per_step = one.graphs[0].num_tasks - len(one.graphs[0].processors)  # less the anchors
    assert four.graphs[0].num_tasks - len(four.graphs[0].processors) == 4 * per_step
    r = lumos.simulate(four)
    assert len(r.steps(3)) == 4
    # the world-wide group grew with the world: every rank's collectives pair up
    assert four.graphs[2].process_groups[0].ranks == (0, 1, 2, 3)


def test_layers_copy_whole_layer_blocks(demo_model: dict[str, Any]) -> None:
    base = sample_workload(plan_sample(demo_model, seed=1))
    assert demo_model["members"][0]["config"]["layers"] == 2
    more = sample_workload(plan_sample(demo_model, seed=1, config={"layers": 4}))
    skel = demo_model["members"][0]["skeletons"][0][0]  # rank class 0, main step variant
    layer = {i for s in skel["layers"] for b in s["blocks"][:1] for i in b}
    assert layer, "the demo's layers were found"
    # every step gains the tasks of two more layers in each layer group
    grown = more.graphs[0].num_tasks - base.graphs[0].num_tasks
    assert grown > 0 and grown % base.graphs[0].annotations.kind.size == 0
    ratio = _step_ms(more) / _step_ms(base)
    assert 1.15 < ratio < 2.0


def test_bad_requests_and_files(demo_model: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="hidden=999"):
        plan_sample(demo_model, config={"hidden": 999})
    with pytest.raises(ConfigError, match="at least 1"):
        plan_sample(demo_model, steps=0)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(InputError, match=r"bad\.json.*not a lumos synth model"):
        read_model(bad)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**demo_model, "version": 0}))
    with pytest.raises(InputError, match="version 0"):
        read_model(old)
    flat = json.loads(json.dumps(demo_model))  # an earlier layout: one skeleton per class
    flat["members"][0]["skeletons"] = [c[0] for c in flat["members"][0]["skeletons"]]
    (tmp_path / "flat.json").write_text(json.dumps(flat))
    with pytest.raises(InputError, match=r"flat\.json.*list of step variants"):
        read_model(tmp_path / "flat.json")
    good = write_model(demo_model, tmp_path / "m.json")
    assert read_model(good) == json.loads(json.dumps(demo_model))


def test_cli_fit_sample_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.json"
    assert main(["synth", "fit", str(DEMO), "-o", str(model), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "source 0: 2 rank(s) of 2" in out and "layers=2" in out
    for d in ("a", "b"):
        assert main(["synth", "sample", str(model), "-o", str(tmp_path / d / "s"),
                     "--seed", "5", "--steps", "2"]) == 0  # fmt: skip
    a, b = sorted((tmp_path / "a").glob("s.*.et")), sorted((tmp_path / "b").glob("s.*.et"))
    assert [p.name for p in a] == ["s.0.et", "s.1.et"]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    summary = json.loads((tmp_path / "a" / "s.sample.json").read_text())
    assert summary["steps"] == 2 and summary["seed"] == 5 and summary["timestamps"] == "simulated"
    capsys.readouterr()
    assert main(["chakra", "validate", str(tmp_path / "a" / "s")]) == 0  # the ETs validate
    # the written sample replays as it was simulated before writing
    w, _ = build_workload([str(tmp_path / "a")], workers=1)
    direct = sample_workload(plan_sample(read_model(model), steps=2, seed=5))
    r1, r2 = lumos.simulate(w), lumos.simulate(direct)
    for gi in range(2):
        assert [s["predicted_ns"] for s in r1.steps(gi)] == [
            s["predicted_ns"] for s in r2.steps(gi)
        ]
    assert main(["synth", "sample", str(tmp_path / "nope.json"), "-o", str(tmp_path / "x")]) == 1
