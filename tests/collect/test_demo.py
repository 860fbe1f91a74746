"""``lumos demo`` end to end on this machine (slow: one 2-rank torchrun plus the replay)."""

from __future__ import annotations

import pytest

from lumos.cli.main import main
from lumos.collect import read_manifest

pytest.importorskip("torch")


@pytest.mark.slow
def test_demo_cli_collects_and_reports_quietly_when_piped(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # progress is for terminals; the workload's output is in the log
    lines = captured.out.splitlines()
    assert any(ln.startswith("lumos: collected ") for ln in lines)
    assert any("ProfilerStep#" in ln for ln in lines)  # the replay table
    assert any("compute 2x faster" in ln for ln in lines)  # the what-if table
    m = read_manifest(out / "run")
    assert m.complete and m.world_size == 2 and all(r.et is not None for r in m.ranks)
    assert (out / "collect.log").is_file()
    html = (out / "report.html").read_text()
    assert html.count('class="chart"') >= 2 and "What-if" in html
    # lumos collect records memory by default: the demo shows it
    assert any("peak MiB" in ln for ln in lines)
    assert "rank 0: Memory" in html or "<h2>Memory</h2>" in html
