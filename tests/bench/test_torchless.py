"""What works without torch around ``lumos bench``: the one-line error, ``lumos comm
--calibrate`` on a bench's timed collectives, ``lumos estimate --chakra`` ETs that replay as
their estimate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from lumos.cli.main import main


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "torch" or name.startswith("torch."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)


def test_bench_without_torch_is_one_line(
    no_torch: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import lumos.bench  # the package itself imports without torch

    assert lumos.bench.op_class("aten::mm") == "gemm"
    assert main(["bench", str(tmp_path / "x.json"), "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("lumos: error: lumos bench needs torch, which is not installed; install it "
                   "with: pip install 'lumos[torch]'")  # fmt: skip


def _bench_doc(samples: list[dict]) -> dict:
    return {"format": "lumos.bench", "version": 1, "comms": {"samples": samples, "table": []}}


def test_calibrate_reads_a_comms_only_bench(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 20 us + size / (2 GB/s), for all-reduces of three sizes over 2 ranks
    samples = [{"call": i, "kind": "all_reduce", "group_size": 2, "size_bytes": s,
                "dtype": "float", "time_ns": 20_000 + s // 2} for i, s in
               enumerate([1 << 20, 2 << 20, 4 << 20] * 2)]  # fmt: skip
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "bench.json").write_text(json.dumps(_bench_doc(samples)))
    assert main(["comm", "--calibrate", str(tmp_path / "b"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["kind"], r["group_size"], r["samples"], r["distinct_sizes"]) for r in rows] == [
        ("all_reduce", 2, 6, 3)]  # fmt: skip
    assert rows[0]["latency_ns"] == pytest.approx(20_000, abs=1)
    assert rows[0]["bw_bytes_per_s"] == pytest.approx(2e9, rel=1e-6)
    doc = _bench_doc([])
    del doc["comms"]
    (tmp_path / "full.json").write_text(json.dumps(doc))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "bench.json").write_text(json.dumps(doc))
    assert main(["comm", "--calibrate", str(tmp_path / "full" / "bench.json")]) == 1
    err = capsys.readouterr().err
    assert "this bench run timed no collectives: rerun lumos bench --comms-only" in err


def test_estimate_writes_each_scenario_as_chakra_ets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lumos.chakra import read_chakra
    from lumos.chakra.mapping import workload_from_chakra
    from lumos.examples_data import example_run_dir
    from lumos.sim import simulate

    out = tmp_path / "est"
    argv = ["estimate", str(example_run_dir()), "--sweep", "layers=2,8", "-o", str(out),
            "--chakra", str(tmp_path / "et" / "x")]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"wrote 2 Chakra ET(s) {tmp_path / 'et' / 'x.layers-8'}.<rank>.et (layers=8)" in text
    rows = json.loads((out / "estimate.json").read_text())["rows"]
    for row in rows[1:]:  # each scenario's ETs replay as its estimate, to the ns
        label = row["config"]["label"].replace("=", "-")
        w = workload_from_chakra(read_chakra(tmp_path / "et" / f"x.{label}"))
        result = simulate(w)
        per_rank = [[s["predicted_ns"] for s in result.steps(gi)] for gi in range(2)]
        assert round(float(np.mean(np.max(per_rank, axis=0)))) == row["step_ns"]
