"""Bad input gets one LumosError naming the file; the CLI prints one line and exits 1."""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.realdata import needs_realdata, trace

from lumos.cli.main import main
from lumos.errors import LumosError, TraceFormatError
from lumos.ingest.kineto import read_kineto, trace_from_bytes

SMALL = "cuda_event_sync"  # a small real A100 trace (tests/realdata.py), read in place


@functools.cache
def _real() -> bytes:
    """The small trace's JSON, loaded once, when a test first needs it."""
    return gzip.decompress(trace(SMALL).read_bytes())


def _cli_error(capsys, *argv: str) -> str:
    assert main(["info", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lumos: error: ")
    return err[0]


def test_truncated_gzip(tmp_path, capsys):
    p = tmp_path / "t.json.gz"
    p.write_bytes(trace(SMALL).read_bytes()[:-100])
    assert "truncated gzip" in _cli_error(capsys, str(p))
    with pytest.raises(LumosError, match=str(p)):
        read_kineto(p)


def test_invalid_json(tmp_path, capsys):
    p = tmp_path / "bad.json"
    p.write_text('{"traceEvents": [{"ph": "X", ')
    line = _cli_error(capsys, str(p))
    assert str(p) in line and "invalid JSON" in line


def test_empty_file(tmp_path, capsys):
    p = tmp_path / "empty.json"
    p.write_bytes(b"")
    assert "empty file" in _cli_error(capsys, str(p))


def test_json_that_is_not_a_trace(tmp_path, capsys):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"lr": 0.1, "layers": [1, 2]}))
    assert "not a trace" in _cli_error(capsys, str(p))
    with pytest.raises(TraceFormatError, match="traceEvents"):
        read_kineto(p)


def test_directory_with_no_traces(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    assert "no Kineto" in _cli_error(capsys, str(tmp_path))


def test_missing_file(tmp_path, capsys):
    assert "no such file" in _cli_error(capsys, str(tmp_path / "nope.json"))


def test_trace_without_duration_events(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "process_name"}]}))
    with pytest.raises(TraceFormatError, match="no duration events"):
        read_kineto(p)


def test_odd_types_degrade_with_counted_warnings(tmp_path):
    doc = json.loads(_real())
    doc["traceEvents"][5]["args"] = ["not", "an", "object"]
    doc["traceEvents"][6]["ts"] = "soon"
    t = trace_from_bytes(json.dumps(doc).encode(), "odd.json")
    assert t.diagnostics["args_not_an_object"] == 1
    assert t.diagnostics["event_without_numeric_ts_dropped"] == 1


def test_verbose_shows_traceback(tmp_path, capsys):
    p = tmp_path / "bad.json"
    p.write_text("{")
    assert main(["-v", "info", str(p)]) == 1
    assert "Traceback" in capsys.readouterr().err


@needs_realdata
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mangled_real_trace_never_crashes(data):
    real = _real()
    cut = data.draw(st.integers(min_value=0, max_value=len(real)), label="cut")
    pos = data.draw(st.integers(min_value=0, max_value=len(real) - 1), label="pos")
    byte = data.draw(st.integers(min_value=0, max_value=255), label="byte")
    mangled = bytearray(real[:cut] if cut % 3 == 0 else real)
    if mangled:
        mangled[pos % len(mangled)] = byte
    with contextlib.suppress(LumosError):
        trace_from_bytes(bytes(mangled), "mangled.json")


# -- types, ranges and nesting, through ingest, graph building and replay (issue 13) ----------
#
# Each example runs under faulthandler's watchdog: pytest-timeout is not installed, and a hang
# must fail the suite (the watchdog dumps every thread's stack and exits) rather than stall it.

_HANG_GUARD_S = 60
_INTS = st.one_of(
    st.integers(min_value=-5, max_value=20),
    st.integers(min_value=0, max_value=8),
    st.sampled_from([2**31, 2**40, 2**63 - 1, 2**63, -(2**63) - 1, 2**70, 10**30]),
)
_FLOATS = st.one_of(
    st.floats(min_value=0, max_value=1e3),
    st.sampled_from([-1.0, 1e12, 1e15, 1e18, 1e300, -1e300, 2.0**70]),
)
_SCALARS = st.one_of(_INTS, _FLOATS, st.text(max_size=8), st.booleans(), st.none())


_DEEP = re.compile(r'"<deep (\d+)>"')


def _expand_deep(text: str) -> str:
    """Replace each ``"<deep N>"`` marker by a list nested N deep (kept as a marker until the
    JSON is written, so that hypothesis can print the example)."""
    return _DEEP.sub(lambda m: "[" * int(m.group(1)) + "1" + "]" * int(m.group(1)), text)


_VALUES = st.one_of(
    _SCALARS,
    st.integers(min_value=1, max_value=5000).map(lambda n: f"<deep {n}>"),
    st.lists(_SCALARS, max_size=3),
)
_ARG_KEYS = st.sampled_from(
    ["correlation", "External id", "device", "stream", "Record function id", "Input Dims",
     "Collective name", "In msg nelems", "Group size", "wait_on_stream", "cuda_sync_kind"]
)  # fmt: skip
_CATS = st.sampled_from(
    ["cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy", "cuda_sync", "x"]
)
_NAMES = st.sampled_from(
    ["aten::mm", "cudaLaunchKernel", "record_param_comms", "nccl:all_reduce",
     "ProfilerStep#1", "ProfilerStep#" + "9" * 30, "cudaStreamSynchronize"]
)  # fmt: skip


@st.composite
def _event(draw) -> dict:
    e = {
        "ph": draw(st.sampled_from(["X", "X", "X", "M", "s", "f"])),
        "cat": draw(_CATS),
        "name": draw(_NAMES),
        "pid": draw(st.one_of(_INTS, st.just("GPU 0"))),
        "tid": draw(st.one_of(_INTS, st.just("stream 7"))),
        "ts": draw(st.one_of(st.floats(min_value=0, max_value=1e3), st.integers(0, 999), _FLOATS)),
        "dur": draw(st.one_of(st.floats(min_value=0, max_value=50), _FLOATS)),
        "args": draw(st.dictionaries(_ARG_KEYS, _VALUES, max_size=4)),
    }
    if draw(st.booleans()):
        e["id"] = draw(_INTS)
    return e


_TOP = st.dictionaries(
    st.sampled_from(["distributedInfo", "deviceProperties"]),
    st.one_of(st.fixed_dictionaries({"rank": _INTS, "world_size": _INTS}), _VALUES),
    max_size=2,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_event(), min_size=1, max_size=12), top=_TOP)
def test_odd_types_ranges_and_nesting_through_replay(events, top):
    import faulthandler

    from lumos.graph.build import build_graph
    from lumos.replay import replay

    raw = _expand_deep(json.dumps({"traceEvents": events, **top})).encode()
    faulthandler.dump_traceback_later(_HANG_GUARD_S, exit=True)
    try:
        with contextlib.suppress(LumosError), warnings.catch_warnings():
            warnings.simplefilter("error")  # a NumPy warning is a failure, not a diagnostic
            replay(build_graph(trace_from_bytes(raw, "fuzz.json")))
    finally:
        faulthandler.cancel_dump_traceback_later()
