"""Per-rank builds shared between traces equal but for their rank (lumos.shared_builds): the
graphs are the ones building every trace gives, and sharing stops wherever it could be wrong."""

from __future__ import annotations

import numpy as np
import pytest
from tests.ranks.replicated import write_replicated

from lumos.graph.model import ExecGraph
from lumos.graph.synthetic import GraphBuilder
from lumos.ingest.detect import TraceRef, expand_paths
from lumos.replay import _build_one, build_workload
from lumos.shared_builds import build_ranks, fingerprint_bytes


def _doc(info: bytes, events: bytes = b'[{"ph": "X", "name": "a", "ts": 1, "dur": 2}]') -> bytes:
    """A Kineto document with ``distributedInfo`` ``info``."""
    return b'{"schemaVersion": 1, "distributedInfo": %s, "traceEvents": %s}' % (info, events)


def test_fingerprint_leaves_out_rank_and_world_size_only() -> None:
    a = fingerprint_bytes(_doc(b'{"backend": "nccl", "rank": 3, "world_size": 8}'))
    b = fingerprint_bytes(_doc(b'{"backend": "nccl", "rank": 12, "world_size": 16}'))
    assert (a.rank, a.world_size, b.rank, b.world_size) == (3, 8, 12, 16)
    assert a.digest == b.digest and a.shareable
    other = fingerprint_bytes(_doc(b'{"backend": "gloo", "rank": 3, "world_size": 8}'))
    assert other.digest != a.digest
    moved = _doc(b'{"backend": "nccl", "rank": 3, "world_size": 8}', b'[{"ts": 2}]')
    assert fingerprint_bytes(moved).digest != a.digest


def test_fingerprint_reads_only_the_top_level_of_distributed_info() -> None:
    nested = b'{"pg_config": [{"rank": 5, "ranks": [0, 1]}], "rank": 1, "world_size": 2}'
    fp = fingerprint_bytes(_doc(nested))
    assert (fp.rank, fp.world_size) == (1, 2)


@pytest.mark.parametrize(
    "info",
    [
        b'{"backend": "nccl"}',  # no rank
        b'{"rank": 3}',  # no world size: the graph's world size would depend on the rank
        b'{"rank": 8, "world_size": 8}',  # not a rank of the job
        b'{"rank": -1, "world_size": 8}',
        b'{"rank": 1, "rank": 2, "world_size": 8}',  # which one does the reader keep?
        b'{"rank": "1", "world_size": 8}',
    ],
)
def test_traces_that_cannot_share(info: bytes) -> None:
    a, b = fingerprint_bytes(_doc(info)), fingerprint_bytes(_doc(info))
    assert not a.shareable and a.digest == b.digest  # equal bytes, yet each its own build
    assert fingerprint_bytes(b"[]").shareable is False


def _same_graph(a: ExecGraph, b: ExecGraph) -> None:
    assert a.names == b.names
    assert (a.rank, a.world_size, a.dims) == (b.rank, b.world_size, b.dims)
    assert a.process_groups == b.process_groups
    assert dict(a.calibration) == dict(b.calibration)
    assert a.diagnostics.to_dict() == b.diagnostics.to_dict()
    for table in ("processors", "tasks", "edges", "waits", "annotations", "comms"):
        ta, tb = getattr(a, table), getattr(b, table)
        for col in type(ta)._COLUMNS:
            assert np.array_equal(getattr(ta, col), getattr(tb, col)), (table, col)
    if a.task_dims_idx is None:
        assert b.task_dims_idx is None
    else:
        assert np.array_equal(a.task_dims_idx, b.task_dims_idx)


def test_shared_builds_equal_one_build_per_trace(tmp_path) -> None:
    run = write_replicated(tmp_path / "run", 16)
    refs = expand_paths([run])
    shared, builds = build_ranks(_build_one, refs, workers=1)
    assert builds == 8  # one per distinct trace
    assert [g.rank for g in shared] == list(range(16))
    for ref, g in zip(refs, shared, strict=True):
        _same_graph(g, _build_one(ref))
    assert shared[8].tasks is shared[0].tasks  # re-stamped, not copied


def test_distinct_traces_are_each_built(tmp_path) -> None:
    run = write_replicated(tmp_path / "run", 16, jitter=True)
    refs = expand_paths([run])
    shared, builds = build_ranks(_build_one, refs, workers=2)
    assert builds == 16
    for ref, g in zip(refs, shared, strict=True):
        _same_graph(g, _build_one(ref))


def _tiny(rank: int, world: int, diagnostic: str | None = None) -> ExecGraph:
    b = GraphBuilder(rank=rank, world_size=world)
    b.task(b.thread(1), "op", 1_000)
    g = b.build()
    if diagnostic:
        g.diagnostics.warn(diagnostic)
    return g


def _refs(tmp_path, ranks: list[int], world: int) -> list[TraceRef]:
    for r in ranks:
        info = b'{"rank": %d, "world_size": %d}' % (r, world)
        (tmp_path / f"r{r}.json").write_bytes(_doc(info))
    return expand_paths([tmp_path])


@pytest.mark.parametrize(
    ("stamped", "diagnostic", "builds"),
    [
        (True, None, 1),  # the representative vouches for its copies
        (True, "p2p_peer_inferred_from_group_of_two", 4),  # its build read the rank
        (False, None, 4),  # it read another rank than the fingerprint found
    ],
)
def test_representative_must_vouch(tmp_path, stamped: bool, diagnostic, builds: int) -> None:
    calls: list[str] = []

    def build(ref: TraceRef) -> ExecGraph:
        calls.append(ref.where)
        rank = int(ref.where.rsplit("r", 1)[1].split(".")[0])
        return _tiny(rank if stamped else (rank + 1) % 4, 4, diagnostic)

    graphs, n = build_ranks(build, _refs(tmp_path, [0, 1, 2, 3], 4), workers=1)
    assert (n, len(calls)) == (builds, builds)
    if stamped:
        assert [g.rank for g in graphs] == [0, 1, 2, 3]


def test_build_workload_takes_found_traces(tmp_path) -> None:
    run = write_replicated(tmp_path / "run", 16)
    by_path, _ = build_workload([run], workers=1)
    by_refs, _ = build_workload(expand_paths([run]), workers=1)
    for a, b in zip(by_path.graphs, by_refs.graphs, strict=True):
        _same_graph(a, b)
