"""Interleaved 1F1B as an edit: a recorded 2-stage GPipe run with 4 micro-batches and 4 layers,
re-cut into 2 chunks per rank (4 virtual stages of 1 layer) and run in Megatron's interleaved
order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.estimate import estimate, parse_scenario
from lumos.estimate.baseline import detect_baseline
from lumos.estimate.reshape import reshape_workload
from lumos.graph.kinds import CommType, DepKind
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
