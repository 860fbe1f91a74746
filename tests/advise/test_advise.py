"""``lumos advise``: the verdict and the opportunities on traces whose answer is known.

Expected values are derived independently of the verdict's code: a step bound by X gains about
half of X's share when X runs twice as fast (the what-if is simulated, the share is read off the
critical path: two different computations that must agree); the late rank and its counts are the
issue's own reading of the DLRM recording (``rank_lateness.csv``: rank 7 last at 5 of 8)."""

from __future__ import annotations

import json
from html import escape as html_escape
from pathlib import Path

import pytest
from tests.realdata import realdata

from lumos.advise import CAUSES, advise, headline
from lumos.cli.main import main
from lumos.examples_data import example_run_dir
from lumos.replay import build_workload

GPU_BASE = Path(__file__).parents[1] / "data" / "gpu_h200_gpt" / "base"
NCCL = "HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz"
DLRM = "param/et_replay/tests/inputs/dlrm_kineto.tar.gz"


def _advise(path: Path):
    workload, _ = build_workload([str(path)], workers=1)
    return advise(workload, [str(path)]).to_dict()


def _gain(doc, name):
    return next(o["gain_pct"] for o in doc["opportunities"] if o["name"] == name)


def test_gpu_bound_step_is_compute_and_compute_2x_pays_half_its_share():
    doc = _advise(GPU_BASE)
    assert doc["bound"] == "compute" and doc["device"] == "gpu"
    share = doc["shares"]["0"]["compute"]
    assert share > 0.85  # matrix products carry this step (tests/data/gpu_h200_gpt/README.md)
    assert _gain(doc, "compute_kernels_2x") == pytest.approx(50 * share, abs=2.0)
    assert doc["opportunities"][0]["name"] == "compute_kernels_2x"
    assert doc["late_rank"] is None  # one rank
    assert {x["name"] for x in doc["not_applicable"]} >= {"communication_2x", "no_straggler"}


def test_host_bound_trace_says_host_and_halving_host_time_halves_the_step():
    """HTA's nccl_data: stream 7 idle 541 of 549 ms, host-bound (issue #32)."""
    doc = _advise(realdata(NCCL))
    assert doc["bound"] == "host"
    share = doc["shares"]["0"]["host"]
    assert share > 0.9
    assert _gain(doc, "host_overhead_half") == pytest.approx(50 * share, abs=2.0)
    assert _gain(doc, "compute_kernels_2x") < 1.0
    assert "GPU waits for the CPU" in headline(doc)


def test_dlrm_names_rank_7_as_the_one_the_others_wait_for():
    doc = _advise(realdata(DLRM))
    late = doc["late_rank"]
    assert (late["rank"], late["times_last"], late["collectives"]) == (7, 5, 8)
    assert late["late_ns_per_step"] == pytest.approx(9.71e6, rel=0.01)
    no_straggler = next(o for o in doc["opportunities"] if o["name"] == "no_straggler")
    assert "--set straggler=7:" in no_straggler["command"]
    assert len(doc["shares"]) == 8


def test_cpu_job_computes_in_its_ops_not_in_host_overhead():
    """The bundled 2-rank gloo run: the time between a parent op's children is the op
    computing (aten::addmm's product), so compute dominates and compute 2x pays most."""
    doc = _advise(example_run_dir())
    assert doc["device"] == "cpu" and doc["bound"] == "compute"
    for rank, shares in doc["shares"].items():
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-3), rank
        assert shares["compute"] > 0.7
    gain = _gain(doc, "compute_kernels_2x")
    assert gain == pytest.approx(50 * doc["shares"][str(doc["slowest_rank"])]["compute"], abs=4.0)
    assert "on the CPU" in headline(doc) and "GPU" not in headline(doc)


def test_opportunities_are_ranked_and_gain_is_defined_against_step_ns():
    doc = _advise(example_run_dir())
    gains = [o["gain_pct"] for o in doc["opportunities"]]
    assert gains == sorted(gains, reverse=True)
    for o in doc["opportunities"]:
        assert o["gain_pct"] == pytest.approx((doc["step_ns"] - o["step_ns"]) / doc["step_ns"]
                                              * 100, abs=0.01)  # fmt: skip


def test_cli_writes_advice_json_with_the_documented_fields(tmp_path, capsys):
    out = tmp_path / "adv"
    assert main(["advise", str(GPU_BASE), "-o", str(out)]) == 0
    doc = json.loads((out / "advice.json").read_text())
    assert set(doc) >= {"bound", "shares", "late_rank", "step_ns", "opportunities"}
    assert doc["bound"] in CAUSES
    for o in doc["opportunities"]:
        assert set(o) == {"name", "step_ns", "gain_pct", "command"}
    assert (out / "advice.md").read_text().startswith("# lumos advise")
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("bound: compute")


def test_the_reproducing_command_gives_the_same_step(tmp_path):
    """compute_kernels_2x's command, run as written, replays to the opportunity's step."""
    doc = _advise(GPU_BASE)
    opp = next(o for o in doc["opportunities"] if o["name"] == "compute_kernels_2x")
    argv = opp["command"].split()[1:]
    argv[argv.index("-o") + 1] = str(tmp_path / "r")
    assert main(argv) == 0
    rep = json.loads((tmp_path / "r" / "replay.json").read_text())
    steps = [s["predicted_ns"] for s in rep["steps"]]  # one rank: its summary at the top
    assert sum(steps) / len(steps) == pytest.approx(opp["step_ns"], rel=0.001)


def test_the_report_opens_with_the_verdict_when_advise_wrote_beside_the_replay(tmp_path):
    out = tmp_path / "r"
    assert main(["replay", str(GPU_BASE), "-o", str(out)]) == 0
    assert main(["advise", str(GPU_BASE), "-o", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    verdict_at = html.index('<section id="advice">')
    assert "bound: compute" in html[verdict_at : verdict_at + 300]
    assert verdict_at < html.index("<section", verdict_at + 10)  # the first section
    assert "compute_kernels_2x" in html
    doc = json.loads((out / "advice.json").read_text())
    for o in doc["opportunities"]:  # each command whole, to copy (longer than a folded name)
        assert f"<code>{html_escape(o['command'])}</code>" in html
    assert max(len(o["command"]) for o in doc["opportunities"]) > 72


def test_a_foreign_advice_json_is_refused_naming_it(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["replay", str(GPU_BASE), "-o", str(out)]) == 0
    (out / "advice.json").write_text('{"rows": []}')
    assert main(["report", str(out)]) == 1
    assert "advice.json: not an advice.json of lumos advise" in capsys.readouterr().err


def test_report_takes_what_ifs_and_advice_from_any_folder(tmp_path, capsys):
    rep, est, adv = tmp_path / "rep", tmp_path / "est", tmp_path / "adv"
    assert main(["replay", str(GPU_BASE), "-o", str(rep)]) == 0
    assert main(["estimate", str(GPU_BASE), "--set", "layers=8", "-o", str(est)]) == 0
    assert main(["advise", str(GPU_BASE), "-o", str(adv)]) == 0
    assert (
        main(["report", str(rep), "--estimate", str(est), "--advice", str(adv / "advice.json")])
        == 0
    )
    html = (rep / "report.html").read_text()
    assert '<section id="advice">' in html and "layers=8" in html
    capsys.readouterr()
    assert main(["report", str(rep), "--estimate", str(tmp_path / "nowhere")]) == 1
    assert "nowhere: no such file (expected estimate.json" in capsys.readouterr().err


def test_a_report_written_elsewhere_links_to_the_replay_s_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rel = Path("trace")
    import shutil

    shutil.copytree(GPU_BASE, rel)
    assert main(["replay", str(rel), "-o", "rep"]) == 0
    (tmp_path / "pages").mkdir()
    assert main(["report", "rep", "-o", "pages/r.html"]) == 0
    html = (tmp_path / "pages" / "r.html").read_text()
    assert 'href="../rep/replay.perfetto.json"' in html
    assert f'href="{(tmp_path / "trace" / "rank0.kineto.json.gz").as_uri()}"' in html


def test_each_what_if_is_one_simulation_the_baseline_is_not_simulated_again(monkeypatch):
    """An opportunity's step (``_step_ns``) simulates the what-if alone: the two-rank
    all-reduce of tests/estimate/test_estimate.py with rank 1 twice as slow steps 174 ns
    (its derivation there), the already-edited workload replays as given (117 ns), and each is
    one simulation, never the baseline again beside it."""
    from tests.sim.test_engine import two_rank_collective

    import lumos.estimate.run as run_mod
    from lumos.advise.opportunities import _step_ns

    calls = []
    real = run_mod._row
    monkeypatch.setattr(run_mod, "_row", lambda *a, **k: calls.append(a[1].label) or real(*a, **k))
    w = two_rank_collective(10, 50, 100, 60)
    assert _step_ns(w, ["straggler=1:2"]) == 174 and calls == ["straggler=1:2"]
    calls.clear()
    assert _step_ns(w) == 117 and calls == ["baseline"]
