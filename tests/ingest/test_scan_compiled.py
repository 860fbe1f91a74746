"""The compiled Kineto scan and its Python source give the same rows, column by column.

:mod:`lumos.ingest.kineto_scan` and the JSON primitives it calls (:mod:`lumos.ingest.json_scan`)
are compiled by ``pip install``; run as Python (``lumos._compiled.python_twin``, the primitives
and :func:`lumos._intern.intern_span` taken from their own Python sources too) they must write the
same rows, string tables and statuses: on small real traces, on random traces (valid, cut short
or with a byte changed) and, primitive by primitive, on random JSON text. The sources also run
where Cython is not installed at all (``lumos._cyshim``).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import kernel_sides as sides
from tests.realdata import needs_realdata, trace

from lumos import _compiled
from lumos.ingest import json_scan, kineto_scan
from lumos.ingest.kineto import _KEY
from lumos.ingest.kineto_fold import ScanState
from lumos.ingest.kineto_scan import FLOAT_FIELDS, INT_FIELDS, MALFORMED, NI, UNSUPPORTED

PRIMITIVES = ("after_member", "as_float", "as_int", "member", "skip_value", "string_end",
              "whitespace_end")  # fmt: skip


def _python_scan() -> ModuleType:
    """The scan's source run as Python, calling the Python sources of what it calls in C."""
    scan_py = sides.interpreted("lumos.ingest.kineto_scan")
    json_py = sides.interpreted("lumos.ingest.json_scan")
    for name in PRIMITIVES:
        setattr(scan_py, name, getattr(json_py, name))
    scan_py.intern_span = sides.interpreted("lumos._intern").intern_span
    return scan_py


def _scan_all(module: ModuleType, raw: bytes, chunk: int) -> dict[str, Any]:
    """Scan ``raw`` (from its ``traceEvents`` on) a chunk at a time, as ``lumos.ingest.kineto``
    does: every chunk's result, every row written (rows beyond those read keep a sentinel) and
    the string tables at the end."""
    m = _KEY.search(raw)
    pos = m.end() if m else 0
    buf = np.frombuffer(raw, dtype=np.uint8)
    state = ScanState()
    results, ints_out, floats_out = [], [], []
    while True:
        state.reserve(chunk)
        ints = np.full(chunk * NI, -7, dtype=np.int64)
        floats = np.full(chunk * len(FLOAT_FIELDS), -7.5)
        n, sep, status, done = module.scan(buf, pos, chunk, ints, floats, *state.arrays())
        results.append((int(n), int(sep), int(status), int(done)))
        ints_out.append(ints.reshape(chunk, NI))
        floats_out.append(floats.reshape(chunk, len(FLOAT_FIELDS)))
        if done or status == MALFORMED:
            break
        pos = sep + 1
    tables = {"counts": state.counts}
    for k, name in enumerate(("cats", "names", "dims")):
        tab, rep, rep_hash = state.tables[k]
        used = int(state.counts[k])
        tables.update({f"{name}_tab": tab, f"{name}_rep": rep[:used],
                       f"{name}_hash": rep_hash[:used]})  # fmt: skip
    rows = np.concatenate(ints_out)
    times = np.concatenate(floats_out)
    return {
        "results": results,
        **{f: rows[:, c] for c, f in enumerate(INT_FIELDS)},
        **{f: times[:, c] for c, f in enumerate(FLOAT_FIELDS)},
        **tables,
    }


def assert_same_scan(raw: bytes, chunk: int) -> dict[str, Any]:
    """The compiled scan of ``raw`` equals its Python source's, column by column, dtype
    included; returns the compiled one."""
    assert sides.compiled("lumos.ingest.kineto_scan") is kineto_scan
    assert sides.compiled("lumos.ingest.json_scan") is json_scan
    compiled = _scan_all(kineto_scan, raw, chunk)
    python = _scan_all(_python_scan(), raw, chunk)
    assert compiled["results"] == python["results"]
    assert list(compiled) == list(python)
    for name in list(compiled)[1:]:
        a, b = compiled[name], python[name]
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    return compiled


def test_the_scan_modules_are_kernels() -> None:
    assert {"lumos.ingest.json_scan", "lumos.ingest.kineto_scan"} <= set(_compiled.KERNEL_MODULES)


@needs_realdata
@pytest.mark.parametrize(
    ("name", "chunk"),
    [
        ("cuda_event_sync", 1000),
        ("gloo_cpu_only", 1000),
        ("backward_thread", 3),
        ("cuda_sync_mock_h100", 1000),
        ("step_on_idle_thread", 50),
        ("simple_add_kineto", 1000),
        ("hip_mi250", 64),  # hex streams: chunks the scan leaves to the typed decoder
    ],
)
def test_compiled_scan_equals_its_source_on_real_traces(name: str, chunk: int) -> None:
    path = trace(name)
    raw = path.read_bytes()
    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    scanned = assert_same_scan(raw, chunk)
    statuses = {status for _, _, status, _ in scanned["results"]}
    assert MALFORMED not in statuses
    assert (UNSUPPORTED in statuses) == (name == "hip_mi250")
    assert sum(n for n, _, _, _ in scanned["results"]) > 0


def test_a_tiny_payload_read_only_or_not() -> None:
    payload = b'{"traceEvents": [{"ph": "X", "name": "a"}, {"b": [2, 3]}], "x": 0}'
    for raw in (payload, bytearray(payload)):
        buf = np.frombuffer(raw, dtype=np.uint8)
        state = ScanState()
        ints, floats = np.empty(4 * NI, np.int64), np.empty(4 * len(FLOAT_FIELDS))
        assert kineto_scan.scan(buf, 17, 4, ints, floats, *state.arrays()) == (2, 56, 0, 1)
        assert ints[INT_FIELDS.index("ph")] == ord("X")
    assert_same_scan(payload, 1)


# random traces: the keys the scan reads and others, values of every JSON kind
_TEXT = st.text(st.sampled_from('ab"\\/\n\tü\x01€ '), max_size=6)
# numbers as JSON text of any length (json.dumps would write each float's shortest form):
# written as a marked string, the marks removed after dumping
_RAW = "\x00#"
_NUMBER = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.from_regex(
        r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
    ).map(lambda text: _RAW + text),
)
_SCALAR = st.one_of(st.none(), st.booleans(), _NUMBER, _TEXT)
_VALUE = st.recursive(
    _SCALAR,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(_TEXT, c, max_size=3),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id", "bp", "s", "x", "p\\u0068"]
)
_ARG_KEYS = st.sampled_from([*kineto_scan.ARG_FIELDS, "cuda_sync_kind", "Input Dims", "other"])
_ARGS = st.dictionaries(
    _ARG_KEYS,
    st.one_of(st.integers(-(2**63), 2**63), st.integers(-5, 5), _VALUE, st.just("0x1a")),
    max_size=6,
)
_EVENT = st.one_of(
    st.fixed_dictionaries(
        {"ph": st.sampled_from(["X", "X", "M", "i", "s", "f", "XX", ""])},
        optional={
            "cat": st.one_of(st.sampled_from(["cpu_op", "kernel", "fwdbwd"]), _TEXT),
            "name": st.one_of(st.sampled_from(["aten::mm", "ProfilerStep#1"]), _TEXT),
            "pid": st.one_of(st.integers(-3, 2**40), _TEXT, _NUMBER),
            "tid": st.one_of(st.integers(-3, 3), st.just("stream 7"), _TEXT),
            "ts": st.one_of(_NUMBER, _TEXT),
            "dur": _NUMBER,
            "id": st.one_of(st.integers(0, 5), st.none(), _TEXT, _NUMBER),
            "args": st.one_of(_ARGS, _VALUE),
        },
    ),
    st.dictionaries(_KEYS, _VALUE, max_size=4),
    _VALUE,
)


@st.composite
def _documents(draw: st.DrawFn) -> bytes:
    events = draw(st.lists(_EVENT, max_size=8))
    doc = json.dumps(
        {"traceEvents": events, "x": [1]},
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.sampled_from([None, 0, 2])),
        separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])),
    ).encode()
    doc = re.sub(rb'"\\u0000#([^"]*)"', rb"\1", doc)
    start = doc.index(b"[") + 1
    edit = draw(st.sampled_from(["none", "none", "cut", "byte"]))
    if edit != "none" and len(doc) > start:
        at = draw(st.integers(start, len(doc) - 1))
        if edit == "cut":
            doc = doc[:at]
        else:
            byte = draw(st.sampled_from(b'{}[],:"\\ 0-.eE\x00\xff'))
            doc = doc[:at] + bytes([byte]) + doc[at + 1 :]
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_documents(), chunk=st.integers(1, 5))
def test_compiled_scan_equals_its_source_on_random_traces(doc: bytes, chunk: int) -> None:
    assert_same_scan(doc, chunk)


_JSONISH = st.one_of(
    _VALUE.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=24),
    st.text(
        st.sampled_from(' \t\n\r{}[],:"\\/u0123456789abcdefABCDEF-+.eEtrunlsf'), max_size=24
    ).map(str.encode),
)


@settings(max_examples=200, deadline=None)
@given(text=_JSONISH)
def test_each_json_primitive_equals_its_source(text: bytes) -> None:
    """Every primitive at every position of random JSON-like text, each end included."""
    python = sides.interpreted("lumos.ingest.json_scan")
    buf = np.frombuffer(text + b"\x00", dtype=np.uint8)  # a byte to stand at when i == end
    for end in {len(text), len(text) // 2}:
        for i in range(end + 1):
            at = (buf, i, end)
            assert json_scan.whitespace_end(*at) == python.whitespace_end(*at)
            assert json_scan.skip_value(*at) == python.skip_value(*at)
            assert json_scan.after_member(*at, 125) == python.after_member(*at, 125)
            assert json_scan.after_member(*at, 93) == python.after_member(*at, 93)
            if i == end:
                continue
            assert json_scan.as_int(*at) == python.as_int(*at)
            assert json_scan.as_float(*at) == python.as_float(*at)
            if text[i] == ord('"'):
                assert json_scan.string_end(*at) == python.string_end(*at)
            assert json_scan.member(*at) == python.member(*at)


@contextmanager
def _without_cython() -> Iterator[None]:
    """``import cython`` fails (as where Cython is not installed)."""
    saved = sys.modules.get("cython")
    sys.modules["cython"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if saved is None:
            del sys.modules["cython"]
        else:
            sys.modules["cython"] = saved


def _load(name: str, where: str) -> ModuleType:
    path = Path(kineto_scan.__file__).parents[1] / where
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sources_run_where_cython_is_not_installed() -> None:
    with _without_cython():
        intern_py = _load("lumos_intern_noc", "_intern.py")
        json_py = _load("lumos_json_scan_noc", "ingest/json_scan.py")
        scan_py = _load("lumos_kineto_scan_noc", "ingest/kineto_scan.py")
    assert scan_py.cython.__name__ == "lumos._cyshim"
    for name in PRIMITIVES:
        setattr(scan_py, name, getattr(json_py, name))
    scan_py.intern_span = intern_py.intern_span
    doc = json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": 'a"b', "pid": 0, "tid": "stream 7", "ts": 1.5,
         "dur": 1712195495519689.047, "args": {"Input Dims": [[2, 3]], "stream": 7, "x": [{}]}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
    ]}, indent=1).encode()  # fmt: skip
    compiled = _scan_all(kineto_scan, doc, 4)
    python = _scan_all(scan_py, doc, 4)
    assert compiled["results"] == python["results"] == [(2, len(doc) - 3, 0, 1)]
    for name in list(compiled)[1:]:
        np.testing.assert_array_equal(compiled[name], python[name], err_msg=name)
