"""Per-rank report work is shared between graphs of one structure, and only between those.

``task_ops`` remembers its result by the columns it reads; ``SimResult.global_tables``
concatenates the workload's edges once for every rank's critical path. The multi-rank replay
of replicated ranks must report exactly what replaying each rank on its own structure does.
"""

from __future__ import annotations

import numpy as np
from tests.realdata import needs_realdata, trace

from lumos.graph.build import build_graph
from lumos.graph.model import Workload
from lumos.ingest.kineto import read_kineto
from lumos.replay import replay
from lumos.report import ops
from lumos.report.ops import task_ops


@needs_realdata
def test_task_ops_shared_by_replicas_and_not_by_other_graphs() -> None:
    a = build_graph(read_kineto(trace("cuda_event_sync")))
    b = build_graph(read_kineto(trace("cuda_event_sync_multi_stream")))
    op_a, call_a = task_ops(a)
    # same columns: the remembered result
    assert task_ops(a.replace(rank=3, world_size=4))[0] is op_a
    op_b, _ = task_ops(b)
    ops._MEMO.clear()
    fresh_a, fresh_call = ops._task_ops(a)
    np.testing.assert_array_equal(op_a, fresh_a)
    np.testing.assert_array_equal(call_a, fresh_call)
    np.testing.assert_array_equal(op_b, ops._task_ops(b)[0])
    # an edit of the columns task_ops reads is a new structure
    t = a.tasks
    shifted = a.replace(tasks=t.replace(kind=np.where(t.kind == t.kind[0], t.kind, t.kind[0])))
    assert task_ops(shifted)[0] is not task_ops(a)[0]


@needs_realdata
def test_replicated_ranks_report_what_each_rank_does_alone() -> None:
    g = build_graph(read_kineto(trace("cuda_event_sync")))
    single = replay(g).summaries[0]
    many = replay(Workload(tuple(g.replace(rank=r, world_size=4) for r in range(4))))
    for summary in many.summaries:
        for key in ("steps", "breakdown", "critical_path", "critical_path_ops"):
            assert summary[key] == single[key], key
