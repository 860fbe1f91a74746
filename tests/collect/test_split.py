"""Splitting an alternating run's Kineto trace into one trace per configuration."""

from __future__ import annotations

import json

import pytest

from lumos.collect import read_manifest
from lumos.collect.split import find_steps, read_trace, split_run, split_trace, write_trace
from lumos.errors import InputError


def _x(name, ts, dur, tid=1, cat="cpu_op", **extra):
    return {"ph": "X", "cat": cat, "name": name, "pid": 9, "tid": tid, "ts": ts, "dur": dur,
            **extra}  # fmt: skip


def _trace() -> dict:
    """Four steps A B A B on one thread; slots [100,150) [150,200) [200,260) [260,300) us."""
    ev = [
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "ts": 90, "args": {"name": "p"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 1, "args": {"name": "main"}},
        {"ph": "i", "s": "g", "name": "Iteration Start", "pid": "T", "tid": "T", "ts": 90},
        _x("PyTorch Profiler (0)", 90, 230, cat="Trace", pid="Spans", tid="P"),
        _x("ProfilerStep#1", 100, 50, cat="user_annotation"),
        _x("config:A", 101, 40, cat="user_annotation"),
        _x("a1", 110, 10),
        _x("g", 152, 1),  # between steps 1 and 2: goes with step 2
        _x("ProfilerStep#2", 155, 45, cat="user_annotation"),
        _x("config:B", 156, 40, cat="user_annotation"),
        _x("b1", 160, 5),
        _x("ProfilerStep#3", 200, 60, cat="user_annotation"),
        _x("config:A", 201, 55, cat="user_annotation"),
        _x("a2", 210, 20),
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 7, "pid": 9, "tid": 1, "ts": 215},
        {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 7, "pid": 9, "tid": 1, "ts": 230,
         "bp": "e"},
        _x("cudaLaunchKernel", 250, 2, cat="cuda_runtime", args={"correlation": 5}),
        _x("ProfilerStep#4", 260, 40, cat="user_annotation"),
        _x("config:B", 261, 35, cat="user_annotation"),
        # launched in step 3 (A), runs during step 4: goes with A
        _x("kern", 265, 3, cat="kernel", pid=0, tid=7, args={"correlation": 5}),
        _x("gloo:op", 265, 10, tid=2),
        _x("b2", 270, 10),
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 310},
    ]  # fmt: skip
    return {"schemaVersion": 1, "distributedInfo": {"rank": 0}, "deviceProperties": [],
            "traceEvents": ev}  # fmt: skip


def _by_name(doc: dict) -> dict[str, dict]:
    return {e["name"]: e for e in doc["traceEvents"] if e.get("ph") != "M"}


def test_find_steps_labels_each_step_by_its_marker():
    steps = find_steps(_trace())
    assert [(s.number, s.label, s.start_ns, s.end_ns) for s in steps] == [
        (1, "A", 100_000, 150_000), (2, "B", 155_000, 200_000),
        (3, "A", 200_000, 260_000), (4, "B", 260_000, 300_000),
    ]  # fmt: skip


def test_split_keeps_a_and_shifts_later_steps_back_by_the_dropped_slots():
    out, stats = split_trace(_trace(), "A")
    assert stats.kept_steps == (1, 3) and stats.dropped_steps == (2, 4)
    assert (stats.events_in, stats.events_out, stats.markers_removed) == (23, 13, 4)
    assert stats.shifted_ns == 90_000  # slots of steps 2 (50 us) and 4 (40 us)
    ev = _by_name(out)
    assert sorted(ev) == sorted([
        "Iteration Start", "PyTorch Profiler (0)", "ProfilerStep#1", "a1", "ProfilerStep#3",
        "a2", "fwdbwd", "cudaLaunchKernel", "kern", "Record Window End",
    ])  # fmt: skip
    assert ev["ProfilerStep#1"]["ts"] == 100 and ev["a1"]["ts"] == 110  # before any drop
    assert ev["ProfilerStep#3"]["ts"] == 150.0 and ev["ProfilerStep#3"]["dur"] == 60
    assert ev["a2"]["ts"] == 160.0 and ev["cudaLaunchKernel"]["ts"] == 200.0
    assert ev["kern"]["ts"] == 215.0  # follows its launch, not its own time
    flows = [e["ts"] for e in out["traceEvents"] if e["name"] == "fwdbwd"]
    assert flows == [165.0, 180.0]
    assert ev["Record Window End"]["ts"] == 220.0
    assert (ev["PyTorch Profiler (0)"]["ts"], ev["PyTorch Profiler (0)"]["dur"]) == (90.0, 140.0)
    assert ev["Iteration Start"]["ts"] == 90
    assert out["distributedInfo"] == {"rank": 0} and out["schemaVersion"] == 1
    assert sum(e["ph"] == "M" for e in out["traceEvents"]) == 2


def test_split_keeps_b_with_the_gap_event_before_its_first_step():
    out, stats = split_trace(_trace(), "B")
    assert stats.kept_steps == (2, 4) and stats.events_out == 11
    ev = _by_name(out)
    assert sorted(ev) == sorted([
        "Iteration Start", "PyTorch Profiler (0)", "g", "ProfilerStep#2", "b1",
        "ProfilerStep#4", "gloo:op", "b2", "Record Window End",
    ])  # fmt: skip
    # slot 1 (100..150) dropped: everything of B moves back 50 us, after slot 3 another 60
    assert (ev["g"]["ts"], ev["ProfilerStep#2"]["ts"], ev["b1"]["ts"]) == (102.0, 105.0, 110.0)
    assert (ev["ProfilerStep#4"]["ts"], ev["b2"]["ts"], ev["gloo:op"]["ts"]) == (
        150.0,
        160.0,
        155.0,
    )
    assert ev["Record Window End"]["ts"] == 200.0
    assert (ev["PyTorch Profiler (0)"]["ts"], ev["PyTorch Profiler (0)"]["dur"]) == (90.0, 120.0)


def test_kept_steps_are_contiguous():
    for label in "AB":
        out, _ = split_trace(_trace(), label)
        steps = sorted(
            (e["ts"], e["ts"] + e["dur"]) for e in out["traceEvents"]
            if e["name"].startswith("ProfilerStep")
        )  # fmt: skip
        assert steps[1][0] == steps[0][1]


def test_steps_without_markers_are_refused():
    doc = _trace()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e["name"] != "config:B"]
    with pytest.raises(InputError, match="ProfilerStep#2 holds no config:LABEL"):
        find_steps(doc, where="t.json")
    with pytest.raises(InputError, match="no step of configuration 'C'"):
        split_trace(_trace(), "C")
    with pytest.raises(InputError, match="no traceEvents"):
        split_trace({"x": 1}, "A")


def test_split_run_writes_one_run_directory_per_configuration(tmp_path):
    src = tmp_path / "run"
    src.mkdir()
    ranks = []
    for r in range(2):
        write_trace(_trace(), src / f"rank{r}.kineto.json.gz")
        ranks.append({"rank": r, "kineto": f"rank{r}.kineto.json.gz", "et": None, "device": "cpu"})
    (src / "run.json").write_text(json.dumps({
        "format": "lumos.run", "version": 1, "world_size": 2, "parallel": {"pp": 2},
        "schedule": {"wait": 1, "warmup": 1, "active": 4}, "ranks": ranks,
    }))  # fmt: skip
    (src / "alternate.json").write_text(
        json.dumps(
            {
                "configs": {
                    "B": {"config": {"layers": 8}, "parallel": {"pp": 2, "num_microbatches": 4}}
                }
            }
        )
    )
    got = split_run(src, {"A": tmp_path / "a", "B": tmp_path / "b"})
    assert got["A"]["parallel"] == {"pp": 2} and got["A"]["alternate"]["kept_steps"] == [1, 3]
    assert got["B"]["parallel"] == {"pp": 2, "num_microbatches": 4}
    assert got["B"]["alternate"]["config"] == {"layers": 8}
    m = read_manifest(tmp_path / "b")
    assert m.data["schedule"]["active"] == 2 and len(m.ranks) == 2
    again = read_trace(m.ranks[1].kineto)
    names = [e["name"] for e in again["traceEvents"] if e["name"].startswith("ProfilerStep")]
    assert names == ["ProfilerStep#2", "ProfilerStep#4"]
