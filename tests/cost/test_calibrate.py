"""Calibration recovers a known latency and bandwidth from noisy points and from a graph."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.cost.calibrate import calibrate_from_graph, fit_alpha_beta
from lumos.errors import ConfigError
from lumos.graph.kinds import CommType, TaskKind
from lumos.graph.synthetic import GraphBuilder

ALPHA_NS, BW = 8_000.0, 40e9


def _times(sizes, rng):
    exact = ALPHA_NS + np.asarray(sizes, dtype=float) / BW * 1e9
    return exact * (1 + rng.normal(0, 0.01, len(exact)))  # 1 % noise


def test_fit_recovers_alpha_beta_within_5_percent():
    rng = np.random.default_rng(0)
    sizes = np.repeat(2 ** np.arange(10, 27), 3)
    fit = fit_alpha_beta(sizes, _times(sizes, rng))
    assert fit.latency_ns == pytest.approx(ALPHA_NS, rel=0.05)
    assert fit.bw_bytes_per_s == pytest.approx(BW, rel=0.05)
    assert fit.r2 > 0.99 and fit.rel_rms < 0.05 and fit.n == len(sizes)


def test_fit_needs_two_sizes():
    with pytest.raises(ConfigError, match="two distinct sizes"):
        fit_alpha_beta([1024, 1024], [5.0, 6.0])


def test_calibrate_from_graph_per_kind_and_group_size():
    rng = np.random.default_rng(1)
    b = GraphBuilder(rank=0, world_size=4)
    st = b.stream(20)
    pg = b.process_group("0", (0, 1, 2, 3))
    sizes = [1 << k for k in range(12, 24)]
    for size, t in zip(sizes, _times(sizes, rng), strict=True):
        c = b.comm(CommType.ALL_REDUCE, size, pg, wait_ns=5000)  # waiting is not transfer
        b.task(st, "ncclAllReduce", round(t) + 5000, TaskKind.COMM, comm=c)
    c = b.comm(CommType.ALL_GATHER, 4096, pg)
    b.task(st, "ncclAllGather", 900, TaskKind.COMM, comm=c)
    c = b.comm(CommType.UNKNOWN, 4096, pg)
    b.task(st, "nccl?", 900, TaskKind.COMM, comm=c)
    rows = calibrate_from_graph(b.build())
    assert [(r.kind, r.group_size, r.samples) for r in rows] == [
        ("all_gather", 4, 1),
        ("all_reduce", 4, len(sizes)),
    ]
    assert rows[0].fit is None and "one size" in rows[0].note
    fit = rows[1].fit
    assert fit.latency_ns == pytest.approx(ALPHA_NS, rel=0.05)
    assert fit.bw_bytes_per_s == pytest.approx(BW, rel=0.05)


def test_gloo_collectives_are_calibrated_as_nccl_ones():
    """The bundled gloo demo's gradient all-reduces are host-side spans (CPU_COMM): they are
    samples too (they once were left out, and a gloo run calibrated nothing)."""
    from lumos.examples_data import example_run_dir
    from lumos.replay import build_workload

    w, _ = build_workload([example_run_dir()], workers=1)
    rows = calibrate_from_graph(w)
    assert [(r.kind, r.group_size) for r in rows] == [("all_reduce", 2)]
    assert rows[0].samples == 12
