"""`lumos link ET KINETO [--json]`: per-rank report, rank pairing of archives, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos.cli.main import main

DATA = Path(__file__).parent.parent / "data"
SIMPLE_ET = DATA / "link_simple_add" / "benchmark_simple_add_et.json.gz"
SIMPLE_K = DATA / "link_simple_add" / "benchmark_simple_add_trace.json.gz"


def test_link_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["link", str(SIMPLE_ET), str(SIMPLE_K)]) == 0
    out = capsys.readouterr().out
    assert "linked 36/36 ET ops (100.0 %)" in out
    assert "external_id 36" in out


def test_link_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["link", "--json", str(SIMPLE_ET), str(SIMPLE_K)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    rep = json.loads(line)
    assert (rep["num_linked"], rep["num_et_ops"], rep["match_rate"]) == (36, 36, 1.0)
    assert rep["method_counts"]["external_id"] == 36


def test_link_archives_pair_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    d = DATA / "link_dlrm_8rank"
    rc = main(
        [
            "link",
            "--json",
            "--min-rate",
            "0.95",
            str(d / "dlrm_pytorch_et.tar.gz"),
            str(d / "dlrm_kineto.tar.gz"),
        ]
    )
    reps = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rc == 0
    assert [r["rank"] for r in reps] == list(range(8))
    for r in reps:
        assert r["et_path"].endswith(f"dlrm_eg_{r['rank']}.json")
        assert f"worker{r['rank']}_" in r["kineto_path"]
        assert r["match_rate"] >= 0.95


def test_min_rate_failure_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["link", "--min-rate", "1.01", str(SIMPLE_ET), str(SIMPLE_K)]) == 1


def test_wrong_kind_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["link", str(SIMPLE_K), str(SIMPLE_K)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("lumos: error: ") and "holds no PyTorch Execution Trace" in err
    assert len(err.strip().splitlines()) == 1
