"""Memory in the outputs: the ``memory`` analysis table, the Perfetto counter track, the HTML
report's memory section and the what-if table's peak column (on tests/data/memory_gpt_cpu)."""

from __future__ import annotations

import json
from pathlib import Path

from lumos.replay import build_workload, replay, write_replay
from lumos.report.html import render_report

MEM = Path(__file__).parent.parent / "data" / "memory_gpt_cpu"
PEAKS = json.loads((MEM / "measured_peaks.json").read_text())


def test_memory_table_splits_each_peak() -> None:
    w, _ = build_workload([MEM / "base"])
    rep = replay(w)
    rows = rep.analysis()["memory"].to_dicts()
    for view in ("measured", "predicted"):
        for rank in (0, 1):
            mine = [r for r in rows if r["view"] == view and r["rank"] == rank]
            peaks = [r["bytes"] for r in mine if r["kind"] == "peak"]
            # the replay of the unedited recording reproduces the recorded peak of each step
            assert max(peaks) == PEAKS["base"]["ranks"][rank]
            assert {r["name"] for r in mine if r["kind"] == "peak"} == {"cpu"}
            for step in {r["step"] for r in mine}:
                kind = {r["kind"]: r["bytes"] for r in mine if r["step"] == step
                        and r["kind"] in ("peak", "resident", "allocated_in_step")}  # fmt: skip
                assert kind["resident"] + kind["allocated_in_step"] == kind["peak"]
                held = sum(r["bytes"] for r in mine if r["step"] == step and r["kind"] == "phase")
                assert 0 < held <= kind["peak"]  # in-step allocations, some resident freed


def test_perfetto_counter_track_and_report(tmp_path: Path) -> None:
    w, _ = build_workload([MEM / "base"])
    rep = replay(w)
    paths = write_replay(rep, tmp_path)
    events = json.loads(paths["perfetto"].read_text())["traceEvents"]
    counters = [e for e in events if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {"allocated bytes (cpu)"}
    # one counter per rank in each group: the replay's (pid 1000 * (rank + 1)) and, one above
    # it, the recording's (pid + 1); each has a value per memory event and the rank's peak
    n_events = [len(g.memory) for g in w.graphs if g.memory is not None]
    for rank, n in enumerate(n_events):
        for pid in (1000 * (rank + 1), 1000 * (rank + 1) + 1):
            mine = [e for e in counters if e["pid"] == pid]
            assert len(mine) == n, pid
            assert max(e["args"]["allocated"] for e in mine) == PEAKS["base"]["ranks"][rank]
    assert len(counters) == 2 * sum(n_events)
    assert max(e["args"]["allocated"] for e in counters) == PEAKS["base"]["peak"]
    names = {(e["pid"], e["args"]["name"]) for e in events if e["ph"] == "M"
             and e["name"] == "process_name"}  # fmt: skip
    assert {(1000, "rank 0 predicted (replay)"), (1001, "rank 0 measured (recorded)")} <= names
    doc = json.loads(paths["replay"].read_text())
    timeline = doc["memory"]["timeline"]
    assert max(timeline["measured"]) == max(timeline["predicted"]) == PEAKS["base"]["ranks"][0]
    html = render_report(doc)
    assert "<h2>rank 0: Memory</h2>" in html and "<h2>rank 1: Memory</h2>" in html
    assert "MiB" in html
