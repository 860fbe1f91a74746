"""Bad ET input gets one TraceFormatError/InputError naming the file, never anything else."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.realdata import needs_realdata, trace

from lumos import read_pytorch_et
from lumos.errors import InputError, LumosError, TraceFormatError

# real ETs (tests/realdata.py), read in place: schema 1.0.1 and 1.1.1
SIMPLE_ADD = "simple_add_et"
PT2 = "et_1.1.1"


def _et(nodes: list[dict]) -> bytes:
    return json.dumps({"schema": "1.0.1", "pid": 1, "nodes": nodes}).encode()


def _write(tmp_path: Path, data: bytes, name: str = "et.json") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty file"),
        (b"  \n", "empty file"),
        (b'{"nodes": [', "invalid or truncated JSON"),
        (b"[1, 2, 3]", "not a PyTorch Execution Trace"),
        (b'{"traceEvents": []}', "Kineto trace, not a PyTorch Execution Trace"),
        (b'{"schema": "1.0.1"}', "not a PyTorch Execution Trace"),
        (b'{"nodes": []}', "has no nodes"),
        (b'{"nodes": [{"name": "x"}]}', "missing required field `id`"),
        (_et([{"id": 1, "parent": 1}, {"id": 1, "parent": 1}]), "duplicate node id 1"),
        (_et([{"id": 1, "parent": 2}, {"id": 2, "parent": 1}]), "cycle"),
        (_et([{"id": 1, "parent": 1}, {"id": 2, "parent": 3}, {"id": 3, "parent": 2}]), "cycle"),
        (_et([{"id": "one"}]), "malformed Execution Trace"),
    ],
)
def test_bad_input_names_file_and_problem(tmp_path: Path, data: bytes, problem: str) -> None:
    p = _write(tmp_path, data)
    with pytest.raises(TraceFormatError) as info:
        read_pytorch_et(p)
    assert str(info.value).startswith(str(p))
    assert problem in str(info.value)


def test_truncated_gzip(tmp_path: Path) -> None:
    raw = trace(SIMPLE_ADD).read_bytes()
    p = _write(tmp_path, raw[: len(raw) // 2], "et.json.gz")
    with pytest.raises(InputError, match="truncated gzip"):
        read_pytorch_et(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_pytorch_et(tmp_path / "nope.json")


def test_dangling_parent_is_a_counted_warning(tmp_path: Path) -> None:
    p = _write(tmp_path, _et([{"id": 1, "parent": 1}, {"id": 2, "parent": 99, "name": "a"}]))
    t = read_pytorch_et(p)
    assert t.diagnostics.count("dangling_parent") == 1
    assert "parent 99" in t.diagnostics.example("dangling_parent")
    assert t.parent_idx.tolist() == [-1, -1]


def test_malformed_inputs_are_refused_on_decode(tmp_path: Path) -> None:
    p = _write(tmp_path, _et([{"id": 1, "parent": 1, "inputs": {"values": 5}}]))
    t = read_pytorch_et(p)
    with pytest.raises(TraceFormatError, match="node 1: malformed inputs"):
        t.inputs(0)


@functools.cache
def _original(which: str) -> bytes:
    """A real ET's bytes: ``plain`` is the 1.0.1 layout, ``newer`` 1.1.1 (ctrl_deps, attrs, inputs)."""
    if which == "plain":
        return gzip.decompress(trace(SIMPLE_ADD).read_bytes())
    return trace(PT2).read_bytes()


@needs_realdata
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(["plain", "newer"]),
    st.lists(
        st.tuples(st.integers(0, 1 << 20), st.binary(min_size=0, max_size=4)),
        min_size=1,
        max_size=4,
    ),
    st.floats(0.0, 1.0),
)
def test_mangled_real_et_only_lumos_errors(
    tmp_path: Path, which: str, edits: list[tuple[int, bytes]], keep: float
) -> None:
    original = _original(which)
    data = bytearray(original[: max(int(len(original) * keep), 1)])
    for pos, repl in edits:
        pos %= len(data)
        data[pos : pos + len(repl)] = repl
    p = _write(tmp_path, bytes(data))
    try:
        t = read_pytorch_et(p)
    except LumosError:
        return
    for i in range(t.num_nodes):  # a trace that loads must decode every node's arguments
        try:
            t.inputs(i)
            t.outputs(i)
        except LumosError:
            pass
