"""The structure of a sample: skeletons become graphs, layers are resized, steps chained.

The graphs built here carry *bins*, not times, in their value columns (task ``dur_ns``, edge
``delay_ns``, collective ``wait_ns``: where each value sat in its distribution, see
:func:`lumos.synth.sketch.rank_bins`): graph edits copy them with their tasks, and
:func:`lumos.synth.sample.sample_rank` draws the times.

A step copy is drawn from the member's *step variants* (distinct kinds of step the source ran,
each with its weight); every rank of a sample chains the same variants in the same order
(``Plan.variant_order``), so their collectives pair up. Copy ``k``'s collectives are numbered
``seq + k * SEQ_STEP``; its tasks follow copy ``k - 1``'s on every processor, joined by a
program-order edge carrying the bin of the gap the source had there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.errors import ConfigError
from lumos.estimate.blocks import resize_groups
from lumos.estimate.layers import Group
from lumos.graph.build_tasks import START
from lumos.graph.kinds import AnnotationKind, DepKind, ProcessorKind, TaskKind
from lumos.graph.model import (
    Annotations,
    Comms,
    Edges,
    ExecGraph,
    Processors,
    Tasks,
    Waits,
    order_within,
)
from lumos.synth.skeleton import Skeleton

__all__ = ["SEQ_STEP", "chain_steps", "class_structure", "resize_layers", "step_graph",
           "with_anchors"]  # fmt: skip

#: Collective sequence numbers of step copy ``k`` start at ``k * SEQ_STEP``.
SEQ_STEP = 1 << 24


def sym_names(skeletons: Sequence[Skeleton], classes: Sequence[str]) -> dict[int, str]:
    """``symbol -> "<class>#<symbol>"`` for every symbol of ``skeletons``."""
    sym = np.concatenate([sk.sym for sk in skeletons])
    cls = np.concatenate([sk.cls for sk in skeletons])
    uniq, first = np.unique(sym, return_index=True)
    return {int(s): f"{classes[int(c)]}#{int(s)}" for s, c in zip(uniq, cls[first], strict=True)}


def step_graph(skel: Skeleton, names: Mapping[int, str], bin_set: int = 0) -> ExecGraph:
    """One step of ``skel`` as a graph (bin set ``bin_set`` in its value columns); task names
    from ``names`` (see :func:`sym_names`), its step span named ``ProfilerStep#0``."""
    syms = np.unique(skel.sym)
    table = (*(names[int(s)] for s in syms), "ProfilerStep#0")
    name_idx = np.searchsorted(syms, skel.sym).astype(np.int32)
    n = skel.num_tasks
    procs = Processors.create(
        kind=skel.proc_kind, pid=np.zeros(len(skel.proc_kind), np.int64),
        tid=np.arange(len(skel.proc_kind), dtype=np.int64), device=skel.proc_device,
    )  # fmt: skip
    comm_idx = np.full(n, -1, np.int32)
    comm_idx[skel.comm_task] = np.arange(len(skel.comm_task), dtype=np.int32)
    tasks = Tasks.create(
        name_idx=name_idx, kind=skel.kind, processor_idx=skel.proc, order=order_within(skel.proc),
        dur_ns=skel.dur_bin[bin_set].astype(np.int64), ts_ns=0, event_idx=-1, comm_idx=comm_idx,
    )  # fmt: skip
    edges = Edges.create(
        src=skel.edge_src, dst=skel.edge_dst, kind=skel.edge_kind,
        delay_ns=skel.delay_bin[bin_set].astype(np.int64),
    )  # fmt: skip
    waits = Waits.create(
        task_idx=skel.wait_task, kind=skel.wait_kind, target_processor_idx=skel.wait_target,
        device=skel.wait_device, record_task_idx=skel.wait_record,
    )  # fmt: skip
    comms = Comms.create(
        kind=skel.comm_kind, size_bytes=skel.comm_size, pg_idx=skel.comm_pg, seq_id=skel.comm_seq,
        peer_rank=skel.comm_peer, tag=skel.comm_tag, wait_ns=skel.wait_bin[bin_set].astype(np.int64),
    )  # fmt: skip
    ann = Annotations.create(
        name_idx=np.array([len(table) - 1], np.int32),
        kind=np.array([int(AnnotationKind.STEP)], np.int8),
        processor_idx=np.array([skel.step_proc], np.int32),
        first_task_idx=np.array([skel.step_first], np.int32),
        last_task_idx=np.array([skel.step_last], np.int32),
        ts_ns=np.zeros(1, np.int64), dur_ns=np.zeros(1, np.int64),
    )  # fmt: skip
    return ExecGraph(table, procs, tasks, edges, waits, ann, comms)


def resize_layers(g: ExecGraph, skel: Skeleton, layers: int) -> ExecGraph:
    """``g`` (from :func:`step_graph`) with every layer group holding ``layers`` blocks."""
    specs = [s for s in skel.layers if s.level == "layer"]
    if not specs:
        raise ConfigError("the model's step has no layer groups; --layers needs them")
    groups = [
        Group(s.proc, tuple(np.asarray(b, dtype=np.int64) for b in s.blocks), s.level, s.phase, 0)
        for s in specs
    ]
    out, _ = resize_groups(g, groups, [layers] * len(groups))
    return out


def chain_steps(copies: Sequence[ExecGraph], joins: Sequence[NDArray[np.int8]]) -> ExecGraph:
    """One graph running ``copies`` (one-step graphs on the same processors) one after the
    other; the program-order edge into copy ``k`` on processor ``p`` carries ``joins[k][p]``."""
    names: dict[str, int] = {}
    parts_t, parts_e, parts_w, parts_c, parts_a = [], [], [], [], []
    n_proc = len(copies[0].processors)
    last = np.full(n_proc, -1, dtype=np.int64)  # the last task so far on each processor
    count = np.zeros(n_proc, dtype=np.int64)
    j_src: list[int] = []
    j_dst: list[int] = []
    j_kind: list[int] = []
    j_bin: list[int] = []
    stream = copies[0].processors.kind == int(ProcessorKind.STREAM)
    base = n_comm = 0
    for k, g in enumerate(copies):
        t = g.tasks
        remap = np.array([names.setdefault(s, len(names)) for s in g.names[:-1]]
                         + [names.setdefault(f"ProfilerStep#{k}", len(names))], np.int32)  # fmt: skip
        parts_t.append(t.replace(
            name_idx=remap[t.name_idx], order=(t.order + count[t.processor_idx]).astype(np.int32),
            comm_idx=np.where(t.comm_idx >= 0, t.comm_idx + n_comm, -1).astype(np.int32),
        ))  # fmt: skip
        e = g.edges
        parts_e.append(e.replace(src=e.src + base, dst=e.dst + base))
        indptr, perm = g.processor_order()
        for p in np.flatnonzero(np.diff(indptr) > 0).tolist():
            if last[p] >= 0:
                j_src.append(int(last[p]))
                j_dst.append(base + int(perm[indptr[p]]))
                j_kind.append(int(DepKind.INTRA_STREAM if stream[p] else DepKind.INTRA_THREAD))
                j_bin.append(int(joins[k][p]))
            last[p] = base + int(perm[indptr[p + 1] - 1])
        w = g.waits
        parts_w.append(w.replace(task_idx=w.task_idx + base, record_task_idx=np.where(
            w.record_task_idx >= 0, w.record_task_idx + base, -1).astype(np.int32)))  # fmt: skip
        c = g.comms
        parts_c.append(c.replace(seq_id=np.where(c.seq_id >= 0, c.seq_id + k * SEQ_STEP, -1)))
        a = g.annotations.take(g.annotations.kind == int(AnnotationKind.STEP))
        parts_a.append(a.replace(name_idx=remap[a.name_idx], first_task_idx=a.first_task_idx
                                 + base, last_task_idx=a.last_task_idx + base))  # fmt: skip
        count += np.bincount(t.processor_idx, minlength=n_proc)
        base += g.num_tasks
        n_comm += len(c)
    joined = Edges.create(
        src=np.array(j_src, np.int32),
        dst=np.array(j_dst, np.int32),
        kind=np.array(j_kind, np.int8),
        delay_ns=np.array(j_bin, np.int64),
    )
    return ExecGraph(
        tuple(names), copies[0].processors, Tasks.concat(parts_t),
        Edges.concat([*parts_e, joined]), Waits.concat(parts_w), Annotations.concat(parts_a),
        Comms.concat(parts_c),
    )  # fmt: skip


def with_anchors(g: ExecGraph) -> ExecGraph:
    """``g`` with a ``<start>`` anchor first on every processor (as built graphs have), joined
    to the processor's first task by a program-order edge: where a rank's late arrival goes."""
    t = g.tasks
    n_proc = len(g.processors)
    stream = g.processors.kind == int(ProcessorKind.STREAM)
    names = (*g.names, "<start>")
    tasks = Tasks.concat([
        t.replace(order=t.order + 1),
        Tasks.create(
            name_idx=np.full(n_proc, len(names) - 1, np.int32),
            kind=np.where(stream, int(TaskKind.KERNEL), int(TaskKind.CPU_OP)).astype(np.int8),
            processor_idx=np.arange(n_proc, dtype=np.int32), order=np.zeros(n_proc, np.int32),
            dur_ns=np.zeros(n_proc, np.int64), ts_ns=0, event_idx=START, comm_idx=-1,
        ),
    ])  # fmt: skip
    indptr, perm = g.processor_order()
    has = np.flatnonzero(np.diff(indptr) > 0)
    edges = Edges.concat([g.edges, Edges.create(
        src=(g.num_tasks + has).astype(np.int32), dst=perm[indptr[has]].astype(np.int32),
        kind=np.where(stream[has], int(DepKind.INTRA_STREAM), int(DepKind.INTRA_THREAD))
        .astype(np.int8),
        delay_ns=np.zeros(len(has), np.int64),
    )])  # fmt: skip
    return dataclasses.replace(g, names=names, tasks=tasks, edges=edges)


def class_structure(
    variants: Sequence[Mapping[str, Any]],
    order: Sequence[int],
    classes: Sequence[str],
    layers: int | None,
    seed: int = 0,
) -> ExecGraph:
    """The graph of one rank class: its step ``variants`` (skeleton JSON) chained in ``order``
    (variant per copy), each layer-resized to ``layers`` when given, anchors first. The ``j``-th
    copy of a variant takes its bin set ``(j + seed) mod sets``: the source's steps of that
    structure in turn."""
    skels = [Skeleton.from_json(v) for v in variants]
    names = sym_names(skels, classes)
    built: dict[tuple[int, int], ExecGraph] = {}
    seen = [0] * len(skels)
    copies, joins = [], []
    for v in order:
        key = (v, (seen[v] + seed) % skels[v].bin_sets)
        seen[v] += 1
        if key not in built:
            g = step_graph(skels[v], names, key[1])
            built[key] = resize_layers(g, skels[v], layers) if layers is not None else g
        copies.append(built[key])
        joins.append(skels[v].join_bin[key[1]])
    return with_anchors(chain_steps(copies, joins))
