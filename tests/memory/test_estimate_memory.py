"""Memory under what-ifs: ``estimate.json`` rows' ``peak_memory_bytes`` and ``fits``.

Ground truth: ``tests/data/memory_gpt_cpu`` (the bundled GPT recorded with memory on, each
configuration its own job; the targets' peaks read from their traces by a reader that uses no
lumos code). The estimate sees only the base run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lumos.cli.estimate import format_estimate, parse_size
from lumos.errors import ConfigError
from lumos.estimate import estimate, parse_scenario
from lumos.estimate.memory_edit import out_elements
from lumos.replay import build_workload

DATA = Path(__file__).parent.parent / "data"
MEM = DATA / "memory_gpt_cpu"
PEAKS = json.loads((MEM / "measured_peaks.json").read_text())
TARGETS = {"layers4": "layers=4", "hidden128": "hidden=128", "seq64": "seq=64",
           "batch8": "microbatch_size=8"}  # fmt: skip


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    w, _ = build_workload([MEM / "base"])
    scenarios = [parse_scenario([s]) for s in TARGETS.values()]
    doc = estimate(w, scenarios).to_dict()
    return {"base": doc["rows"][0], **dict(zip(TARGETS, doc["rows"][1:], strict=True))}


def test_baseline_peak_is_the_recorded_one(rows: dict[str, dict]) -> None:
    assert rows["base"]["peak_memory_bytes"] == PEAKS["base"]
    assert rows["base"]["fits"] is None  # a CPU job: no capacity unless --device-memory


def test_predicted_peaks_match_runs_never_seen(rows: dict[str, dict]) -> None:
    errors = []
    for run in TARGETS:
        pred, meas = rows[run]["peak_memory_bytes"], PEAKS[run]
        errors.append(abs(pred / meas - 1))
        assert errors[-1] <= 0.10, (run, pred, meas)
    assert float(np.mean(errors)) <= 0.05
    # the what-ifs move the peak: none of them is the baseline's
    assert all(rows[r]["peak_memory_bytes"] > 1.5 * PEAKS["base"] for r in TARGETS)


def test_fits_against_a_given_capacity() -> None:
    w, _ = build_workload([MEM / "base"])
    doc = estimate(w, [parse_scenario(["layers=4"])], device_memory=2_000_000).to_dict()
    base, big = doc["rows"]
    assert (base["fits"], big["fits"]) == (True, False)
    assert base["capacity_bytes"] == 2_000_000
    text = format_estimate(doc)
    assert "peak memory" in text and "layers=4: does NOT fit" in text


def test_no_memory_events_no_memory_number() -> None:
    w, _ = build_workload([DATA / "whatif_pairs" / "ddp_layers_x2"])
    doc = estimate(w, [parse_scenario(["layers=8"])]).to_dict()
    assert all(r["peak_memory_bytes"] is None and r["fits"] is None for r in doc["rows"])
    text = format_estimate(doc)
    assert "memory" not in text and "MiB" not in text and "GiB" not in text


def test_sizes() -> None:
    assert parse_size("80GiB") == 80 << 30
    assert parse_size("40 GB") == 40 * 10**9
    assert parse_size("512MiB") == 512 << 20
    with pytest.raises(ConfigError):
        parse_size("lots")


@pytest.mark.parametrize(
    ("name", "dims", "elements"),
    [
        ("aten::mm", [[512, 128], [128, 512]], 512 * 512),
        ("aten::addmm", [[384], [512, 128], [128, 384], [], []], 512 * 384),
        ("aten::bmm", [[32, 64, 16], [32, 16, 64]], 32 * 64 * 64),
        ("aten::linear", [[8, 64, 128], [512, 128], [512]], 8 * 64 * 512),
        ("aten::cat", [[[8, 64, 128], [8, 64, 128], [8, 64, 128]], []], 3 * 8 * 64 * 128),
        ("aten::index_select", [[512, 128], [], [64]], 64 * 128),
        ("aten::embedding", [[512, 128], [8, 64]], 8 * 64 * 128),
        ("aten::gelu", [[8, 64, 512], []], 8 * 64 * 512),
        ("aten::add", [[8, 64, 128], [64, 128], []], 8 * 64 * 128),
        ("aten::empty", [[], [], []], 0),
    ],
)
def test_out_elements_by_hand(name: str, dims: list, elements: int) -> None:
    assert out_elements(name, dims) == elements
