"""Numbers a user trusts in the replay outputs (issue #14's wrong numbers, on the traces where
they were found)."""

from __future__ import annotations

import json
import re

from tests.realdata import trace

from lumos.cli.main import main
from lumos.replay import build_workload, replay
from lumos.report.perfetto import to_chrome_trace


def test_multi_rank_perfetto_lines_up_with_the_recording():
    """The 8-rank DLRM run: each rank's replay starts where its recording starts (rank 7 began
    7.5 ms after rank 0; it used to be drawn at +15 ms, its offset counted twice)."""
    w, _ = build_workload([trace("dlrm_kineto_8rank")], workers=1)
    rep = replay(w)
    doc = to_chrome_trace(None, rep.result)
    first_us: dict[int, float] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e["dur"] > 0 and e["cat"] not in ("step", "op"):  # tasks
            rank = int(e["pid"]) // 1000 - 1
            first_us[rank] = min(first_us.get(rank, float("inf")), e["ts"])
    for g in w.graphs:
        recorded_first = min(g.tasks.ts_ns[g.tasks.dur_ns > 0]) / 1e3
        assert abs(first_us[g.rank] - recorded_first) < 1.0, g.rank


def test_scale_changes_the_prediction_not_the_measurement(tmp_path):
    """``--scale nccl=0.5`` on df_index_resolver halved the *measured* exposed communication."""
    path = str(trace("v100_stream_wait_event"))
    assert main(["replay", path, "-o", str(tmp_path / "a")]) == 0
    assert main(["replay", path, "-o", str(tmp_path / "b"), "--scale", "nccl=0.5"]) == 0
    a = json.loads((tmp_path / "a" / "replay.json").read_text())
    b = json.loads((tmp_path / "b" / "replay.json").read_text())
    assert a["breakdown"]["measured"] == b["breakdown"]["measured"]
    assert [s["measured_ns"] for s in a["steps"]] == [s["measured_ns"] for s in b["steps"]]
    assert a["breakdown"]["predicted"] != b["breakdown"]["predicted"]


def test_each_rank_has_its_own_critical_path():
    """A multi-rank summary gives each rank the critical path to its own end."""
    w, _ = build_workload([trace("dlrm_kineto_8rank")], workers=1)
    rep = replay(w)
    totals = [sum(s["critical_path_ns"].values()) for s in rep.summaries]
    ends = [int(rep.result.ends(gi).max()) for gi in range(len(w.graphs))]
    assert totals == ends
    assert len(set(totals)) > 1


def test_info_says_unknown_when_collective_sizes_are_unknown(capsys):
    """df_index_resolver's 2,020 all-reduces carry no size: not "(0.0 MB)"."""
    assert main(["info", str(trace("v100_stream_wait_event"))]) == 0
    out = capsys.readouterr().out
    assert "all_reduce x2020 (size unknown)" in out
    assert "0.0 MB" not in out


def test_dot_labels_break_lines_the_dot_way(tmp_path):
    """Graphviz reads ``\\n`` inside a label as a line break; ``\\\\n`` showed a backslash."""
    from tests.realdata import astra_micro, realdata

    out = tmp_path / "g.dot"
    src = realdata(astra_micro("all_reduce", 4, rank=0))
    assert main(["chakra", "visualize", str(src), "-o", str(out)]) == 0
    text = out.read_text()
    assert '[label="0: all_reduce_4npus_1MB\\nCOMM_COLL_NODE 0 us"]' in text
    assert "\\\\n" not in text


def test_chakra_tools_say_a_kineto_trace_is_one(tmp_path, capsys):
    """``chakra validate/stats/jsonize/visualize`` on a Kineto ``.json.gz`` blamed a truncated
    protobuf; ``timeline`` reads ETs too."""
    path = str(trace("cuda_event_sync"))
    for tool, out in (("validate", None), ("stats", None), ("jsonize", "k.json"),
                      ("visualize", "k.dot"), ("timeline", "t.json")):  # fmt: skip
        assert main(["chakra", tool, path, *(["-o", str(tmp_path / out)] if out else [])]) == 1
        err = capsys.readouterr().err
        assert "this is a Kineto trace, not a Chakra ET" in err, tool
        assert not out or not (tmp_path / out).exists()


def test_a_gpu_trace_without_device_properties_is_not_called_cpu(tmp_path, capsys):
    events = [
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5,
         "pid": 1, "tid": 1, "args": {"correlation": 7}},
        {"ph": "X", "cat": "Kernel", "name": "sgemm", "ts": 20, "dur": 50, "pid": 0,
         "tid": "stream 7", "args": {"correlation": 7, "device": 0, "stream": 7}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert main(["info", str(path)]) == 0
    assert "device GPU (model not in the trace)" in capsys.readouterr().out


def test_chakra_timeline_says_what_it_could_not_schedule(tmp_path, capsys):
    """Upstream's chakra.0.et has a dependency cycle (node 3317's ctrl dep is 3318, whose data
    dep is 3317): 1,381 of 3,664 nodes can be scheduled. It used to say only 'wrote'."""
    path = str(trace("chakra_pytorch_converted"))
    out = str(tmp_path / "t.json")
    assert main(["chakra", "timeline", path, "-o", out]) == 0
    text = capsys.readouterr().out
    assert "scheduled 1381 of 3664 nodes" in text
    assert "2283 nodes never became ready" in text and "3318 -> 3317" in text
    assert main(["chakra", "timeline", path, "-o", out, "--strict"]) == 1


def test_the_report_of_an_8_rank_replay_shows_every_rank(tmp_path):
    """It showed rank 0 only, unlabelled, with links to paths inside the tar archive."""
    out = tmp_path / "r"
    assert main(["replay", str(trace("dlrm_kineto_8rank")), "-o", str(out), "--workers", "1"]) == 0
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    for rank in range(8):
        assert f"<h2>rank {rank}: Per-step time</h2>" in html
        assert html.count(f'<section data-rank="{rank}">') == 4  # the selector shows or hides
        assert f'<a href="#rank={rank}">{rank}</a>' in html  # the ranks table links to them
    # one rank at a time, starting on the slowest (rank 1 here); "all ranks" shows every one
    select = re.search(r'<select id="rank-select" data-default="(\d+)">(.*?)</select>', html)
    assert select is not None and select.group(1) == "1"
    options = re.findall(r'<option value="([^"]+)">([^<]+)</option>', select.group(2))
    assert options == [("all", "all ranks")] + [
        (str(r), f"rank {r}" + (" (slowest)" if r == 1 else "")) for r in range(8)
    ]
    assert "Ranks (all ranks, slowest first)" in html
    assert "::" not in html.split("<h2>Traces</h2>")[1]
    # an archive is named, not linked: Perfetto cannot open a path inside one
    assert "<li>measured: dlrm_kineto.tar.gz (8 traces inside; extract one to open it in " in html
    assert 'dlrm_kineto.tar.gz"' not in html
