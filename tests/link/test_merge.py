"""The merged host+device trace (`lumos link -o DIR`): chakra_trace_link's output format, read back
by `lumos info` and `lumos convert`, and converted by upstream's PyTorch converter."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from tests.realdata import trace

from lumos.chakra import read_chakra
from lumos.cli.main import main
from lumos.ingest.kineto import read_kineto
from lumos.ingest.pytorch_et import read_et_document, read_pytorch_et
from lumos.link import link
from lumos.link.merge import merge_host_device


def _merge(et: Path, kineto: Path) -> tuple[dict, object, object]:
    lt = link(read_pytorch_et(et), read_kineto(kineto))
    merged, summary = merge_host_device(lt, read_et_document(et))
    return merged, summary, lt


def _parent(node: dict) -> int:
    return node["ctrl_deps"] if "ctrl_deps" in node else node["parent"]


def test_simple_add_kernels_under_their_ops() -> None:
    merged, summary, _ = _merge(trace("simple_add_et"), trace("simple_add_kineto"))
    nodes = merged["nodes"]
    assert len(nodes) == 38 + 4
    assert summary.to_dict() == {"host_nodes": 38, "timed_nodes": 36, "gpu_nodes": {"kernel": 4},
                                 "gpu_unattributed": 0, "num_nodes": 42}  # fmt: skip
    ids = [n["id"] for n in nodes]
    assert ids == list(range(1, 43))  # renumbered, each op's kernels right after it
    by_id = {n["id"]: n for n in nodes}
    gpu = [n for n in nodes if "cat" in n]
    assert [by_id[_parent(k)]["name"] for k in gpu] == [
        "aten::uniform_", "aten::uniform_", "aten::add", "aten::add"
    ]  # fmt: skip
    for k in gpu:
        op = by_id[_parent(k)]
        assert k["id"] == op["id"] + 1
        assert (k["cat"], k["ph"], k["stream"]) == ("kernel", "X", 7)
        assert k["inclusive_dur"] == k["exclusive_dur"] > 0
        assert k["ts"] >= op["ts"]
        assert k["inputs"] == op["inputs"] and k["name"] != op["name"]
    # Kineto timing on ops, exclusive = inclusive less the child ops (values from the file, us)
    rand = next(n for n in nodes if n["name"] == "aten::rand")
    assert (rand["ts"], rand["inclusive_dur"], rand["exclusive_dur"]) == (
        1689360788495703,
        19583658,
        189,
    )
    assert rand["inter_thread_dep"] is None
    synthetic = [n for n in nodes if n["name"].startswith("[pytorch|profiler")]
    assert len(synthetic) == 2 and all("ts" not in n for n in synthetic)
    # the parent links of host ops follow the renumbering
    host = [n for n in nodes if "cat" not in n]
    assert sorted(by_id[_parent(n)]["name"] for n in host if n["name"] == "aten::empty") == [
        "aten::rand", "aten::rand", "aten::zeros", "aten::zeros"
    ]  # fmt: skip


def test_input_document_untouched_and_output_deterministic() -> None:
    doc = read_et_document(trace("simple_add_et"))
    before = json.dumps(doc)
    lt = link(read_pytorch_et(trace("simple_add_et")), read_kineto(trace("simple_add_kineto")))
    a, _ = merge_host_device(lt, doc)
    b, _ = merge_host_device(lt, doc)
    assert json.dumps(doc) == before
    assert json.dumps(a) == json.dumps(b)


def test_dlrm_8_ranks_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    et, kineto = trace("dlrm_et_8rank"), trace("dlrm_kineto_8rank")
    assert main(["link", "--json", str(et), str(kineto), "-o", str(tmp_path)]) == 0
    cap = capsys.readouterr()
    reports = [json.loads(line) for line in cap.out.splitlines()]  # stdout stays JSON
    assert cap.err.count("wrote ") == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"host_device_{r}.json" for r in range(8)]
    for rep in reports:
        nodes = json.loads((tmp_path / f"host_device_{rep['rank']}.json").read_text())["nodes"]
        host = [n for n in nodes if "cat" not in n]
        gpu = [n for n in nodes if "cat" in n]
        assert len(host) == 1675
        assert sum("ts" in n for n in host) == rep["num_linked"]
        assert len(gpu) == rep["num_gpu_with_node"]
        by_id = {n["id"]: n for n in nodes}
        for k in gpu:
            op = by_id[_parent(k)]
            assert "cat" not in op and "ts" in op and k["ts"] >= op["ts"]
    rank0 = json.loads((tmp_path / "host_device_0.json").read_text())["nodes"]
    cats = sorted(n["cat"] for n in rank0 if "cat" in n)
    assert (cats.count("kernel"), cats.count("gpu_memcpy"), len(rank0)) == (245, 16, 1675 + 261)


def test_info_and_convert_read_it_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    et, kineto = trace("simple_add_et"), trace("simple_add_kineto")
    assert main(["link", str(et), str(kineto), "-o", str(tmp_path / "lk")]) == 0
    merged = tmp_path / "lk" / "host_device_0.json"
    capsys.readouterr()
    assert main(["info", "--json", str(merged)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["num_nodes"] == 38
    assert info["linked"] == {"timed_nodes": 36, "gpu_nodes": {"kernel": 4}}
    host = read_pytorch_et(merged)
    assert host.device_nodes == {"kernel": 4} and "linked (4 GPU nodes)" in repr(host)

    assert main(["convert", str(merged), str(kineto), "-o", str(tmp_path / "m")]) == 0
    assert main(["convert", str(et), str(kineto), "-o", str(tmp_path / "o")]) == 0
    assert "100.0%" in capsys.readouterr().out
    a, b = read_chakra(tmp_path / "m.0.et"), read_chakra(tmp_path / "o.0.et")
    assert a.num_nodes == b.num_nodes
    for i in range(a.num_nodes):
        assert a.name_of(i) == b.name_of(i)
        got = {x.name: x.value for x in a.attrs_of(i) if x.name != "et_id"}
        assert got == {x.name: x.value for x in b.attrs_of(i) if x.name != "et_id"}


def test_linking_a_linked_trace_is_one_line_error(tmp_path: Path, capsys) -> None:
    et, kineto = trace("simple_add_et"), trace("simple_add_kineto")
    assert main(["link", str(et), str(kineto), "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    again = ["link", str(tmp_path / "host_device_0.json"), str(kineto), "-o", str(tmp_path / "x")]
    assert main(again) == 1
    err = capsys.readouterr().err
    assert "already a linked host+device trace" in err and len(err.strip().splitlines()) == 1


def _tiny_pair(tmp_path: Path) -> tuple[Path, Path]:
    """A newer-schema ET (what upstream's converter accepts) and its Kineto trace: aten::linear
    calls aten::mm (launches gemm), then aten::relu launches relu."""

    def op(nid: int, name: str, parent: int, rf_id: int) -> dict:
        attrs = [("rf_id", rf_id), ("fw_parent", 0), ("seq_id", -1), ("scope", 0), ("tid", 1),
                 ("fw_tid", 0)]  # fmt: skip
        return {"id": nid, "name": name, "ctrl_deps": parent,
                "inputs": {"values": [], "shapes": [], "types": []},
                "outputs": {"values": [], "shapes": [], "types": []},
                "attrs": [{"name": k, "type": "int64", "value": v} for k, v in attrs]
                + [{"name": "op_schema", "type": "string", "value": ""}]}  # fmt: skip

    et = {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "2026-01-01 00:00:00",
          "start_ts": 0, "finish_ts": 100,
          "nodes": [op(1, "[pytorch|profiler|execution_trace|process]", 1, 0),
                    op(2, "[pytorch|profiler|execution_trace|thread]", 1, 1),
                    op(3, "aten::linear", 2, 10), op(4, "aten::mm", 3, 11),
                    op(5, "aten::relu", 2, 12)]}  # fmt: skip

    def ev(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
        tid = args.pop("tid", 1)
        return {"ph": "X", "cat": cat, "name": name, "pid": 1 if tid == 1 else 0, "tid": tid,
                "ts": ts, "dur": dur, "args": args}  # fmt: skip

    events = [
        ev("cpu_op", "aten::linear", 10, 30, **{"Record function id": 10}),
        ev("cpu_op", "aten::mm", 12, 20, **{"Record function id": 11}),
        ev("cuda_runtime", "cudaLaunchKernel", 14, 5, correlation=7),
        ev("kernel", "gemm", 20.5, 40, correlation=7, device=0, stream=7, tid=7),
        ev("cpu_op", "aten::relu", 45, 10, **{"Record function id": 12}),
        ev("cuda_runtime", "cudaLaunchKernel", 47, 4, correlation=8),
        ev("kernel", "relu", 61, 3, correlation=8, device=0, stream=7, tid=7),
    ]
    (tmp_path / "et.json").write_text(json.dumps(et))
    (tmp_path / "kineto.json").write_text(json.dumps({"traceEvents": events}))
    return tmp_path / "et.json", tmp_path / "kineto.json"


def test_tiny_pair_values(tmp_path: Path) -> None:
    merged, summary, _ = _merge(*_tiny_pair(tmp_path))
    rows = [(n["id"], n["name"], n["ctrl_deps"], n.get("ts"), n.get("inclusive_dur"),
             n.get("exclusive_dur")) for n in merged["nodes"]]  # fmt: skip
    assert rows == [
        (1, "[pytorch|profiler|execution_trace|process]", 1, None, None, None),
        (2, "[pytorch|profiler|execution_trace|thread]", 1, None, None, None),
        (3, "aten::linear", 2, 10, 30, 10),
        (4, "aten::mm", 3, 12, 20, 20),
        (5, "gemm", 4, 20.5, 40, 40),
        (6, "aten::relu", 2, 45, 10, 10),
        (7, "relu", 6, 61, 3, 3),
    ]
    assert summary.gpu_nodes == {"kernel": 2}


@pytest.mark.skipif(
    importlib.util.find_spec("chakra") is None,
    reason="mlc-chakra not installed (pip install --no-deps mlc-chakra) - upstream interop skipped",
)
def test_upstream_converter_reads_the_merged_trace(tmp_path: Path) -> None:
    from chakra.src.converter.pytorch_converter import PyTorchConverter

    et, kineto = _tiny_pair(tmp_path)
    assert main(["link", str(et), str(kineto), "-o", str(tmp_path / "lk")]) == 0
    PyTorchConverter().convert(str(tmp_path / "lk" / "host_device_0.json"),
                               str(tmp_path / "up.et"), simulate=False)  # fmt: skip
    t = read_chakra(tmp_path / "up.et")
    names = [t.name_of(i) for i in range(t.num_nodes)]
    assert sorted(names) == sorted(["[pytorch|profiler|execution_trace|thread]", "aten::linear",
                                    "aten::mm", "gemm", "aten::relu", "relu"])  # fmt: skip
    row = {n: i for i, n in enumerate(names)}
    attrs = {n: {a.name: a.value for a in t.attrs_of(row[n])} for n in names}
    assert attrs["gemm"]["is_cpu_op"] is False and attrs["aten::mm"]["is_cpu_op"] is True
    assert attrs["gemm"]["stream"] == 7
    assert int(t.duration_micros[row["gemm"]]) == 40  # the kernel's recorded duration
    assert int(t.duration_micros[row["aten::linear"]]) == 10  # exclusive of aten::mm
    deps = {n: {names[int(j)] for j in t.index_of(t.data_deps_of(row[n]))} for n in names}
    assert deps["gemm"] == {"aten::mm"} and deps["relu"] == {"aten::relu"}
