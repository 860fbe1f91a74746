"""The run directory's rank records, run.json merging, and read_manifest's errors."""

from __future__ import annotations

import json

import pytest

from lumos.collect import kineto_name, read_manifest, write_manifest
from lumos.collect.manifest import build_manifest, et_name, write_rank_record
from lumos.errors import InputError, NoTracesError


def _fake_rank(run_dir, rank, world_size=2, et=True, threads=None):
    (run_dir / kineto_name(rank)).write_bytes(b"{}")
    if et:
        (run_dir / et_name(rank)).write_text("{}")
    write_rank_record(
        run_dir,
        {
            "rank": rank, "world_size": world_size, "backend": "gloo", "device_type": "cpu",
            "device": "cpu", "torch_version": "2.13.0", "host": "h", "pid": 100 + rank,
            "parallel": {"dp": world_size}, "schedule": {"wait": 1, "warmup": 1, "active": 2},
            "kineto": kineto_name(rank), "et": et_name(rank) if et else None,
            "argv": ["train.py"], **({"intra_op_threads": threads} if threads else {}),
        },
    )  # fmt: skip


def test_merge_two_ranks(tmp_path):
    for r in (1, 0):
        _fake_rank(tmp_path, r)
    path = write_manifest(tmp_path, command=["torchrun", "train.py"], exit_code=0)
    data = json.loads(path.read_text())
    assert data["format"] == "lumos.run" and data["version"] == 1
    assert data["world_size"] == 2 and data["complete"] is True
    assert data["backend"] == "gloo" and data["device"] == "cpu"
    assert data["parallel"] == {"dp": 2} and data["execution_trace"] is True
    assert data["command"] == ["torchrun", "train.py"] and data["exit_code"] == 0
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    m = read_manifest(tmp_path)
    assert m.complete and m.world_size == 2
    assert [r.kineto for r in m.ranks] == [tmp_path / kineto_name(0), tmp_path / kineto_name(1)]
    assert m.ranks[1].et == tmp_path / et_name(1)
    assert read_manifest(path).ranks == m.ranks


def test_intra_op_threads_are_carried_per_rank_and_checked(tmp_path):
    _fake_rank(tmp_path, 0, threads=1)
    _fake_rank(tmp_path, 1)  # recorded before lumos recorded threads
    m = read_manifest(write_manifest(tmp_path))
    assert [r.intra_op_threads for r in m.ranks] == [1, None]
    data = json.loads((tmp_path / "run.json").read_text())
    data["ranks"][0]["intra_op_threads"] = 0
    (tmp_path / "run.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="rank 0's intra_op_threads must be a positive integer"):
        read_manifest(tmp_path)


def test_manifest_is_deterministic(tmp_path):
    for r in (0, 1):
        _fake_rank(tmp_path, r)
    a = write_manifest(tmp_path).read_bytes()
    assert write_manifest(tmp_path).read_bytes() == a


def test_missing_rank_marks_incomplete(tmp_path):
    _fake_rank(tmp_path, 0, world_size=3)
    _fake_rank(tmp_path, 2, world_size=3)
    data = build_manifest(tmp_path)
    assert data["complete"] is False
    assert not read_manifest(write_manifest(tmp_path)).complete


def test_no_records_is_no_traces_error(tmp_path):
    with pytest.raises(NoTracesError, match="no rank records"):
        write_manifest(tmp_path)
    with pytest.raises(NoTracesError, match="does not exist"):
        write_manifest(tmp_path / "nope")


def test_read_manifest_errors_name_the_file(tmp_path):
    with pytest.raises(InputError, match=r"run\.json: no such file"):
        read_manifest(tmp_path)
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(InputError, match=r"run\.json: not valid JSON"):
        read_manifest(tmp_path)
    (tmp_path / "run.json").write_text('{"format": "other"}')
    with pytest.raises(InputError, match="not a lumos run manifest"):
        read_manifest(tmp_path)
    _fake_rank(tmp_path, 0, world_size=1)
    write_manifest(tmp_path)
    (tmp_path / kineto_name(0)).unlink()
    with pytest.raises(
        InputError, match=r"rank 0's Kineto trace rank0\.kineto\.json\.gz is missing"
    ):
        read_manifest(tmp_path)
