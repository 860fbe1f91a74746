"""The compiled scan of big Kineto payloads gives exactly the trace the typed decoders give.

``trace_from_bytes(..., split_min_bytes=0)`` forces the scan (:mod:`lumos.ingest.kineto_scan`,
folded by :mod:`lumos.ingest.kineto_fold`) on payloads of any size; every field of the two
traces is compared. Real traces of every kind, hand-written corner cases (escapes, string pids,
hex streams, ns-fraction times, chunks that fall back to the typed decoder), and random traces.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.realdata import needs_realdata, trace

import lumos.ingest.kineto as kineto
from lumos.errors import LumosError
from lumos.ingest.kineto import trace_from_bytes


def assert_same(a: object, b: object, where: str = "trace") -> None:
    """Every field of two traces (or parts of them) equal, arrays dtype included."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def both_ways(raw: bytes) -> tuple[Any, Any]:
    """(whole decode, forced scan) of ``raw``: traces, or the error message each raised."""
    out = []
    for split in (1 << 62, 0):
        try:
            out.append(trace_from_bytes(raw, "t.json", split_min_bytes=split))
        except LumosError as exc:
            out.append(str(exc))
    return out[0], out[1]


@pytest.fixture
def folds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the chunks the fast fold took (the others fell back to the typed decoder)."""
    calls: list[int] = []
    real = kineto.fold_scanned

    def counting(*args: Any) -> None:
        real(*args)
        calls.append(args[-1])

    monkeypatch.setattr(kineto, "fold_scanned", counting)
    return calls


@needs_realdata
@pytest.mark.parametrize(
    "name",
    [
        "v100_stream_wait_event",
        "legacy_2021_v100",
        "nccl_a100",
        "gpu_bound_v100",
        "hip_mi250",
        "rccl_mi300",
        "allgather_b200",
        "gloo_cpu_only",
        "sendrecv_5streams_rank0",
    ],
)
def test_scan_equals_typed_decode_on_real_traces(name: str, folds: list[int]) -> None:
    path = trace(name)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    whole, scanned = both_ways(raw)
    assert_same(whole, scanned)
    if name == "v100_stream_wait_event":
        assert sum(folds) == 216_092  # every event folded by the fast path, none fell back


def _ev(**kw: Any) -> dict[str, Any]:
    e = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10.5,
         "dur": 3.25, "args": {"External id": 7}}  # fmt: skip
    e.update(kw)
    return e


def _doc(events: list[dict[str, Any]], **kw: Any) -> bytes:
    return json.dumps({"schemaVersion": 1, "traceEvents": events, "x": [1]}, **kw).encode()


CORNERS = {
    "escaped and unicode names": [
        _ev(name='a"b'),
        _ev(name="x\\y"),
        _ev(name="ünï"),
        _ev(name="A"),
        _ev(name="tab\there"),
    ],
    "string pid and tid": [
        _ev(pid="Spans", tid="PyTorch Profiler", cat="Trace"),
        _ev(cat="kernel", pid=0, tid="stream 7", args={"correlation": 3}),
        _ev(cat="kernel", pid="GPU 1", tid="stream 9", args={}),
    ],
    "hip hex stream (falls back)": [_ev(cat="kernel", args={"stream": "0x1a", "device": 0})],
    "float where an integer belongs (tolerant decoder)": [_ev(args={"External id": 1.5})],
    "ns-fraction times beyond a double": [
        _ev(ts=1712195495519689.047, dur=12.345678901234567),
        _ev(ts=1712195495519690.5e0, dur=0),
    ],
    "metadata, flows and instants": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main thread"}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "s", "cat": "fwdbwd", "id": 5, "pid": 1, "tid": 2, "ts": 10.5},
        {"ph": "f", "cat": "fwdbwd", "id": 5, "pid": 1, "tid": 2, "ts": 20, "bp": "e"},
        {"ph": "s", "cat": "ac2g", "id": 6, "pid": 1, "tid": 2, "ts": 11},
        {"ph": "i", "s": "g", "name": "Iteration Start", "pid": "Traces", "tid": "x", "ts": 1},
        _ev(
            name="aten::mm", args={"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}
        ),
        _ev(name="ProfilerStep#3", cat="user_annotation", ts=1, dur=100),
    ],
    "collectives and syncs": [
        _ev(
            name="record_param_comms",
            args={
                "Collective name": "allreduce",
                "In msg nelems": 4,
                "Out msg nelems": 4,
                "dtype": "Float",
                "Group size": 2,
                "Process Group Ranks": [0, 1],
                "Seq": 3,
                "External id": 9,
            },
        ),
        _ev(
            cat="cuda_sync",
            name="Event Sync",
            args={
                "cuda_sync_kind": "event",
                "wait_on_stream": 7,
                "wait_on_cuda_event_record_corr_id": 42,
                "stream": 7,
            },
        ),
        _ev(
            cat="kernel",
            name="ncclKernel_AllReduce",
            args={"stream": 7, "device": 0, "correlation": 5, "Collective name": "allreduce"},
        ),
    ],
    "odd elements and keys": [
        _ev(),
        7,
        _ev(extra={"nested": [{"a": [True, False, None]}]}),
        {"ph": "X"},
        _ev(args={}),
    ],
    "args not an object": [_ev(args=None), _ev()],
    "memory events": [
        _ev(name="aten::empty", ts=10, dur=5),
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "s": "t",
            "name": "[memory]",
            "pid": 1,
            "tid": 2,
            "ts": 12,
            "args": {
                "Ev Idx": 3,
                "Device Type": 1,
                "Device Id": 0,
                "Addr": 139926520725504,
                "Bytes": 512,
                "Total Allocated": 1536,
                "Total Reserved": 2097152,
            },
        },
        {
            "ph": "i",
            "s": "t",
            "name": "[memory]",
            "pid": 1,
            "tid": 2,
            "ts": 13.5,
            "args": {"Device Type": 0, "Device Id": -1, "Bytes": -16},
        },
        {
            "ph": "i",
            "s": "t",
            "name": "[memory]",
            "pid": 1,
            "tid": "2",
            "ts": 14,
            "args": {"Device Type": 6, "Device Id": 1, "Addr": 7, "Bytes": -512},
        },
        {
            "ph": "i",
            "s": "t",
            "name": "[memory]",
            "pid": 9,
            "tid": 9,
            "ts": 30,
            "args": {
                "Device Type": 1,
                "Device Id": 0,
                "Addr": 139926520725504,
                "Bytes": -512,
                "Total Allocated": 1024,
                "Total Reserved": 2097152,
            },
        },
        {"ph": "i", "s": "t", "name": "[memoryx]", "pid": 1, "tid": 2, "ts": 15, "args": {}},
    ],
}


@pytest.mark.parametrize("chunk", [1, 2, 1000])
@pytest.mark.parametrize("case", sorted(CORNERS))
def test_scan_equals_typed_decode_on_corner_cases(
    case: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kineto, "CHUNK_EVENTS", chunk)
    for kw in ({}, {"indent": 2}, {"ensure_ascii": False, "separators": (",", ":")}):
        whole, scanned = both_ways(_doc([_ev(), *CORNERS[case], _ev(name="last")], **kw))
        assert_same(whole, scanned)


def test_most_chunks_fold_fast_when_one_falls_back(
    folds: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kineto, "CHUNK_EVENTS", 2)
    events = [_ev(name=f"op{i}", ts=i) for i in range(10)]
    events[5] = _ev(cat="kernel", args={"stream": "0x1"})  # chunk 3 of 5 falls back
    whole, scanned = both_ways(_doc(events))
    assert_same(whole, scanned)
    assert folds == [2, 2, 2, 2]


@pytest.mark.parametrize(
    "bad",
    [
        b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "na',
        b'{"traceEvents": [{"ph": "X", "name": "a\x01", "ts": 1, "dur": 2}]}',
        b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 01, "dur": 2}]}',
        b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": tru}]}',
        b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2},]}',
        b'{"traceEvents": [{"ph": "X", "name": "\\q", "ts": 1, "dur": 2}]}',
        b'{"traceEvents": [{"ph": "X", "name": "\xff\xfe", "ts": 1, "dur": 2}]}',
    ],
)
def test_invalid_json_gets_the_typed_decoders_error(bad: bytes) -> None:
    whole, scanned = both_ways(bad)
    assert isinstance(whole, str) and whole == scanned


_NAMES = st.sampled_from(
    ["aten::mm", "aten::copy_", 'q"uote', "back\\slash", "ünï", "nccl:all_reduce",
     "gloo:all_reduce", "c10d::allreduce_", "record_param_comms", "ProfilerStep#1",
     "cudaLaunchKernel", "thread_name", "", "[memory]"]
)  # fmt: skip
_INT = st.integers(-(2**40), 2**40)
_ARGS = st.fixed_dictionaries(
    {},
    optional={
        "External id": _INT, "correlation": _INT, "Record function id": _INT,
        "Sequence number": _INT, "Fwd thread id": _INT, "bytes": _INT, "device": st.integers(0, 8),
        "stream": st.one_of(st.integers(-1, 20), st.just("0x3")),
        "Input Dims": st.lists(st.lists(st.integers(0, 64), max_size=3), max_size=3),
        "Collective name": st.sampled_from(["allreduce", "all_gather"]),
        "In msg nelems": st.integers(0, 10**6), "dtype": st.just("Float"), "name": _NAMES,
        "Concrete Inputs": st.lists(st.sampled_from(["", "2", "0"]), max_size=4),
        "Device Type": st.sampled_from([0, 1, 6]), "Device Id": st.integers(-1, 2),
        "Addr": _INT, "Bytes": _INT, "Total Allocated": _INT, "Total Reserved": _INT,
        "other": st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False,
                              allow_infinity=False) | st.text(max_size=4),
                              lambda c: st.lists(c, max_size=2), max_leaves=4),
    },
)  # fmt: skip
_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "X", "M", "i", "i", "I", "s", "f", "C"])},
    optional={
        "cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "gpu_memcpy", "fwdbwd",
                                "ac2g", "python_function", "user_annotation", "Trace", "caté"]),
        "name": _NAMES,
        "pid": st.one_of(st.integers(0, 3), st.just("Spans")),
        "tid": st.one_of(st.integers(0, 3), st.just("stream 7")),
        "ts": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6).map(lambda x: round(x, 3)),
                        st.just(1712195495519689.047)),
        "dur": st.one_of(st.integers(0, 1000), st.floats(0, 1e3).map(lambda x: round(x, 3))),
        "id": st.integers(0, 5),
        "args": _ARGS,
    },
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(_EVENT, min_size=1, max_size=12),
    chunk=st.integers(1, 5),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 1]),
)
def test_scan_equals_typed_decode_on_random_traces(
    events: list[dict[str, Any]], chunk: int, ascii_only: bool, indent: int | None
) -> None:
    saved = kineto.CHUNK_EVENTS
    kineto.CHUNK_EVENTS = chunk
    try:
        whole, scanned = both_ways(_doc(events, ensure_ascii=ascii_only, indent=indent))
    finally:
        kineto.CHUNK_EVENTS = saved
    assert_same(whole, scanned)


def test_big_plain_files_are_memory_mapped_and_read_alike(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain files from ``MAP_MIN_BYTES`` on are mapped, not read; both decoders take the map
    (whole and scanned) and give the trace the bytes give; compressed files are never mapped."""
    import mmap

    import lumos._io as io_

    raw = _doc([_ev(), *CORNERS["metadata, flows and instants"], *CORNERS["string pid and tid"]])
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(raw)
    packed.write_bytes(gzip.compress(raw))
    monkeypatch.setattr(io_, "MAP_MIN_BYTES", 0)
    mapped = io_.read_payload(plain)
    assert isinstance(mapped, mmap.mmap)
    assert isinstance(io_.read_payload(packed), bytes)
    expected = trace_from_bytes(raw, "t.json")
    assert_same(expected, trace_from_bytes(mapped, "t.json"))
    assert_same(expected, trace_from_bytes(mapped, "t.json", split_min_bytes=0))
    got = kineto.read_kineto(plain)
    assert_same(dataclasses.replace(expected, path=str(plain)), got)


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "na',
         "Input data was truncated"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2},]}', "trailing comma"),
    ],
)  # fmt: skip
def test_a_big_invalid_payload_is_refused_without_decoding_it(
    bad: bytes, problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big trace cut short is refused after a constant-memory validation, not after decoding
    every event it holds (``SPLIT_MIN_BYTES`` lowered to stand for a multi-GB file)."""
    monkeypatch.setattr(kineto, "SPLIT_MIN_BYTES", 0)

    def whole(*args: Any) -> Any:
        raise AssertionError("decoded the whole document")

    monkeypatch.setattr(kineto, "_decode_whole", whole)
    with pytest.raises(LumosError, match=f"t.json: invalid JSON: .*{problem}"):
        trace_from_bytes(bad, "t.json")


def test_pages_released_while_scanning_are_read_again_when_needed(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mapped file's scanned pages are dropped chunk by chunk (``MADV_DONTNEED``); strings
    first seen there and shapes met again later still read right (the pages map again)."""
    import lumos._io as io_

    events = [_ev(name=f"op{i % 37}", ts=i, args={"External id": i, "Input Dims": [[i % 5, 3]]})
              for i in range(4000)]  # fmt: skip
    raw = _doc(events, indent=2)
    assert len(raw) > 40 * 4096
    plain = tmp_path / "t.json"
    plain.write_bytes(raw)
    monkeypatch.setattr(io_, "MAP_MIN_BYTES", 0)
    monkeypatch.setattr(kineto, "CHUNK_EVENTS", 100)
    monkeypatch.setattr(kineto, "SPLIT_MIN_BYTES", 0)
    released: list[int] = []
    real = kineto._release

    def counting(*args: Any) -> int:
        out = real(*args)
        released.append(out)
        return out

    monkeypatch.setattr(kineto, "_release", counting)
    got = kineto.read_kineto(plain)
    assert max(released) > len(raw) // 2  # pages were released as the scan went
    expected = trace_from_bytes(raw, str(plain), split_min_bytes=1 << 62)
    assert_same(expected, got)
