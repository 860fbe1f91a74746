"""`lumos info --json`: the machine-readable contract other tools read."""

from __future__ import annotations

import gzip
import json

from tests.realdata import TRACES, extract_archive, trace

from lumos.cli.main import main

REQUIRED = {"path", "rank", "world_size", "device", "num_events", "steps", "streams", "collectives"}


def test_info_json_nccl_trace(capsys):
    assert main(["info", "--json", str(trace("nccl_a100"))]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= REQUIRED
    assert [s["name"] for s in out["steps"]] == [
        "ProfilerStep#4",
        "ProfilerStep#5",
        "ProfilerStep#6",
    ]
    assert {"device", "stream", "num_kernels"} <= set(out["streams"][0])
    assert out["collectives"] == {"all_reduce": 15, "broadcast": 6}


def test_info_on_a_directory_and_archive(capsys, tmp_path):
    archive = trace("dlrm_kineto_8rank")
    folder = extract_archive(TRACES["dlrm_kineto_8rank"], tmp_path / "dlrm")  # never in the tree
    for where in (archive, folder):
        assert main(["info", "--json", str(where)]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert sorted(r["rank"] for r in rows) == list(range(8))
        assert all(r["world_size"] == 8 for r in rows)


def test_info_human_output_mentions_flags(capsys):
    assert main(["info", str(trace("nccl_a100"))]) == 0
    out = capsys.readouterr().out
    assert "ProfilerStep#5" in out and "no cuda_sync events" in out


def test_info_recognizes_each_kind_by_content(capsys, tmp_path):
    chakra_gz = tmp_path / "chakra.0.et.gz"  # gzipped here: info sniffs the content inside
    chakra_gz.write_bytes(gzip.compress(trace("chakra_pytorch_converted").read_bytes(), mtime=0))
    paths = [chakra_gz, trace("et_1.1.0"), trace("cuda_event_sync")]
    assert main(["info", "--json", *map(str, paths)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["kind"] for r in rows] == ["chakra", "pytorch_et", "kineto"]
    assert rows[0]["nodes"] == 3664
    assert rows[0]["nodes_by_type"] == {"COMP_NODE": 3643, "COMM_COLL_NODE": 21}


def test_info_example_is_the_bundled_two_rank_run(capsys):
    """``--example``: lumos's own recording (both ranks), summarized without any other file."""
    assert main(["info", "--json", "--example"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["rank"] for r in rows] == [0, 1]
    for r in rows:
        assert set(r) >= REQUIRED
        assert r["world_size"] == 2 and r["backend"] == "gloo" and r["streams"] == []
        assert [s["name"] for s in r["steps"]] == [f"ProfilerStep#{k}" for k in (2, 3, 4)]
        assert r["collectives"] == {"all_reduce": 6}
    assert main(["info", "--example"]) == 0
    out = capsys.readouterr().out
    assert "rank 0/2  backend gloo  device CPU" in out and "ProfilerStep#3" in out
