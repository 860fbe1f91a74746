"""The Perfetto file holds the recording and the replay side by side: per rank a ``measured``
process group (every task at its recorded time) and a ``predicted`` one (the replay), and the
critical path marked on the replay's tasks and drawn as a track of its own."""

from __future__ import annotations

import gzip
import json

import numpy as np

from lumos.graph.model import DepKind, TaskKind, WaitKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import replay, write_replay
from lumos.report.metrics import critical_path
from lumos.report.perfetto import to_chrome_trace, write_chrome_trace
from lumos.sim import simulate


def _graph():
    """Thread 1 launches gemm (100 ns, stream 7) and copy (10 ns, stream 8), then waits for
    stream 7 and runs aten::add. The path to the end: add <- sync <- gemm <- its launch; the
    second launch and the copy are off it. Recorded starts are given (the clock at 5000 ns)."""
    b = GraphBuilder()
    th, s7, s8 = b.thread(1), b.stream(7), b.stream(8)
    la = b.task(th, "cudaLaunchKernel", 5, TaskKind.RUNTIME)
    gemm = b.task(s7, "gemm", 100)
    b.edge(la, gemm, DepKind.LAUNCH, 13)
    lb = b.task(th, "cudaMemcpyAsync", 4, TaskKind.RUNTIME, gap_ns=1)
    copy = b.task(s8, "copy", 10, TaskKind.MEMCPY)
    b.edge(lb, copy, DepKind.LAUNCH, 6)
    sync = b.task(th, "cudaStreamSynchronize", 2, TaskKind.RUNTIME, gap_ns=1)
    b.wait(sync, WaitKind.STREAM, stream=s7)
    add = b.task(th, "aten::add", 10, gap_ns=3)
    b.annotate("ProfilerStep#1", th, la, add, ts_ns=4990, dur_ns=200)
    g = b.build()
    ts = np.array([5000, 5020, 5007, 5016, 5125, 5131])  # la, gemm, lb, copy, sync, add
    return g.replace(tasks=g.tasks.replace(ts_ns=ts)).validate()


def _by_pid(events, pid):
    return [e for e in events if e["pid"] == pid and e["ph"] == "X"]


def test_measured_and_predicted_groups_hold_each_task_at_its_recorded_and_simulated_time(
    tmp_path,
) -> None:
    g = _graph()
    r = simulate(g)
    write_chrome_trace(tmp_path / "t.json", g, r)
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert events == json.loads(json.dumps(to_chrome_trace(g, r)["traceEvents"]))
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {1000: "rank 0 predicted (replay)", 1001: "rank 0 measured (recorded)"}
    order = {e["pid"]: e["args"]["sort_index"] for e in events if e["name"] == "process_sort_index"}
    assert order == {1001: 0, 1000: 1}  # the recording just above the replay
    t = g.tasks
    measured = {e["args"]["task_idx"]: e for e in _by_pid(events, 1001) if e["cat"] != "step"}
    assert sorted(measured) == list(range(6))
    for i, e in measured.items():
        assert (e["ts"], e["dur"], e["name"]) == (t.ts_ns[i] / 1e3, t.dur_ns[i] / 1e3,
                                                   g.names[t.name_idx[i]])  # fmt: skip
        assert e["tid"] == [1, 7, 1, 8, 1, 1][i]
    step = [e for e in _by_pid(events, 1001) if e["cat"] == "step"]
    assert [(s["ts"], s["dur"]) for s in step] == [(4.99, 0.2)]  # the recorded span
    shift = 5000  # the replay starts where the recording started
    predicted = {e["args"]["task_idx"]: e for e in _by_pid(events, 1000)
                 if e["cat"] not in ("step", "op", "critical_path")}  # fmt: skip
    for i, e in predicted.items():
        start, end = int(r.start_ns[i]), int(r.end_ns[i])
        assert (e["ts"], e["dur"]) == ((start + shift) / 1e3, (end - start) / 1e3)
        assert e["args"]["recorded_ts_us"] == t.ts_ns[i] / 1e3


def test_the_critical_path_is_marked_on_exactly_its_tasks_and_drawn_as_a_track() -> None:
    g = _graph()
    r = simulate(g)
    cp = critical_path(r)
    assert sorted(cp.tasks.tolist()) == [0, 1, 4, 5]  # launch, gemm, sync, add
    events = to_chrome_trace(g, r)["traceEvents"]
    marked = {e["args"]["task_idx"] for e in _by_pid(events, 1000)
              if e["cat"] != "critical_path" and e["args"].get("critical_path")}  # fmt: skip
    assert marked == {0, 1, 4, 5}
    assert not any("critical_path" in e.get("args", {}) for e in _by_pid(events, 1001))
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e["name"] == "thread_name" and e["pid"] == 1000}  # fmt: skip
    assert threads == {1: "thread 1 (predicted)", 7: "GPU 0 stream 7 (predicted)",
                       8: "GPU 0 stream 8 (predicted)", 9: "critical path (predicted)"}  # fmt: skip
    track = [e for e in _by_pid(events, 1000) if e["cat"] == "critical_path"]
    assert all(e["tid"] == 9 and e["args"]["critical_path"] is True for e in track)
    # in path order, from each task's simulated start, the part of it on the path
    assert [e["args"]["task_idx"] for e in track] == [0, 1, 4, 5]
    assert [(e["ts"], e["dur"]) for e in track] == [
        ((int(r.start_ns[i]) + 5000) / 1e3, int(ns) / 1e3)
        for i, ns in zip(cp.tasks[::-1].tolist(), cp.task_ns[::-1].tolist(), strict=True)
    ]
    assert sum(e["dur"] for e in track) * 1e3 == sum(cp.task_ns.tolist())


def test_a_what_if_keeps_the_recording_as_measured(tmp_path) -> None:
    """``lumos replay --scale gemm=0.5``: the measured group shows gemm's recorded 100 ns, the
    predicted one the 50 ns replayed; ``--perfetto NAME.json.gz`` writes the same, gzipped."""
    rep = replay(_graph(), scale=[("gemm", 0.5)])
    paths = write_replay(rep, tmp_path / "a")
    gz = write_replay(rep, tmp_path / "b", perfetto="replay.perfetto.json.gz")["perfetto"]
    text = paths["perfetto"].read_bytes()
    assert gzip.decompress(gz.read_bytes()) == text
    events = json.loads(text)["traceEvents"]
    gemm = {e["pid"]: e["dur"] for e in events if e["name"] == "gemm" and e["cat"] == "kernel"}
    assert gemm == {1001: 0.1, 1000: 0.05}


def test_two_ranks_get_two_groups_each_and_the_path_crosses_them() -> None:
    from tests.sim.test_engine import two_rank_collective

    r = simulate(two_rank_collective(10, 50, 100, 60))
    events = to_chrome_trace(Workload(r.graphs), r)["traceEvents"]
    names = sorted(e["args"]["name"] for e in events if e["name"] == "process_name")
    assert names == ["rank 0 measured (recorded)", "rank 0 predicted (replay)",
                     "rank 1 measured (recorded)", "rank 1 predicted (replay)"]  # fmt: skip
    cp = critical_path(r)
    expected = {(int(gi), int(t) - int(r.task_offsets[gi]))
                for t, gi in zip(cp.tasks.tolist(), cp.graph_of.tolist(), strict=True)}  # fmt: skip
    marked = {(e["args"]["rank"], e["args"]["task_idx"]) for e in events
              if e["ph"] == "X" and e["cat"] != "critical_path"
              and e["args"].get("critical_path")}  # fmt: skip
    assert marked == expected and {gi for gi, _ in expected} == {0, 1}
