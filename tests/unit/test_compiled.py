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
    monkeypatch.setattr(engine, "_kernel", _compiled.python_twin("lumos.sim._kernel"))
    return simulate(graph)


def test_the_simulator_source_gives_the_compiled_results(monkeypatch):
    g = random_graph(3_000, seed=4)
    compiled = simulate(g)
    _same(_arrays(compiled), _arrays(_with_python_sim(g, monkeypatch)))


@needs_realdata
@pytest.mark.parametrize("name", ["cuda_event_sync_multi_stream", "hip_mi250", "gloo_cpu_only"])
def test_the_simulator_source_replays_real_traces_alike(name, monkeypatch):
    g = build_graph(read_kineto(trace(name)))
    compiled = simulate(g)
    _same(_arrays(compiled), _arrays(_with_python_sim(g, monkeypatch)))


def test_span_interning_source_gives_the_compiled_rows():
    from lumos import _intern
    from lumos._spans import new_table

    rng = np.random.default_rng(3)
    words = [bytes(rng.integers(97, 100, size=rng.integers(0, 4))) for _ in range(400)]
    buf = np.frombuffer(b"".join(words), np.uint8)
    twin = _compiled.python_twin("lumos._intern")
    out = []
    for module in (_intern, twin):
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
