"""Executed against source: step times and the time per op class of a Kineto trace."""

from __future__ import annotations

import json
from pathlib import Path

from lumos.bench.compare import compare_classes, compare_steps, step_classes
from lumos.ingest.kineto import read_kineto


def _ev(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur,
            "args": {}}  # fmt: skip


def _trace(tmp_path: Path) -> Path:
    events = [
        _ev("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _ev("forward", 5, 900, cat="user_annotation"),  # a wrapper: its children count
        _ev("aten::linear", 10, 100),
        _ev("aten::addmm", 20, 80),  # inside linear: the same class, counted once
        _ev("aten::add", 200, 50),
        _ev("aten::copy_", 210, 10),  # another class inside add: counted as copy
        _ev("autograd::engine::evaluate_function: MmBackward0", 300, 100),
        _ev("aten::mm", 310, 80),
        _ev("aten::fill_", 450, 20),
        _ev("gloo:all_reduce", 500, 200, tid=2),
        _ev("ProfilerStep#2", 1000, 1000, cat="user_annotation"),
        _ev("aten::add", 1100, 50),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_time_per_class_in_each_step(tmp_path: Path) -> None:
    got = step_classes(read_kineto(_trace(tmp_path)))
    assert got["ProfilerStep#1"]["dur_ns"] == 1_000_000
    one = {c: ns for c, ns in got["ProfilerStep#1"]["classes"].items() if ns}
    assert one == {"gemm": 180_000, "elementwise": 70_000, "copy": 10_000,
                   "communication": 200_000}  # fmt: skip
    two = {c: ns for c, ns in got["ProfilerStep#2"]["classes"].items() if ns}
    assert two == {"elementwise": 50_000}


def test_compare_steps_and_classes() -> None:
    got = compare_steps({"S#1": 100, "S#2": 200, "S#3": None}, {"S#1": 110, "S#2": 150, "S#3": 9})
    assert got["steps"][1] == {"name": "S#2", "source_ns": 200, "executed_ns": 150,
                               "change": -0.25}  # fmt: skip
    assert got["steps"][2]["change"] is None
    assert got["median"] == {"source_ns": 150, "executed_ns": 130, "change": -0.1333}
    src = [{"S#1": {"dur_ns": 100, "classes": {"gemm": 40, "elementwise": 10}},
            "S#2": {"dur_ns": 100, "classes": {"gemm": 60, "elementwise": 30}}}]  # fmt: skip
    ex = [{"S#1": {"dur_ns": 90, "classes": {"gemm": 45, "elementwise": 10}},
           "S#2": {"dur_ns": 90, "classes": {"gemm": 55, "elementwise": 10}},
           "S#9": {"dur_ns": 90, "classes": {"gemm": 1000, "elementwise": 0}}}]  # fmt: skip
    rows = compare_classes(src, ex)  # S#9 is not in the source: left out
    assert rows == [
        {"class": "gemm", "source_ns": 50, "executed_ns": 50, "change": 0.0},
        {"class": "elementwise", "source_ns": 20, "executed_ns": 10, "change": -0.5},
    ]


def test_waiting_for_the_other_ranks_is_told_apart_from_transfers() -> None:
    """The straggler run (tests/data/gloo_ddp_2rank_straggler): rank 1 is late, rank 0's
    gloo:all_reduce spans hold the wait for it. Expected: each rank's wait is the last rank's
    start of each collective less its own, from the raw events; transfers keep the rest."""
    import gzip

    from lumos.bench.compare import split_waiting

    data = Path(__file__).parents[1] / "data" / "gloo_ddp_2rank_straggler"
    raw = []
    for r in (0, 1):
        events = json.loads(gzip.decompress((data / f"rank{r}.kineto.json.gz").read_bytes()))
        events = events["traceEvents"]
        steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
        spans = {s["name"]: sorted(e["ts"] for e in events if e.get("name") == "gloo:all_reduce"
                                   and s["ts"] <= e["ts"] < s["ts"] + s["dur"])
                 for s in steps}  # fmt: skip
        raw.append(spans)
    ranks = [step_classes(read_kineto(data / f"rank{r}.kineto.json.gz")) for r in (0, 1)]
    total = [{n: s["classes"]["communication"] for n, s in rk.items()} for rk in ranks]
    split_waiting(ranks)
    for name in ("ProfilerStep#2", "ProfilerStep#3"):
        assert len(raw[0][name]) == len(raw[1][name]) == 4
        last = [max(a, b) for a, b in zip(raw[0][name], raw[1][name], strict=True)]
        for r in (0, 1):
            want_us = sum(t - s for t, s in zip(last, raw[r][name], strict=True))
            got = ranks[r][name]["classes"]
            assert abs(got["comm_wait"] - want_us * 1000) <= 4 * 1000  # us in the JSON, ns here
            assert got["communication"] + got["comm_wait"] == total[r][name]
    # rank 1 arrived last at every collective of step 3: it waited for nobody, rank 0 for it
    assert ranks[1]["ProfilerStep#3"]["classes"]["comm_wait"] == 0
    assert ranks[0]["ProfilerStep#3"]["classes"]["comm_wait"] > 100_000_000
