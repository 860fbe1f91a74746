"""The hook with real torch, in this process (one rank, no process group): files and manifest.

Skipped where torch is not installed. The multi-rank torchrun run is in test_workload.py (slow).
"""

from __future__ import annotations

import gzip
import json

import pytest

from lumos.collect import CollectConfig, collector, read_manifest

torch = pytest.importorskip("torch")


def _loop(col, n):
    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.ones(4, 16)
    for _ in range(n):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        col.step()


def test_one_rank_kineto_and_et_of_the_same_steps(tmp_path):
    cfg = CollectConfig(run_dir=tmp_path, steps=2, warmup=1, wait=1, execution_trace=True)
    with collector(cfg, parallel={"dp": 1}) as col:
        _loop(col, cfg.total_steps + 1)
    assert col.recorded_steps == 2
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["rank0.et.json", "rank0.kineto.json.gz", "rank0.meta.json", "run.json"]
    m = read_manifest(tmp_path)
    assert m.complete and m.world_size == 1 and m.data["parallel"] == {"dp": 1}
    assert m.data["schedule"] == {"wait": 1, "warmup": 1, "active": 2}
    kineto = json.loads(gzip.decompress(m.ranks[0].kineto.read_bytes()))
    events = kineto["traceEvents"]
    steps = sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    assert any("Input Dims" in e.get("args", {}) for e in events)  # record_shapes=True
    # The ET observer shared the profiler session: every Kineto op's record-function id is an
    # ET node's rf_id, so the two traces join by id.
    kineto_rf = {
        e["args"]["Record function id"]
        for e in events
        if e.get("cat") == "cpu_op" and "Record function id" in e.get("args", {})
    }
    et = json.loads(m.ranks[0].et.read_text())
    et_rf = {a["value"] for n in et["nodes"] for a in n.get("attrs", []) if a["name"] == "rf_id"}
    assert kineto_rf and kineto_rf <= et_rf
    et_steps = sorted(n["name"] for n in et["nodes"] if n["name"].startswith("ProfilerStep#"))
    assert et_steps == steps


def test_each_rank_records_the_intra_op_threads_it_ran_with(tmp_path):
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        cfg = CollectConfig(run_dir=tmp_path, steps=1, warmup=1, wait=0)
        with collector(cfg) as col:
            _loop(col, 1)
    finally:
        torch.set_num_threads(before)
    assert json.loads((tmp_path / "rank0.meta.json").read_text())["intra_op_threads"] == 3
    assert json.loads((tmp_path / "run.json").read_text())["ranks"][0]["intra_op_threads"] == 3
    assert read_manifest(tmp_path).ranks[0].intra_op_threads == 3


def test_job_shorter_than_the_window_records_what_it_ran(tmp_path):
    cfg = CollectConfig(run_dir=tmp_path, steps=3, warmup=1, wait=0, execution_trace=True)
    with collector(cfg) as col:
        _loop(col, 2)
    assert col.recorded_steps == 1
    rec = json.loads((tmp_path / "rank0.meta.json").read_text())
    assert rec["recorded_steps"] == 1 and rec["kineto"] == "rank0.kineto.json.gz"


def test_job_ending_in_warmup_leaves_no_trace_and_an_incomplete_manifest(tmp_path):
    cfg = CollectConfig(run_dir=tmp_path, steps=2, warmup=1, wait=1, execution_trace=True)
    with collector(cfg) as col:
        _loop(col, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.meta.json", "run.json"]
    assert json.loads((tmp_path / "run.json").read_text())["complete"] is False
