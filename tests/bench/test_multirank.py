"""Real 2-rank runs (gloo): a data-parallel ET's collectives through torch.distributed, and a
comms-only replay of the bundled run whose timings feed ``lumos comm --calibrate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.bench.ets import allreduce_et

from lumos.cli.main import main
from lumos.ingest.kineto import read_kineto

pytest.importorskip("torch")
pytestmark = pytest.mark.slow


def test_two_ranks_all_reduce_through_gloo(tmp_path: Path) -> None:
    ets = [allreduce_et(tmp_path / f"rank{r}.et.json", rank=r) for r in (0, 1)]
    out = tmp_path / "out"
    assert main(["bench", *map(str, ets), "-o", str(out)]) == 0
    doc = json.loads((out / "bench.json").read_text())
    # PyTorch ETs do not say how many threads their ranks had: one each, as torchrun gives
    assert [(r["threads"], r["threads_from"]) for r in doc["ranks"]] == [
        (1, "not recorded: one per rank")] * 2  # fmt: skip
    assert (doc["world_size"], doc["ops_total"], doc["ops_executed"]) == (2, 8, 8)
    assert (doc["comms_total"], doc["comms_executed"], doc["comms_skipped"]) == (4, 4, {})
    assert [s["name"] for s in doc["steps"]] == ["ProfilerStep#0", "ProfilerStep#1"]
    for r in (0, 1):
        t = read_kineto(out / f"rank{r}" / f"rank{r}.kineto.json.gz")
        assert t.rank == r and t.meta.world_size == 2
        c = t.collectives
        assert list(zip(c.kind, c.size_bytes.tolist(), strict=True)) == [("all_reduce", 4096)] * 2
    assert any(row["class"] == "communication" for row in doc["classes"])


def test_comms_only_replays_the_recorded_collectives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lumos.convert import convert
    from lumos.examples_data import example_run_dir

    convert([example_run_dir()], tmp_path / "ex")
    out = tmp_path / "comms"
    assert main(["bench", str(tmp_path / "ex"), "--comms-only", "-o", str(out)]) == 0
    doc = json.loads((out / "bench.json").read_text())
    recorded = read_kineto(example_run_dir() / "rank0.kineto.json.gz").collectives
    want = list(zip(recorded.kind, recorded.size_bytes.tolist(), strict=True))
    samples = doc["comms"]["samples"]
    assert [(s["kind"], s["size_bytes"]) for s in samples] == want  # sizes and order
    assert all(s["group_size"] == 2 and s["time_ns"] > 0 for s in samples)
    for r in (0, 1):  # and what ran on the ranks, as their traces show
        c = read_kineto(out / f"rank{r}" / f"rank{r}.kineto.json.gz").collectives
        assert list(zip(c.kind, c.size_bytes.tolist(), strict=True)) == want
    assert [row["count"] for row in doc["comms"]["table"]] == [3, 3]
    assert {row["class"] for row in doc["classes"]} <= {"communication", "comm_wait"}
    capsys.readouterr()
    assert main(["comm", "--calibrate", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["kind"], r["group_size"], r["samples"], r["distinct_sizes"]) for r in rows] == [
        ("all_reduce", 2, 6, 2)]  # fmt: skip
