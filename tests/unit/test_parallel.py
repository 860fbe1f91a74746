"""Per-rank work: in-process, local processes, and a Dask cluster give the same results."""

from __future__ import annotations

import pytest
from tests.realdata import trace

from lumos.errors import MissingDependencyError
from lumos.parallel import map_ranks
from lumos.replay import build_workload


@pytest.fixture(scope="module")
def traces():
    """Two ranks of one NCCL job, read in place (skips without the realdata folder)."""
    return [trace("sendrecv_5streams_rank0"), trace("sendrecv_5streams_rank1")]


def _square(x: int) -> int:
    return x * x


def test_order_is_kept_with_processes():
    done: list[int] = []
    assert map_ranks(_square, [3, 1, 2], workers=2, on_done=done.append) == [9, 1, 4]
    assert sorted(done) == [0, 1, 2]


def test_graphs_built_in_processes_equal_in_process(traces):
    a, _ = build_workload(traces, workers=1)
    b, _ = build_workload(traces, workers=2)
    assert a.ranks == b.ranks == (0, 1)
    for ga, gb in zip(a.graphs, b.graphs, strict=True):
        assert ga.tasks == gb.tasks and ga.edges == gb.edges


def test_dask_cluster(tmp_path, traces):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        a, _ = build_workload(traces, dask_address=cluster.scheduler_address)
    b, _ = build_workload(traces, workers=1)
    for ga, gb in zip(a.graphs, b.graphs, strict=True):
        assert ga.tasks == gb.tasks


def test_dask_missing_is_one_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.startswith(("dask", "distributed")):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(MissingDependencyError, match=r"lumos\[dask\]"):
        map_ranks(_square, [1, 2], dask_address="tcp://127.0.0.1:1")
