"""``lumos bench`` end to end on one rank: bench.json, the executed Kineto trace, source timing
from a Kineto trace given beside the ET, ``lumos diff`` on the pair, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.bench.ets import compute_et

from lumos.cli.main import main
from lumos.ingest.kineto import read_kineto

pytest.importorskip("torch")


def test_bench_a_pytorch_et(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    et = compute_et(tmp_path / "et.json", steps=2)
    out = tmp_path / "out"
    assert main(["bench", str(et), "-o", str(out), "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    doc = json.loads((out / "bench.json").read_text())
    assert (doc["ops_total"], doc["ops_executed"]) == (18, 14)
    assert doc["ops_skipped"] == {"no such operator in this PyTorch": 2,
                                  "raised RuntimeError here": 2}  # fmt: skip
    assert doc["substituted"] == {
        "aten::cudnn_batch_norm_backward": "aten::native_batch_norm_backward"
    }
    assert [s["name"] for s in doc["steps"]] == ["ProfilerStep#0", "ProfilerStep#1"]
    assert all(s["source_ns"] is None and s["executed_ns"] > 0 for s in doc["steps"])
    assert doc["source"]["timing"] is None and doc["world_size"] == 1
    assert doc["ranks"][0]["kineto"] == "rank0/rank0.kineto.json.gz"
    assert not doc["execution_trace"] and doc["ranks"][0]["et"] is None
    assert "skipped 2 myns::custom: no such operator in this PyTorch" in text
    assert "executed 14 of 18 compute ops (77.8 %)" in text
    executed = read_kineto(out / doc["ranks"][0]["kineto"])  # a trace lumos reads
    assert list(executed.steps.name) == ["ProfilerStep#0", "ProfilerStep#1"]
    names = {executed.name_of(i) for i in range(len(executed.events))}
    assert {"aten::mm", "aten::native_batch_norm_backward"} <= names
    assert "myns::custom" not in names

    # the executed run's trace times the ET in a second run; lumos diff reads the pair
    again = tmp_path / "again"
    kineto = str(out / doc["ranks"][0]["kineto"])
    assert main(["bench", str(et), kineto, "-o", str(again), "--warmup", "0", "--et",
                 "--memory", "--threads", "2"]) == 0  # fmt: skip
    doc2 = json.loads((again / "bench.json").read_text())
    assert doc["ranks"][0]["threads_from"] == "not recorded: torch default"
    assert (doc2["ranks"][0]["threads"], doc2["ranks"][0]["threads_from"]) == (2, "option")
    assert not doc2["source"]["memory"] and doc2["memory"]
    assert _memory_events(again / doc2["ranks"][0]["kineto"]) > 0
    assert _memory_events(out / doc["ranks"][0]["kineto"]) == 0
    first = {s["name"]: s["executed_ns"] for s in doc["steps"]}
    assert {s["name"]: s["source_ns"] for s in doc2["steps"]} == first
    assert (
        doc2["source"]["timing"] == "recorded" and doc2["ranks"][0]["et"] == "rank0/rank0.et.json"
    )
    assert {c["class"] for c in doc2["classes"]} >= {"gemm", "elementwise"}
    capsys.readouterr()
    assert main(["diff", str(out), str(again)]) == 0
    diff = capsys.readouterr().out
    assert "0 / ProfilerStep#0" in diff and "0 / ProfilerStep#1" in diff

    # a source that recorded allocations is executed recording them too (their cost on both sides)
    third = tmp_path / "third"
    assert main(["bench", str(et), str(again / doc2["ranks"][0]["kineto"]), "-o", str(third),
                 "--warmup", "0"]) == 0  # fmt: skip
    doc3 = json.loads((third / "bench.json").read_text())
    assert doc3["source"]["memory"] and doc3["memory"]
    assert _memory_events(third / doc3["ranks"][0]["kineto"]) > 0


def test_a_collected_run_executes_with_the_threads_it_recorded(tmp_path: Path) -> None:
    import torch

    from lumos.collect import CollectConfig, collector

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = CollectConfig(run_dir=tmp_path / "run", steps=1, warmup=1, wait=0,
                            execution_trace=True)  # fmt: skip
        with collector(cfg) as col:
            model = torch.nn.Linear(8, 8)
            for _ in range(cfg.total_steps + 1):
                model(torch.ones(2, 8)).sum().backward()
                col.step()
    finally:
        torch.set_num_threads(before)
    out = tmp_path / "out"
    assert main(["bench", str(tmp_path / "run"), "-o", str(out), "--warmup", "0"]) == 0
    rank = json.loads((out / "bench.json").read_text())["ranks"][0]
    assert (rank["threads"], rank["threads_from"]) == (1, "recorded")


def _memory_events(kineto: Path) -> int:
    import gzip

    events = json.loads(gzip.decompress(kineto.read_bytes()))["traceEvents"]
    return sum(e.get("name") == "[memory]" for e in events)


def test_bad_sources_fail_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [')
    assert main(["bench", str(bad), "-o", str(tmp_path / "o1")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"lumos: error: {bad}")
    kineto = tmp_path / "k.json"
    kineto.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a",
                                                   "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}))  # fmt: skip
    assert main(["bench", str(kineto), "-o", str(tmp_path / "o2")]) == 1
    assert "no PyTorch ET or Chakra ET to run" in capsys.readouterr().err
    et = compute_et(tmp_path / "et.json")
    assert main(["bench", str(et), "-o", str(tmp_path / "o3"), "--device", "cuda:7"]) == 1
    err = capsys.readouterr().err
    import torch

    if not torch.cuda.is_available():
        assert "--device cuda:7: this PyTorch sees no CUDA device" in err
    assert main(["bench", str(et), "-o", str(tmp_path / "o4"), "--warmup", "-1"]) == 1
    assert "--warmup must be 0 or more" in capsys.readouterr().err
    for i in (1, 2, 3, 4):  # nothing written, as every verb (-o may be left, empty)
        assert not (tmp_path / f"o{i}").exists() or not list((tmp_path / f"o{i}").iterdir())


def test_run_directory_without_ets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lumos.examples_data import example_run_dir

    assert main(["bench", str(example_run_dir()), "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "rank 0 recorded no Execution Trace: collect the run with lumos collect --et" in err
