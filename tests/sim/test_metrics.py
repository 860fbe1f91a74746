"""Metrics: interval algebra, SM utilization bins, critical path, Perfetto export."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos.graph.model import CommType, DepKind, TaskKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.report.metrics import (
    breakdown,
    critical_path,
    graph_breakdown,
    graph_sm_utilization,
    interval_union,
    sm_utilization,
)
from lumos.report.perfetto import to_chrome_trace, write_chrome_trace
from lumos.sim import simulate

from .test_engine import sync_graph, two_rank_collective


def test_interval_union_merges_touching_and_nested() -> None:
    s, e = interval_union(np.array([0, 2, 10, 10, 30]), np.array([5, 4, 20, 12, 30]))
    assert (s.tolist(), e.tolist()) == ([0, 10], [5, 20])
    s, e = interval_union(np.array([0, 5]), np.array([5, 9]))
    assert (s.tolist(), e.tolist()) == ([0], [9])


def test_breakdown_exact_parts() -> None:
    # compute [0,10) [20,30); comm [5,25); window [0, 40)
    b = breakdown(np.array([0, 20, 5]), np.array([10, 30, 25]), np.array([0, 0, 1], bool), 0, 40)
    assert b.to_dict() == {
        "exposed_compute_ns": 10,
        "overlapped_ns": 10,
        "exposed_comm_ns": 10,
        "other_ns": 10,
    }
    clipped = breakdown(
        np.array([0, 20, 5]), np.array([10, 30, 25]), np.array([0, 0, 1], bool), 8, 22
    )
    assert clipped.window_ns == 14 and clipped.overlapped_ns == 4 and clipped.exposed_comm_ns == 10


intervals = st.lists(
    st.tuples(st.integers(-50, 200), st.integers(0, 80), st.booleans()), max_size=30
)


@settings(max_examples=200, deadline=None)
@given(intervals, st.integers(-20, 100), st.integers(0, 150))
def test_breakdown_parts_sum_to_window(rows: list[tuple[int, int, bool]], t0: int, w: int) -> None:
    s = np.array([r[0] for r in rows], dtype=np.int64)
    e = s + np.array([r[1] for r in rows], dtype=np.int64)
    c = np.array([r[2] for r in rows], dtype=bool)
    b = breakdown(s, e, c, t0, t0 + w)
    parts = (b.exposed_compute_ns, b.overlapped_ns, b.exposed_comm_ns, b.other_ns)
    assert all(p >= 0 for p in parts)
    assert sum(parts) == w
    # brute force on a unit grid
    grid = np.arange(t0, t0 + w)
    cov_c = ((s[~c, None] <= grid) & (grid < e[~c, None])).any(axis=0)
    cov_m = ((s[c, None] <= grid) & (grid < e[c, None])).any(axis=0)
    assert b.overlapped_ns == int((cov_c & cov_m).sum())
    assert b.exposed_compute_ns == int((cov_c & ~cov_m).sum())
    util = sm_utilization(s, e, t0, t0 + w, bin_ns=7)
    if w:
        busy = (cov_c | cov_m).astype(float)
        expect = [busy[i : i + 7].mean() for i in range(0, w, 7)]
        assert np.allclose(util, expect)


def test_sm_utilization_bins() -> None:
    u = sm_utilization(np.array([0, 1_500_000]), np.array([500_000, 2_000_000]), 0, 2_500_000)
    assert u.tolist() == [0.5, 0.5, 0.0]


def test_breakdown_of_trace_and_replay_from_a_graph() -> None:
    g = two_rank_collective(10, 50, 100, 60).graphs[1]
    r = simulate(g)
    rec = graph_breakdown(g, g.tasks.ts_ns, g.tasks.ts_ns + g.tasks.dur_ns, 0, 200)
    sim = graph_breakdown(g, r.start_ns, r.end_ns, 0, 200)
    assert sim.exposed_compute_ns == 57 and sim.exposed_comm_ns == 60
    assert sum(rec.to_dict().values()) == 200
    assert graph_sm_utilization(g, r.start_ns, r.end_ns, 0, 117, bin_ns=117).tolist() == [1.0]


def test_critical_path_of_a_stream_sync() -> None:
    r = simulate(sync_graph())
    cp = critical_path(r)
    assert cp.tasks.tolist() == [3, 2, 1, 0]  # add <- sync <- kernel <- launch
    assert cp.kind_ns["kernel"] == 100 and cp.kind_ns["runtime"] == 7
    assert cp.kind_ns["cpu_op"] == 10 and cp.kind_ns["delay"] == 16
    assert sum(cp.kind_ns.values()) == cp.length_ns == r.makespan_ns
    assert abs(sum(cp.share.values()) - 1.0) < 1e-12
    # 13 ns launch latency + 3 ns CPU gap before aten::add; the sync waited with no gap
    assert cp.delay_ns["launch"] == 13 and cp.delay_ns["intra_thread"] == 3
    assert sum(cp.delay_ns.values()) == cp.kind_ns["delay"]


def test_critical_path_crosses_ranks_through_a_collective() -> None:
    r = simulate(two_rank_collective(10, 50, 100, 60))
    cp = critical_path(r)
    assert sum(cp.kind_ns.values()) == r.makespan_ns == 117
    # ends with rank 1's compute (the late arrival) whichever rank's 'after' ends last
    assert cp.graph_of[-1] == 1 and cp.kind_ns["comm"] == 60


def test_perfetto_export_is_deterministic_and_aligned(tmp_path) -> None:
    g = sync_graph().replace(
        tasks=sync_graph().tasks.replace(ts_ns=np.array([1000, 1018, 1006, 1123]))
    )
    r = simulate(g)
    trace = to_chrome_trace(g, r)
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == 1000
          and e["cat"] not in ("step", "op", "critical_path")]  # fmt: skip
    assert [e["name"] for e in xs] == [
        "cudaLaunchKernel",
        "cudaStreamSynchronize",
        "aten::add",
        "gemm",
    ]
    assert xs[0]["ts"] == 1.0 and xs[3]["ts"] == 1.018 and xs[3]["dur"] == 0.1
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"thread 1 (predicted)", "GPU 0 stream 7 (predicted)", "thread 1 (measured)",
                     "GPU 0 stream 7 (measured)", "critical path (predicted)"}  # fmt: skip
    write_chrome_trace(tmp_path / "a.json", g, r)
    write_chrome_trace(tmp_path / "b.json", g, r)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert json.loads((tmp_path / "a.json").read_text())["displayTimeUnit"] == "ns"


def test_perfetto_multi_rank_pids_do_not_collide() -> None:
    r = simulate(two_rank_collective(10, 50, 100, 60))
    trace = to_chrome_trace(None, r)
    pids = {e["pid"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert pids == {1000, 1001, 2000, 2001}  # per rank: predicted, measured


def test_workload_of_one_graph_and_launch_only() -> None:
    b = GraphBuilder()
    th, st_ = b.thread(1), b.stream(2)
    b.edge(b.task(th, "l", 1, TaskKind.RUNTIME), b.task(st_, "k", 1), DepKind.LAUNCH)
    assert simulate(Workload((b.build(),))).makespan_ns == 2
    assert CommType.SEND == 100


def test_replay_summary_is_json_and_fits_the_html_report() -> None:
    from lumos.report.html import render_report, validate_replay
    from lumos.report.metrics import replay_summary

    g = sync_graph()
    r = simulate(g)
    summary = replay_summary(r)
    text = json.dumps(summary, sort_keys=True, allow_nan=False)
    assert json.loads(text) == summary
    assert summary["steps"] == [
        {"name": "ProfilerStep#1", "measured_ns": 200, "predicted_ns": 143, "error": -0.285,
         "measured_peak_memory_bytes": None, "predicted_peak_memory_bytes": None}  # no memory
    ]  # fmt: skip
    assert summary["window_ns"] == {"measured": [0, 200], "predicted": [-4, 139]}
    assert summary["breakdown"]["predicted"]["exposed_compute_ns"] == 100
    assert summary["critical_path"]["kernel"] == 100 / 133
    validate_replay(summary)
    assert "ProfilerStep#1" in render_report(summary)


def test_perfetto_file_is_the_dict_streamed_and_gz_by_extension(tmp_path) -> None:
    import gzip

    r = simulate(two_rank_collective(10, 50, 100, 60))
    expected = json.dumps(to_chrome_trace(None, r), separators=(",", ":"), sort_keys=True)
    write_chrome_trace(tmp_path / "t.json", None, r)
    write_chrome_trace(tmp_path / "t.json.gz", None, r)
    assert (tmp_path / "t.json").read_text() == expected
    raw = (tmp_path / "t.json.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b" and gzip.decompress(raw).decode() == expected
