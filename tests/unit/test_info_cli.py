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


def test_info_of_a_job_prints_its_summary_first_and_one_line_per_rank(capsys):
    """DLRM's 8 ranks (issue #32: 104 lines, no job summary): the step's slowest and fastest
    rank with their spread, the collectives every rank shares, each note with how many ranks
    carry it, then one line per rank; ``--all-ranks`` adds every rank's detail."""
    assert main(["info", str(trace("dlrm_kineto_8rank"))]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == [
        "job: 8 ranks of world 8, backend nccl, device Tesla V100-SXM2-32GB",
        "  ProfilerStep#10: slowest rank 1 19.901 ms, fastest rank 7 12.509 ms "
        "(spread 59.1 %, 8 of 8 ranks)",
        "  collectives (every rank): all_reduce x3 (2.5 MB), all_to_all x5 (0.1 MB)",
        "  note (8 of 8 ranks): no cuda_sync events: inter-stream dependencies inferred from "
        "runtime calls",
        "  rank  events  kernels  steps",
    ]
    assert lines[5:13] == [
        f"  {r:>4}  {e:>6}  {k:>7}  {ms} ms"
        for r, e, k, ms in [(0, 3290, 245, "14.455"), (1, 3424, 310, "19.901"),
                            (2, 3268, 246, "13.017"), (3, 3474, 315, "19.313"),
                            (4, 3310, 251, "17.979"), (5, 3250, 245, "17.797"),
                            (6, 3272, 246, "13.091"), (7, 3250, 246, "12.509")]
    ]  # fmt: skip
    assert len(lines) == 14 and "lumos info --all-ranks" in lines[13]
    assert main(["info", str(trace("dlrm_kineto_8rank")), "--all-ranks"]) == 0
    detail = capsys.readouterr().out.splitlines()
    assert detail[:14] == lines and len(detail) == 14 + 104
