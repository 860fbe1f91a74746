"""The kernels give the same results interpreted (first run, nothing cached) as compiled.

:mod:`lumos._jit` runs a kernel's own Python source over lists while its compiled code is not in
numba's cache and the input is small. These tests run real traces both ways and compare every
output array, dtype included; the chunked and the whole-document Kineto decode are compared the
same way. The background warmer is checked in a fresh ``NUMBA_CACHE_DIR`` (subprocesses).
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from tests.realdata import needs_realdata, trace

from lumos import _jit
from lumos.graph.build import align_ranks, build_graph
from lumos.graph.model import Workload
from lumos.ingest.kineto import read_kineto, trace_from_bytes
from lumos.ingest.kineto_split import _scan, _scan_events
from lumos.report.metrics import critical_path
from lumos.sim import _kernel, simulate

TRACES = ("v100_stream_wait_event", "cuda_event_sync_multi_stream", "hip_mi250", "gloo_cpu_only")


@contextmanager
def interpreted_kernels() -> Iterator[None]:
    """Every kernel runs interpreted, whatever the cache holds."""
    saved = [(k, k.ready, k.max_interpreted) for k in _jit.kernels()]
    try:
        for k in _jit.kernels():
            k.ready = lambda: False  # type: ignore[method-assign]
            k.max_interpreted = 1 << 62
        yield
    finally:
        for k, ready, limit in saved:
            k.ready = ready  # type: ignore[method-assign]
            k.max_interpreted = limit


def _assert_same(a: object, b: object) -> None:
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


@needs_realdata
@pytest.mark.parametrize("name", TRACES)
def test_interpreted_replay_equals_compiled(name: str) -> None:
    graph = build_graph(read_kineto(trace(name)))
    compiled = simulate(graph)
    path = critical_path(compiled)
    with interpreted_kernels():
        again = simulate(graph)
        path_again = critical_path(again)
    for field in ("start_ns", "end_ns", "cause_kind", "cause_ref"):
        _assert_same(getattr(compiled, field), getattr(again, field))
    for field in ("tasks", "task_ns", "gap_ns"):
        _assert_same(getattr(path, field), getattr(path_again, field))
    assert (path.length_ns, path.kind_ns, path.delay_ns) == (
        path_again.length_ns,
        path_again.kind_ns,
        path_again.delay_ns,
    )


@needs_realdata
def test_interpreted_multi_rank_replay_equals_compiled() -> None:
    """Two ranks with matched collectives (the rendezvous part of the loop)."""
    graphs = [build_graph(read_kineto(trace(f"sendrecv_5streams_rank{r}"))) for r in (0, 1)]
    workload = Workload(align_ranks(graphs))
    compiled = simulate(workload)
    with interpreted_kernels():
        again = simulate(workload)
    for field in ("start_ns", "end_ns", "cause_kind", "cause_ref"):
        _assert_same(getattr(compiled, field), getattr(again, field))


def test_compiled_calls_use_only_the_declared_signature() -> None:
    """Arrays of other dtypes, read-only or not, reach the one cached specialization."""
    from lumos.examples_data import example_trace_path

    result = simulate(build_graph(read_kineto(example_trace_path())))
    critical_path(result)
    split_events_payload = b'{"traceEvents": [{"a": 1}, {"b": [2, 3]}], "x": 0}'
    buf = np.frombuffer(split_events_payload, dtype=np.uint8)
    cuts = np.empty(4, dtype=np.int64)
    assert _scan(buf, 17, 1, cuts, work=len(buf))[0] == 2
    for k in _jit.kernels():
        if k.ready():
            assert k.compiled.signatures == [k.signature], k.name


def test_interpreted_scan_fills_its_output_argument() -> None:
    payload = b'{"traceEvents": [{"a": "]"}, {"b": [2, 3]}, 4, "x\\"y"], "z": 1}'
    start = payload.index(b"[") + 1
    got = []
    for run in (_scan_events, lambda *a: _jit.run_interpreted(_scan_events, a)):
        cuts = np.full(8, -1, dtype=np.int64)
        out = run(np.frombuffer(payload, dtype=np.uint8), start, 1, cuts)
        got.append((tuple(int(x) for x in out), cuts.tolist()))
    assert got[0] == got[1]
    assert got[0][0][:2] == (4, 3)  # four elements, a cut after each of the first three


@needs_realdata
@pytest.mark.parametrize("name", ["v100_stream_wait_event", "legacy_2021_v100", "nccl_a100"])
def test_chunked_decode_equals_whole_decode(name: str) -> None:
    path = trace(name)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    whole = trace_from_bytes(raw, str(path))
    chunked = trace_from_bytes(raw, str(path), split_min_bytes=0)
    _assert_deep_equal(whole, chunked, "trace")


def _assert_deep_equal(a: object, b: object, where: str) -> None:
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _assert_deep_equal(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        _assert_same(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for key in a:
            _assert_deep_equal(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_deep_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _ready_in(cache: Path) -> str:
    code = (
        "from lumos import _jit; print(sum(k.ready() for k in _jit.kernels()), len(_jit.kernels()))"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_warmer_fills_an_empty_cache(tmp_path: Path) -> None:
    n = len(_jit.kernels())
    assert _ready_in(tmp_path) == f"0 {n}"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "lumos._jit"], env=env, check=True, timeout=600)
    assert _ready_in(tmp_path) == f"{n} {n}"


def test_kernel_module_list_is_the_registry() -> None:
    names = {k.name for k in _jit.kernels()}
    assert names == {
        "lumos.ingest.kineto_split._scan_events",
        "lumos.sim._kernel._run",
        "lumos.report.metrics._walk_path",
        "lumos.report.json_columns._format_rows",
    }
    assert _kernel.run in _jit.kernels()


@pytest.mark.parametrize(
    ("input_bytes", "now", "at_exit"),
    [(1 << 20, 0, 1), (_jit.SMALL_INPUT_BYTES, 1, 0), (None, 1, 0)],
)
def test_warmer_waits_for_the_end_of_small_commands(
    monkeypatch: pytest.MonkeyPatch, input_bytes: int | None, now: int, at_exit: int
) -> None:
    started: list[str] = []
    registered: list[object] = []
    monkeypatch.setattr(_jit, "_REQUESTED", False)
    monkeypatch.setattr(_jit, "_start_warmer", lambda: started.append("now"))
    monkeypatch.setattr(_jit.atexit, "register", registered.append)
    monkeypatch.setenv("LUMOS_JIT_BACKGROUND", "1")
    for k in _jit.kernels():
        monkeypatch.setattr(k, "ready", lambda: False)
    assert _jit.warm_in_background(input_bytes) is True
    assert (len(started), len(registered)) == (now, at_exit)
    assert _jit.warm_in_background(input_bytes) is False  # once per process


def test_no_warmer_when_cached_or_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    monkeypatch.setattr(_jit, "_start_warmer", lambda: started.append("now"))
    monkeypatch.setattr(_jit, "_REQUESTED", False)
    for k in _jit.kernels():
        monkeypatch.setattr(k, "ready", lambda: True)
    assert _jit.warm_in_background(None) is False
    monkeypatch.setattr(_jit, "_REQUESTED", False)
    monkeypatch.setenv("LUMOS_JIT_BACKGROUND", "0")
    for k in _jit.kernels():
        monkeypatch.setattr(k, "ready", lambda: False)
    assert _jit.warm_in_background(None) is False
    assert started == []
