"""Obfuscated real traces replay like their sources (within 0.5 %) and pass the leak check."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from tests.realdata import realdata, trace

from lumos.cli.main import main
from lumos.replay import build_workload, replay
from lumos.synth.obfuscate import obfuscate_files

pytestmark = pytest.mark.slow

TOL = 0.005


def _replayed(path: Path) -> dict:
    w, _ = build_workload([path], workers=1)
    return replay(w).summaries[0]


def _close(a: int, b: int) -> bool:
    return abs(a - b) <= TOL * max(abs(b), 1)


def _same_steps(src: dict, obf: dict) -> None:
    assert [s["name"] for s in obf["steps"]] == [s["name"] for s in src["steps"]]
    assert src["steps"]  # the comparison below is not vacuous
    for s, o in zip(src["steps"], obf["steps"], strict=True):
        assert _close(o["measured_ns"], s["measured_ns"]), (s, o)
        assert _close(o["predicted_ns"], s["predicted_ns"]), (s, o)


@pytest.mark.parametrize(
    ("name", "gone"),
    [("nccl_a100", b"autograd::engine"), ("v100_stream_wait_event", b"volta_sgemm")],
)
def test_kineto_replays_like_its_source(tmp_path: Path, name: str, gone: bytes) -> None:
    src = trace(name)
    assert gone in gzip.decompress(src.read_bytes())
    (f,) = obfuscate_files([src], tmp_path / "o", key="k")  # raises if the leak check fails
    assert f.path.name.endswith(".json.gz")
    assert gone not in gzip.decompress(f.path.read_bytes())
    _same_steps(_replayed(src), _replayed(f.path))


def test_converted_et_replays_like_its_source(tmp_path: Path) -> None:
    assert main(["convert", str(trace("nccl_a100")), "-o", str(tmp_path / "src")]) == 0
    src = tmp_path / "src.0.et"
    (f,) = obfuscate_files([src], tmp_path / "obf", key="k", shapes="drop")
    assert f.path == tmp_path / "obf.0.et"
    assert b"autograd::engine" in src.read_bytes()
    assert b"autograd::engine" not in f.path.read_bytes()
    _same_steps(_replayed(src), _replayed(f.path))


def test_upstream_chakra_et_replays_like_its_source(tmp_path: Path) -> None:
    src = tmp_path / "up.0.et"
    src.write_bytes(realdata("chakra/tests/data/chakra.0.et").read_bytes())
    (f,) = obfuscate_files([src], tmp_path / "obf", key="k", shapes="bucket")
    data = f.path.read_bytes()
    assert b"flatten_dense_tensors" not in data and b"op_schema" not in data
    a, b = _replayed(src), _replayed(f.path)
    assert a["steps"] == b["steps"] == []  # upstream's ET has no step annotations
    assert a["makespan_ns"] > 0 and _close(b["makespan_ns"], a["makespan_ns"])


def test_eight_ranks_obfuscated_in_one_call_replay_together(tmp_path: Path) -> None:
    src = trace("dlrm_kineto_8rank")  # a tar archive of 8 ranks' Kineto traces
    files = obfuscate_files([src], tmp_path / "o", key="job")
    assert [f.path.name for f in files] == [f"o.{r}.json" for r in range(8)]
    a = replay(build_workload([src], workers=1)[0])
    b = replay(build_workload([f.path for f in files], workers=1)[0])
    assert len(b.summaries) == 8
    for sa, sb in zip(a.summaries, b.summaries, strict=True):
        assert sa["rank"] == sb["rank"]
        _same_steps(sa, sb)


def test_obfuscated_trace_is_the_same_workload_for_lumos_synth_report(tmp_path: Path) -> None:
    from lumos.synth.fidelity import compare

    src = trace("nccl_a100")
    (f,) = obfuscate_files([src], tmp_path / "o", key="k", shapes="bucket")
    fid = compare(build_workload([src], workers=1)[0], build_workload([f.path], workers=1)[0])
    assert len(fid.rows) > 40  # step time, breakdown, op-class counts, comm bytes, graph stats
    assert [r.metric for r in fid.rows if r.delta] == []
