"""Interleaved 1F1B as an edit: a recorded 2-stage GPipe run with 4 micro-batches and 4 layers,
re-cut into 2 chunks per rank (4 virtual stages of 1 layer) and run in Megatron's interleaved
order."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.estimate import estimate, parse_scenario
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.interleave import _streams
from lumos.estimate.reshape import reshape_workload
from lumos.graph.kinds import CommType, DepKind
from lumos.graph.model import ProcessGroup
from lumos.graph.synthetic import GraphBuilder
from lumos.replay import build_workload
from lumos.sim import simulate
from lumos.sim.cost import TracedCost

RUN = Path(__file__).parents[1] / "data" / "whatif_pairs" / "pp_microbatches_x2_B"


@pytest.fixture(scope="module")
def traced():
    workload, _ = build_workload([str(RUN)])
    return workload


def _streams_in_issue_order(g) -> list[str]:
    """Each message as ``S``/``R`` and its stream (``0f``: forward over virtual boundary 0),
    in the order the main thread issues it (a lane's send where its issue edge comes from)."""
    t, c, e = g.tasks, g.comms, g.edges
    lane = np.array(["batched sends" in lb for lb in g.processors.label])
    where = t.order.astype(np.float64)
    issue = (e.kind == int(DepKind.INTER_THREAD)) & lane[t.processor_idx[e.dst]]
    where[e.dst[issue]] = t.order[e.src[issue]] + 0.5
    msgs = np.flatnonzero(t.comm_idx >= 0)
    msgs = msgs[np.argsort(where[msgs], kind="stable")]
    ci = t.comm_idx[msgs]
    return [("S" if k == int(CommType.SEND) else "R") + g.process_group_name(p)[len("lumos:vpp"):]
            for k, p in zip(c.kind[ci].tolist(), c.pg_idx[ci].tolist(), strict=True)]  # fmt: skip


def test_each_rank_runs_its_chunks_in_the_interleaved_order(traced):
    out, edits = reshape_workload(traced, detect_baseline(traced), {}, "interleaved", 2)
    assert edits[-1].name == "schedule interleaved, 2 chunks per rank"
    assert [g.rank for g in out.graphs] == [0, 1]
    # stage 0: F1c1 F2c1 F1c2 F2c2 F3c1 B1c2 F4c1 B2c2 F3c2 B1c1 F4c2 B2c1 B3c2 B4c2 B3c1 B4c1;
    # chunk 1 (virtual stage 0) sends forward over boundary 0 and receives its gradients back;
    # chunk 2 (virtual stage 2) receives over boundary 1 and sends over boundary 2
    f1, f2, b2, b1 = ["S0f"], ["R1f", "S2f"], ["R2b", "S1b"], ["R0b"]
    step = [*f1, *f1, *f2, *f2, *f1, *b2, *f1, *b2, *f2, *b1, *f2, *b1, *b2, *b2, *b1, *b1]
    assert _streams_in_issue_order(out.graphs[0]) == step * 3
    # stage 1: F1c1 F2c1 F1c2 B1c2 F2c2 B2c2 F3c1 B1c1 F4c1 B2c1 F3c2 B3c2 F4c2 B4c2 B3c1 B4c1
    f1, f2, b2, b1 = ["R0f", "S1f"], ["R2f"], ["S2b"], ["R1b", "S0b"]
    step = [*f1, *f1, *f2, *b2, *f2, *b2, *f1, *b1, *f1, *b1, *f2, *b2, *f2, *b2, *b1, *b1]
    assert _streams_in_issue_order(out.graphs[1]) == step * 3
    # every send is issued without blocking: 12 per rank and step (4 micro-batches, and on
    # each rank 3 of its 4 chunk passes send), 3 steps, 2 ranks
    assert edits[-1].detail.endswith("; 72 sends issued without blocking")
    simulate(out, TracedCost())  # the non-blocking sends let every receive be met


def test_interleaving_shortens_the_bubble_the_traced_order_has(traced):
    est = estimate(traced, [parse_scenario(["schedule=1f1b"]),
                            parse_scenario(["schedule=interleaved", "chunks=2"])])  # fmt: skip
    _, one_f_one_b, inter = est.rows
    # p = 2, m = 4: the bubble is 1/5 of a 1F1B step and 1/9 of an interleaved one; each rank
    # also gets 2 more stage boundaries to cross, so the gain is smaller than 10 %
    assert 0.85 * one_f_one_b.step_ns < inter.step_ns < 0.99 * one_f_one_b.step_ns


def test_what_the_interleaved_schedule_cannot_do_is_refused(traced):
    with pytest.raises(ConfigError, match="chunks=1"):
        parse_scenario(["schedule=interleaved", "chunks=1"])
    with pytest.raises(ConfigError, match="needs --set schedule=interleaved"):
        parse_scenario(["chunks=2"])
    assert parse_scenario(["chunks=3", "schedule=interleaved"]).label == (
        "schedule=interleaved chunks=3"
    )
    # 4 layers do not split into 2 stages x 4 chunks
    with pytest.raises(ConfigError, match="layers=4 do not split evenly into 8"):
        reshape_workload(traced, detect_baseline(traced), {}, "interleaved", 4)


def test_a_virtual_stages_messages_go_to_physical_ranks_in_one_group_per_boundary_direction():
    """Virtual stage 3 of a 3-rank pipeline (so on rank 3 % 3 = 0) sends to stage 4 (rank 1)
    and receives from stage 2 (rank 2) on the forward, the other way on the backward, and sends
    to stage 4 once more. Each message goes to its stage's rank (4 % 3 = 1, 2 % 3 = 2), in the
    group of its boundary (the lower stage) and direction (``f`` when the lower stage sends):
    3->4 ``vpp3f`` on ranks (0, 1), 2->3 ``vpp2f`` on (0, 2), 3->2 ``vpp2b``, 4->3 ``vpp3b``;
    the repeated send reuses ``vpp3f``. The all-reduce and a send with no known peer keep their
    peer and group; the graph's own group stays first. Stage 1's receive from stage 0 (peer
    rank 0, a known one) is in ``vpp0f`` on (0, 1)."""
    b = GraphBuilder(rank=3, world_size=6)
    th = b.thread(1)
    dp = b.process_group("dp", (0, 3))
    S, R = CommType.SEND, CommType.RECV
    comms = [b.comm(CommType.ALL_REDUCE, 8, pg=dp), b.comm(S, 8, peer_rank=4),
             b.comm(R, 8, peer_rank=2), b.comm(S, 8, peer_rank=2), b.comm(R, 8, peer_rank=4),
             b.comm(S, 8, peer_rank=4), b.comm(S, 8)]  # fmt: skip
    for k, c in enumerate(comms):
        b.task(th, f"op{k}", 5, ts_ns=10 * k, comm=c)
    out = _streams(b.build().validate(), 3, 3)
    assert out.comms.peer_rank.tolist() == [-1, 1, 2, 2, 1, 1, -1]
    assert out.comms.pg_idx.tolist() == [0, 1, 2, 3, 4, 1, -1]
    boundary = partial(ProcessGroup, desc="virtual pipeline boundary", backend="")
    assert out.process_groups == (
        ProcessGroup(name="dp", ranks=(0, 3)),
        boundary(name="lumos:vpp3f", ranks=(0, 1)),
        boundary(name="lumos:vpp2f", ranks=(0, 2)),
        boundary(name="lumos:vpp2b", ranks=(0, 2)),
        boundary(name="lumos:vpp3b", ranks=(0, 1)),
    )
    b = GraphBuilder(rank=1, world_size=6)
    b.task(b.thread(1), "recv", 5, comm=b.comm(R, 8, peer_rank=0))
    out = _streams(b.build().validate(), 1, 3)
    assert (out.comms.peer_rank.tolist(), out.comms.pg_idx.tolist()) == ([0], [0])
    assert out.process_groups == (boundary(name="lumos:vpp0f", ranks=(0, 1)),)


def test_a_virtual_stage_without_its_micro_batch_blocks_is_refused(traced, monkeypatch):
    """Virtual stage 2 (chunk 1 of rank 0, the second one the loop reaches) made to show no
    micro-batch blocks: the edit refuses, naming it, rather than placing nothing."""
    import lumos.estimate.interleave as inter
    from lumos.estimate.layers import LayerMap, find_layers

    def losing(g):
        return LayerMap((), 0, 1, "none") if g.rank == 2 else find_layers(g)

    base = detect_baseline(traced)
    monkeypatch.setattr(inter, "find_layers", losing)
    with pytest.raises(ConfigError) as err:
        reshape_workload(traced, base, {}, "interleaved", 2)
    assert str(err.value) == ("schedule=interleaved: virtual stage 2 lost its micro-batch "
                              "blocks (too few layers per chunk?)")  # fmt: skip
