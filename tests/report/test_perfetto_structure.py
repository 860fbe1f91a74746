"""The replay's Perfetto trace keeps the recording's structure: steps and parent ops as spans,
launch arrows, and arrows where the critical path changes track."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
from tests.realdata import trace

from lumos.replay import build_workload, replay
from lumos.report.perfetto import to_chrome_trace


def _nesting_errors(events) -> int:
    """Spans on one track that overlap without nesting (Perfetto draws them wrongly), beyond
    half a microsecond: timestamps are float microseconds from the epoch (1.7e15 us in some
    traces), which keep only about a quarter of a microsecond."""
    tracks = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[e["pid"], e["tid"]].append((e["ts"], -e["dur"], e["ts"] + e["dur"]))
    bad = 0
    for spans in tracks.values():
        spans.sort()
        open_ends: list[float] = []
        for ts, _neg, end in spans:
            while open_ends and open_ends[-1] <= ts + 0.5:
                open_ends.pop()
            bad += bool(open_ends and end > open_ends[-1] + 0.5)
            open_ends.append(end)
    return bad


@pytest.mark.parametrize(
    ("name", "steps", "ops", "launches"),
    [("cuda_event_sync", 1, 8, 5), ("nccl_a100", 3, 8382, 3774)],
)
def test_steps_ops_and_launches(name, steps, ops, launches):
    w, _ = build_workload([trace(name)], workers=1)
    rep = replay(w)
    every = to_chrome_trace(None, rep.result)["traceEvents"]
    ev = [e for e in every if e["pid"] % 1000 == 0]  # the replay's group; 1001: the recording
    count = Counter((e["ph"], e.get("cat")) for e in ev)
    assert (count["X", "step"], count["X", "op"]) == (steps, ops)
    measured = Counter((e["ph"], e.get("cat")) for e in every if e["pid"] % 1000 == 1)
    assert (measured["X", "step"], measured["X", "op"]) == (steps, ops)  # as recorded
    assert count["s", "launch"] == count["f", "launch"] == launches
    assert count["s", "critical_path"] == count["f", "critical_path"] > 0
    step_us = [e["dur"] for e in ev if e.get("cat") == "step"]
    assert step_us == [s["predicted_ns"] / 1e3 for s in rep.summaries[0]["steps"]]
    assert _nesting_errors(ev) == 0
    assert _nesting_errors(every) == 0
    ids = Counter(e["id"] for e in ev if e["ph"] in "sf")
    assert set(ids.values()) == {2}  # every arrow has both ends


def test_critical_path_arrows_cross_ranks():
    """The 8-rank DLRM: the path to the last task waits for rank 7 at a collective."""
    w, _ = build_workload([trace("dlrm_kineto_8rank")], workers=1)
    ev = to_chrome_trace(None, replay(w).result)["traceEvents"]
    ends: dict[int, dict[str, int]] = defaultdict(dict)
    for e in ev:
        if e.get("cat") == "critical_path" and e["ph"] in "sf":
            ends[e["id"]][e["ph"]] = e["pid"] // 1000 - 1
    assert any(v["s"] != v["f"] for v in ends.values())
    assert _nesting_errors(ev) == 0


def test_microseconds_are_round_to_3_decimals_everywhere() -> None:
    """The vectorized ``us_list`` gives exactly ``round(ns / 1000, 3)`` (the old per-value form)
    for durations, relative times, epoch times and the range in between."""
    from lumos.report import perfetto_structure

    rng = np.random.default_rng(0)
    parts = [rng.integers(-(10**12), 10**12, 20_000)]
    for lo, hi in [(2**49, 2**51), (2**50, 1000 * 2**50), (1000 * 2**50 - 10**6, 2**62)]:
        parts.append(rng.integers(lo, hi, 20_000))
    parts.append(np.array([0, 1, -1, 999, 1000, 1001, 2**50 - 1, 2**50, 1000 * 2**50]))
    ns = np.concatenate(parts).astype(np.int64)
    expected = [round(v / 1000.0, 3) for v in ns.tolist()]
    assert perfetto_structure.us_list(ns) == expected
    assert [perfetto_structure._us(v) for v in ns.tolist()] == expected
