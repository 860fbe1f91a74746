"""``lumos chakra obfuscate``: a planted secret never reaches an output, names are keyed, shapes
and durations follow the options, and a failed leak check writes nothing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lumos.chakra import ChakraTrace, attr, read_chakra, write_chakra
from lumos.chakra.attrs import IOInfo
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.schema import NodeType
from lumos.cli.main import main
from lumos.errors import ConfigError
from lumos.ingest.kineto import trace_from_bytes
from lumos.synth import obfuscate_names
from lumos.synth.leaks import LeakError
from lumos.synth.obfuscate import obfuscate_files

SECRET = "ZorblaxSecretBlock"


def _kineto(secret: str = SECRET, *, dims: list | None = None) -> dict:
    """A small, valid Kineto trace with ``secret`` in every place a model's name can hide."""
    dims = dims if dims is not None else [[3, 1000], [1000, 77]]
    cpu = {"pid": 10, "tid": 11}
    return {
        "schemaVersion": 1,
        "traceName": f"/home/alice/{secret}/trace.json",
        "deviceProperties": [{"id": 0, "name": f"NVIDIA {secret} 80GB", "computeMajor": 9,
                              "computeMinor": 0, "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1, "pg_count": 1,
                            "pg_config": [{"pg_name": "0", "pg_desc": f"{secret}_tp",
                                           "backend_config": "cuda:nccl", "pg_size": 1,
                                           "ranks": [0]}]},
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 10, "tid": 0,
             "args": {"name": f"python {secret}.py"}},
            {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11,
             "args": {"name": f"{secret}_worker"}},
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", **cpu,
             "ts": 1000.0, "dur": 500.0, "args": {"External id": 1}},
            {"ph": "X", "cat": "user_annotation", "name": f"## {secret} ##", **cpu,
             "ts": 1001.0, "dur": 200.0, "args": {"External id": 2}},
            {"ph": "X", "cat": "python_function", "name": f"nn.Module: {secret}_0", **cpu,
             "ts": 1002.0, "dur": 150.0, "args": {"Python id": 7,
                                                  "Python module": f"{secret}.layers"}},
            {"ph": "X", "cat": "cpu_op", "name": f"{secret}::fused_op", **cpu, "ts": 1003.0,
             "dur": 100.0, "args": {"External id": 3, "Record function id": 3,
                                    "Input Dims": dims, "Input type": ["float", secret],
                                    "Concrete Inputs": ["", f"{secret}_mode"],
                                    "Call stack": f"model.py(12): {secret}.forward",
                                    "Module Hierarchy": f"top.{secret}.mlp",
                                    "Source File": f"/src/{secret}.py"}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", **cpu,
             "ts": 1010.0, "dur": 5.0, "args": {"correlation": 40, "External id": 3}},
            {"ph": "X", "cat": "kernel", "name": f"void {secret}_kernel<float>(float*)",
             "pid": 0, "tid": 7, "ts": 1020.0, "dur": 300.0,
             "args": {"correlation": 40, "External id": 3, "device": 0, "stream": 7,
                      "grid": [4, 1, 1], "block": [128, 1, 1], "kernel name": secret}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", **cpu,
             "ts": 1100.0, "dur": 230.0, "args": {"correlation": 41}},
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", **cpu,
             "ts": 1500.0, "dur": 400.0, "args": {"External id": 4}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", **cpu,
             "ts": 1510.0, "dur": 5.0, "args": {"correlation": 42, "External id": 4}},
            {"ph": "X", "cat": "kernel", "name": f"void {secret}_kernel<float>(float*)",
             "pid": 0, "tid": 7, "ts": 1520.0, "dur": 300.0,
             "args": {"correlation": 42, "device": 0, "stream": 7}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", **cpu,
             "ts": 1600.0, "dur": 230.0, "args": {"correlation": 43}},
        ],
    }  # fmt: skip


def _et(secret: str = SECRET) -> ChakraTrace:
    """A small Chakra ET with ``secret`` in node names, attributes, IO and metadata."""
    b = ChakraTraceBuilder(version="0.0.4", metadata_attrs=[attr("model", secret)])
    b.add_node(1, f"{secret}.forward", NodeType.COMP_NODE, duration_micros=10,
               attrs=[attr("is_cpu_op", True), attr("op_schema", f"{secret}(Tensor x)"),
                      attr(f"{secret}_flag", 1)],
               inputs=IOInfo(values="[[1, 2, 0, 12, 4, 'cuda:0']]", shapes="[[3, 4]]",
                             types=f"['Tensor({secret})']"))  # fmt: skip
    b.add_node(2, f"{secret}_gemm_kernel", NodeType.COMP_NODE, data_deps=[1],
               duration_micros=20, attrs=[attr("is_cpu_op", False)],
               inputs=IOInfo(values="[[3, 4, 0, 12, 4, 'cuda:0']]", shapes="[[3, 1000]]",
                             types="['Tensor(float)']"))  # fmt: skip
    b.add_node(3, "ncclKernel_AllReduce_RING_LL_Sum_float", NodeType.COMM_COLL_NODE,
               data_deps=[2], duration_micros=30,
               attrs=[attr("is_cpu_op", False), attr("comm_type", 0), attr("comm_size", 4096),
                      attr("pg_name", secret)])  # fmt: skip
    return b.build()


def _inputs(tmp_path: Path, secret: str = SECRET) -> list[Path]:
    k = tmp_path / "in" / "trace.json.gz"
    k.parent.mkdir(parents=True, exist_ok=True)
    k.write_bytes(gzip.compress(json.dumps(_kineto(secret)).encode(), mtime=0))
    et = tmp_path / "in" / "w.0.et"
    write_chakra(_et(secret), et)
    return [k, et]


def _payload(p: Path) -> bytes:
    data = p.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def test_planted_secret_reaches_no_output_byte(tmp_path: Path, capsys) -> None:
    ins = _inputs(tmp_path)
    assert all(SECRET.encode() in _payload(p) for p in ins)  # the test can fail
    prefix = tmp_path / "out" / "shared"
    assert main(["chakra", "obfuscate", *map(str, ins), "-o", str(prefix), "--key", "k"]) == 0
    outs = sorted((tmp_path / "out").iterdir())
    assert [p.name for p in outs] == ["shared.0.json.gz", "shared.1.et"]
    for p in outs:
        for blob in (p.read_bytes(), _payload(p)):
            assert b"Zorblax" not in blob, p
            assert b"alice" not in blob, p
    assert "leak check passed" in capsys.readouterr().out
    # the outputs are still traces lumos reads, with the vocabulary kept
    kt = trace_from_bytes(_payload(outs[0]), str(outs[0]))
    assert sorted(s for s in kt.names if s.startswith(("Profiler", "cuda"))) == [
        "ProfilerStep#1",
        "ProfilerStep#2",
        "cudaDeviceSynchronize",
        "cudaLaunchKernel",
    ]
    et = read_chakra(outs[1])
    assert isinstance(et, ChakraTrace)
    assert et.num_nodes == 3 and et.names[2].startswith("ncclDevKernel_AllReduce_")
    assert [int(x) for x in et.duration_micros] == [10, 20, 30]
    assert int(et.comm.comm_size[2]) == 4096


def test_renamed_names_keep_their_class(tmp_path: Path) -> None:
    from lumos.graph.model import TaskKind
    from lumos.synth.classes import class_of

    namer = obfuscate_names.Namer("k")
    cases = [("ampere_sgemm_128x64_nn", TaskKind.KERNEL), ("reduce_kernel", TaskKind.KERNEL),
             ("radixSortKernel", TaskKind.KERNEL), ("aten::empty", TaskKind.CPU_OP),
             ("aten::sort", TaskKind.CPU_OP), ("myStreamSynchronize", TaskKind.RUNTIME),
             ("Optimizer.step#Adam", TaskKind.CPU_OP), ("weird copy", TaskKind.MEMCPY),
             ("c10d::broadcast_(0)", TaskKind.CPU_OP)]  # fmt: skip
    for name, kind in cases:
        new = namer.task(name, kind)
        assert new != name and class_of(new, kind) == class_of(name, kind), (name, new)
    assert namer.task("cudaStreamWaitEvent", TaskKind.RUNTIME) == "cudaStreamWaitEvent"
    assert namer.task("ProfilerStep#12", TaskKind.CPU_OP) == "ProfilerStep#12"
    assert namer.task("nccl:all_reduce", TaskKind.CPU_OP) == "nccl:all_reduce"
    assert namer.task("c10d::allreduce_", TaskKind.CPU_OP) == "c10d::allreduce_"


def test_key_makes_names_stable_and_linkable_only_with_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(obfuscate_names.KEY_ENV, raising=False)
    ins = _inputs(tmp_path)

    def names(key: str | None, tag: str) -> tuple[list[str], list[str]]:
        files = obfuscate_files([ins[1], ins[1]], tmp_path / tag / "o", key=key)
        a, b = (read_chakra(f.path) for f in files)
        return list(a.names), list(b.names)  # type: ignore[union-attr]

    one_a, one_b = names("job-key", "one")
    assert one_a == one_b  # same key, same names across two files
    again, _ = names("job-key", "again")
    assert again == one_a  # and across calls
    other, _ = names("other-key", "other")
    assert other[:2] != one_a[:2]
    r1, r1b = names(None, "r1")
    r2, _ = names(None, "r2")
    assert r1 == r1b and r1[:2] != r2[:2]  # random key: consistent within a call only
    monkeypatch.setenv(obfuscate_names.KEY_ENV, "job-key")
    env, _ = names(None, "env")
    assert env == one_a


def _dims_out(tmp_path: Path, mode: str, dims: list) -> list | None:
    p = tmp_path / mode / "t.json"
    p.parent.mkdir()
    p.write_text(json.dumps(_kineto(dims=dims)))
    (f,) = obfuscate_files([p], tmp_path / mode / "o", key="k", shapes=mode)
    doc = json.loads(f.path.read_bytes())
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    return op["args"].get("Input Dims")


def test_shapes_keep_bucket_drop(tmp_path: Path) -> None:
    dims = [[3, 1000], [1000, 77], [], [1]]
    assert _dims_out(tmp_path, "keep", dims) == dims
    assert _dims_out(tmp_path, "bucket", dims) == [[4, 1024], [1024, 128], [], [1]]
    assert _dims_out(tmp_path, "drop", dims) is None
    with pytest.raises(ConfigError):
        obfuscate_files([], tmp_path / "x", shapes="round")


def test_jitter_is_seeded_and_bounded(tmp_path: Path) -> None:
    ins = _inputs(tmp_path)

    def run(tag: str, seed: int) -> bytes:
        files = obfuscate_files([ins[0]], tmp_path / tag / "o", key="k", jitter_pct=10, seed=seed)
        return _payload(files[0].path)

    a, b, c = run("a", 1), run("b", 1), run("c", 2)
    assert a == b and a != c
    kernels = [e for e in json.loads(a)["traceEvents"] if e.get("cat") == "kernel"]
    assert all(270.0 <= e["dur"] <= 330.0 for e in kernels)
    assert any(e["dur"] != 300.0 for e in kernels)
    hosts = [e for e in json.loads(a)["traceEvents"] if e.get("cat") == "cuda_runtime"]
    assert [e["dur"] for e in hosts] == [5.0, 230.0, 5.0, 230.0]  # host events nest: untouched


def test_failed_leak_check_names_the_file_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    ins = _inputs(tmp_path)
    monkeypatch.setattr(obfuscate_names.Namer, "span", lambda self, name: name)
    with pytest.raises(LeakError, match=r"o\.0\.json\.gz: the obfuscated output still holds '\w+'"):
        obfuscate_files(ins, tmp_path / "out" / "o", key="k")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(secret=st.from_regex(r"[A-Z][a-z]{3,9}[A-Z][a-z]{3,9}", fullmatch=True))
def test_random_names_never_survive(tmp_path_factory, secret: str) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    files = obfuscate_files(_inputs(tmp, secret), tmp / "out" / "o", key="k")
    for f in files:
        assert secret.encode() not in _payload(f.path)


def test_collective_sizes_stay_exact_when_shapes_are_bucketed(tmp_path: Path) -> None:
    doc = _kineto()
    doc["traceEvents"].append(
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 11,
         "ts": 1200.0, "dur": 10.0, "args": {"Input Dims": [[3, 1000]], "Input type": ["float"]}}
    )  # fmt: skip
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    (f,) = obfuscate_files([p], tmp_path / "o", key="k", shapes="bucket")
    out = json.loads(f.path.read_bytes())["traceEvents"]
    comm = next(e for e in out if e.get("name") == "c10d::allreduce_")
    assert comm["args"] == {"Input Dims": [[3, 1000]], "Input type": ["float"]}


def test_et_shapes_bucket_and_drop(tmp_path: Path) -> None:
    src = tmp_path / "w.0.et"
    write_chakra(_et(), src)
    for mode, shapes, values in (("bucket", "[[4, 1024]]", ""), ("drop", "", "")):
        (f,) = obfuscate_files([src], tmp_path / mode, key="k", shapes=mode)
        t = read_chakra(f.path)
        assert isinstance(t, ChakraTrace)
        info = t.materialize(1).inputs
        assert info is not None and (info.shapes, info.values) == (shapes, values)
        assert info.types == "['Tensor(float)']"
