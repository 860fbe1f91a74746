"""Real traces give the same results with every kernel run from its Python source as compiled.

``pip install`` compiles the kernel modules (:mod:`lumos._compiled`); where it cannot, their
``.py`` sources run instead. These tests replace every compiled kernel a replay, a dependency
order, a critical path or a list schedule calls with its source run as Python
(:func:`lumos._compiled.python_twin`, asserted to be the ``.py`` source while the kernel it
replaces is asserted compiled: ``tests/kernel_sides.py``) and compare every output array, dtype
included, on real traces: one rank, two ranks with matched collectives, and a Chakra ET with and without a cycle.
The Kineto scan is compared with its Python source in ``tests/ingest/test_scan_compiled.py``, the
Chakra codec in ``tests/chakra/test_codec_compiled.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from tests import kernel_sides as sides
from tests.realdata import needs_realdata, trace

from lumos.graph.build import align_ranks, build_graph
from lumos.graph.model import Workload
from lumos.ingest.kineto import read_kineto
from lumos.report.metrics import critical_path
from lumos.sim import simulate

TRACES = ("v100_stream_wait_event", "cuda_event_sync_multi_stream", "hip_mi250", "gloo_cpu_only")

#: Where each kernel is called from: (calling module, the name it binds, kernel module, kernel).
CALLERS = (
    ("lumos.sim.engine", "_kernel", "lumos.sim._kernel", None),
    ("lumos.graph.algorithms", "kahn_fifo", "lumos.graph._order", "kahn_fifo"),
    ("lumos.chakra.deps", "longest_path", "lumos.graph._order", "longest_path"),
    ("lumos.chakra.deps", "successor_csr", "lumos.graph._order", "successor_csr"),
    ("lumos.chakra.timeline", "list_schedule", "lumos.graph._order", "list_schedule"),
    ("lumos.report.metrics", "walk_path", "lumos.report._kernels", "walk_path"),
)


@contextmanager
def interpreted_kernels() -> Iterator[None]:
    """Every kernel of :data:`CALLERS` runs from its Python source."""
    import importlib

    saved = []
    try:
        for caller, bound, module, name in CALLERS:
            mod = importlib.import_module(caller)
            sides.compiled(module)
            twin = sides.interpreted(module)
            saved.append((mod, bound, getattr(mod, bound)))
            setattr(mod, bound, twin if name is None else getattr(twin, name))
        yield
    finally:
        for mod, bound, value in saved:
            setattr(mod, bound, value)


def test_every_caller_binds_the_compiled_kernel() -> None:
    """The names :func:`interpreted_kernels` replaces are the compiled kernels the callers use (a
    caller that imported a kernel another way would keep running it compiled in these tests)."""
    import importlib

    for caller, bound, module, name in CALLERS:
        kernel = sides.compiled(module)
        expected = kernel if name is None else getattr(kernel, name)
        assert getattr(importlib.import_module(caller), bound) is expected, (caller, bound)


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
