"""`lumos link ET KINETO [--json]`: per-rank report, rank pairing of archives, one-line errors."""

from __future__ import annotations

import json

import pytest
from tests.realdata import trace

from lumos.cli.main import main


@pytest.fixture
def simple() -> tuple[str, str]:
    """A matched ET + Kineto pair of one A100 process (HTA's simple_add), read in place."""
    return str(trace("simple_add_et")), str(trace("simple_add_kineto"))


def test_link_text_report(capsys: pytest.CaptureFixture[str], simple) -> None:
    assert main(["link", *simple]) == 0
    out = capsys.readouterr().out
    assert "linked 36/36 ET ops (100.0 %)" in out
    assert "external_id 36" in out


def test_link_json(capsys: pytest.CaptureFixture[str], simple) -> None:
    assert main(["link", "--json", *simple]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    rep = json.loads(line)
    assert (rep["num_linked"], rep["num_et_ops"], rep["match_rate"]) == (36, 36, 1.0)
    assert rep["method_counts"]["external_id"] == 36


def test_link_archives_pair_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    et, kineto = trace("dlrm_et_8rank"), trace("dlrm_kineto_8rank")
    rc = main(["link", "--json", "--min-rate", "0.95", str(et), str(kineto)])
    reps = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rc == 0
    assert [r["rank"] for r in reps] == list(range(8))
    for r in reps:
        assert r["et_path"].endswith(f"dlrm_eg_{r['rank']}.json")
        assert f"worker{r['rank']}_" in r["kineto_path"]
        assert r["match_rate"] >= 0.95


def test_min_rate_failure_exit_code(capsys: pytest.CaptureFixture[str], simple) -> None:
    assert main(["link", "--min-rate", "1.01", *simple]) == 1


def test_wrong_kind_is_one_line_error(capsys: pytest.CaptureFixture[str], simple) -> None:
    assert main(["link", simple[1], simple[1]]) == 1
    err = capsys.readouterr().err
    assert err.startswith("lumos: error: ") and "holds no PyTorch Execution Trace" in err
    assert len(err.strip().splitlines()) == 1
