"""Pipeline stages numbered along the forward sends (``pipeline_stages``), on hand-made ranks
whose micro-batch blocks are given by hand (no layer detection involved)."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.estimate.layers import Group, LayerMap
from lumos.estimate.pipeline import pipeline_stages
from lumos.graph.kinds import CommType, TaskKind
from lumos.graph.model import Workload
from lumos.graph.synthetic import GraphBuilder

NONE = -1  # a peer the trace does not name (gloo without "Concrete Inputs")


def _rank(rank, world, recv=None, sends=(), backward=(), later=(), blocks=True):
    """Rank ``rank`` of ``world``: one thread whose micro-batch groups are, in this order, a
    backward block (a receive from, then a send to, each peer in ``backward``), the step's
    forward block (a receive from ``recv`` when given, an ``mm``, a send to each of ``sends``)
    and the next step's forward block (a send to each of ``later``). Without ``blocks`` the
    rank's map holds no micro-batch group at all."""
    b = GraphBuilder(rank=rank, world_size=world)
    th = b.thread(1)

    def p2p(kind, peer):
        comm = b.comm(kind, 256, peer_rank=peer)
        return b.task(th, f"gloo:{kind.name.lower()}", 10, TaskKind.CPU_COMM, comm=comm)

    bwd = [t for peer in backward for t in (p2p(CommType.RECV, peer), p2p(CommType.SEND, peer))]
    fwd = [p2p(CommType.RECV, recv)] if recv is not None else []
    fwd.append(b.task(th, "aten::mm", 100))
    fwd += [p2p(CommType.SEND, peer) for peer in sends]
    nxt = [p2p(CommType.SEND, peer) for peer in later] or [b.task(th, "aten::mm", 100)]
    groups = [
        Group(0, (np.array(blk, dtype=np.int64),), "microbatch", phase, step)
        for blk, phase, step in ((bwd, "backward", 0), (fwd, "forward", 0), (nxt, "forward", 1))
        if blk
    ]
    return b.build().validate(), LayerMap(tuple(groups) if blocks else (), 0, 1, "by hand")


def _stages(*ranks):
    workload = Workload(tuple(g for g, _ in ranks))
    by_rank = {g.rank: lm for g, lm in ranks}
    return pipeline_stages(workload, [by_rank[g.rank] for g in workload.graphs])


def test_stages_follow_the_first_forward_send_of_the_first_forward_block():
    """Rank 0 receives nothing in its forward: stage 0. Its first forward send goes to rank 2
    (stage 1; the second send, to rank 1, and the next step's send to rank 1 are not read, nor
    is its backward block, which receives from and sends to rank 1 before the forward), rank 2
    sends on to rank 1 (stage 2). Rank 1 sends backward to rank 2 only: not a forward send, so
    the chain ends there."""
    stages = _stages(
        _rank(0, 3, sends=(2, 1), backward=(1,), later=(1,)),
        _rank(1, 3, recv=2, backward=(2,)),
        _rank(2, 3, recv=0, sends=(1,), backward=(1,)),
    )
    assert stages == {0: 0, 2: 1, 1: 2}
    assert list(stages) == [0, 2, 1]


def test_unnamed_peers_put_the_middle_stages_in_rank_order():
    """No send names its peer: the first stage is the rank receiving nothing (3), the last the
    one sending nothing forward (1), the middle ones (0, 2) go by rank. With two ranks, the
    one receiving nothing (1) is first and the other last."""
    stages = _stages(
        _rank(0, 4, recv=NONE, sends=(NONE,)),
        _rank(1, 4, recv=NONE),
        _rank(2, 4, recv=NONE, sends=(NONE,)),
        _rank(3, 4, sends=(NONE,)),
    )
    assert stages == {3: 0, 0: 1, 2: 2, 1: 3}
    assert list(stages) == [3, 0, 2, 1]
    assert _stages(_rank(0, 2, recv=NONE), _rank(1, 2, sends=(NONE,))) == {1: 0, 0: 1}


def test_a_single_rank_is_stage_0():
    """Rank 5 of 8 traced alone: stage 0, whether or not it sends (to an unnamed peer)."""
    assert _stages(_rank(5, 8, sends=(NONE,))) == {5: 0}
    assert _stages(_rank(5, 8)) == {5: 0}


def test_a_send_back_to_a_staged_rank_ends_the_chain():
    """Rank 1 sends forward to rank 0, already stage 0: both ranks are staged once."""
    assert _stages(_rank(0, 2, sends=(1,)), _rank(1, 2, recv=0, sends=(0,))) == {0: 0, 1: 1}


def test_what_cannot_be_ordered_into_one_pipeline_is_refused_with_the_reason():
    """A rank without micro-batch blocks; two ranks (0 and 2) receiving nothing; every rank
    receiving; a chain 0 -> 1 that never reaches rank 2."""
    with pytest.raises(ConfigError) as err:
        _stages(_rank(0, 2, sends=(1,)), _rank(1, 2, recv=0, blocks=False))
    assert str(err.value) == (
        "schedule: rank 1 shows no micro-batch blocks (a pipeline run with at least 2 "
        "micro-batches is needed)"
    )
    with pytest.raises(ConfigError) as err:
        _stages(_rank(0, 3, sends=(1,)), _rank(1, 3, recv=0), _rank(2, 3, sends=(1,)))
    assert str(err.value) == (
        "schedule: cannot order the pipeline stages (ranks receiving nothing in their "
        "forward: [0, 2])"
    )
    with pytest.raises(ConfigError) as err:
        _stages(_rank(0, 2, recv=1, sends=(1,)), _rank(1, 2, recv=0, sends=(0,)))
    assert str(err.value) == (
        "schedule: cannot order the pipeline stages (ranks receiving nothing in their forward: [])"
    )
    with pytest.raises(ConfigError) as err:
        _stages(_rank(0, 3, sends=(1,)), _rank(1, 3, recv=0), _rank(2, 3, recv=1))
    assert str(err.value) == (
        "schedule: the forward sends do not chain every rank into one pipeline"
    )


def test_the_maps_must_be_one_per_rank():
    """A map missing is refused, not read as a shorter pipeline."""
    ranks = [_rank(0, 2, sends=(1,)), _rank(1, 2, recv=0)]
    with pytest.raises(ValueError, match="zip"):
        pipeline_stages(Workload(tuple(g for g, _ in ranks)), [ranks[0][1]])
