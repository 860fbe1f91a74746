"""lumos convert: per-rank Chakra ETs from Kineto (+ ET) runs that replay like the original."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from tests.realdata import SIMPLE_ADD_DIR, realdata, trace

from lumos.chakra import NodeType, read_chakra
from lumos.chakra.mapping import from_chakra, graph_differences
from lumos.chakra.validate import validate_trace
from lumos.cli.main import main
from lumos.convert import convert, convert_graph, upstream_compat
from lumos.errors import ConfigError, NoTracesError
from lumos.examples_data import example_trace_path
from lumos.graph.build import build_graph
from lumos.graph.model import DepKind, TaskKind
from lumos.ingest.kineto import read_kineto
from lumos.replay import build_workload, replay
from lumos.sim import simulate

# the replay traces of tests/graph/test_build_real.py that convert in well under a second
FAST = [
    "alltoall_4streams",
    "sendrecv_5streams_rank0",
    "cuda_event_sync",
    "hip_mi250",
    "rccl_mi300",
]


def _simple():
    """The folder of a matched ET + Kineto pair (HTA's simple_add), read in place."""
    return realdata(SIMPLE_ADD_DIR)


def _dlrm():
    """Both 8-rank DLRM archives (ET, Kineto), read in place."""
    return [trace("dlrm_et_8rank"), trace("dlrm_kineto_8rank")]


def _steps(rep) -> list[int]:
    return [s["predicted_ns"] for s in rep.summaries[0]["steps"]]


def test_et_and_kineto_convert_with_inputs_outputs_and_schema(tmp_path):
    rep = convert([_simple()], tmp_path / "simple")
    (r,) = rep.ranks
    assert r.match_rate == 1.0
    assert r.ops_with_et > 0
    t = read_chakra(tmp_path / "simple.0.et")
    assert validate_trace(t).ok
    with_schema = [i for i in range(t.num_nodes) if t.node(i).attr("op_schema")]
    assert len(with_schema) == r.ops_with_et
    node = t.node(with_schema[0])
    assert node.attr("is_cpu_op") is True
    assert node.inputs is not None and json.loads(node.inputs.shapes) is not None
    assert node.attr("rf_id") is not None
    doc = json.loads((tmp_path / "simple.convert.json").read_text())
    assert doc["ranks"][0]["match_rate"] == 1.0
    # the extra attributes do not change the graph
    g = build_graph(read_kineto(trace("simple_add_kineto")))
    assert graph_differences(g, from_chakra(t)) == []


def test_dlrm_ranks_pair_and_convert_in_parallel(tmp_path):
    rep = convert(_dlrm(), tmp_path / "dlrm", workers=2)
    assert [r.rank for r in rep.ranks] == list(range(8))
    assert all(r.match_rate is not None and r.match_rate >= 0.95 for r in rep.ranks)
    assert sorted(p.name for p in tmp_path.glob("dlrm.*.et")) == [f"dlrm.{k}.et" for k in range(8)]
    for k in (0, 7):
        assert validate_trace(read_chakra(tmp_path / f"dlrm.{k}.et")).ok


@pytest.mark.parametrize("name", FAST)
def test_converted_et_replays_like_the_kineto_trace(name, tmp_path):
    convert([trace(name)], tmp_path / "run")
    kin, _ = build_workload([trace(name)], workers=1)
    (et_file,) = tmp_path.glob("run.*.et")
    et, _ = build_workload([et_file], workers=1)
    a, b = _steps(replay(kin)), _steps(replay(et))
    assert any(a) and len(a) == len(b)
    for x, y in zip(a, b, strict=True):  # a step no task falls in predicts 0 on both sides
        assert abs(x - y) <= 0.005 * x


def test_example_trace_replays_identically_through_chakra(tmp_path):
    convert([example_trace_path()], tmp_path / "ex")
    kin, _ = build_workload([example_trace_path()], workers=1)
    (et_file,) = tmp_path.glob("ex.*.et")
    et, _ = build_workload([et_file], workers=1)
    assert _steps(replay(kin)) == _steps(replay(et))


def test_upstream_compat_drops_what_upstream_drops():
    g = build_graph(read_kineto(trace("cuda_event_sync")))
    u = upstream_compat(g)
    kinds = set(np.unique(u.edges.kind).tolist())
    assert not kinds & {DepKind.INTRA_STREAM, DepKind.INTER_STREAM, DepKind.SYNC}
    assert len(u.waits) == 0
    assert not (u.tasks.kind[u.edges.src] == TaskKind.COMM).any()
    t, _ = convert_graph(g, compat="upstream")
    assert validate_trace(t).ok
    # losing the syncs and event waits makes this trace replay short
    full = simulate(g).steps()[0]["predicted_ns"]
    short = simulate(from_chakra(t)).steps()[0]["predicted_ns"]
    assert short < full
    with pytest.raises(ConfigError):
        convert_graph(g, compat="nonsense")


def test_nccl_trace_keeps_collectives_and_process_groups(tmp_path):
    convert([trace("nccl_a100")], tmp_path / "ex")
    (et_file,) = tmp_path.glob("ex.*.et")
    t = read_chakra(et_file)
    assert int((t.node_type == NodeType.COMM_COLL_NODE).sum()) == 21
    assert int((t.node_type == NodeType.METADATA_NODE).sum()) == 1


def test_cli_prints_a_summary_per_rank(tmp_path, capsys):
    assert main(["convert", str(_simple()), "-o", str(tmp_path / "s"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "100.0%" in out and "s.0.et" in out
    assert main(["chakra", "validate", str(tmp_path / "s.0.et")]) == 0


def test_cli_compat_and_bad_input(tmp_path, capsys):
    src = trace("cuda_event_sync")
    assert main(["convert", str(src), "-o", str(tmp_path / "u"), "--compat", "upstream"]) == 0
    assert "--compat upstream" in capsys.readouterr().out
    assert main(["convert", str(trace("et_1.1.1")), "-o", str(tmp_path / "x")]) == 1
    assert "no Kineto trace" in capsys.readouterr().err


def test_no_kineto_raises():
    with pytest.raises(NoTracesError):
        convert([trace("et_1.1.1")], "/nonexistent/x")


def test_foreign_chakra_replays_through_replay(tmp_path):
    # gzipped into tmp_path: lumos reads Chakra files gzipped as well as plain
    gz = tmp_path / "chakra.0.et.gz"
    gz.write_bytes(gzip.compress(trace("chakra_pytorch_converted").read_bytes(), mtime=0))
    w, _ = build_workload([gz], workers=1)
    rep = replay(w)
    diag = rep.summaries[0]["diagnostics"]
    assert diag["cpu_comm_without_comm_type"]["count"] == 14


def test_delay_nodes_are_the_default_and_can_be_turned_off(tmp_path):
    from lumos.chakra.mapping_delay import delay_rows

    src = str(trace("cuda_event_sync"))
    g = build_graph(read_kineto(src))
    n_delays = int((g.edges.delay_ns > 0).sum())
    for flags, prefix, expected in (([], "d", n_delays), (["--no-delay-nodes"], "p", 0),
                                    (["--compat", "upstream"], "u", 0),
                                    (["--compat", "upstream", "--delay-nodes"], "ud", None)):  # fmt: skip
        assert main(["convert", src, "-o", str(tmp_path / prefix), "--workers", "1", *flags]) == 0
        t = read_chakra(tmp_path / f"{prefix}.0.et")
        got = int(delay_rows(t).sum())
        assert got > 0 if expected is None else got == expected
        assert main(["chakra", "validate", str(tmp_path / f"{prefix}.0.et")]) == 0
    back = from_chakra(read_chakra(tmp_path / "d.0.et"))
    assert graph_differences(g, back) == []
