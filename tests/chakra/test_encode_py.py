"""The NumPy Chakra encoders of a first command (``lumos.chakra._encode_py``) are the compiled ones.

Every trace here is encoded both ways, side by side: the records of ``write_chakra``
(``_wire.encode_nodes``) and the attribute bytes of ``to_chakra`` (``mapping_encode._encode``).
The files must be byte-identical: real ETs read and written back, what ``lumos convert`` makes
of real Kineto traces (with a PyTorch ET, several ranks, several write chunks), generated
traces and attribute columns. Then which encoder ``write_chakra`` and ``build_trace`` pick.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from chakra_testdata import ATTRS, EVERY_KIND, NODES, Uncompiled
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.realdata import SIMPLE_ADD_DIR, needs_realdata, realdata, trace

from lumos import _jit
from lumos.chakra import (
    ChakraTrace,
    NodeType,
    _encode_py,
    _wire,
    _wire_py,
    io,
    mapping_encode,
    read_chakra,
    write_chakra,
)
from lumos.chakra.attrs import IOInfo
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.mapping_encode import AttrColumn, build_trace
from lumos.chakra.trace import ChakraMetadata

DATA = Path(__file__).parents[1] / "data"  # lumos's own test data
ENCODERS = {_wire.encode_nodes: "nodes", mapping_encode._encode: "attributes"}


@contextmanager
def encoders(python: bool) -> Iterator[list[str]]:
    """Within it every encoder is the Python (or the compiled) one; yields the encoders asked
    for, by :data:`ENCODERS` name, as they are asked."""
    asked: list[str] = []

    def use_python(compiled: Any, nbytes: int) -> bool:
        asked.append(ENCODERS[compiled])
        return python

    with mock.patch.object(_encode_py, "use_python", use_python):
        yield asked


def _write_both(
    data: Any, folder: Path, name: str, make: Any = None, gzip: bool = False
) -> list[bytes]:
    """The files of ``write_chakra(make() if make else data)`` with the compiled encoders,
    asserted identical to those of the Python ones; returns them."""
    files = []
    for python in (False, True):
        with encoders(python) as asked:
            data = make() if make else data
            written = write_chakra(data, folder / f"{name}-{python}", gzip=gzip)
        assert "nodes" in asked
        files.append([p.read_bytes() for p in written])
    compiled, python_ = files
    assert len(python_) == len(compiled) and python_ == compiled
    return compiled


def test_every_real_et_is_written_back_the_same(realdata_dir, tmp_path):
    files = sorted(realdata_dir.rglob("*.et")) + sorted(DATA.rglob("*.et*"))
    assert len(files) >= 121
    for k, f in enumerate(files):
        et = read_chakra(f)
        assert isinstance(et, ChakraTrace)
        _write_both(et, tmp_path, str(k))
    (raw,) = _write_both(read_chakra(files[-1]), tmp_path, "gz", gzip=True)
    assert raw[:2] == b"\x1f\x8b"


def test_real_et_written_in_several_chunks(realdata_dir, tmp_path):
    """upstream's chakra.0.et (3,664 nodes, 3 MB) in chunks of 1,000 nodes."""
    et = read_chakra(realdata_dir / "chakra/tests/data/chakra.0.et")
    with mock.patch.object(io, "_CHUNK_NODES", 1000):
        (raw,) = _write_both(et, tmp_path, "chakra")
    assert raw == (realdata_dir / "chakra/tests/data/chakra.0.et").read_bytes()


def _converted(paths: list[Path], folder: Path, workers: int = 1) -> list[bytes]:
    """``lumos convert`` of ``paths`` with each encoder pair: the ETs, asserted identical."""
    from lumos.convert import convert

    files = []
    for python in (False, True):
        with encoders(python) as asked:
            convert(paths, folder / f"run-{python}", workers=workers)
        if workers == 1:  # other workers ask in their own processes
            assert {"nodes", "attributes"} <= set(asked)
        files.append([p.read_bytes() for p in sorted(folder.glob(f"run-{python}.*.et"))])
    assert files[0] and files[1] == files[0]
    return files[0]


@needs_realdata
@pytest.mark.parametrize("name", ["gloo_cpu_only", "hip_mi250", "nccl_a100", "rccl_mi300"])
def test_converted_kineto_traces_encode_the_same(name, tmp_path):
    _converted([trace(name)], tmp_path)


@needs_realdata
def test_converted_kineto_and_et_pair_encodes_the_same(tmp_path):
    """HTA's simple_add: inputs/outputs and ``op_schema`` attributes from the PyTorch ET."""
    (raw,) = _converted([realdata(SIMPLE_ADD_DIR)], tmp_path)
    assert b"op_schema" in raw


@needs_realdata
def test_converted_ranks_encode_the_same_in_worker_processes(tmp_path):
    """The 8-rank DLRM run, 2 ranks a worker process (each with its own budget)."""
    assert len(_converted([trace("dlrm_kineto_8rank")], tmp_path, workers=2)) == 8


@needs_realdata
def test_large_converted_trace_encodes_the_same(tmp_path):
    """df_index_resolver: 162k nodes and 28 MB, written in three chunks."""
    from lumos.convert import convert_graph
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto

    graph = build_graph(read_kineto(trace("v100_stream_wait_event")))

    def make() -> ChakraTrace:
        return convert_graph(graph)[0]

    (raw,) = _write_both(None, tmp_path, "v100", make)
    assert len(raw) > 20 << 20


# ---- generated traces -----------------------------------------------------------------------
def _trace(nodes: list[dict]) -> ChakraTrace:
    b = ChakraTraceBuilder(version="0.0.4")
    for node in nodes:
        b.add_node(**node)
    return b.build()


def test_every_attribute_kind_and_field(tmp_path):
    t = _trace([
        {"id": 2**64 - 1, "name": "n", "type": NodeType.COMP_NODE, "attrs": EVERY_KIND,
         "ctrl_deps": [0, 2**63], "data_deps": [2**64 - 1, 1], "start_time_micros": 1,
         "duration_micros": _wire.MAX_MICROS, "inputs": IOInfo("[1]", "[[2]]", "t"),
         "outputs": IOInfo(), "unknown": b"\x9d\x06\x01\x02\x03\x04"},
        {"id": 0, "name": "", "type": 0},  # an empty record
        {"id": 1, "name": "é" * 200, "type": -128, "attrs": EVERY_KIND[::-1]},
    ])  # fmt: skip
    (raw,) = _write_both(t, tmp_path, "every")
    assert read_chakra(tmp_path / "every-True").num_nodes == 3 and len(raw) > 400


@settings(max_examples=200, deadline=None)
@given(nodes=NODES, chunk=st.integers(1, 9))
def test_generated_traces_encode_the_same(nodes, chunk):
    with tempfile.TemporaryDirectory() as d, mock.patch.object(io, "_CHUNK_NODES", chunk):
        _write_both(_trace(nodes), Path(d), "g")


def _i64(lo: int = -(2**63), hi: int = 2**63 - 1) -> st.SearchStrategy:
    return st.integers(lo, hi)


@st.composite
def attr_columns(draw: Any, n: int) -> AttrColumn:
    kind = draw(st.sampled_from(["bool_val", "int32_val", "int64_val", "sint64_val",
                                 "string_val"]))  # fmt: skip
    strings: tuple[str, ...] = ()
    if kind == "string_val":
        strings = tuple(draw(st.lists(st.text(max_size=130), min_size=1, max_size=4)))
        one = st.integers(0, len(strings) - 1)
    else:
        one = st.integers(0, 1) if kind == "bool_val" else _i64()
    values = np.array(draw(st.lists(one, min_size=n, max_size=n)), dtype=np.int64)
    mask = draw(st.none() | st.lists(st.booleans(), min_size=n, max_size=n).map(np.array))
    return AttrColumn(draw(st.sampled_from(["", "a", "comm_size", "é" * 70])), kind, values,
                      mask, strings)  # fmt: skip


@st.composite
def column_traces(draw: Any) -> dict:
    """``build_trace`` keyword arguments: attribute columns, extra attributes and inputs/outputs
    on some nodes."""
    n = draw(st.integers(0, 6))
    nodes = st.integers(0, max(n - 1, 0))
    io_info = st.none() | st.builds(IOInfo, st.text(max_size=3))
    return {
        "names": ["a", ""], "name_idx": np.zeros(n, np.int64), "node_type": np.ones(n, np.int8),
        "data_ptr": np.zeros(n + 1, np.int64), "data_deps": np.zeros(0, np.int64),
        "start_time_micros": np.zeros(n, np.int64), "duration_micros": np.ones(n, np.int64),
        "columns": draw(st.lists(attr_columns(n), max_size=4)),
        "extra_attrs": draw(st.dictionaries(nodes, st.lists(ATTRS, max_size=3)) if n else
                            st.just({})),
        "io": draw(st.dictionaries(nodes, st.tuples(io_info, io_info)) if n else st.just({})),
    }  # fmt: skip


def _build_both(kwargs: dict) -> ChakraTrace:
    """``build_trace(**kwargs)`` with each attribute encoder, asserted identical."""
    built = []
    for python in (False, True):
        with encoders(python) as asked:
            built.append(build_trace(ChakraMetadata.build("0.0.4"), **kwargs))
        assert asked == ["attributes"]
    a, b = built
    for col in ("blob", "attr_off", "attr_len", "attr_ptr", "attr_kind", "attr_int"):
        x, y = getattr(a, col), getattr(b, col)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), col
    return a


# where a varint or a zigzag grows a byte, and the ends of int32 and int64
EDGES = [0, 1, -1, 63, 64, -64, -65, 127, 128, 2**31 - 1, -(2**31), 2**62 - 1, 2**62,
         -(2**62), -(2**62) - 1, 2**63 - 1, -(2**63)]  # fmt: skip


def test_attribute_columns_at_the_varint_edges():
    n = len(EDGES)
    values = np.array(EDGES, dtype=np.int64)
    columns = [AttrColumn(kind, kind, values) for kind in ("int32_val", "int64_val", "sint64_val")]
    columns += [
        AttrColumn("b", "bool_val", values & 1, values >= 0),
        AttrColumn("s", "string_val", np.arange(n) % 3, None, ("", "x" * 127, "é" * 64)),
    ]
    t = _build_both({
        "names": ["a"], "name_idx": np.zeros(n, np.int64), "node_type": np.ones(n, np.int8),
        "data_ptr": np.zeros(n + 1, np.int64), "data_deps": np.zeros(0, np.int64),
        "start_time_micros": np.zeros(n, np.int64), "duration_micros": np.ones(n, np.int64),
        "columns": columns, "extra_attrs": {3: EVERY_KIND}, "io": {0: (IOInfo("x"), None)},
    })  # fmt: skip
    assert [t.node(i).attr("sint64_val") for i in range(n)] == EDGES


@settings(max_examples=200, deadline=None)
@given(kwargs=column_traces())
def test_generated_attribute_columns_encode_the_same(kwargs):
    _build_both(kwargs)


# ---- which encoder is used ------------------------------------------------------------------
def test_python_encoders_are_used_only_uncached_and_within_the_budget(monkeypatch):
    monkeypatch.setattr(_wire_py, "_compiled_only", False)  # undo tests/conftest.py
    monkeypatch.setattr(_encode_py, "_encoded", {})
    monkeypatch.setattr(_jit, "cached", lambda disp: False)
    nodes, attrs = Uncompiled(), Uncompiled()
    use = _encode_py.use_python
    assert not use(nodes, _encode_py.MAX_BYTES + 1)
    assert use(nodes, _encode_py.MAX_BYTES // 2)
    assert use(nodes, _encode_py.MAX_BYTES // 2)
    assert not use(nodes, 1)  # this process has encoded its share with that encoder
    assert use(attrs, _encode_py.MAX_BYTES)  # the other one has its own
    monkeypatch.setattr(_encode_py, "_encoded", {})
    with _wire_py.compiled():  # the background warmer
        assert not use(nodes, 10)
    assert use(nodes, 10)
    monkeypatch.setattr(_jit, "cached", lambda disp: True)
    assert not use(nodes, 10)
    monkeypatch.setattr(_jit, "cached", lambda disp: False)
    nodes.overloads = {"sig": "loaded"}
    assert not use(nodes, 10)


def test_write_chakra_asks_once_per_file_with_its_copied_bytes(monkeypatch, tmp_path):
    asked: list[tuple[Any, int]] = []
    monkeypatch.setattr(_encode_py, "use_python", lambda c, n: asked.append((c, n)) or True)
    calls: list[int] = []
    real = _encode_py.encode_nodes
    monkeypatch.setattr(_encode_py, "encode_nodes", lambda *a: calls.append(a[1]) or real(*a))
    monkeypatch.setattr(io, "_CHUNK_NODES", 2)
    t = _trace([{"id": 1, "name": "abc", "type": 1, "attrs": EVERY_KIND[:3],
                 "inputs": IOInfo("x"), "unknown": b"\x9d\x06\x01\x02\x03\x04"},
                {"id": 2, "name": "", "type": 1}, {"id": 3, "name": "abc", "type": 1}])  # fmt: skip
    write_chakra(t, tmp_path / "t.et")
    payload = 6 + int(t.attr_len.sum()) + int(t.inputs_len[0]) + len(b"\x9d\x06\x01\x02\x03\x04")
    assert asked == [(_wire.encode_nodes, payload)] and calls == [2, 3]
    assert read_chakra(tmp_path / "t.et").node_id.tolist() == [1, 2, 3]


def _spy(calls: list[str], module: Any, name: str) -> Any:
    real = getattr(module, name)

    def spy(*args: Any) -> Any:
        calls.append(f"{module.__name__.rpartition('.')[2]}.{name}")
        return real(*args)

    return spy


@pytest.mark.parametrize("python", [True, False])
def test_to_chakra_encodes_with_the_encoders_use_python_names(monkeypatch, tmp_path, python):
    from lumos.chakra.mapping import to_chakra
    from lumos.examples_data import example_trace_path
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto

    graph = build_graph(read_kineto(example_trace_path()))
    called: list[str] = []
    for module, name in ((_encode_py, "encode_attributes"), (_encode_py, "encode_nodes"),
                         (mapping_encode, "_encode"), (_wire, "encode_nodes")):  # fmt: skip
        monkeypatch.setattr(module, name, _spy(called, module, name))
    monkeypatch.setattr(_encode_py, "use_python", lambda c, n: python)
    write_chakra(to_chakra(graph), tmp_path / "ex.0.et")
    expect = (
        ["_encode_py.encode_attributes", "_encode_py.encode_nodes"]
        if python
        else ["mapping_encode._encode", "_wire.encode_nodes"]
    )
    assert called == expect
