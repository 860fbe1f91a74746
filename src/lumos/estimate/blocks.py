"""Copy or drop repeated blocks of a graph (layers, micro-batches): graph in, graph out.

:func:`resize_groups` gives each :class:`~lumos.estimate.layers.Group` a new block count. The
new blocks are copies of the old ones, spread evenly (``new block j`` copies ``old block
floor(j * count / new_count)``: doubling repeats every block, halving keeps every other one),
so a block that differs a little from its neighbours (the first layer's backward, the micro-batch
that assigns gradients instead of accumulating them) keeps its share.

What a block holds: its tasks on the thread, the runtime calls among them, and the GPU work they
launch (``LAUNCH`` edges), never the ops that issue collectives. Dependencies are rewired with
the pattern they had:

==================================  ==========================================================
old edge                            new edges
==================================  ==========================================================
inside one block                    inside every copy of it
block b -> block b+o (one group)    copy j -> copy j+o (same positions)
outside <-> a block                 outside <-> the first copy of that block, which keeps its
                                    place among the outside ops around it (a wait inside a
                                    layer stays one wait: the copies do not repeat it)
group A block -> group B block      by layer index when both have the same count
program order on a processor        regenerated, each task keeping the overhead before it
==================================  ==========================================================

Copied communication gets its own ``seq_id`` (old * 1024 + copy), the same on every rank that
makes the same edit, so collectives and sends/receives still pair up. Spans (annotations) that
lie inside one block are copied with it; steps keep their first and last tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.errors import ConfigError
from lumos.estimate.layers import COMM_PATTERN, Group, marked
from lumos.graph.kinds import DepKind, ProcessorKind, TaskKind
from lumos.graph.model import Annotations, Comms, Edges, ExecGraph, Tasks, Waits

__all__ = [
    "INTRA_KINDS",
    "ResizeStats",
    "block_contents",
    "overhead_before",
    "resize_groups",
    "tasks_in_order",
]

SEQ_STRIDE = 1024
INTRA_KINDS = (int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM))


@dataclass(frozen=True)
class ResizeStats:
    """What :func:`resize_groups` did."""

    tasks_added: int
    tasks_removed: int
    spans_dropped: int
    #: event waits whose record's processor kept no task (nothing left to capture)
    waits_dropped: int = 0


def block_contents(g: ExecGraph, groups: Sequence[Group]) -> list[list[NDArray[np.int64]]]:
    """Per group, per block: every task of the block (see the module docstring), sorted by
    ``(processor, order)``."""
    indptr, perm = g.processor_order()
    rank = np.empty(g.num_tasks, dtype=np.int64)
    rank[perm] = np.arange(g.num_tasks)
    t = g.tasks
    comm = marked(g, COMM_PATTERN, indptr, perm)
    runtime = (t.kind == int(TaskKind.RUNTIME)) & ~comm
    out_ptr, out_idx = g.csr_out()
    e = g.edges
    launch = e.kind == int(DepKind.LAUNCH)
    result = []
    for grp in groups:
        blocks = []
        for block in grp.blocks:
            lo, hi = rank[block].min(), rank[block].max()
            span = perm[lo : hi + 1]
            keep = np.isin(span, block) | runtime[span]
            members = span[keep]
            sat = []
            for m in members[runtime[members]].tolist():
                for ei in out_idx[out_ptr[m] : out_ptr[m + 1]].tolist():
                    if launch[ei]:
                        sat.append(int(e.dst[ei]))
            allm = np.unique(np.concatenate([members, np.asarray(sat, dtype=np.int64)]))
            blocks.append(allm[np.lexsort((t.order[allm], t.processor_idx[allm]))])
        result.append(blocks)
    return result


def _src_blocks(count: int, new_count: int) -> list[int]:
    """Old block of each new block: growing repeats each block in turn (0 0 1 1 ...),
    shrinking keeps the first and the last and spreads the rest (8 -> 4: 0 2 5 7)."""
    if new_count >= count:
        return [j * count // new_count for j in range(new_count)]
    if new_count == 1:
        return [0]
    return [round(j * (count - 1) / (new_count - 1)) for j in range(new_count)]


def resize_groups(
    g: ExecGraph, groups: Sequence[Group], new_counts: Sequence[int]
) -> tuple[ExecGraph, ResizeStats]:
    """``g`` with group ``i`` holding ``new_counts[i]`` blocks (see the module docstring).

    Groups must not share tasks (resize micro-batches and the layers inside them in two calls).
    """
    if len(groups) != len(new_counts):
        raise ConfigError("resize_groups: one new count per group")
    contents = block_contents(g, groups)
    n = g.num_tasks
    grp = np.full(n, -1, dtype=np.int64)
    blk = np.full(n, -1, dtype=np.int64)
    pos = np.full(n, -1, dtype=np.int64)
    for gi, blocks in enumerate(contents):
        for b, members in enumerate(blocks):
            if (grp[members] >= 0).any():
                raise ConfigError("resize_groups: groups overlap; resize one level at a time")
            grp[members], blk[members] = gi, b
            pos[members] = np.arange(len(members))
    srcs = [_src_blocks(len(c), k) for c, k in zip(contents, new_counts, strict=True)]

    # new tasks, processor by processor, in program order
    indptr, perm = g.processor_order()
    src_task: list[int] = []
    copy_no: list[int] = []
    # new_content[gi][j] = new indices of new block j, by position
    new_content: list[list[list[int]]] = [[[] for _ in s] for s in srcs]
    instances: dict[int, list[tuple[int, int]]] = {}  # old task -> [(new idx, new block)]
    # the first copy of a block keeps its place, and the outside ops interleaved with it (DDP
    # issues buckets mid-layer); further copies follow it, each contiguous
    on_proc: dict[tuple[int, int, int], list[int]] = {}
    for gi, blocks in enumerate(contents):
        for b, members in enumerate(blocks):
            for m in members.tolist():
                key = (gi, b, int(g.tasks.processor_idx[m]))
                on_proc.setdefault(key, []).append(m)
    copies_of = [
        {b: [j for j, sb in enumerate(s) if sb == b] for b in range(len(c))}
        for s, c in zip(srcs, contents, strict=True)
    ]

    def emit(task: int, j: int, nth: int) -> None:
        instances.setdefault(task, []).append((len(src_task), j))
        src_task.append(task)
        copy_no.append(nth)

    for p in range(len(g.processors)):
        for t_ in perm[indptr[p] : indptr[p + 1]].tolist():
            gi = int(grp[t_])
            if gi < 0:
                emit(t_, -1, 0)
                continue
            b = int(blk[t_])
            js = copies_of[gi][b]
            if not js:
                continue
            emit(t_, js[0], 0)
            mine = on_proc[(gi, b, p)]
            if t_ == mine[-1]:
                for nth, j in enumerate(js[1:], start=1):
                    for m in mine:
                        emit(m, j, nth)
    for old, inst in instances.items():
        gi = int(grp[old])
        if gi >= 0:
            for new, j in inst:
                block = new_content[gi][j]
                q = int(pos[old])
                if len(block) <= q:
                    block.extend([-1] * (q + 1 - len(block)))
                block[q] = new
    src = np.asarray(src_task, dtype=np.int64)
    copies = np.asarray(copy_no, dtype=np.int64)

    def at(gi: int, j: int, q: int) -> int:
        if 0 <= j < len(new_content[gi]) and q < len(new_content[gi][j]):
            return new_content[gi][j][q]
        return -1

    def ends(old: int) -> list[tuple[int, int]]:
        """The instance of ``old`` an edge from or to outside its group uses: the first copy,
        which keeps its place among the outside ops around it."""
        return instances.get(old, [])[:1]

    e = g.edges
    new_src: list[int] = []
    new_dst: list[int] = []
    new_kind: list[int] = []
    new_delay: list[int] = []
    for s, d, kind, delay in zip(
        e.src.tolist(), e.dst.tolist(), e.kind.tolist(), e.delay_ns.tolist(), strict=True
    ):
        if kind in INTRA_KINDS:
            continue
        gs, gd = int(grp[s]), int(grp[d])
        pairs: list[tuple[int, int]] = []
        if gs >= 0 and gd >= 0 and (gs == gd or len(contents[gs]) == len(contents[gd])):
            ls = _layer(groups[gs], int(blk[s]), len(contents[gs]))
            ld = _layer(groups[gd], int(blk[d]), len(contents[gd]))
            k2d = len(srcs[gd])
            for ns, j in instances.get(s, []):
                lj = _layer(groups[gs], j, len(srcs[gs])) + (ld - ls)
                jd = k2d - 1 - lj if groups[gd].backward else lj
                nd = at(gd, jd, int(pos[d]))
                if nd >= 0:
                    pairs.append((ns, nd))
        else:
            for ns, _ in ends(s):
                for nd, _ in ends(d):
                    if ns >= 0 and nd >= 0:
                        pairs.append((ns, nd))
        for ns, nd in pairs:
            new_src.append(ns)
            new_dst.append(nd)
            new_kind.append(kind)
            new_delay.append(delay)

    tasks, intra = tasks_in_order(g, src, e)
    new_src += intra[0]
    new_dst += intra[1]
    new_kind += intra[2]
    new_delay += intra[3]
    comms, comm_idx = _comms(g, src, copies)
    tasks = tasks.replace(comm_idx=comm_idx)
    first_new = np.full(n, -1, dtype=np.int64)
    last_new = np.full(n, -1, dtype=np.int64)
    for old, inst in instances.items():
        first_new[old] = min(i for i, _ in inst)
        last_new[old] = max(i for i, _ in inst)
    _fill_dropped(g, first_new, last_new)
    annotations, dropped = _annotations(g, grp, blk, first_new, last_new, instances)
    waits, waits_dropped = _waits(g, instances, first_new, last_new)
    out = g.replace(
        tasks=tasks,
        edges=Edges.create(
            src=np.asarray(new_src, dtype=np.int32),
            dst=np.asarray(new_dst, dtype=np.int32),
            kind=np.asarray(new_kind, dtype=np.int8),
            delay_ns=np.asarray(new_delay, dtype=np.int64),
        ),
        waits=waits,
        annotations=annotations,
        comms=comms,
        task_dims_idx=None if g.task_dims_idx is None else g.task_dims_idx[src],
    )
    removed = n - len(np.unique(src))
    return out, ResizeStats(len(src) - (n - removed), removed, dropped, waits_dropped)


def _fill_dropped(g: ExecGraph, first_new: NDArray[np.int64], last_new: NDArray[np.int64]) -> None:
    """A dropped task's stand-ins: the next surviving task on its processor for a span that
    starts there, the previous one for a span that ends there."""
    indptr, perm = g.processor_order()
    for p in range(len(g.processors)):
        o = perm[indptr[p] : indptr[p + 1]]
        f, la = first_new[o], last_new[o]
        idx = np.arange(len(o))
        prev = np.maximum.accumulate(np.where(la >= 0, idx, -1))
        nxt = np.minimum.accumulate(np.where(f >= 0, idx, len(o))[::-1])[::-1]
        gone = la < 0
        last_new[o[gone & (prev >= 0)]] = la[prev[gone & (prev >= 0)]]
        first_new[o[gone & (nxt < len(o))]] = f[nxt[gone & (nxt < len(o))]]


def _layer(group: Group, b: int, count: int) -> int:
    return count - 1 - b if group.backward else b


def overhead_before(num_tasks: int, e: Edges) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """Per task: whether a program-order edge (thread or stream) leads into it, and its delay
    (the overhead before the task)."""
    intra = np.isin(e.kind, np.array(INTRA_KINDS, dtype=np.int8))
    has_in = np.zeros(num_tasks, dtype=bool)
    delay_in = np.zeros(num_tasks, dtype=np.int64)
    has_in[e.dst[intra]] = True
    delay_in[e.dst[intra]] = e.delay_ns[intra]
    return has_in, delay_in


def tasks_in_order(
    g: ExecGraph, src: NDArray[np.int64], e: Edges
) -> tuple[Tasks, tuple[list[int], list[int], list[int], list[int]]]:
    """The new task table (program order as emitted) and regenerated intra-processor edges."""
    t = g.tasks
    proc = t.processor_idx[src]
    has_in, delay_in = overhead_before(g.num_tasks, e)
    indptr, perm = g.processor_order()
    prev_old = np.full(g.num_tasks, -1, dtype=np.int64)
    for p in range(len(g.processors)):
        o = perm[indptr[p] : indptr[p + 1]]
        prev_old[o[1:]] = o[:-1]
    gap = np.where(prev_old >= 0, t.ts_ns - t.ts_ns[np.maximum(prev_old, 0)], 0)
    gap = np.maximum(gap, 0)
    # new tasks come grouped by processor, in program order within each group
    n_new = len(src)
    idx = np.arange(n_new)
    first = np.ones(n_new, dtype=bool)
    first[1:] = proc[1:] != proc[:-1]
    group_start = np.maximum.accumulate(np.where(first, idx, 0))
    order = (idx - group_start).astype(np.int32)
    step = np.where(first, t.ts_ns[src], gap[src])
    csum = np.cumsum(step)
    ts = (csum - np.where(group_start > 0, csum[np.maximum(group_start - 1, 0)], 0)).astype(
        np.int64
    )
    ts = np.where(group_start > 0, ts, csum)
    link = np.flatnonzero(~first & has_in[src])
    thread = g.processors.kind[proc[link]] == int(ProcessorKind.THREAD)
    isrc = (link - 1).tolist()
    idst = link.tolist()
    ikind = np.where(thread, int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)).tolist()
    idelay = delay_in[src[link]].tolist()
    tasks = t.take(src).replace(order=order, ts_ns=ts)
    return tasks, (isrc, idst, ikind, idelay)


def _comms(
    g: ExecGraph, src: NDArray[np.int64], copies: NDArray[np.int64]
) -> tuple[Comms, NDArray[np.int32]]:
    old = g.tasks.comm_idx[src]
    has = old >= 0
    comms = g.comms.take(old[has])
    seq = comms.seq_id.copy()
    known = seq >= 0
    seq[known] = seq[known] * SEQ_STRIDE + copies[has][known]
    comm_idx = np.full(len(src), -1, dtype=np.int32)
    comm_idx[has] = np.arange(int(has.sum()), dtype=np.int32)
    return comms.replace(seq_id=seq), comm_idx


def _annotations(
    g: ExecGraph,
    grp: NDArray[np.int64],
    blk: NDArray[np.int64],
    first_new: NDArray[np.int64],
    last_new: NDArray[np.int64],
    instances: dict[int, list[tuple[int, int]]],
) -> tuple[Annotations, int]:
    """Spans inside one block are copied with each copy of it (or dropped with it); the others
    keep their first and last tasks (or the nearest survivors). Returns them and how many
    spans were dropped."""
    a = g.annotations
    f, la = a.first_task_idx.astype(np.int64), a.last_task_idx.astype(np.int64)
    covers = (f >= 0) & (la >= 0)
    f0, l0 = np.maximum(f, 0), np.maximum(la, 0)
    inside = covers & (grp[f0] >= 0) & (grp[f0] == grp[l0]) & (blk[f0] == blk[l0])
    nf = np.where(covers, first_new[f0], -1)
    nl = np.where(covers, last_new[l0], -1)
    keep = ~inside & ~(covers & ((nf < 0) | (nl < 0) | (nf > nl)))
    rows = np.flatnonzero(keep).tolist()
    firsts, lasts = nf[keep].tolist(), nl[keep].tolist()
    for i in np.flatnonzero(inside).tolist():
        last_of = dict((j, n) for n, j in instances.get(int(la[i]), []))
        for n, j in instances.get(int(f[i]), []):
            if j in last_of and n <= last_of[j]:
                rows.append(i)
                firsts.append(n)
                lasts.append(last_of[j])
    order = np.argsort(np.asarray(rows, dtype=np.int64), kind="stable")
    out = a.take(np.asarray(rows, dtype=np.int64)[order]).replace(
        first_task_idx=np.asarray(firsts, dtype=np.int32)[order],
        last_task_idx=np.asarray(lasts, dtype=np.int32)[order],
    )
    dropped = int(covers.sum()) - int(keep.sum()) - int(inside.sum())
    dropped += int(inside.sum()) - (len(rows) - int(keep.sum()))
    return out, max(dropped, 0)


def _waits(
    g: ExecGraph,
    instances: dict[int, list[tuple[int, int]]],
    first_new: NDArray[np.int64],
    last_new: NDArray[np.int64],
) -> tuple[Waits, int]:
    """The waits of the surviving tasks (each copy of a waiting task waits), their record
    task moved to its first instance; a dropped record to its stand-in: the next surviving
    task on its processor (the capture happens where the record would have run), else the
    previous one (the record was the processor's last: the capture after the last survivor),
    else none, and the wait is dropped (nothing left on that processor to capture): the
    waits, and how many of the old ones were dropped so."""
    w = g.waits
    dropped = 0
    rows: list[int] = []
    task: list[int] = []
    record: list[int] = []
    for i, (t_, r) in enumerate(zip(w.task_idx.tolist(), w.record_task_idx.tolist(), strict=True)):
        stand_in = -1 if r < 0 else int(first_new[r] if first_new[r] >= 0 else last_new[r])
        if r >= 0 and stand_in < 0:
            dropped += t_ in instances
            continue
        for new, _ in instances.get(t_, []):
            rows.append(i)
            task.append(new)
            record.append(stand_in)
    out = w.take(np.asarray(rows, dtype=np.int64))
    out = out.replace(
        task_idx=np.asarray(task, dtype=np.int32),
        record_task_idx=np.asarray(record, dtype=np.int32),
    )
    return out, dropped
