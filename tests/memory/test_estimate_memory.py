"""Memory under what-ifs: ``estimate.json`` rows' ``peak_memory_bytes`` and ``fits``.

Ground truth: ``tests/data/memory_gpt_cpu`` (the bundled GPT on 2 CPU ranks) and
``tests/data/memory_gpt_h200`` (on one H200 GPU), each configuration its own job, recorded with
memory on; the targets' peaks read from their traces by a reader that uses no lumos code. The
estimate sees only the base run.
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
CASES = {
    "memory_gpt_cpu": {"layers4": "layers=4", "layers1": "layers=1", "hidden128": "hidden=128",
                       "hidden32": "hidden=32", "seq64": "seq=64", "batch8": "microbatch_size=8"},
    "memory_gpt_h200": {"layers8": "layers=8", "layers2": "layers=2", "hidden2048": "hidden=2048",
                        "hidden512": "hidden=512", "seq1024": "seq=1024",
                        "batch16": "microbatch_size=16", "ffn8x": "ffn=8192",
                        "heads32": "heads=32"},
}  # fmt: skip


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple[dict[str, int], dict[str, dict]]:
    """(measured peaks, estimate rows by run) of one data set."""
    folder = DATA / request.param
    targets = CASES[request.param]
    w, _ = build_workload([folder / "base"])
    doc = estimate(w, [parse_scenario([s]) for s in targets.values()]).to_dict()
    rows = {"base": doc["rows"][0], **dict(zip(targets, doc["rows"][1:], strict=True))}
    peaks = json.loads((folder / "measured_peaks.json").read_text())
    return {k: v["peak"] for k, v in peaks.items()}, rows


def test_baseline_peak_is_the_recorded_one(case: tuple[dict[str, int], dict[str, dict]]) -> None:
    peaks, rows = case
    assert rows["base"]["peak_memory_bytes"] == peaks["base"]


def test_predicted_peaks_match_runs_never_seen(
    case: tuple[dict[str, int], dict[str, dict]],
) -> None:
    peaks, rows = case
    errors = []
    for run in rows:
        if run == "base":
            continue
        pred, meas = rows[run]["peak_memory_bytes"], peaks[run]
        errors.append(abs(pred / meas - 1))
        assert errors[-1] <= 0.10, (run, pred, meas)
    assert float(np.mean(errors)) <= 0.05


def test_fits_on_the_recorded_device(
    case: tuple[dict[str, int], dict[str, dict]], request: pytest.FixtureRequest
) -> None:
    _, rows = case
    base = rows["base"]
    gpu = request.node.callspec.params["case"] == "memory_gpt_h200"  # the data, not the output
    assert ("capacity_bytes" in base) is gpu
    # a GPU's capacity comes from deviceProperties; a CPU job's is unknown unless given
    assert base["fits"] is (True if gpu else None)
    if gpu:
        assert base["capacity_bytes"] == 150_109_880_320  # the H200's totalGlobalMem


def test_fits_against_a_given_capacity() -> None:
    w, _ = build_workload([MEM / "base"])
    doc = estimate(w, [parse_scenario(["layers=4"])], device_memory=2_000_000).to_dict()
    assert doc["rows"][0]["peak_memory_bytes"] < 2_000_000 < doc["rows"][1]["peak_memory_bytes"]
    base, big = doc["rows"]
    assert (base["fits"], big["fits"]) == (True, False)
    assert base["capacity_bytes"] == 2_000_000
    # the memory resident before the recording began (weights...) grows with the parameters
    assert [e["edit"] for e in big["edits"]] == [
        "layers 2 -> 4", "communication re-sized", "resident memory"]  # fmt: skip
    text = format_estimate(doc)
    assert "peak memory" in text and "layers=4: does NOT fit" in text


def test_no_memory_events_no_memory_number() -> None:
    w, _ = build_workload([DATA / "whatif_pairs" / "ddp_layers_x2"])
    doc = estimate(w, [parse_scenario(["layers=8"])]).to_dict()
    assert all(r["peak_memory_bytes"] is None and r["fits"] is None for r in doc["rows"])
    text = format_estimate(doc)
    assert "memory" not in text and "MiB" not in text and "GiB" not in text


def test_more_micro_batches_and_another_schedule() -> None:
    """GPipe with 2 micro-batches -> 4 of the same size (measured in its own job); 1F1B keeps
    fewer micro-batches' activations alive: on the last stage its peak lies between what the
    recorded pipeline holds with one micro-batch and with four (both measured)."""
    peaks = json.loads((MEM / "measured_peaks.json").read_text())
    w, _ = build_workload([MEM / "pipe_mb2"])
    more = estimate(w, [parse_scenario(["microbatches=4"])]).to_dict()["rows"][1]
    assert abs(more["peak_memory_bytes"] / peaks["pipe_mb4"]["peak"] - 1) <= 0.05
    w4, _ = build_workload([MEM / "pipe_mb2"])
    doc = estimate(w4, [parse_scenario(["microbatches=4", "schedule=1f1b"])]).to_dict()
    one_f_one_b = doc["rows"][1]["peak_memory_bytes"]
    assert peaks["pipe_mb1"]["peak"] < one_f_one_b < 0.9 * peaks["pipe_mb4"]["peak"]


def test_re_staged_pipelines_have_no_memory_number() -> None:
    """pp 2 -> 1 merges the two stages onto one rank, which mixes their tasks: the row has no
    peak (unknown, not wrong) and says so in an edit; the baseline's is the recorded one."""
    peaks = json.loads((MEM / "measured_peaks.json").read_text())
    w, _ = build_workload([MEM / "pipe_mb2"])
    doc = estimate(w, [parse_scenario(["pp=1"])]).to_dict()
    base, merged = doc["rows"]
    assert base["peak_memory_bytes"] == peaks["pipe_mb2"]["peak"]
    assert (merged["peak_memory_bytes"], merged["fits"]) == (None, None)
    assert [e["edit"] for e in merged["edits"]] == ["pp 2 -> 1", "memory unknown"]


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
        # without a bias: rows of the input times the weight's out-features (its first dim)
        ("aten::linear", [[8, 64, 128], [512, 128]], 8 * 64 * 512),
        # batched: batch x rows of batch1 (its dims but the last) times columns of batch2
        ("aten::baddbmm", [[4, 64, 64], [4, 64, 32], [4, 32, 64], [], []], 4 * 64 * 64),
        ("aten::cat", [[[8, 64, 128], [8, 64, 128], [8, 64, 128]], []], 3 * 8 * 64 * 128),
        ("aten::index_select", [[512, 128], [], [64]], 64 * 128),
        ("aten::embedding", [[512, 128], [8, 64]], 8 * 64 * 128),
        # a table larger than the output: indices (4 x 8) times the row width 16, not the
        # largest input (the table's 16,000)
        ("aten::embedding", [[1000, 16], [4, 8]], 4 * 8 * 16),
        ("aten::gelu", [[8, 64, 512], []], 8 * 64 * 512),
        ("aten::add", [[8, 64, 128], [64, 128], []], 8 * 64 * 128),
        ("aten::empty", [[], [], []], 0),
    ],
)
def test_out_elements_by_hand(name: str, dims: list, elements: int) -> None:
    assert out_elements(name, dims) == elements
