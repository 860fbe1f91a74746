"""Without torch: lumos imports, collect fails in one line saying how to install it, and the demo
replays the bundled recording instead of collecting, saying so."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lumos.cli.main import main
from lumos.collect import CollectConfig, Collector, collector
from lumos.errors import MissingDependencyError

INSTALL_HINT = "pip install 'lumos[torch]'"


@pytest.fixture
def no_torch(monkeypatch):
    """Make ``import torch`` fail in this process, as on an install without the extra."""
    for name in list(sys.modules):
        if name == "torch" or name.startswith("torch."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)


def test_collect_fails_in_one_line(no_torch, tmp_path, capsys):
    assert main(["collect", "-o", str(tmp_path / "RUN"), "--", "true"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("lumos: error:") and "needs torch" in err and INSTALL_HINT in err
    assert not (tmp_path / "RUN").exists()


def test_demo_replays_the_bundled_recording(no_torch, tmp_path, capsys):
    from lumos.collect import read_manifest
    from lumos.examples_data import example_run_dir

    out = tmp_path / "demo"
    assert main(["demo", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # progress is for terminals
    lines = captured.out.splitlines()
    assert "torch is not installed" in lines[0] and "bundled recording" in lines[0]
    assert INSTALL_HINT in lines[0]
    assert any("ProfilerStep#" in ln for ln in lines)  # the replay table
    assert any("compute 2x faster" in ln for ln in lines)  # the what-if table
    assert any(ln.startswith("lumos: replayed the bundled recording") for ln in lines)
    m = read_manifest(out / "run")  # a copy of the bundled run, beside the report
    assert m.complete and m.world_size == 2
    bundled = example_run_dir()
    for r in m.ranks:
        assert r.kineto.read_bytes() == (bundled / r.kineto.name).read_bytes()
    html = (out / "report.html").read_text()
    assert "bundled recording" in html and html.count('class="chart"') >= 2


def test_enabled_collector_raises_missing_dependency(no_torch, tmp_path):
    col = Collector(CollectConfig(run_dir=tmp_path))
    with pytest.raises(MissingDependencyError, match=r"pip install 'lumos\[torch\]'"):
        col.__enter__()


def test_disabled_collector_is_a_no_op_without_torch(no_torch, monkeypatch):
    monkeypatch.delenv("LUMOS_COLLECT_DIR", raising=False)
    with collector() as col:
        for _ in range(3):
            col.step()
    assert not col.enabled and col.steps_done == 3 and col.recorded_steps == 0


def test_report_works_without_torch(no_torch, tmp_path, capsys):
    from pathlib import Path

    fixture = Path(__file__).parents[1] / "report" / "data" / "replay.json"
    assert main(["report", str(fixture), "-o", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 1000


def test_importing_lumos_does_not_import_torch():
    code = (
        "import sys, lumos, lumos.collect, lumos.examples, lumos.report.html, lumos.cli.main\n"
        "lumos.cli.main.build_parser()\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
