"""Interleaved 1F1B (``schedule=interleaved``, ``chunks=V``): each rank holds ``V`` model chunks.

A pipeline run of ``p`` stages becomes ``p`` ranks each holding ``V`` chunks of
``layers / (p x V)`` layers: chunk ``c`` of rank ``s`` is virtual stage ``c x p + s``, so a
micro-batch's forward visits rank 0, 1, ..., p-1, then rank 0 again with the next chunk (Megatron's
virtual pipeline). Built from the graph edits that exist:

1. :func:`~lumos.estimate.stages.restage` splits the traced stages into the ``p x V`` virtual
   stages (the embedding stays on virtual stage 0, the head and loss on the last one);
2. each rank's chunks are merged onto it (:func:`~lumos.estimate.merge.merge_in_order`), every
   micro-batch block in the order :func:`~lumos.estimate.schedule.pipeline_schedule` gives the
   rank for ``interleaved`` (forwards in groups of ``p`` micro-batches per chunk, a warm-up, then
   one forward and one backward in turn);
3. messages go to the rank of their virtual peer; each virtual stage boundary and direction gets
   its own process group (``lumos:vpp<b><f|b>``), so messages pair within their stream in
   micro-batch order whatever the order the two ranks issue streams in, as communicators per
   pipeline pair do;
4. each send followed by a receive is issued together with it
   (:func:`~lumos.estimate.reorder.batch_sends`), as Megatron's ``batch_isend_irecv`` does.

The micro-batch count must be a multiple of ``p``; layers must split evenly into ``p x V``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from lumos.errors import ConfigError
from lumos.estimate.layers import LayerMap, find_layers
from lumos.estimate.merge import block_keys, merge_in_order, place
from lumos.estimate.pipeline import traced_stages
from lumos.estimate.reorder import batch_sends
from lumos.estimate.schedule import Slot, pipeline_schedule
from lumos.estimate.stages import restage
from lumos.graph.kinds import CommType
from lumos.graph.model import ExecGraph, ProcessGroup, Workload

__all__ = ["interleave"]

_SEND, _RECV = int(CommType.SEND), int(CommType.RECV)


def _slot_of(backward: bool, b: int, where: dict[Slot, int], chunk: int) -> int:
    return where[Slot("B" if backward else "F", b, chunk)]


def _streams(g: ExecGraph, vstage: int, p: int) -> ExecGraph:
    """Virtual stage ``vstage``'s messages: addressed to their physical rank, each in the
    process group of its boundary and direction."""
    c = g.comms
    p2p = np.flatnonzero(np.isin(c.kind, [_SEND, _RECV]) & (c.peer_rank >= 0))
    peer = c.peer_rank.copy()
    pg_idx = c.pg_idx.copy()
    groups = list(g.process_groups)
    names = {pg.name: i for i, pg in enumerate(groups)}
    for i in p2p.tolist():
        other = int(c.peer_rank[i])
        boundary = min(other, vstage)
        sender = vstage if c.kind[i] == _SEND else other
        name = f"lumos:vpp{boundary}{'f' if sender == boundary else 'b'}"
        if name not in names:
            names[name] = len(groups)
            groups.append(ProcessGroup(name=name, ranks=tuple(sorted({vstage % p, other % p})),
                                       desc="virtual pipeline boundary", backend=""))  # fmt: skip
        pg_idx[i] = names[name]
        peer[i] = other % p
    return g.replace(comms=c.replace(peer_rank=peer, pg_idx=pg_idx), process_groups=tuple(groups))


def interleave(
    workload: Workload, maps: Sequence[LayerMap], layers: int, chunks: int
) -> tuple[Workload, dict[str, int]]:
    """``workload`` (a pipeline, one stage per rank) with ``chunks`` model chunks per rank on
    the interleaved schedule (see the module docstring). Returns the workload and counts for
    the edit record: ``tasks_zeroed``, ``messages_added``, ``sends_batched``."""
    stage, microbatches = traced_stages(workload, list(maps), "schedule=interleaved")
    p = len(stage)
    sched = pipeline_schedule(p, microbatches, "interleaved", chunks)
    virtual, counts = restage(workload, maps, layers, p * chunks)
    vgraphs = [_streams(g, g.rank, p) for g in virtual.graphs]
    vmaps = [find_layers(g) for g in virtual.graphs]
    end_slot = 2 * microbatches * chunks
    out, batched = [], 0
    for s in range(p):
        where = {slot: k for k, slot in enumerate(sched[s])}
        parts, keys = [], []
        for c in range(chunks):
            g, lm = vgraphs[c * p + s], vmaps[c * p + s]
            if {x.count for x in lm.microbatch_groups()} != {microbatches}:
                raise ConfigError(f"schedule=interleaved: virtual stage {c * p + s} lost its "
                                  "micro-batch blocks (too few layers per chunk?)")  # fmt: skip
            step, slot = block_keys(g, lm, partial(_slot_of, where=where, chunk=c))
            keys.append(place(g, step, slot, end_slot, c))
            parts.append(g)
        merged = merge_in_order(parts, keys).replace(rank=s, world_size=p)
        merged, n = batch_sends(merged, every=True)
        batched += n
        out.append(merged)
    return Workload(tuple(out), workload.diagnostics.copy()), {**counts, "sends_batched": batched}
