"""Fewer pipeline stages (``pp`` below the traced value): neighbouring stages run on one rank.

A pipeline run of ``p`` stages, each rank one stage, becomes ``p / k`` stages: new rank ``r``
runs traced stages ``k x r`` to ``k x r + k - 1`` on one thread (and its streams), a micro-batch
at a time, the way a rank holding those layers would:

* every step keeps its place; inside it, each traced stage's micro-batch blocks (found by
  :mod:`lumos.estimate.layers`) run interleaved: forward ``i`` of the first merged stage, then
  of the next...; backward ``i`` of the last merged stage first. Work between blocks stays with
  the block after it; work after a step's last block (the optimizer) runs after every block,
  stage by stage. This keeps the traced GPipe order (all forwards, then all backwards);
* the messages between merged stages become local: they take no time and wait for nobody (the
  producer's block already ran before the consumer's on the thread), and the gaps next to them
  (a blocking send waits for its receiver outside any op) shrink to the thread's median gap
  between ops; the time between a merged stage's steps is dropped; messages to stages on
  other ranks are re-addressed;
* :func:`merge_graphs` is the graph surgery: one graph with the tasks, dependencies, spans,
  waits and communication of several, processors matched by kind and position.

The spans of iterations (``ProfilerStep``) are the first merged stage's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from numpy.typing import NDArray

from lumos.errors import ConfigError
from lumos.estimate.blocks import block_contents
from lumos.estimate.layers import LayerMap
from lumos.estimate.pipeline import traced_stages
from lumos.estimate.reorder import rebuild_in_order
from lumos.graph.kinds import AnnotationKind, CommType, DepKind, TaskKind
from lumos.graph.model import (
    Annotations,
    Comms,
    Edges,
    ExecGraph,
    Processors,
    Tasks,
    Waits,
    Workload,
)

__all__ = ["block_keys", "merge_graphs", "merge_in_order", "merge_stages", "place"]

_P2P = (int(CommType.SEND), int(CommType.RECV))


def _union(base: list[str], more: Sequence[str]) -> NDArray[np.int64]:
    """Indices of ``more`` in ``base``, appending what is missing."""
    where = {s: i for i, s in enumerate(base)}
    out = np.empty(len(more), dtype=np.int64)
    for i, s in enumerate(more):
        if s not in where:
            where[s] = len(base)
            base.append(s)
        out[i] = where[s]
    return out


def _processor_map(base: Processors, part: Processors) -> tuple[NDArray[np.int64], list[int]]:
    """Processor of ``base`` for each of ``part`` (the n-th thread onto the n-th thread, the
    n-th stream onto the n-th stream), and the ``part`` processors ``base`` lacks."""
    out = np.empty(len(part), dtype=np.int64)
    extra: list[int] = []
    for kind in np.unique(part.kind).tolist():
        mine = np.flatnonzero(base.kind == kind)
        theirs = np.flatnonzero(part.kind == kind)
        for n, p in enumerate(theirs.tolist()):
            if n < len(mine):
                out[p] = mine[n]
            else:
                out[p] = -1
                extra.append(p)
    return out, extra


def merge_graphs(graphs: Sequence[ExecGraph]) -> ExecGraph:
    """One graph (the first's rank) holding every task of ``graphs`` in turn (part ``i``'s
    tasks right after part ``i - 1``'s, on a shared processor after them), processors matched
    by kind and position (see the module docstring). The STEP spans are the first part's."""
    first = graphs[0]
    names = list(first.names)
    dims = list(first.dims)
    pgs = list(first.process_groups)
    procs = [first.processors]
    n_procs = len(first.processors)
    tasks: list[Tasks] = []
    edges: list[Edges] = []
    waits: list[Waits] = []
    spans: list[Annotations] = []
    comms: list[Comms] = []
    tdims: list[NDArray[np.int32]] = []
    offset = 0
    order_base = np.zeros(n_procs, dtype=np.int64)
    for i, g in enumerate(graphs):
        pmap, extra = _processor_map(first.processors, g.processors)
        if extra:
            pmap[extra] = n_procs + np.arange(len(extra))
            procs.append(g.processors.take(np.asarray(extra)))
            n_procs += len(extra)
            order_base = np.concatenate([order_base, np.zeros(len(extra), np.int64)])
        name_map = _union(names, g.names)
        # one spare entry: a part with no dims still has an element 0 for the masked lookups
        dims_map = np.append(_union(dims, g.dims), -1)
        pg_names = [p.name for p in pgs]
        # the same for process groups: a part with none may still have comms (pg_idx -1)
        pg_map = np.full(len(g.process_groups) + 1, -1, dtype=np.int64)
        for j, pg in enumerate(g.process_groups):
            if pg.name not in pg_names:
                pgs.append(pg)
                pg_names.append(pg.name)
            pg_map[j] = pg_names.index(pg.name)
        t = g.tasks
        proc = pmap[t.processor_idx]
        order = t.order + order_base[proc]
        np.maximum.at(order_base, proc, order + 1)
        n_comms = sum(len(x) for x in comms)
        tasks.append(t.replace(
            name_idx=name_map[t.name_idx], processor_idx=proc, order=order,
            comm_idx=np.where(t.comm_idx >= 0, t.comm_idx + n_comms, -1),
        ))  # fmt: skip
        e = g.edges
        edges.append(e.replace(src=e.src + offset, dst=e.dst + offset))
        w = g.waits
        waits.append(w.replace(
            task_idx=w.task_idx + offset,
            target_processor_idx=np.where(w.target_processor_idx >= 0,
                                          pmap[np.maximum(w.target_processor_idx, 0)], -1),
            record_task_idx=np.where(w.record_task_idx >= 0, w.record_task_idx + offset, -1),
        ))  # fmt: skip
        a = g.annotations
        keep = np.ones(len(a), dtype=bool) if i == 0 else a.kind != int(AnnotationKind.STEP)
        a = a.take(np.flatnonzero(keep))
        spans.append(a.replace(
            name_idx=name_map[a.name_idx], processor_idx=pmap[a.processor_idx],
            first_task_idx=np.where(a.first_task_idx >= 0, a.first_task_idx + offset, -1),
            last_task_idx=np.where(a.last_task_idx >= 0, a.last_task_idx + offset, -1),
            dims_idx=np.where(a.dims_idx >= 0, dims_map[np.maximum(a.dims_idx, 0)], -1),
        ))  # fmt: skip
        c = g.comms
        comms.append(c.replace(pg_idx=np.where(c.pg_idx >= 0, pg_map[np.maximum(c.pg_idx, 0)], -1)))
        if g.task_dims_idx is not None:
            td = g.task_dims_idx
            tdims.append(np.where(td >= 0, dims_map[np.maximum(td, 0)], -1).astype(np.int32))
        else:
            tdims.append(np.full(g.num_tasks, -1, dtype=np.int32))
        offset += g.num_tasks
    merged = first.replace(
        names=tuple(names), dims=tuple(dims), process_groups=tuple(pgs),
        processors=Processors.concat(procs), tasks=Tasks.concat(tasks),
        edges=Edges.concat(edges), waits=Waits.concat(waits),
        annotations=Annotations.concat(spans), comms=Comms.concat(comms),
        task_dims_idx=np.concatenate(tdims),
    )  # fmt: skip
    return merged


def block_keys(
    g: ExecGraph, lm: LayerMap, position: Callable[[bool, int], int]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per task of stage graph ``g``: its step and its slot on the merged rank,
    ``position(backward, micro-batch)`` for the tasks of a micro-batch block, ``-1`` for tasks
    outside blocks (placed by :func:`place`)."""
    step = np.full(g.num_tasks, -1, dtype=np.int64)
    slot = np.full(g.num_tasks, -1, dtype=np.int64)
    mb = lm.microbatch_groups()
    for grp, blocks in zip(mb, block_contents(g, mb), strict=True):
        for b, members in enumerate(blocks):
            step[members] = grp.step
            slot[members] = position(grp.phase == "backward", b)
    return step, slot


def place(
    g: ExecGraph, step: NDArray[np.int64], slot: NDArray[np.int64], end_slot: int, part: int
) -> NDArray[np.int64]:
    """Sort keys ``(step, slot, part, order)`` flattened: a task outside the blocks takes the
    key of the next block on its processor in the same step, or runs after every block."""
    indptr, perm = g.processor_order()
    key_step = step.copy()
    key_slot = slot.copy()
    for p in range(len(g.processors)):
        seq = perm[indptr[p] : indptr[p + 1]]
        nxt_step, nxt_slot = -1, -1
        last_step = -1
        for t_ in seq[::-1].tolist():
            if slot[t_] >= 0:
                nxt_step, nxt_slot = int(step[t_]), int(slot[t_])
                continue
            key_step[t_] = nxt_step
            key_slot[t_] = nxt_slot
        for t_ in seq.tolist():  # after a step's last block: with that step, after the blocks
            if slot[t_] >= 0:
                last_step = int(step[t_])
            elif last_step >= 0 and (key_step[t_] != last_step):
                key_step[t_], key_slot[t_] = last_step, end_slot
            elif key_step[t_] < 0:
                key_step[t_], key_slot[t_] = 0, -1
    return (key_step * (end_slot + 2) + key_slot + 1) * 4096 + part


def merge_in_order(graphs: Sequence[ExecGraph], keys: Sequence[NDArray[np.int64]]) -> ExecGraph:
    """:func:`merge_graphs` of ``graphs`` (the later ones without the gaps between their
    steps), each processor's tasks in the order of their ``keys`` (from :func:`place`)."""
    merged = merge_graphs([_no_gap_before_steps(g) if i else g for i, g in enumerate(graphs)])
    key = np.concatenate(keys)
    src = np.lexsort((merged.tasks.order, key, merged.tasks.processor_idx))
    return rebuild_in_order(merged, src.astype(np.int64))[0]


def _gpipe_slot(backward: bool, b: int, m: int, k: int, part: int) -> int:
    """Forward ``b`` of each of the ``k`` merged stages in turn, then backward ``b`` from the
    last stage."""
    return (int(backward) * m + b) * k + ((k - 1 - part) if backward else part)


def merge_stages(
    workload: Workload, maps: Sequence[LayerMap], new_pp: int
) -> tuple[Workload, dict[str, int]]:
    """``workload`` (a pipeline of ``len(maps)`` stages) on ``new_pp`` ranks (see the module
    docstring). Returns the new workload and ``messages_local``, the messages made local."""
    stage, m = traced_stages(workload, list(maps), f"pp={new_pp}")
    p = len(stage)
    if p % new_pp:
        raise ConfigError(f"pp={new_pp}: the traced {p} stages merge evenly only into a divisor "
                          f"of {p}")  # fmt: skip
    k = p // new_pp
    end_slot = 2 * m * k
    by_stage = sorted(zip(workload.graphs, maps, strict=True), key=lambda x: stage[x[0].rank])
    out, local = [], 0
    for r in range(new_pp):
        parts = by_stage[r * k : (r + 1) * k]
        keys = []
        for i, (g, lm) in enumerate(parts):
            step, slot = block_keys(g, lm, partial(_gpipe_slot, m=m, k=k, part=i))
            keys.append(place(g, step, slot, end_slot, i))
        merged = merge_in_order([g for g, _ in parts], keys)
        merged, n = _localize(merged, {g.rank: stage[g.rank] for g, _ in parts}, stage, k, r)
        local += n
        out.append(merged.replace(rank=r, world_size=new_pp))
    return Workload(tuple(out), workload.diagnostics.copy()), {"messages_local": local}


def _no_gap_before_steps(g: ExecGraph) -> ExecGraph:
    """``g`` without the gaps before its steps' first tasks: time between a rank's steps is
    not work of the rank it is merged into."""
    a, e = g.annotations, g.edges
    firsts = a.first_task_idx[(a.kind == int(AnnotationKind.STEP)) & (a.first_task_idx >= 0)]
    into = np.isin(e.dst, firsts) & np.isin(e.kind, [int(DepKind.INTRA_THREAD)])
    return g.replace(edges=e.replace(delay_ns=np.where(into, 0, e.delay_ns)))


def _localize(
    g: ExecGraph, mine: dict[int, int], stage: dict[int, int], k: int, rank: int
) -> tuple[ExecGraph, int]:
    """Messages between the merged stages take no time and match nobody; the others go to the
    rank now holding their peer's stage."""
    t, c = g.tasks, g.comms
    has = np.flatnonzero(t.comm_idx >= 0)
    ci = t.comm_idx[has]
    p2p = np.isin(c.kind[ci], _P2P)
    inside = p2p & np.isin(c.peer_rank[ci], list(mine))
    drop = has[inside]
    dur = t.dur_ns.copy()
    dur[drop] = 0
    kind = t.kind.copy()
    kind[drop] = int(TaskKind.CPU_OP)
    comm_idx = t.comm_idx.copy()
    comm_idx[drop] = -1
    # a blocking message's peer held the thread before or after it (gaps no op covers); a
    # local one leaves the thread's usual overhead between two ops
    e = g.edges
    intra = e.kind == int(DepKind.INTRA_THREAD)
    local = np.zeros(g.num_tasks, dtype=bool)
    local[drop] = True
    usual = int(np.median(e.delay_ns[intra])) if intra.any() else 0
    near = intra & (local[e.src] | local[e.dst])
    delay = np.where(near, np.minimum(e.delay_ns, usual), e.delay_ns)
    peer = c.peer_rank.copy()
    outside = ci[p2p & ~inside]
    peer[outside] = [stage.get(int(x), -1 * k) // k for x in c.peer_rank[outside].tolist()]
    return g.replace(
        tasks=t.replace(dur_ns=dur, kind=kind, comm_idx=comm_idx),
        comms=c.replace(peer_rank=peer),
        edges=e.replace(delay_ns=delay),
    ), len(drop)
