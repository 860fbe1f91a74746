"""Invariants of collectives across ranks on random multi-rank workloads (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lumos.graph.model import CommType, DepKind, TaskKind, Workload
from lumos.graph.synthetic import GraphBuilder
from lumos.sim import simulate


@st.composite
def workloads(draw: st.DrawFn) -> tuple[Workload, bool]:
    world = draw(st.integers(2, 4))
    n_coll = draw(st.integers(1, 6))
    use_seq = draw(st.booleans())
    graphs = []
    for rank in range(world):
        b = GraphBuilder(rank=rank, world_size=world)
        th, compute, comm = b.thread(1), b.stream(7), b.stream(20)
        pg = b.process_group("0", tuple(range(world)))
        for i in range(n_coll):
            launch = b.task(
                th,
                "launch",
                draw(st.integers(1, 5)),
                TaskKind.RUNTIME,
                gap_ns=draw(st.integers(0, 9)),
            )
            k = b.task(compute, "gemm", draw(st.integers(0, 100)))
            b.edge(launch, k, DepKind.LAUNCH, draw(st.integers(0, 10)))
            nccl_launch = b.task(th, "ncclLaunch", 2, TaskKind.RUNTIME)
            dur = draw(st.integers(1, 200))
            wait = draw(st.integers(0, dur))
            c = b.comm(CommType.ALL_REDUCE, 1024, pg, seq_id=i if use_seq else -1, wait_ns=wait)
            nccl = b.task(comm, "ncclAllReduce", dur, TaskKind.COMM, comm=c)
            b.edge(nccl_launch, nccl, DepKind.LAUNCH)
            b.edge(k, nccl, DepKind.INTER_STREAM)
        graphs.append(b.build().validate())
    return Workload(tuple(graphs)), use_seq


@settings(max_examples=100, deadline=None)
@given(workloads())
def test_collectives_start_together_and_run_their_transfer(case: tuple[Workload, bool]) -> None:
    """Participants start at the last arrival and each runs its duration less its waiting."""
    w, _ = case
    r = simulate(w)
    groups = w.collective_groups()
    assert (groups.sizes() == len(w.graphs)).all()
    for k in range(groups.num_groups):
        lo, hi = groups.indptr[k], groups.indptr[k + 1]
        gi, ti = groups.member_graph[lo:hi], groups.member_task[lo:hi]
        starts = np.array([r.starts(int(a))[b] for a, b in zip(gi, ti, strict=True)])
        ends = np.array([r.ends(int(a))[b] for a, b in zip(gi, ti, strict=True)])
        durs = np.array([w.graphs[int(a)].tasks.dur_ns[b] for a, b in zip(gi, ti, strict=True)])
        waits = np.array(
            [
                w.graphs[int(a)].comms.wait_ns[w.graphs[int(a)].tasks.comm_idx[b]]
                for a, b in zip(gi, ti, strict=True)
            ]
        )
        assert (starts == starts[0]).all()
        assert (ends == starts[0] + durs - waits).all()
    for gi, g in enumerate(w.graphs):
        s, e = r.starts(gi), r.ends(gi)
        assert (s[g.edges.dst] >= e[g.edges.src] + g.edges.delay_ns).all()
    assert simulate(w).to_json(True) == r.to_json(True)
