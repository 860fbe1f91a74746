"""``lumos synth report``: a real trace against itself and against an edited copy."""

from __future__ import annotations

import csv
import json

from tests.realdata import trace

from lumos.chakra.io import write_chakra
from lumos.chakra.mapping import to_chakra
from lumos.cli.main import main
from lumos.replay import apply_edits, build_workload


def _edited_copy(src: str, prefix: str, scale: list[tuple[str, float]]) -> None:
    """``src``'s graph with ``scale`` applied (what ``replay --scale`` does), as lumos Chakra
    ETs ``<prefix>.<rank>.et`` (which read back as that exact graph)."""
    w, _ = build_workload([src], workers=1)
    for g in w.graphs:
        write_chakra(to_chakra(apply_edits(g, scale=scale)), f"{prefix}.{g.rank}.et")


def test_a_trace_against_itself_passes_and_writes_the_report(tmp_path, capsys):
    src = str(trace("sendrecv_5streams_rank0"))
    out = tmp_path / "fid"
    assert main(["synth", "report", src, src, "--strict", "-o", str(out), "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "fidelity: all " in text and "MISS" not in text
    doc = json.loads((out / "fidelity.json").read_text())
    assert doc["ok"] is True and doc["failures"] == []
    assert doc["inputs"] == {"source": src, "candidate": src}
    assert all(r["delta"] == 0.0 for r in doc["rows"])
    with (out / "fidelity.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["metric"] for r in rows] == [r["metric"] for r in doc["rows"]]
    assert next(r for r in rows if r["metric"] == "step_time_ns")["bound"] == "0.05"
    html = (out / "fidelity.html").read_text()
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == 1
    assert "op-class mix" in html and "comm.bytes_per_step" in html


def test_gemm_twice_as_slow_misses_bounds_and_strict_exits_1(tmp_path, capsys):
    """A GPU-bound rank (5 streams, send/recv) with its GEMMs at 2x: the step grows by more
    than 5 % and exposed compute by more than 5 points."""
    src = str(trace("sendrecv_5streams_rank0"))
    prefix = str(tmp_path / "gemm2")
    _edited_copy(src, prefix, [("gemm", 2.0)])
    assert main(["synth", "report", src, prefix, "--workers", "1"]) == 0  # report only
    text = capsys.readouterr().out
    assert main(["synth", "report", src, prefix, "--strict", "--workers", "1"]) == 1
    assert capsys.readouterr().out == text
    miss = [line.split()[0] for line in text.splitlines() if line.endswith("MISS")]
    assert miss[:2] == ["step_time_ns", "breakdown.exposed_compute.share"]
    assert not any(m.startswith(("class.", "comm.")) for m in miss)  # same tasks, same bytes
    assert f"bounds missed: {', '.join(miss)}" in text


def test_a_missing_input_is_one_line_and_exit_1(tmp_path, capsys):
    assert main(["synth", "report", str(tmp_path / "nothing"), str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("lumos: error: ") and "nothing" in err and "\n" not in err
