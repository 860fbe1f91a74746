"""Re-schedule a pipeline-parallel run: its micro-batch blocks in another order (``schedule=``).

A pipeline stage's step is a forward block and a backward block per micro-batch (found by
:mod:`lumos.estimate.layers`, one send or receive each). :func:`reschedule` puts each rank's
blocks in the order :func:`~lumos.estimate.schedule.pipeline_schedule` gives its stage (``gpipe``
or ``1f1b``): the ops, their costs and their dependencies stay, the order on the thread changes,
and the simulation finds the new waits for the neighbours' sends. A ``1f1b`` order sends and
receives at the same points the way Megatron does, batched (``batch_isend_irecv``). Stages are numbered along the
forward sends: the rank whose forward receives nothing is stage 0.
"""

from __future__ import annotations

import numpy as np

from lumos.errors import ConfigError
from lumos.estimate.blocks import block_contents
from lumos.estimate.layers import LayerMap, find_layers
from lumos.estimate.reorder import batch_sends, reorder_blocks
from lumos.estimate.schedule import pipeline_schedule
from lumos.graph.kinds import CommType
from lumos.graph.model import ExecGraph, Workload

__all__ = ["SCHEDULES", "pipeline_stages", "reschedule", "traced_stages"]

SCHEDULES = ("gpipe", "1f1b", "interleaved")


def _p2p(g: ExecGraph, tasks: np.ndarray, kind: CommType) -> list[int]:
    ci = g.tasks.comm_idx[tasks]
    ci = ci[ci >= 0]
    return g.comms.peer_rank[ci[g.comms.kind[ci] == int(kind)]].tolist()


def pipeline_stages(workload: Workload, maps: list[LayerMap]) -> dict[int, int]:
    """Stage of each rank, following the forward sends from the rank that receives nothing."""
    nxt: dict[int, int] = {}
    receives: set[int] = set()
    for g, lm in zip(workload.graphs, maps, strict=True):
        fwd = [x for x in lm.microbatch_groups() if x.phase == "forward"]
        if not fwd:
            raise ConfigError(f"schedule: rank {g.rank} shows no micro-batch blocks "
                              "(a pipeline run with at least 2 micro-batches is needed)")  # fmt: skip
        tasks = np.concatenate(fwd[0].blocks)
        sends = _p2p(g, tasks, CommType.SEND)
        if sends:
            nxt[g.rank] = sends[0]  # -1 when the trace does not say to whom
        if _p2p(g, tasks, CommType.RECV):
            receives.add(g.rank)
    firsts = [g.rank for g in workload.graphs if g.rank not in receives]
    if len(firsts) != 1:
        raise ConfigError(f"schedule: cannot order the pipeline stages (ranks receiving nothing "
                          f"in their forward: {firsts})")  # fmt: skip
    stage: dict[int, int] = {}
    r = firsts[0]
    while r not in stage and r >= 0:
        stage[r] = len(stage)
        r = nxt.get(r, -1)
    if len(stage) == 1 and len(workload.graphs) > 1:
        # peers not recorded (gloo without "Concrete Inputs"): the last stage sends nothing
        # forward, the middle ones go by rank, as pipeline groups usually are laid out
        last = [g.rank for g in workload.graphs if g.rank not in nxt]
        middle = sorted(set(workload.ranks) - {firsts[0], *last})
        stage = {rk: i for i, rk in enumerate([firsts[0], *middle, *last])}
    if len(stage) != len(workload.graphs):
        raise ConfigError("schedule: the forward sends do not chain every rank into one pipeline")
    return stage


def traced_stages(
    workload: Workload, maps: list[LayerMap], what: str
) -> tuple[dict[int, int], int]:
    """Stage of each rank and the micro-batches per step of a pipeline trace, every rank a
    stage whose steps hold the same number of micro-batch blocks; a ConfigError starting with
    ``what`` (the setting asked for) otherwise."""
    if len(maps) < 2 or not all(lm.microbatch_groups() for lm in maps):
        raise ConfigError(f"{what}: needs a pipeline-parallel trace (every rank a stage with "
                          "micro-batch blocks); this one has none")  # fmt: skip
    counts = {x.count for lm in maps for x in lm.microbatch_groups()}
    if len(counts) != 1:
        raise ConfigError(f"{what}: the stages' micro-batch blocks differ in number "
                          f"({sorted(counts)}); it needs them equal")  # fmt: skip
    return pipeline_stages(workload, maps), counts.pop()


def reschedule(workload: Workload, kind: str) -> tuple[Workload, int]:
    """Every rank's micro-batch blocks in the order of schedule ``kind`` (see the module), and
    how many sends were batched with the receive after them (``1f1b`` only: see
    :func:`~lumos.estimate.reorder.batch_sends`)."""
    if kind not in SCHEDULES[:2]:
        raise ConfigError(f"schedule={kind}: re-ordering knows {', '.join(SCHEDULES[:2])} "
                          "(interleaved: lumos.estimate.interleave)")  # fmt: skip
    maps = [find_layers(g) for g in workload.graphs]
    stage = pipeline_stages(workload, maps)
    out = []
    batched = 0
    for g, lm in zip(workload.graphs, maps, strict=True):
        mb = lm.microbatch_groups()
        # a send of a step's last block is never batched with the next step's first receive
        eligible = np.ones(g.num_tasks, dtype=bool)
        for step in sorted({x.step for x in mb}):
            groups = [x for x in mb if x.step == step]
            fwd = [x for x in groups if x.phase == "forward"]
            bwd = [x for x in groups if x.phase == "backward"]
            if len(fwd) != 1 or len(bwd) != 1 or fwd[0].count != bwd[0].count:
                raise ConfigError(f"schedule: rank {g.rank} step {step}: expected one forward and "
                                  "one backward block per micro-batch")  # fmt: skip
            m = fwd[0].count
            f_blocks, b_blocks = block_contents(g, [fwd[0], bwd[0]])
            slots = pipeline_schedule(len(stage), m, kind)[stage[g.rank]]
            order = [s.microbatch if s.phase == "F" else m + s.microbatch for s in slots]
            eligible[[*f_blocks, *b_blocks][order[-1]]] = False
            g, new_of = reorder_blocks(g, [*f_blocks, *b_blocks], order)
            moved = np.empty_like(eligible)
            moved[new_of] = eligible
            eligible = moved
            mb = find_layers(g).microbatch_groups()
        if kind == "1f1b":
            g, n = batch_sends(g, eligible)
            batched += n
        out.append(g)
    return workload.replace_graphs(out), batched
