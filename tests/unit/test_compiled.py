"""The kernels ``pip install`` compiles are the ones that run, and their Python sources give the
same results (``lumos._compiled``, ``setup.py``).

CI installs with a C compiler, so there every kernel module must be the compiled extension: a
build that failed (the extensions are optional, so ``pip install`` goes on without them) fails
here. Each kernel's ``.py`` source, run as Python, must give the same arrays, dtype included.
"""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from tests import kernel_sides as sides
from tests.realdata import needs_realdata, trace

from lumos import _compiled
from lumos.graph.build import build_graph
from lumos.graph.synthetic import random_graph
from lumos.ingest.kineto import read_kineto
from lumos.sim import engine, simulate

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_kernel_list_is_what_setup_compiles():
    """``setup.py`` compiles every module whose first line is a ``# cython:`` directive."""
    found = []
    for path in sorted((SRC / "lumos").rglob("*.py")):
        with path.open(encoding="utf-8") as f:
            if f.readline().startswith("# cython:"):
                found.append(".".join(path.relative_to(SRC).with_suffix("").parts))
    assert tuple(found) == _compiled.KERNEL_MODULES


def _compiler() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


@pytest.mark.skipif(_compiler() is None, reason="no C compiler: the kernels run as Python")
def test_every_kernel_runs_compiled_where_a_compiler_exists():
    assert _compiled.status() == dict.fromkeys(_compiled.KERNEL_MODULES, True)


def _arrays(r):
    return (r.start_ns, r.end_ns, r.cause_kind, r.cause_ref)


def _same(a, b):
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def _with_python_sim(graph, monkeypatch):
    assert engine._kernel is sides.compiled("lumos.sim._kernel")
    monkeypatch.setattr(engine, "_kernel", sides.interpreted("lumos.sim._kernel"))
    return simulate(graph)


def test_the_simulator_source_gives_the_compiled_results(monkeypatch):
    g = random_graph(3_000, seed=4)
    assert engine._kernel is sides.compiled("lumos.sim._kernel")
    _same(_arrays(simulate(g)), _arrays(_with_python_sim(g, monkeypatch)))


@needs_realdata
@pytest.mark.parametrize("name", ["cuda_event_sync_multi_stream", "hip_mi250", "gloo_cpu_only"])
def test_the_simulator_source_replays_real_traces_alike(name, monkeypatch):
    g = build_graph(read_kineto(trace(name)))
    assert engine._kernel is sides.compiled("lumos.sim._kernel")
    _same(_arrays(simulate(g)), _arrays(_with_python_sim(g, monkeypatch)))


def test_span_interning_source_gives_the_compiled_rows():
    from lumos._intern import new_table

    rng = np.random.default_rng(3)
    words = [bytes(rng.integers(97, 100, size=rng.integers(0, 4))) for _ in range(400)]
    buf = np.frombuffer(b"".join(words), np.uint8)
    out = []
    for module in (sides.compiled("lumos._intern"), sides.interpreted("lumos._intern")):
        tab, rep, rep_hash = new_table(64)
        rows, nrep, off = [], 0, 0
        for w in words:
            r = module.intern_span(buf, off, len(w), tab, rep, rep_hash, nrep)
            nrep += r == nrep
            rows.append(r)
            off += len(w)
        out.append((rows, nrep, tab.copy(), rep[:nrep].copy(), rep_hash[:nrep].copy()))
    assert out[0][0] == out[1][0] and out[0][1] == out[1][1] == len(set(words))
    for a, b in zip(out[0][2:], out[1][2:], strict=True):
        np.testing.assert_array_equal(a, b)
    # rows number the distinct words in order of first appearance
    first = {}
    assert out[0][0] == [first.setdefault(w, len(first)) for w in words]


def _both(module: str, fn: str, *args):
    """``fn`` of the compiled module and of its Python source, on copies of ``args``."""
    copy = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    return (
        getattr(sides.compiled(module), fn)(*args),
        getattr(sides.interpreted(module), fn)(*copy),
    ), (args, copy)


def _same_out(a, b):
    if isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _same_out(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert int(a) == int(b)


def _random_dag(rng, n, m):
    src = rng.integers(0, n - 1, m)
    dst = src + 1 + (rng.integers(0, n, m) % np.maximum(n - 1 - src, 1))
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order].astype(np.int32)
    out_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=out_ptr[1:])
    pred = np.argsort(dst, kind="stable")
    pred_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=pred_ptr[1:])
    return out_ptr, np.arange(m, dtype=np.int64), dst, pred_ptr, src[pred].astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graph_order_sources_give_the_compiled_results(seed):
    rng = np.random.default_rng(seed)
    n, m = 300, 900
    out_ptr, out_edge, dst, pred_ptr, pred_idx = _random_dag(rng, n, m)
    succ = np.where(rng.random(n) < 0.5, np.minimum(np.arange(n) + 1, n - 1), -1).astype(np.int64)
    succ[-1] = -1
    (a, b), _ = _both("lumos.graph._order", "kahn_fifo", n, out_ptr, out_edge, dst, succ)
    _same_out(a, b)
    assert a[1] == n  # acyclic: every task ordered
    order = a[0][: a[1]]
    (a, b), _ = _both("lumos.graph._order", "successor_csr", n, pred_ptr, pred_idx)
    _same_out(a, b)
    dur = rng.integers(0, 50, n).astype(np.int64)
    for fn, extra in (("longest_path", ()), ("list_schedule", (rng.integers(0, 3, n), 3))):
        (a, b), _ = _both("lumos.graph._order", fn, order, pred_ptr, pred_idx, dur, *extra)
        _same_out(a, b)
    step = (np.arange(n) // 50).astype(np.int64)
    (a, b), _ = _both("lumos.graph._order", "chain_depth", order, out_ptr, out_edge, dst, step)
    _same_out(a, b)


@pytest.mark.parametrize("seed", [0, 1])
def test_repeat_and_lcs_sources_give_the_compiled_results(seed):
    rng = np.random.default_rng(seed)
    block = rng.integers(0, 9, 11)
    seq = np.concatenate([rng.integers(0, 9, 7), np.tile(block, 5), rng.integers(0, 9, 5)])
    seq[30] = 99  # a mismatch inside the repeat
    periods = np.arange(8, 40, dtype=np.int64)
    (a, b), _ = _both("lumos.estimate._repeat", "best_repeat", seq.astype(np.int64), periods, 0.1)
    assert tuple(a) == tuple(b) and a[1] == 11 and a[2] >= 4
    x, y = rng.integers(0, 5, 60).astype(np.int64), rng.integers(0, 5, 70).astype(np.int64)
    ia, ib = np.zeros(60, np.int64), np.zeros(60, np.int64)
    (ka, kb), (args, copy) = _both("lumos.link._lcs", "lcs", x, y, ia, ib)
    assert ka == kb > 0
    _same_out((args[2][:ka], args[3][:ka]), (copy[2][:kb], copy[3][:kb]))
    assert (x[args[2][:ka]] == y[args[3][:ka]]).all()


def test_critical_path_walk_source_gives_the_compiled_path():
    g = random_graph(2_000, seed=9)
    r = simulate(g)
    edge_src, _, _ = r.global_tables()
    args = (
        r.start_ns,
        r.end_ns,
        r.cause_kind,
        r.cause_ref,
        np.ascontiguousarray(edge_src, np.int64),
    )
    (a, b), _ = _both("lumos.report._kernels", "walk_path", *args, int(np.argmax(r.end_ns)))
    k = a[4]
    assert k == b[4] > 10
    _same_out(tuple(x[:k] for x in a[:4]), tuple(x[:k] for x in b[:4]))


def test_the_path_walk_reads_the_simulator_cause_kinds():
    """``report._kernels`` keeps its own C copies of the simulator's cause kinds."""
    from lumos.sim import _kernel

    walk = sides.interpreted("lumos.report._kernels")
    assert (walk._CAUSE_NONE, walk._CAUSE_EDGE, walk._CAUSE_COLLECTIVE) == (
        _kernel.CAUSE_NONE,
        _kernel.CAUSE_EDGE,
        _kernel.CAUSE_COLLECTIVE,
    )
    assert np.iinfo(np.int64).min == walk._INT64_MIN
