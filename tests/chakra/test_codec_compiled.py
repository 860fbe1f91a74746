"""Each kernel of the Chakra codec gives, run as Python, what its compiled module gives.

The kernels are one source each, compiled by ``pip install`` (``lumos._compiled``): the framing
scan and the node decoder (``lumos.chakra._wire``), the attribute value decoder
(``_wire_attr``), the record encoder (``_wire.encode_nodes``), the attribute encoder of
``to_chakra`` (``_encode_attrs``) and the node and attribute views (``view``). Here each runs
compiled (asserted: ``tests/kernel_sides.py``) and from its ``.py`` source
(:func:`lumos._compiled.python_twin`, asserted too) on the same inputs:
real ETs, files lumos writes, generated and mutated traces, hand-made malformed buffers and
attribute bodies. They must agree on every array (dtype, shape and bytes, so NaN payloads and
-0.0 count) or on the :class:`~lumos.errors.ChakraFormatError` message, write the same bytes,
and hand out views with the same fields (Python ints, not NumPy scalars).
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import numpy as np
import pytest
from chakra_testdata import (
    ATTRS,
    BODIES,
    EVERY_KIND,
    LONG,
    MALFORMED,
    NAME,
    NODES,
    VALID,
    _values,
    field,
    mutate,
    rec,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import kernel_sides as sides
from tests.realdata import SIMPLE_ADD_DIR, needs_realdata, realdata, trace

from lumos.chakra import (
    ChakraTrace,
    NodeType,
    _encode_attrs,
    _wire,
    _wire_attr,
    attr_table,
    io,
    io_nodes,
    mapping_encode,
    read_chakra,
    write_chakra,
)
from lumos.chakra._wire import MAX_MICROS
from lumos.chakra.attr_table import AttrTable
from lumos.chakra.attrs import Attr, IOInfo, attr, encode_attr, read_varint
from lumos.chakra.attrs import varint_bytes as _v
from lumos.chakra.builder import ChakraTraceBuilder
from lumos.chakra.mapping_encode import AttrColumn, build_trace
from lumos.chakra.schema import ATTR_KIND_BY_NAME
from lumos.chakra.trace import ChakraMetadata
from lumos.errors import ChakraFormatError

DATA = Path(__file__).parents[1] / "data"  # lumos's own test data
Decoded = tuple[int, int, list[np.ndarray]] | str


@functools.cache
def twin(name: str) -> ModuleType:
    """Kernel module ``lumos.chakra.<name>`` loaded from its ``.py`` source (asserted)."""
    return sides.interpreted(f"lumos.chakra.{name}")


@pytest.fixture(autouse=True, scope="module")
def _compiled_side() -> None:
    """The modules these tests call as "compiled" are the extension modules (else they skip)."""
    for module in (_wire, _wire_attr, _encode_attrs):
        assert sides.compiled(module.__name__) is module
    sides.compiled("lumos.chakra.view")


def _same_arrays(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        assert (y.dtype, y.shape) == (x.dtype, x.shape), k
        assert y.tobytes() == x.tobytes(), k


def _real_ets(root: Path) -> list[Path]:
    files = sorted(root.rglob("*.et")) + sorted(DATA.rglob("*.et*"))
    assert len(files) >= 121
    return files


# ---- the node decoder -----------------------------------------------------------------------
def _decode(buf: np.ndarray, wire: ModuleType) -> Decoded:
    """``(records, empty node records, io_nodes.decode_node_records columns)`` by ``wire``'s
    scan and decoder, or the message of the error ``read_chakra`` would raise."""
    path = Path("t.et")
    err = np.zeros(7, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    try:
        n = wire.scan_records(buf, 0, buf.size, io.RECORD_DEFAULT, False, empty, empty, err)
        io._raise_scan(path, err, io.RECORD_DEFAULT)
        n_empty = int(err[4])
        meta_len, pos = read_varint(buf[:10].tobytes(), 0)
        with mock.patch.object(io_nodes, "_wire", wire):
            cols = io_nodes.decode_node_records(path, buf, pos + meta_len, n - 1, err)
    except ChakraFormatError as exc:
        return str(exc)
    return n, n_empty, cols


def _same(data: bytes | np.ndarray) -> Decoded:
    """Decode ``data`` compiled and as Python, assert the results are identical, return them."""
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    compiled, python = _decode(buf, _wire), _decode(buf, twin("_wire"))
    if isinstance(compiled, str) or isinstance(python, str):
        assert python == compiled
        return compiled
    assert python[:2] == compiled[:2]
    assert len(compiled[2]) == 25
    _same_arrays(compiled[2], python[2])
    return compiled


def test_every_real_et_decodes_the_same(realdata_dir):
    for f in _real_ets(realdata_dir):
        result = _same(io._load(f))
        assert not isinstance(result, str), f


def test_written_trace_with_every_attribute_kind_decodes_the_same(tmp_path):
    b = ChakraTraceBuilder(version="1.0.0", metadata_attrs=[attr("schema", "x")])
    b.add_node(1, "n", NodeType.COMP_NODE, attrs=EVERY_KIND, ctrl_deps=[0], data_deps=[2**64 - 1],
               start_time_micros=MAX_MICROS, duration_micros=3, inputs=IOInfo("[1]", "[[2]]", "t"),
               outputs=IOInfo(), unknown=_v(99 << 3 | 5) + b"abcd")  # fmt: skip
    b.add_node(0, "", 0)  # an empty record
    b.add_node(2, "n", NodeType.COMM_COLL_NODE, attrs=EVERY_KIND[::-1], data_deps=[1, 1, 300])
    b.add_node(3, "", -128, attrs=[attr("comm_size", 1 << 20)])
    write_chakra(b.build(), tmp_path / "a.et")
    n, n_empty, cols = _same((tmp_path / "a.et").read_bytes())  # type: ignore[misc]
    assert (n, n_empty) == (5, 1)
    assert cols[-1].shape == (len({a.name for a in EVERY_KIND} | {"comm_size"}), 2)


def _example_graph() -> Any:
    from lumos.examples_data import example_trace_path
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto

    return build_graph(read_kineto(example_trace_path()))


def test_converted_trace_decodes_the_same(tmp_path):
    """What ``lumos convert`` writes: a graph's tasks with lumos's attributes and delay nodes."""
    from lumos.chakra.mapping import to_chakra

    et = to_chakra(_example_graph(), delay_nodes=True)
    path = write_chakra(et, tmp_path / "ex.0.et")[0]
    _, _, cols = _same(path.read_bytes())  # type: ignore[misc]
    assert cols[0].size == et.num_nodes and cols[17].size > 5 * et.num_nodes


def _file(nodes: list[dict]) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        return write_chakra(_built(nodes), Path(d) / "g.et")[0].read_bytes()


def _built(nodes: list[dict]) -> ChakraTrace:
    b = ChakraTraceBuilder(version="0.0.4")
    for node in nodes:
        b.add_node(**node)
    return b.build()


@settings(max_examples=150, deadline=None)
@given(nodes=NODES)
def test_generated_traces_decode_the_same(nodes):
    result = _same(_file(nodes))
    assert not isinstance(result, str) and result[0] == len(nodes) + 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=NODES, data=st.data())
def test_mutated_traces_decode_or_fail_the_same(nodes, data):
    raw = mutate(_file(nodes), data, (1, 4), cut=8, insert=12)
    if raw:
        _same(raw)


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_buffers_fail_with_the_same_message(case):
    result = _same(MALFORMED[case])
    assert isinstance(result, str) == (case not in VALID), result


def test_float32_nan_payload_is_cast_as_c_casts():
    _, _, cols = _same(MALFORMED["attribute float32 NaN payload"])  # type: ignore[misc]
    assert np.isnan(cols[19][0]) and cols[17].tolist() == [5]
    # a signalling NaN (payload 1) becomes the quiet float64 NaN of the same payload
    assert cols[19].view(np.uint64).tolist() == _f32_bits_as_f64_bits([0x7F800001])


# ---- the helpers the two decoders share -----------------------------------------------------
def _f32_bits_as_f64_bits(bits: list[int]) -> list[int]:
    """What C's float -> double cast makes of each float32 bit pattern (NumPy's cast)."""
    with np.errstate(invalid="ignore"):
        f64 = np.array(bits, np.uint32).view(np.float32).astype(np.float64)
    return f64.view(np.uint64).tolist()


SPECIAL_F32 = [0, 1, 0x7FFFFF, 0x800000, 0x3F800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001,
               0x7FC00000, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFF800000, 0xFFC00001,
               0x00400000, 0x80400000]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(bits=st.lists(st.integers(0, 2**32 - 1), max_size=20))
def test_float32_widening_is_c_cast_in_both(bits):
    bits = bits + SPECIAL_F32
    expect = _f32_bits_as_f64_bits(bits)
    for module in (_wire, twin("_wire")):
        assert [module._float64_bits(b) for b in bits] == expect


@settings(max_examples=300, deadline=None)
@given(u=st.integers(0, 2**64 - 1))
def test_integer_casts_are_c_casts_in_both(u):
    i64 = int(np.array([u], np.uint64).view(np.int64)[0])
    i32 = int(np.array([u & 0xFFFFFFFF], np.uint32).view(np.int32)[0])
    for module in (_wire, twin("_wire")):
        assert (module._signed64(u), module._signed32(u)) == (i64, i32)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=14), start=st.integers(0, 3), wt=st.integers(0, 7),
       fno=st.integers(-2, 40))  # fmt: skip
def test_varints_and_skips_alike(raw, start, wt, fno):
    buf = np.frombuffer(raw + b"\0", dtype=np.uint8)
    end = len(raw)
    got = [
        (m._varint(buf, start, end), m._skip(buf, start, end, wt), m._attr_wire_type(fno),
         m._le(buf, 0, min(end, 8)))
        for m in (_wire, twin("_wire"))
    ]  # fmt: skip
    assert got[0] == got[1]


# ---- the attribute value decoder ------------------------------------------------------------
def _table(blob: np.ndarray, off: np.ndarray, ln: np.ndarray, module: ModuleType) -> AttrTable:
    with mock.patch.object(attr_table, "_wire_attr", module):
        return AttrTable.decode(blob, off, ln, np.zeros(off.size, np.int8))


def _same_values(blob: np.ndarray, off: object, ln: object) -> AttrTable:
    """Decode the bodies ``blob[off[k]:off[k]+ln[k]]`` compiled and as Python, assert the four
    arrays are identical and return the compiled table."""
    off = np.asarray(off, dtype=np.int64)
    ln = np.asarray(ln, dtype=np.int64)
    compiled = _table(blob, off, ln, _wire_attr)
    python = _table(blob, off, ln, twin("_wire_attr"))
    names = ("ptr", "val", "val_len", "bad")
    _same_arrays([getattr(compiled, k) for k in names], [getattr(python, k) for k in names])
    return compiled


def _pack(bodies: list[bytes], gaps: list[bytes] | None = None) -> tuple[np.ndarray, list, list]:
    """``(blob, off, ln)`` of ``bodies`` laid out one after the other, ``gaps[k]`` before body k
    (so that string spans are read at offsets other than their body's)."""
    gaps = gaps or [b""] * len(bodies)
    blob, off, ln = b"", [], []
    for gap, body in zip(gaps, bodies, strict=True):
        blob += gap
        off.append(len(blob))
        ln.append(len(body))
        blob += body
    return np.frombuffer(blob + b"\xff", dtype=np.uint8), off, ln


def _trace_values(t: ChakraTrace) -> int:
    """Compare the node attributes and the metadata attributes of ``t``; their number."""
    nodes = _same_values(t.blob, t.attr_off, t.attr_len)
    assert not nodes.bad.any()
    off, ln = t.metadata._spans
    _same_values(np.frombuffer(t.metadata.raw, dtype=np.uint8), off, ln)
    return int(nodes.bad.size) + len(off)


def test_every_attribute_of_every_real_et_decodes_the_same(realdata_dir):
    total = 0
    for f in _real_ets(realdata_dir):
        t = read_chakra(f)
        assert isinstance(t, ChakraTrace), f
        total += _trace_values(t)
    assert total > 20_000  # chakra.0.et alone has 22,037


def _equal(a: object, b: object) -> bool:
    return a == b or (a != a and b != b)  # NaN is NaN


def test_every_attribute_kind_decodes_the_same_values(tmp_path):
    b = ChakraTraceBuilder(version="1.0.0", metadata_attrs=EVERY_KIND)
    b.add_node(1, "n", NodeType.COMP_NODE, attrs=EVERY_KIND)
    b.add_node(2, "m", NodeType.COMM_COLL_NODE, attrs=EVERY_KIND[::-1])
    t = read_chakra(write_chakra(b.build(), tmp_path / "a.et")[0])
    assert isinstance(t, ChakraTrace) and _trace_values(t) == 3 * len(EVERY_KIND)
    kinds = t.attr_kind
    for module in (_wire_attr, twin("_wire_attr")):
        with mock.patch.object(attr_table, "_wire_attr", module):
            table = AttrTable.decode(t.blob, t.attr_off, t.attr_len, kinds)
        for k, a in enumerate(EVERY_KIND):
            got = table.value(k)
            if a.kind.endswith("_list"):
                assert len(got) == len(a.value) and all(map(_equal, got, a.value)), a
            elif a.kind == "float_val":
                assert _equal(got, float(np.float32(a.value))), a
            else:
                assert _equal(got, a.value), a


@pytest.mark.parametrize("case", list(BODIES))
def test_hand_made_bodies_decode_or_fail_the_same(case):
    body, code = BODIES[case]
    t = _same_values(*_pack([NAME + body, body], [b"\x00", b"\x01\x02"]))
    assert t.bad.tolist() == [code, code]


def test_all_hand_made_bodies_at_once():
    """One call over every body: rows after a malformed one keep their places."""
    bodies = [body for body, _ in BODIES.values()]
    t = _same_values(*_pack(bodies, [bytes(k % 3) for k in range(len(bodies))]))
    assert t.bad.tolist() == [code for _, code in BODIES.values()]


def test_no_bodies():
    t = _same_values(np.zeros(0, np.uint8), [], [])
    assert t.ptr.tolist() == [0] and t.val.size == 0


def _element_bytes(kind: str, value: object) -> bytes:
    """One list element of ``kind`` as its scalar kind writes it (without the tag)."""
    scalar = kind.replace("_list", "_val")
    raw = encode_attr(Attr("", value, scalar))
    return raw[read_varint(raw, 0)[1] :]


_ELEMENT_WIRE_TYPE = {"double": 1, "fixed64": 1, "sfixed64": 1, "float": 5, "fixed32": 5,
                      "sfixed32": 5, "string": 2, "bytes": 2}  # fmt: skip


@st.composite
def _list_member(draw: st.DrawFn) -> bytes:
    """A list member whose elements come packed or not, in runs, between unknown fields."""
    kind = draw(st.sampled_from(sorted(k for k in ATTR_KIND_BY_NAME if k.endswith("_list"))))
    wt = _ELEMENT_WIRE_TYPE.get(kind.partition("_")[0], 0)
    body = b""
    for run in draw(st.lists(_values(kind), max_size=3)):
        items = [_element_bytes(kind, v) for v in run]
        if wt != 2 and draw(st.booleans()):
            body += field(1, 2, rec(b"".join(items)))
        else:
            body += b"".join(field(1, wt, item) for item in items)
        body += draw(st.sampled_from([b"", field(2, 0, b"\x01"), field(3, 2, b"\x01x")]))
    return field(ATTR_KIND_BY_NAME[kind], 2, rec(body))


MEMBERS = st.one_of(
    ATTRS.map(encode_attr),
    _list_member(),
    st.sampled_from([NAME, field(2, 2, b"\x01d"), field(40, 0, b"\x01"), field(0, 1, bytes(8))]),
)
BODY = st.lists(MEMBERS, max_size=4).map(b"".join)
GAPS = st.binary(max_size=3)


@settings(max_examples=300, deadline=None)
@given(bodies=st.lists(st.tuples(GAPS, BODY), max_size=6))
def test_generated_bodies_decode_the_same(bodies):
    gaps, raw = [g for g, _ in bodies], [b for _, b in bodies]
    t = _same_values(*_pack(raw, gaps))
    assert not t.bad.any()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies=st.lists(BODY, min_size=1, max_size=4), data=st.data())
def test_mutated_bodies_decode_or_fail_the_same(bodies, data):
    _same_values(*_pack([mutate(body, data, (0, 3), cut=8, insert=12) for body in bodies]))


@settings(max_examples=300, deadline=None)
@given(bodies=st.lists(st.binary(max_size=24), max_size=4))
def test_arbitrary_bytes_decode_or_fail_the_same(bodies):
    _same_values(*_pack(bodies))


def test_a_long_varint_is_an_error_in_both():
    t = _same_values(*_pack([field(9, 0, LONG)]))
    assert t.bad.tolist() == [_wire.E_VARINT_TOO_LONG]


# ---- the encoders ---------------------------------------------------------------------------
@contextmanager
def encoders(python: bool) -> Iterator[None]:
    """Within it ``write_chakra`` and ``build_trace`` encode with the Python sources (or the
    compiled modules)."""
    wire = twin("_wire") if python else _wire
    attrs = twin("_encode_attrs") if python else _encode_attrs
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(io, "_wire", wire))
        stack.enter_context(mock.patch.object(mapping_encode, "_encode_attrs", attrs))
        yield


def _write_both(
    data: Any, folder: Path, name: str, make: Any = None, gzip: bool = False
) -> list[bytes]:
    """The files of ``write_chakra(make() if make else data)`` compiled, asserted identical to
    those the Python sources write; returns them."""
    files = []
    for python in (False, True):
        with encoders(python):
            data = make() if make else data
            written = write_chakra(data, folder / f"{name}-{python}", gzip=gzip)
        files.append([p.read_bytes() for p in written])
    compiled, python_ = files
    assert python_ == compiled
    return compiled


def test_every_real_et_is_written_back_the_same(realdata_dir, tmp_path):
    files = _real_ets(realdata_dir)
    for k, f in enumerate(files):
        et = read_chakra(f)
        assert isinstance(et, ChakraTrace)
        _write_both(et, tmp_path, str(k))
    (raw,) = _write_both(read_chakra(files[-1]), tmp_path, "gz", gzip=True)
    assert raw[:2] == b"\x1f\x8b"


def test_real_et_written_in_several_chunks(realdata_dir, tmp_path):
    """upstream's chakra.0.et (3,664 nodes, 3 MB) in chunks of 1,000 nodes, byte for byte."""
    et = read_chakra(realdata_dir / "chakra/tests/data/chakra.0.et")
    with mock.patch.object(io, "_CHUNK_NODES", 1000):
        (raw,) = _write_both(et, tmp_path, "chakra")
    assert raw == (realdata_dir / "chakra/tests/data/chakra.0.et").read_bytes()


def _converted(paths: list[Path], folder: Path) -> list[bytes]:
    """``lumos convert`` of ``paths`` with each pair of encoders: the ETs, asserted identical."""
    from lumos.convert import convert

    files = []
    for python in (False, True):
        with encoders(python):
            convert(paths, folder / f"run-{python}", workers=1)
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
def test_converted_ranks_encode_the_same(tmp_path):
    """The 8-rank DLRM run."""
    assert len(_converted([trace("dlrm_kineto_8rank")], tmp_path)) == 8


@pytest.mark.slow
@needs_realdata
def test_large_converted_trace_encodes_the_same(tmp_path):
    """df_index_resolver: 162k nodes and 28 MB, written in three chunks (the Python source
    takes half a minute)."""
    from lumos.convert import convert_graph
    from lumos.graph.build import build_graph
    from lumos.ingest.kineto import read_kineto

    graph = build_graph(read_kineto(trace("v100_stream_wait_event")))

    def make() -> ChakraTrace:
        return convert_graph(graph)[0]

    (raw,) = _write_both(None, tmp_path, "v100", make)
    assert len(raw) > 20 << 20


def test_every_attribute_kind_and_field_encode_the_same(tmp_path):
    t = _built([
        {"id": 2**64 - 1, "name": "n", "type": NodeType.COMP_NODE, "attrs": EVERY_KIND,
         "ctrl_deps": [0, 2**63], "data_deps": [2**64 - 1, 1], "start_time_micros": 1,
         "duration_micros": MAX_MICROS, "inputs": IOInfo("[1]", "[[2]]", "t"),
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
        _write_both(_built(nodes), Path(d), "g")


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
        with encoders(python):
            built.append(build_trace(ChakraMetadata.build("0.0.4"), **kwargs))
    a, b = built
    cols = ("blob", "attr_off", "attr_len", "attr_ptr", "attr_kind", "attr_int")
    _same_arrays([getattr(a, c) for c in cols], [getattr(b, c) for c in cols])
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


# ---- node and attribute views ---------------------------------------------------------------
def _fields(v: Any) -> str:
    """Every field of a node view and its attribute views, types included, as text (NaN equals
    NaN, -0.0 differs from 0.0, a NumPy scalar from an int)."""
    attrs = [(a.name, a.kind, a.value, a.doc_string, a.row, repr(a), str(a)) for a in v.attrs]
    looked_up = [v.attr(a.name) for a in v.attrs] + [v.attr("no such attribute", 7)]
    values = (v.id, v.name, v.type, v.ctrl_deps, v.data_deps, v.start_time_micros,
              v.duration_micros, v.row, v.inputs, v.outputs, v.unknown, attrs, looked_up)  # fmt: skip
    types = [type(x).__name__ for x in values[:8]]
    return repr((values, types, repr(v)))


def _same_views(t: ChakraTrace) -> int:
    """The views of every node of ``t``, compiled and from the Python source, field by field;
    their number."""
    view = twin("view")
    python_t = dataclasses.replace(t)  # its own cached columns: the Python source's type
    python_t.__dict__["view_columns"] = view.ViewColumns(python_t)
    n = 0
    for a, b in zip(t.iter_nodes(), view.node_views(python_t, 0, t.num_nodes), strict=True):
        assert _fields(a) == _fields(b)
        n += 1
    assert n == t.num_nodes
    return n


def test_views_of_every_real_et_are_the_same(realdata_dir):
    assert sum(_same_views(read_chakra(f)) for f in _real_ets(realdata_dir)) > 4000


def test_views_of_every_attribute_kind_and_field_are_the_same(tmp_path):
    t = _built([
        {"id": 2**64 - 1, "name": "n", "type": NodeType.COMP_NODE, "attrs": EVERY_KIND,
         "ctrl_deps": [0, 2**63], "data_deps": [2**64 - 1, 1], "start_time_micros": 1,
         "duration_micros": MAX_MICROS, "inputs": IOInfo("[1]", "[[2]]", "t"),
         "outputs": IOInfo(), "unknown": b"\x9d\x06\x01\x02\x03\x04"},
        {"id": 0, "name": "", "type": 0},
        {"id": 1, "name": "é", "type": -128, "attrs": EVERY_KIND[::-1]},
        {"id": 2, "name": "x", "type": 99},
    ])  # fmt: skip
    assert _same_views(t) == 4
    assert _same_views(read_chakra(write_chakra(t, tmp_path / "v.et")[0])) == 4
    node = next(iter(t.iter_nodes()))
    assert type(node.id) is int and node.id == 2**64 - 1 and node.data_deps == (2**64 - 1, 1)
    assert [v.type for v in t.iter_nodes()][2:] == [-128, 99]


def test_views_of_a_converted_trace_are_the_same(tmp_path):
    from lumos.chakra.mapping import to_chakra

    et = to_chakra(_example_graph(), delay_nodes=True)
    assert _same_views(read_chakra(write_chakra(et, tmp_path / "ex.0.et")[0])) == et.num_nodes


@settings(max_examples=100, deadline=None)
@given(nodes=NODES)
def test_views_of_generated_traces_are_the_same(nodes):
    _same_views(_built(nodes))
