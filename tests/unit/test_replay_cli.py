"""`lumos replay`: outputs, ablations, what-ifs, determinism and errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.realdata import TRACES, realdata

from lumos.cli.main import main

SMALL = TRACES["cuda_event_sync"]  # realdata paths, resolved in the test (skips where absent)
GOLDEN = Path(__file__).parent.parent / "golden" / "replay_cuda_event_sync.json"
LEGACY = TRACES["legacy_2021_v100"]


def _replay(tmp_path: Path, *args: str, trace: str = SMALL) -> dict:
    out = tmp_path / "out"
    assert main(["replay", str(realdata(trace)), "-o", str(out), *args]) == 0
    return json.loads((out / "replay.json").read_text())


def test_outputs_and_schema(tmp_path, capsys):
    doc = _replay(tmp_path)
    assert {"steps", "breakdown", "sm_util", "critical_path", "error"} <= set(doc)
    st = doc["steps"][0]
    assert {"name", "measured_ns", "predicted_ns", "error"} <= set(st)
    for side in ("measured", "predicted"):
        assert set(doc["breakdown"][side]) >= {
            "exposed_compute_ns",
            "overlapped_ns",
            "exposed_comm_ns",
            "other_ns",
        }
    trace = json.loads((tmp_path / "out" / "replay.perfetto.json").read_text())
    assert trace["traceEvents"]
    assert (tmp_path / "out" / "sm_util.csv").read_text().startswith("rank,bin,")
    out = capsys.readouterr().out
    assert "ProfilerStep#" in out and "breakdown" in out


def test_replay_json_is_golden(tmp_path):
    """Byte-identical output for the same input. The golden file is written by
    ``python -m tests.golden.regenerate``, on purpose, never by this test."""
    _replay(tmp_path)
    produced = (tmp_path / "out" / "replay.json").read_text()
    doc = json.loads(produced)
    doc["sources"] = ["<trace>"]
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    assert GOLDEN.exists(), f"{GOLDEN} missing: run python -m tests.golden.regenerate"
    assert text == GOLDEN.read_text()


def test_without_sync_lets_the_cpu_run_ahead(tmp_path):
    base = _replay(tmp_path, trace=LEGACY)
    cut = _replay(tmp_path, "--without", "sync", trace=LEGACY)
    b = sum(s["predicted_ns"] for s in base["steps"])
    c = sum(s["predicted_ns"] for s in cut["steps"])
    assert c < b
    assert cut["without"] == ["sync"]


def test_scale_makes_matching_ops_faster(tmp_path):
    base = _replay(tmp_path, trace=LEGACY)
    fast = _replay(tmp_path, "--scale", "^aten::=0.5", trace=LEGACY)
    assert sum(s["predicted_ns"] for s in fast["steps"]) < sum(
        s["predicted_ns"] for s in base["steps"]
    )
    assert fast["scale"] == [{"pattern": "^aten::", "factor": 0.5}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--without", "nonsense"], "unknown dependency kind"),
        (["--scale", "gemm"], "REGEX=FACTOR"),
        (["--scale", "(=2"], "bad regular expression"),
    ],
)
def test_bad_options_are_one_line(tmp_path, capsys, args, message):
    assert main(["replay", str(realdata(SMALL)), "-o", str(tmp_path / "o"), *args]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_two_ranks_of_a_larger_job_replay_as_a_partial_workload(tmp_path, capsys):
    """HTA's trace_filter pair: ranks 0 and 1 of a 128-rank job replay together; the 126
    missing peers are named in the diagnostics (and the summary), not crashed on."""
    from tests.realdata import trace

    out = tmp_path / "tf"
    paths = [str(trace("sendrecv_5streams_rank0")), str(trace("sendrecv_5streams_rank1"))]
    assert main(["replay", *paths, "-o", str(out)]) == 0
    doc = json.loads((out / "replay.json").read_text())
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    missing = doc["diagnostics"]["partial_workload_missing_ranks"]
    assert missing == {"count": 126, "example": "2-127"}
    assert "126 ranks of the job not traced" in capsys.readouterr().out


def test_perfetto_gz_by_name(tmp_path):
    import gzip

    doc = _replay(tmp_path, "--perfetto", "replay.perfetto.json.gz")
    out = tmp_path / "out"
    assert doc["perfetto"] == {"replay": "replay.perfetto.json.gz"}
    assert not (out / "replay.perfetto.json").exists()
    trace = json.loads(gzip.decompress((out / "replay.perfetto.json.gz").read_bytes()))
    assert trace["displayTimeUnit"] == "ns" and trace["traceEvents"]


def test_perfetto_name_must_be_a_json_file_name(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["replay", str(realdata(SMALL)), "-o", str(out), "--perfetto", "x/y.json"]) == 1
    assert "--perfetto 'x/y.json'" in capsys.readouterr().err


def test_a_rank_that_began_later_begins_later_in_its_window(tmp_path):
    """Without ProfilerSteps a rank's run is its window; on a shared clock a rank that began
    later begins later in the replay too, and its window is measured from its own first task
    (the window used to start at 0 for every rank: +11 % on the later rank of a 2-rank job)."""
    from lumos.graph.model import Workload
    from lumos.graph.synthetic import GraphBuilder
    from lumos.replay import replay

    graphs = []
    for rank, start in ((0, 1_000), (1, 0)):
        b = GraphBuilder(rank=rank, world_size=2)
        th = b.thread(1)
        anchor = b.task(th, "<start>", 0, ts_ns=0)
        b.task(th, "aten::mm", 5_000, ts_ns=start, gap_ns=start)
        g = b.build()
        ev = np.full(g.num_tasks, -1, dtype=np.int64)
        ev[anchor] = -2  # the processor's anchor, as built from a trace
        graphs.append(g.replace(tasks=g.tasks.replace(event_idx=ev)))
    rep = replay(Workload(tuple(graphs)))
    windows = {s["rank"]: s["window_ns"] for s in rep.summaries}
    assert windows[0] == {"measured": [1_000, 6_000], "predicted": [1_000, 6_000]}
    assert windows[1] == {"measured": [0, 5_000], "predicted": [0, 5_000]}


def test_totals_are_labelled_as_totals(tmp_path, capsys):
    """The step table is per step; the breakdown covers every step of the window, and says so;
    lumos diff says which of its tables are per step and which are totals over ranks."""
    gpu = Path(__file__).parents[1] / "data" / "gpu_h200_gpt" / "base"
    assert main(["replay", str(gpu), "-o", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "breakdown, 3 steps" in out
    # exposed compute 105.290 ms over the 3 steps of ~37 ms each: a total, not a step
    assert "exposed compute            105.290" in out
    assert main(["diff", str(gpu), str(gpu)]) == 0
    out = capsys.readouterr().out
    assert "steps (3 rows, per rank and step," in out
    assert "kernel classes (" in out and "total over every step and rank" in out


def test_a_job_of_many_ranks_prints_its_summary_first_and_its_slowest_rank(tmp_path, capsys):
    """Issue 32: the 8-rank DLRM replay printed 221 lines, rank after rank. Now the job first,
    then the slowest rank; --all-ranks prints every one."""
    dlrm = str(realdata("param/et_replay/tests/inputs/dlrm_kineto.tar.gz"))
    assert main(["replay", dlrm, "-o", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "across ranks (sum of steps)"
    assert out[3] == "detail of rank 1, the slowest (the other 7: --all-ranks, or replay.json)"
    assert [line for line in out if line.startswith("rank ")] == ["rank 1"]
    assert main(["replay", dlrm, "-o", str(tmp_path / "b"), "--all-ranks"]) == 0
    every = capsys.readouterr().out.splitlines()
    assert [line for line in every if line.startswith("rank ")] == [f"rank {r}" for r in range(8)]


def test_a_cpu_only_replay_speaks_of_the_cpu(tmp_path, capsys):
    """Issue 32: the demo's CPU-only output spoke of "GPU time"."""
    from lumos.examples_data import example_run_dir

    assert main(["replay", str(example_run_dir()), "-o", str(tmp_path / "r")]) == 0
    words = capsys.readouterr().out.split("\nwords: ")[1]
    assert "GPU" not in words and words.startswith("exposed compute/comm = time when only compute")
