"""Bad input gets one LumosError naming the file; the CLI prints one line and exits 1."""

from __future__ import annotations

import contextlib
import functools
import gzip
import json

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
