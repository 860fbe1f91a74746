"""Find the repeated blocks of a training step: layers, and micro-batches around them.

A transformer step is a few long repeats: the forward of layer 1, 2, ..., L runs the same ops with
the same shapes, and so do their backwards (in reverse); a pipeline stage repeats its whole forward
(and backward) once per micro-batch, layers nested inside. This module finds those repeats from
the trace alone, with nothing but op names and recorded "Input Dims" (``record_shapes=True``):

1. Each CPU thread's tasks of one step become a sequence of symbols ``(name, Input Dims)``.
2. *Micro-batch* blocks: a pipeline stage sends or receives once per micro-batch, so a run of two
   or more identical point-to-point ops marks them (a block starts at a receive, or ends with a
   send; a middle stage's block runs from its receive to its send;
   :mod:`lumos.estimate.microbatches`). They keep every op inside them, collectives included.
3. *Layer* blocks, inside each micro-batch block and in the rest of the step: the longest *tandem
   repeat* (a block of ``period`` symbols occurring ``count >= 2`` times back to back, covering
   the most tasks; ties go to the shorter period; blocks may differ in :data:`MISMATCH_SHARE` of
   their ops) is a layer :class:`Group`, and the search goes on before and after it. Only
   periods at which some op recurs at least three times are scanned.
4. Collective-issuing ops (``c10d::*``, ``record_param_comms``, ``nccl:*``, ``gloo:*``) are left
   out of the layer search: DDP issues its gradient buckets between layers wherever a bucket
   fills, which breaks the period without being part of any layer.

When the trace has module annotations (``nn.Module: TransformerBlock_3`` calls of a profile
recorded with its Python stack), the forward layer blocks come from them instead
(:mod:`lumos.estimate.layer_modules`) and the search finds the rest.

Repeats covering less than :data:`MIN_SHARE` of the step's tasks, or with a period under
:data:`MIN_PERIOD`, are not layers (a loop over a few tensors is not a model). A group is a
``backward`` group when most of it is backward ops or lies under autograd spans (its blocks run
the layers in reverse: block 0 is the last layer), an ``optimizer`` group when it lies under
``Optimizer.*`` spans (the per-layer parameter updates), else ``forward``. The forward groups'
usual count is the rank's number of layers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.estimate._repeat import best_repeat
from lumos.estimate.layer_modules import module_layers
from lumos.estimate.microbatches import by_phase, microbatch_blocks, phase_of
from lumos.graph.build_spans import MODULE_PREFIX
from lumos.graph.kinds import AnnotationKind, TaskKind
from lumos.graph.model import ExecGraph, ProcessorKind

__all__ = [
    "COMM_PATTERN",
    "Group",
    "LayerMap",
    "find_layers",
    "find_repeat",
    "forward_layer_spans",
    "is_comm_issuer",
    "marked",
]

#: A layer runs at least this many ops (a loop over a few tensors is not a layer).
MIN_PERIOD = 8
MIN_SHARE = 0.05
#: Blocks of one repeat may differ in this share of their ops (substitutions only).
MISMATCH_SHARE = 0.04
#: Ops that issue collectives; ``cpu.comm#N`` is their name in synthetic workloads.
COMM_PATTERN = re.compile(r"^(c10d::|record_param_comms|nccl:|gloo:|cpu\.comm#)|ProcessGroup")
BACKWARD_PATTERN = re.compile(r"Backward|_backward|^autograd::engine")
OPTIMIZER_PATTERN = re.compile(r"^Optimizer\.|optimizer|^aten::_foreach_")


def is_comm_issuer(name: str) -> bool:
    """Whether an op issues or is a collective (kept out of the layer search)."""
    return bool(COMM_PATTERN.search(name))


@dataclass(frozen=True)
class Group:
    """``count`` consecutive blocks of ``period`` tasks each on one thread.

    ``blocks[b]`` are the task indices of block ``b`` (execution order; blocks in time order).
    ``level`` is ``"layer"`` or ``"microbatch"``; ``phase`` is ``forward``, ``backward`` (its
    blocks run the layers in reverse) or ``optimizer``. ``step`` is the step (0-based, in time order) the group belongs to and ``parent``
    the index of the micro-batch group and block it sits in (``(-1, -1)`` at the top).
    """

    processor_idx: int
    blocks: tuple[NDArray[np.int64], ...]
    level: str
    phase: str
    step: int
    parent: tuple[int, int] = (-1, -1)

    @property
    def backward(self) -> bool:
        return self.phase == "backward"

    @property
    def count(self) -> int:
        return len(self.blocks)

    @property
    def period(self) -> int:
        return len(self.blocks[0]) if self.blocks else 0


@dataclass(frozen=True)
class LayerMap:
    """What :func:`find_layers` found in one rank's graph."""

    groups: tuple[Group, ...]
    num_layers: int  # layers on this rank (the usual count of its layer groups)
    num_microbatches: int  # 1 without micro-batch groups
    how: str

    def layer_groups(self) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if g.level == "layer")

    def microbatch_groups(self) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if g.level == "microbatch")

    def task_layer(self, num_tasks: int) -> NDArray[np.int32]:
        """Per task: its layer index (0 = first layer of the model part on this rank), or -1."""
        out = np.full(num_tasks, -1, dtype=np.int32)
        for g in self.layer_groups():
            for b, block in enumerate(g.blocks):
                out[block] = g.count - 1 - b if g.backward else b
        return out


def find_repeat(seq: NDArray[np.int64], min_period: int = MIN_PERIOD) -> tuple[int, int, int]:
    """The tandem repeat covering most of ``seq``: ``(start, period, count)``, count 0 if none.

    >>> find_repeat(np.array([9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 8]), min_period=3)
    (1, 3, 3)
    """
    seq = np.ascontiguousarray(seq, dtype=np.int64)
    periods = np.ascontiguousarray(_candidate_periods(seq, min_period), dtype=np.int64)
    start, period, count = best_repeat(seq, periods, MISMATCH_SHARE)
    return int(start), int(period), int(count)


def _candidate_periods(seq: NDArray[np.int64], min_period: int) -> NDArray[np.int64]:
    """Periods worth scanning: distances between consecutive occurrences of one symbol that
    recur at least 3 times. A layer has ops that run once per layer (its QKV product, with
    its shapes), and each of them recurs at exactly the period; a loop over tensors does not
    make a distance recur unless it repeats too."""
    n = len(seq)
    if n < 2 * max(min_period, 1):
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(n), seq))
    same = seq[order[1:]] == seq[order[:-1]]
    dist = (order[1:] - order[:-1])[same]
    dist = dist[(dist >= max(min_period, 1)) & (dist <= n // 2)]
    if not len(dist):
        return np.zeros(0, dtype=np.int64)
    vals, counts = np.unique(dist, return_counts=True)
    return vals[counts >= min(3, int(counts.max()))].astype(np.int64)


def _repeats(
    seq: NDArray[np.int64], lo: int, hi: int, min_cover: int
) -> list[tuple[int, int, int]]:
    """Non-overlapping repeats in ``seq[lo:hi]`` (absolute starts), largest first."""
    if hi - lo < 2 * MIN_PERIOD:
        return []
    start, period, count = find_repeat(seq[lo:hi])
    if count < 2 or period * count < min_cover:
        return []
    start += lo
    end = start + period * count
    return [
        (start, period, count),
        *_repeats(seq, lo, start, min_cover),
        *_repeats(seq, end, hi, min_cover),
    ]


def _symbols(g: ExecGraph, tasks: NDArray[np.int64]) -> NDArray[np.int64]:
    dims = g.task_dims_idx
    d = dims[tasks].astype(np.int64) + 1 if dims is not None else np.zeros(len(tasks), np.int64)
    return g.tasks.name_idx[tasks].astype(np.int64) * (len(g.dims) + 2) + d


def _step_ranges(g: ExecGraph, proc: int, order: NDArray[np.int64]) -> list[tuple[int, int]]:
    """Slices of ``order`` (a thread's tasks in order) that fall in each recorded step: between
    the step's first and last task's start and end (task times, which an edit keeps coherent;
    the span's recorded times are not moved by edits)."""
    a, t = g.annotations, g.tasks
    steps = np.flatnonzero((a.kind == int(AnnotationKind.STEP)) & (a.first_task_idx >= 0))
    lo_ns = t.ts_ns[a.first_task_idx[steps]]
    hi_ns = t.ts_ns[a.last_task_idx[steps]] + t.dur_ns[a.last_task_idx[steps]]
    ts = t.ts_ns[order]
    out = []
    for k in np.argsort(lo_ns, kind="stable").tolist():
        lo = int(np.searchsorted(ts, lo_ns[k], "left"))
        hi = int(np.searchsorted(ts, hi_ns[k], "right"))
        if hi > lo:
            out.append((lo, hi))
    return out or [(0, len(order))]


def find_layers(g: ExecGraph) -> LayerMap:
    """Layer and micro-batch groups of every CPU thread of ``g`` (see the module docstring)."""
    indptr, perm = g.processor_order()
    names = g.names
    comm_name = np.fromiter((is_comm_issuer(s) for s in names), bool, len(names))
    t = g.tasks
    # every op but the synthetic anchors and step markers (negative event ids -2, -4)
    real = ~np.isin(t.event_idx, [-2, -4]) & np.isin(
        t.kind, [int(TaskKind.CPU_OP), int(TaskKind.CPU_COMM)]
    )
    back_name = marked(g, BACKWARD_PATTERN, indptr, perm)
    opt_name = marked(g, OPTIMIZER_PATTERN, indptr, perm)
    mods = module_layers(g, real, back_name)
    groups: list[Group] = []
    for p in np.flatnonzero(g.processors.kind == int(ProcessorKind.THREAD)).tolist():
        order = perm[indptr[p] : indptr[p + 1]]
        order = order[real[order]]
        mine = mods.blocks.get(p, []) if mods else []
        if len(order) < 4 * MIN_PERIOD and not mine:
            continue
        for step, (lo, hi) in enumerate(_step_ranges(g, p, order)):
            tasks = order[lo:hi]
            inside = np.zeros(g.num_tasks, dtype=bool)
            inside[tasks] = True
            blocks = [b for b in mine if inside[b[0]]]
            _groups_of_step(g, p, tasks, step, comm_name, (back_name, opt_name), groups, blocks)
    how = f"module annotations ({MODULE_PREFIX}{mods.module})" if mods else ""
    return _summarize(groups, how)


def _groups_of_step(
    g: ExecGraph,
    proc: int,
    tasks: NDArray[np.int64],
    step: int,
    comm_name: NDArray[np.bool_],
    marks: tuple[NDArray[np.bool_], NDArray[np.bool_]],
    out: list[Group],
    modules: list[NDArray[np.int64]] | None = None,
) -> None:
    """The groups of one step of thread ``proc`` (``tasks`` in program order), appended to
    ``out``; ``modules`` are forward layer blocks found from module annotations
    (:mod:`lumos.estimate.layer_modules`), kept as they are and left out of the search."""
    name_idx = g.tasks.name_idx[tasks]
    seq = _symbols(g, tasks)
    kept = ~comm_name[name_idx]
    loc = np.full(g.num_tasks, -1, dtype=np.int64)
    loc[tasks] = np.arange(len(tasks))
    mods = modules or []
    for m in mods:
        kept[loc[m][loc[m] >= 0]] = False
    placed = np.zeros(len(mods), dtype=bool)
    covered = np.zeros(len(tasks), dtype=bool)
    for run_lo, run_hi in microbatch_blocks(g, tasks, seq):
        run = tuple(tasks[a:b] for a, b in zip(run_lo, run_hi, strict=True))
        for first, end, phase in by_phase(run, marks):
            gi = len(out)
            out.append(Group(proc, run[first:end], "microbatch", phase, step))
            for b in range(end - first):
                a, e = run_lo[first + b], run_hi[first + b]
                covered[a:e] = True
                here = [k for k, m in enumerate(mods) if not placed[k] and a <= loc[m[0]] < e]
                if here:
                    placed[here] = True
                    out.append(Group(proc, tuple(mods[k] for k in here), "layer", "forward",
                                     step, (gi, b)))  # fmt: skip
                pos = np.flatnonzero(kept[a:e]) + a
                min_cover = max(2 * MIN_PERIOD, int(MIN_SHARE * (e - a)))
                for s_, p_, c in _layer_repeats(seq, pos, min_cover):
                    lb = tuple(tasks[pos[s_ + k * p_ : s_ + (k + 1) * p_]] for k in range(c))
                    out.append(Group(proc, lb, "layer", phase_of(lb[0], marks), step, (gi, b)))
    if not placed.all():
        out.append(Group(proc, tuple(m for k, m in enumerate(mods) if not placed[k]), "layer",
                         "forward", step))  # fmt: skip
    rest = np.flatnonzero(kept & ~covered)
    min_cover = max(2 * MIN_PERIOD, int(MIN_SHARE * len(tasks)))
    for s_, p_, c in _layer_repeats(seq, rest, min_cover):
        lb = tuple(tasks[rest[s_ + k * p_ : s_ + (k + 1) * p_]] for k in range(c))
        out.append(Group(proc, lb, "layer", phase_of(lb[0], marks), step))


def _layer_repeats(
    seq: NDArray[np.int64], pos: NDArray[np.int64], min_cover: int
) -> list[tuple[int, int, int]]:
    """Repeats of ``seq[pos]`` (starts are indices into ``pos``) that do not nest further."""
    if not len(pos):
        return []
    return sorted(_repeats(seq[pos], 0, len(pos), min_cover))


def marked(
    g: ExecGraph, pattern: re.Pattern[str], indptr: NDArray[np.int64], perm: NDArray[np.int64]
) -> NDArray[np.bool_]:
    """Tasks named like ``pattern`` or inside an annotation (parent op, span) named like it."""
    hit = np.fromiter((bool(pattern.search(s)) for s in g.names), bool, len(g.names))
    out = hit[g.tasks.name_idx].copy()
    a = g.annotations
    sel = np.flatnonzero(hit[a.name_idx] & (a.first_task_idx >= 0) & (a.last_task_idx >= 0))
    if not len(sel):
        return out
    rank = np.empty(len(perm), dtype=np.int64)
    rank[perm] = np.arange(len(perm))
    diff = np.zeros(len(perm) + 1, dtype=np.int64)
    np.add.at(diff, rank[a.first_task_idx[sel]], 1)
    np.add.at(diff, rank[a.last_task_idx[sel]] + 1, -1)
    out[perm[np.cumsum(diff[:-1]) > 0]] = True
    return out


def forward_layer_spans(g: ExecGraph, lm: LayerMap) -> NDArray[np.bool_] | None:
    """Per task of ``g``: whether it runs inside a forward layer block of ``lm`` (found on
    ``g`` itself): on the block's thread, from its first task to its last, the tasks the layer
    search leaves out included (the CUDA runtime calls that are all a GPU ``aten::addmm``
    records under it, collective issuers). None when ``lm`` has no forward layer block."""
    blocks = [b for x in lm.layer_groups() if x.phase == "forward" for b in x.blocks if len(b)]
    if not blocks:
        return None
    _, perm = g.processor_order()
    rank = np.empty(len(perm), dtype=np.int64)
    rank[perm] = np.arange(len(perm))
    diff = np.zeros(len(perm) + 1, dtype=np.int64)
    for b in blocks:
        diff[rank[b].min()] += 1
        diff[rank[b].max() + 1] -= 1
    out = np.zeros(g.num_tasks, dtype=bool)
    out[perm[np.cumsum(diff[:-1]) > 0]] = True
    return out


def _summarize(groups: list[Group], how: str = "") -> LayerMap:
    # the forward decides: backward and optimizer repeats may be split differently
    layer_counts = [g.count for g in groups if g.level == "layer" and g.phase == "forward"] or [
        g.count for g in groups if g.level == "layer"
    ]
    mb_counts = [g.count for g in groups if g.level == "microbatch"]
    num_layers = _mode(layer_counts)
    how = how or (
        "repeated op sequence (names and Input Dims)" if groups else "no repeated layers found"
    )
    return LayerMap(tuple(groups), num_layers, _mode(mb_counts) or 1, how)


def _mode(values: list[int]) -> int:
    if not values:
        return 0
    vals, counts = np.unique(np.asarray(values), return_counts=True)
    return int(vals[np.flatnonzero(counts == counts.max())[-1]])
