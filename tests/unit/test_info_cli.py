"""`lumos info --json`: the machine-readable contract other tools read."""

from __future__ import annotations

import json

from tests.conftest import DATA

from lumos.cli.main import main

REQUIRED = {"path", "rank", "world_size", "device", "num_events", "steps", "streams", "collectives"}


def test_info_json_example(capsys):
    assert main(["info", "--json", "--example"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= REQUIRED
    assert [s["name"] for s in out["steps"]] == [
        "ProfilerStep#4",
        "ProfilerStep#5",
        "ProfilerStep#6",
    ]
    assert {"device", "stream", "num_kernels"} <= set(out["streams"][0])
    assert out["collectives"] == {"all_reduce": 15, "broadcast": 6}


def test_info_on_a_directory_and_archive(capsys):
    assert main(["info", "--json", str(DATA / "link_dlrm_8rank" / "dlrm_kineto.tar.gz")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["rank"] for r in rows) == list(range(8))
    assert all(r["world_size"] == 8 for r in rows)


def test_info_human_output_mentions_flags(capsys):
    assert main(["info", "--example"]) == 0
    out = capsys.readouterr().out
    assert "ProfilerStep#5" in out and "no cuda_sync events" in out


def test_info_recognizes_each_kind_by_content(capsys):
    paths = [
        DATA / "chakra_pytorch_converted/chakra.0.et.gz",
        DATA / "et_schema_versions/resnet_2gpu_et.json.gz",
        DATA / "cuda_event_sync/event_sync_trace.json.gz",
    ]
    assert main(["info", "--json", *map(str, paths)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["kind"] for r in rows] == ["chakra", "pytorch_et", "kineto"]
    assert rows[0]["nodes"] == 3664
    assert rows[0]["nodes_by_type"] == {"COMP_NODE": 3643, "COMM_COLL_NODE": 21}
