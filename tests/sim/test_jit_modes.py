"""The kernels give the same results interpreted (first run, nothing cached) as compiled.

:mod:`lumos._jit` runs a kernel's own Python source over lists while its compiled code is not in
numba's cache and the input is small. These tests run real traces both ways and compare every
output array, dtype included. The background warmer is checked in a fresh ``NUMBA_CACHE_DIR``
(subprocesses). The Kineto scan is compiled ahead of time (Cython): it is compared with the typed
decoders in ``tests/ingest/test_kineto_scan.py`` and with its Python source in
``tests/ingest/test_scan_compiled.py``.
"""

from __future__ import annotations

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
from lumos.ingest.kineto import read_kineto
from lumos.report.metrics import critical_path
from lumos.sim import simulate

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


@needs_realdata
def test_interpreted_dependency_orders_equal_compiled() -> None:
    """A Chakra ET's dependency order (successor CSR, then Kahn), with and without a cycle, and
    an execution graph's topological order (Kahn with processor order)."""
    from lumos.chakra import ChakraTrace, read_chakra
    from lumos.chakra.deps import DepGraph, resolve_deps
    from lumos.chakra.deps import topological_order as dep_order
    from lumos.graph.algorithms import topological_order as task_order

    et = read_chakra(trace("chakra_pytorch_converted"))
    assert isinstance(et, ChakraTrace)
    deps = resolve_deps(et)
    none = np.zeros((0, 2), np.int64)
    cycle = DepGraph(np.array([0, 1, 2, 3, 3]), np.array([2, 0, 1]), none, none, np.zeros(0))
    graph = build_graph(read_kineto(trace("v100_stream_wait_event")))

    def orders() -> list[np.ndarray]:
        return [*dep_order(deps), *dep_order(cycle), task_order(graph)]

    compiled = orders()
    with interpreted_kernels():
        again = orders()
    assert compiled[2].tolist() == [3] and compiled[3].tolist() == [0, 1, 2]
    for a, b in zip(compiled, again, strict=True):
        _assert_same(a, b)


@needs_realdata
def test_interpreted_chakra_critical_path_and_schedule_equal_compiled() -> None:
    """A Chakra ET's critical path (``lumos chakra stats``, ``lumos info``) and its list schedule
    (``lumos chakra timeline``), its rows blocked by dependency cycles included."""
    from lumos.chakra import ChakraTrace, read_chakra
    from lumos.chakra.deps import critical_path as chakra_path
    from lumos.chakra.timeline import schedule

    et = read_chakra(trace("chakra_pytorch_converted"))
    assert isinstance(et, ChakraTrace)

    def results() -> list[np.ndarray]:
        length, rows = chakra_path(et)
        return [np.array([length]), rows, *schedule(et)]

    compiled = results()
    with interpreted_kernels():
        again = results()
    assert compiled[0][0] > 0 and compiled[1].size > 1
    assert 0 < (compiled[2] < 0).sum() < et.num_nodes  # some rows never scheduled
    for a, b in zip(compiled, again, strict=True):
        _assert_same(a, b)


def test_compiled_calls_use_only_the_declared_signature() -> None:
    """Arrays of other dtypes, read-only or not, reach the one cached specialization."""
    from lumos.examples_data import example_trace_path

    result = simulate(build_graph(read_kineto(example_trace_path())))
    critical_path(result)
    for k in _jit.kernels():
        if k.ready():
            assert k.compiled.signatures == [k.signature], k.name


def _ready_in(cache: Path) -> str:
    code = (
        "from lumos import _jit, warmup; ks, ds = _jit.kernels(), warmup.dispatchers(); "
        "print(sum(k.ready() for k in ks) + sum(map(_jit.cached, ds)), len(ks) + len(ds))"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_warmer_fills_an_empty_cache(tmp_path: Path) -> None:
    """Every kernel, and every compiled function outside kernels (the layer search, the op
    alignment: :mod:`lumos.warmup`), ends up in an empty cache."""
    from lumos import warmup

    n = len(_jit.kernels()) + len(warmup.dispatchers())
    assert _ready_in(tmp_path) == f"0 {n}"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "lumos._jit"], env=env, check=True, timeout=600)
    assert _ready_in(tmp_path) == f"{n} {n}"


def test_kernel_module_list_is_the_registry() -> None:
    names = {k.name for k in _jit.kernels()}
    assert names == {
        "lumos._spans.rehash",
    }


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
    monkeypatch.setenv("LUMOS_JIT_BACKGROUND", "1")
    for k in _jit.kernels():
        monkeypatch.setattr(k, "ready", lambda: True)
    monkeypatch.setattr(_jit, "cached", lambda disp: True)
    assert _jit.warm_in_background(None) is False
    monkeypatch.setattr(_jit, "_REQUESTED", False)
    monkeypatch.setattr(_jit, "cached", lambda disp: False)  # the Chakra decoder, say
    assert _jit.warm_in_background(None) is True
    assert started == ["now"]
    started.clear()
    monkeypatch.setattr(_jit, "_REQUESTED", False)
    monkeypatch.setenv("LUMOS_JIT_BACKGROUND", "0")
    for k in _jit.kernels():
        monkeypatch.setattr(k, "ready", lambda: False)
    assert _jit.warm_in_background(None) is False
    assert started == []


def test_every_verb_but_replay_comm_and_collect_warms_up_when_done(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a first command of any kind, the compiles happen in the background (``replay``
    asks as it begins; ``comm`` and ``collect`` run no compiled code)."""
    from lumos.cli.main import main
    from lumos.examples_data import example_trace_path

    calls: list[int | None] = []
    monkeypatch.setattr(
        _jit, "warm_in_background", lambda input_bytes=None: calls.append(input_bytes)
    )
    assert main(["info", str(example_trace_path())]) == 0
    assert calls == [0]
    assert main(["comm", "all_reduce", "--size", "1MiB", "--ranks", "8", "--bandwidth", "50GB/s",
                 "--latency", "500ns"]) == 0  # fmt: skip
    assert calls == [0]
    capsys.readouterr()
