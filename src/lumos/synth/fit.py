"""Fit a synthetic workload model from traces: ``lumos synth fit``.

The model is a small probabilistic grammar of the training iteration, with fitted distributions
at its leaves::

    workload      -> step^S                              (S = --steps)
    step          -> variant_1 | ... | variant_k          (kinds of step the source ran,
                                                           weighted by how many it ran)
    variant       -> skeleton of the rank's class         (one per distinct rank structure)
    layer group   -> block^L                              (L = --layers; blocks found as in #11)
    task duration ~ sketch[symbol]                        (quantiles, lumos.synth.sketch)
    edge delay    ~ sketch[edge kind, symbol of its target]
    comm wait     ~ sketch[symbol]                        (a collective lasts transfer + wait;
                                                           its sketch[symbol] is the transfer)

Why a grammar over whole steps and not a Markov chain over op classes: a chain draws plausible
*sequences* but breaks what makes a step take its time: a launch without its kernel, an event
wait without its record, a collective on one rank and not its peers. Keeping each source step's
dependency skeleton intact (with names taken out) and drawing every duration and gap from
distributions fitted over all steps and ranks gives workloads that differ from seed to seed in
exactly the way the source's steps differed from each other, while every motif (launch latency,
CPU overhead, syncs, stream overlap, collective placement and sizes) keeps its place. The
repeated-block level (layers) is where the grammar generalises: ``--layers`` copies or drops
whole layer blocks with their launches and dependencies (:mod:`lumos.estimate.blocks`).

Each source (a trace file, or a folder or archive of one job's rank files) is a *member* of the
family, with the configuration lumos detects in it (:mod:`lumos.estimate.baseline`); a sample
is drawn from the member whose configuration matches the request (``--layers`` then resizes
it). Symbols (an anonymous id per distinct op class, name and shapes) belong to their member:
the same op on the same shapes in two runs on other machines or under other loads has other
costs, and mixing them would make one configuration's sample depend on another's run. A rank's main step variant is its
most typical step (past the warm-up of the first); steps whose count of some op class differs
by more than 2 % are further variants (:func:`choose_variants`); durations are fitted on every
step.

Each source is built the way ``lumos replay`` builds it (ranks in parallel processes, aligned
on one clock), then each rank gives its skeleton and sketches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from lumos.errors import InputError, LumosError
from lumos.graph.build_tasks import START
from lumos.graph.model import ExecGraph, Workload
from lumos.synth.classes import CLASSES, task_classes
from lumos.synth.skeleton import Skeleton, extract_step, step_of_tasks
from lumos.synth.sketch import fit_sketches, rank_bins

if TYPE_CHECKING:
    from lumos.estimate.baseline import Baseline
    from lumos.estimate.layers import LayerMap

__all__ = ["MODEL_FORMAT", "MODEL_VERSION", "RankFit", "fit_model", "fit_rank"]

MODEL_FORMAT = "lumos-synth-model"
MODEL_VERSION = 1
#: ``delay key = kind << KIND_SHIFT | symbol``.
KIND_SHIFT = 32

Sketches = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]


@dataclass
class RankFit:
    """What one rank's trace contributes (symbols are local to it until merged)."""

    rank: int
    world_size: int
    symbols: list[tuple[int, str, str]]  # (class, name, shapes): in memory only, never written
    skeletons: list[Skeleton]  # one per step variant
    #: ``(keys, values)`` of every fitted duration, delay and wait (keys use local symbols),
    #: and the row of each skeleton task, edge and collective among them
    durations: tuple[NDArray[np.int64], NDArray[np.int64]]
    delays: tuple[NDArray[np.int64], NDArray[np.int64]]
    waits: tuple[NDArray[np.int64], NDArray[np.int64]]
    rows: list[list[tuple[NDArray[np.int64], ...]]]  # per variant, per bin set
    join_rows: list[list[NDArray[np.int64]]]  # per variant, per bin set, per processor
    groups: list[dict[str, Any]]
    config: dict[str, int]
    steps: int
    step_ns: float
    tasks: int
    step_start_ns: int  # recorded start of the representative step (the trace's clock)
    step_pad_ns: tuple[int, int]  # the step span's lead before its first task, tail after its last
    proc_start_ns: list[int]  # per processor, when its first task began after the step did
    params: tuple[int, int]  # forward weights outside and inside the layers (lumos.estimate)
    calibration: dict[str, int] = field(default_factory=dict)


def step_class_counts(g: ExecGraph) -> NDArray[np.int64]:
    """Tasks per step (rows, in time order) and op class (columns, :data:`CLASSES`) of ``g``."""
    step = step_of_tasks(g)
    n = int(step.max()) + 1 if (step >= 0).any() else 0
    out = np.zeros((n, len(CLASSES)), dtype=np.int64)
    m = step >= 0
    np.add.at(out, (step[m], task_classes(g)[m].astype(np.int64)), 1)
    return out


def choose_variants(
    counts: NDArray[np.int64], tolerance: float = 0.02, slack: int = 2
) -> list[list[int]]:
    """Step variants from the tasks per step and op class (:func:`step_class_counts`): the
    steps each variant stands for, the largest first. Two steps are one variant when every
    class count differs by at most ``tolerance`` of the larger or ``slack`` tasks (a polling
    loop that ran twice more). A variant is grown from its most typical step (the one with the
    most steps alike; the warm-up step, with three or more, only when nothing else is left)."""
    n = len(counts)
    a, b = counts[:, None, :], counts[None, :, :]
    alike = (np.abs(a - b) <= np.maximum(slack, tolerance * np.maximum(a, b))).all(axis=2)
    left = list(range(n))
    groups: list[list[int]] = []
    while left:
        pool = [i for i in left if i != 0] if n >= 3 and len(left) > 1 else left
        centre = max(pool, key=lambda i: (int(alike[i, left].sum()), -abs(i - n // 2)))
        members = [i for i in left if alike[centre, i]]
        groups.append(members)
        left = [i for i in left if i not in members]
    return sorted(groups, key=len, reverse=True)


def _symbols(
    g: ExecGraph,
) -> tuple[NDArray[np.int16], NDArray[np.int32], list[tuple[int, str, str]]]:
    """Per task its class and local symbol, and each symbol's (class, name, shapes)."""
    t = g.tasks
    cls = task_classes(g)
    dims = g.task_dims_idx if g.task_dims_idx is not None else np.full(len(t), -1, np.int32)
    key = np.stack([cls.astype(np.int64), t.name_idx.astype(np.int64), dims.astype(np.int64)], 1)
    uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    symbols = [
        (int(c), g.names[int(n)], g.dims[int(d)] if d >= 0 else "") for c, n, d in uniq.tolist()
    ]
    return cls, inverse.reshape(-1).astype(np.int32), symbols


def _match_tasks(
    g: ExecGraph,
    step: NDArray[np.int32],
    s: int,
    rep_tasks: NDArray[np.int64],
    sym: NDArray[np.int32],
) -> NDArray[np.int64] | None:
    """For each task of the representative (``rep_tasks``, skeleton order), the task of step
    ``s`` in its place: per processor, the two steps' op sequences are aligned (position by
    position when they are as long, else by their longest common runs) and a task takes the
    aligned task of ``s`` when both ran the same op; elsewhere it keeps its own. None when no
    task aligns."""
    from difflib import SequenceMatcher

    t = g.tasks
    other = np.flatnonzero(step == s)
    other = other[np.lexsort((t.order[other], t.processor_idx[other]))]
    out = rep_tasks.copy()
    matched = 0
    for p in np.unique(t.processor_idx[rep_tasks]).tolist():
        where = np.flatnonzero(t.processor_idx[rep_tasks] == p)
        a, b = rep_tasks[where], other[t.processor_idx[other] == p]
        if len(a) == len(b):
            same = sym[a] == sym[b]
            out[where[same]] = b[same]
            matched += int(same.sum())
        elif min(len(a), len(b)) and max(len(a), len(b)) <= _ALIGN_MAX:
            blocks = SequenceMatcher(None, sym[a].tolist(), sym[b].tolist(), autojunk=False)
            for i, j, n in blocks.get_matching_blocks():
                out[where[i : i + n]] = b[j : j + n]
                matched += n
    return out if matched else None


#: Longest op sequence of one processor in one step aligned by common runs (quadratic worst case).
_ALIGN_MAX = 20_000


def representatives(graphs: Sequence[ExecGraph], groups: Sequence[Sequence[int]]) -> list[int]:
    """Per group of steps, its most typical step: among the steps whose structure (on the
    first rank) most of the group shares, the one of median recorded duration on the slowest
    rank, neither the first step (a warm-up) nor the last (it waits for the device to drain)
    when there are others, so that an outlier step does not lend the variant its structure."""
    g = graphs[0]
    cls, sym, _ = _symbols(g)
    step = step_of_tasks(g)
    steps = [step_of_tasks(h) for h in graphs]
    out = []
    for members in groups:
        keys = [extract_step(g, step, s, sym, cls)[0].shape_key() for s in members]
        best = max(keys.count(k) for k in keys)
        common = [s for s, k in zip(members, keys, strict=True) if keys.count(k) == best]
        last = max(int(st.max()) for st in steps)
        inner = [s for s in common if s not in (0, last)] or common
        span = {s: max(int(np.ptp(h.tasks.ts_ns[st == s])) if (st == s).any() else 0
                       for h, st in zip(graphs, steps, strict=True)) for s in inner}  # fmt: skip
        inner.sort(key=lambda s: (span[s], s))
        out.append(inner[(len(inner) - 1) // 2])
    return out


def fit_rank(g: ExecGraph, variants: Sequence[tuple[int, Sequence[int]]] | None = None) -> RankFit:
    """Skeletons of ``g``'s step ``variants`` (``(representative step, the steps it stands
    for)``; default: :func:`choose_variants` of its own steps) and samples of every step's
    durations and delays. Each other step a variant stands for gives it one more *bin set*
    (where each of its durations sat), on the processors where it ran the same ops in the same
    order as the representative (see :func:`_match_tasks`)."""
    t = g.tasks
    cls, sym, symbols = _symbols(g)
    step = step_of_tasks(g)
    n_steps = int(step.max()) + 1 if len(step) else 0
    if n_steps == 0:
        raise InputError(
            f"rank {g.rank}", "no ProfilerStep in the trace: nothing to learn a step from"
        )
    if variants is None:
        step_groups = choose_variants(step_class_counts(g))
        variants = list(zip(representatives([g], step_groups), step_groups, strict=True))
    if max(max(v[1]) for v in variants) >= n_steps:
        raise InputError(f"rank {g.rank}", f"has {n_steps} steps; its job's other ranks have "
                         f"{max(max(v[1]) for v in variants) + 1} or more")  # fmt: skip
    in_step = (step >= 0) & (t.event_idx != START)
    e = g.edges
    e_in = in_step[e.src] & in_step[e.dst]
    comm = in_step & (t.comm_idx >= 0)
    # a collective's own cost is its transfer; the waiting for peers is drawn apart
    wait = np.zeros(len(t), dtype=np.int64)
    wait[comm] = g.comms.wait_ns[t.comm_idx[comm]]
    cost = np.maximum(t.dur_ns - wait, 0)
    from lumos.estimate.layers import find_layers

    base = _baseline(g)
    lm = base.layer_maps[0] if base is not None else find_layers(g)
    groups = lm.groups
    delay_key = (e.kind.astype(np.int64) << KIND_SHIFT) | sym[e.dst].astype(np.int64)
    row_of_task = np.cumsum(in_step) - 1
    row_of_edge = np.cumsum(e_in) - 1
    row_of_comm = np.cumsum(comm) - 1
    skels: list[Skeleton] = []
    rows: list[list[tuple[NDArray[np.int64], ...]]] = []
    join_rows: list[list[NDArray[np.int64]]] = []
    for rep, alike in variants:
        layers = tuple(
            (grp.processor_idx, grp.level, grp.phase, grp.blocks)
            for grp in groups
            if grp.step == rep and grp.level == "layer" and grp.parent == (-1, -1)
        )
        skel, (tasks, edges, comm_tasks, joins) = extract_step(g, step, rep, sym, cls, layers)
        if not skels:
            first = (tasks, skel, rep)
        skels.append(skel)
        rows.append([])
        join_rows.append([])
        rep_rows = (row_of_task[tasks], row_of_edge[edges], row_of_comm[comm_tasks])
        rep_join = np.where((joins >= 0) & e_in[np.maximum(joins, 0)],
                            row_of_edge[np.maximum(joins, 0)], -1)  # fmt: skip
        rows[-1].append(rep_rows)
        join_rows[-1].append(rep_join)
        for s in (i for i in alike if i != rep):
            mapped = _match_tasks(g, step, s, tasks, sym)
            if mapped is None:
                continue
            # a matched collective keeps its own wait; an unmatched task the representative's
            comm_rows = np.where(comm[mapped[skel.comm_task]], row_of_comm[mapped[skel.comm_task]],
                                 rep_rows[2])  # fmt: skip
            rows[-1].append((row_of_task[mapped], rep_rows[1], comm_rows))
            join_rows[-1].append(rep_join)
    a = g.annotations
    from lumos.graph.kinds import AnnotationKind

    steps_ns = a.dur_ns[a.kind == int(AnnotationKind.STEP)]
    return RankFit(
        rank=g.rank,
        world_size=g.world_size,
        symbols=symbols,
        skeletons=skels,
        durations=(sym[in_step].astype(np.int64), cost[in_step]),
        delays=(delay_key[e_in], e.delay_ns[e_in]),
        waits=(sym[comm].astype(np.int64), wait[comm]),
        rows=rows,
        join_rows=join_rows,
        groups=[{"ranks": list(pg.ranks), "backend": pg.backend} for pg in g.process_groups],
        config=dict(base.values) if base is not None else {},
        steps=n_steps,
        step_ns=float(steps_ns.mean()) if len(steps_ns) else 0.0,
        tasks=int(in_step.sum()),
        step_start_ns=int(t.ts_ns[first[0]].min()),
        proc_start_ns=_proc_starts(g, first[0], first[1]),
        step_pad_ns=_pad(g, first[2]),
        params=_params(g, lm, base),
        calibration={k: int(v) for k, v in g.calibration.items()},
    )


def _params(g: ExecGraph, lm: LayerMap, base: Baseline | None) -> tuple[int, int]:
    """Forward weights outside and inside the layers (``lm``, found on ``g``): how gradient
    bytes grow with layers (:func:`lumos.estimate.params.forward_params`)."""
    from lumos.estimate.params import forward_params

    p = forward_params(g, lm, base.dims() if base is not None else None)
    return p.outside_old, p.inside_old


def _proc_starts(g: ExecGraph, tasks: NDArray[np.int64], skel: Skeleton) -> list[int]:
    """Per processor, how long after the step's start its first task began, for processors
    whose first task nothing but program order releases (a stream of kernels whose launches the
    trace does not show); 0 for the others, which their dependencies place."""
    from lumos.graph.kinds import DepKind

    out = [0] * len(skel.proc_kind)
    start = int(g.tasks.ts_ns[tasks].min())
    released = set(
        skel.edge_dst[
            ~np.isin(skel.edge_kind, (int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)))
        ].tolist()
    )
    for p in range(len(out)):
        on = np.flatnonzero(skel.proc == p)
        if len(on) and int(on[0]) not in released:
            out[p] = max(0, int(g.tasks.ts_ns[tasks[on[0]]]) - start)
    return out


def _pad(g: ExecGraph, rep: int) -> tuple[int, int]:
    from lumos.graph.kinds import AnnotationKind

    a = g.annotations
    rows = np.flatnonzero((a.kind == int(AnnotationKind.STEP)) & (a.first_task_idx >= 0))
    rows = rows[np.argsort(a.ts_ns[rows], kind="stable")]
    if rep >= len(rows):
        return (0, 0)
    return (int(a.lead_ns[rows[rep]]), int(a.tail_ns[rows[rep]]))


def _baseline(g: ExecGraph) -> Baseline | None:
    """The model configuration found in ``g`` alone; None where none can be."""
    from lumos.estimate.baseline import detect_baseline

    try:
        return detect_baseline(Workload.of(g))
    except LumosError:
        return None


def fit_model(
    paths: Sequence[str | os.PathLike[str]],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    on_done: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The model (a JSON-ready dict, see :mod:`lumos.synth.model`) of the traces under
    ``paths``: one member per argument. Each job's ranks are built in parallel and aligned
    the way ``lumos replay`` builds them (collective waits from every rank's arrival)."""
    from lumos.graph.build_ranks import shared_clock_origin
    from lumos.replay import build_workload

    members: list[list[RankFit]] = []
    offsets: list[list[int]] = []
    v_steps: list[list[int]] = []
    v_weights: list[list[list[int]]] = []
    for p in paths:
        w, _ = build_workload([p], workers=workers, dask_address=dask_address, on_done=on_done)
        counts = step_class_counts(w.graphs[0])
        if not len(counts):
            raise InputError(str(p), "no ProfilerStep in the trace: nothing to learn a step from")
        weights = choose_variants(counts)
        reps = representatives(w.graphs, weights)
        v_steps.append(reps)
        v_weights.append(weights)
        fits = [fit_rank(g, list(zip(reps, weights, strict=True))) for g in w.graphs]
        members.append(fits)
        start = [f.step_start_ns for f in fits]
        shared = shared_clock_origin(w.graphs) is not None
        offsets.append([s - min(start) if shared else 0 for s in start])
    return merge_fits(members, offsets, v_steps, v_weights)


def merge_fits(
    members: list[list[RankFit]],
    offsets: list[list[int]] | None = None,
    variant_steps: list[list[int]] | None = None,
    variant_weights: list[list[list[int]]] | None = None,
) -> dict[str, Any]:
    """One model from the per-rank fits of each member (job); ``offsets`` are each rank's
    arrival at the main step variant after the job's first (0 when clocks differ), the
    variants each member's ranks were fitted with and the steps each stands for."""
    table: dict[tuple[int, str, str, int], int] = {}
    dur: dict[int, list[tuple[NDArray[np.int64], int]]] = {}
    wait: dict[int, list[tuple[NDArray[np.int64], int]]] = {}
    delay: dict[int, list[tuple[NDArray[np.int64], int]]] = {}
    sample_names = ("durations", "delays", "waits")
    out_members = []
    for mi, fits in enumerate(members):
        offset = offsets[mi] if offsets else [0] * len(fits)
        by_rank = sorted(range(len(fits)), key=lambda i: fits[i].rank)
        classes: dict[bytes, int] = {}
        skeletons: list[list[dict[str, Any]]] = []
        rank_class = []
        ordered = sorted(fits, key=lambda f: f.rank)
        # symbols are per source: two runs (other machines, other loads, other configurations
        # nothing records) would otherwise mix their costs
        remaps = [np.array([table.setdefault((*s, mi), len(table)) for s in f.symbols],
                           dtype=np.int64) for f in ordered]  # fmt: skip
        # one sample per quantity over every rank of the job: sketches, and each skeleton
        # value's slice of it
        # bins[rank][variant][set] = [durations, delays, waits]; joins[rank][variant][set]
        bins: list[list[list[list[NDArray[np.int8]]]]] = [
            [[[] for _ in sets] for sets in f.rows] for f in ordered
        ]
        joins: list[list[list[NDArray[np.int8]]]] = [[[] for _ in f.rows] for f in ordered]
        for q, (name, into, shift) in enumerate(zip(sample_names, (dur, delay, wait),
                                                    (0, KIND_SHIFT, 0), strict=True)):  # fmt: skip
            keys = np.concatenate([_global(getattr(f, name)[0], r, shift)
                                   for f, r in zip(ordered, remaps, strict=True)])  # fmt: skip
            values = np.concatenate([getattr(f, name)[1] for f in ordered])
            ranks_bins = rank_bins(keys, values)
            start = 0
            for i, f in enumerate(ordered):
                n = len(getattr(f, name)[0])
                mine = ranks_bins[start : start + n]
                for v, sets in enumerate(f.rows):
                    for j, set_rows in enumerate(sets):
                        bins[i][v][j].append(mine[set_rows[q]])
                        if name == "delays":
                            jr = f.join_rows[v][j]
                            joins[i][v].append(np.where(jr >= 0, mine[np.maximum(jr, 0)] if n
                                                        else 0, 0).astype(np.int8))  # fmt: skip
                start += n
            uk, points, counts = fit_sketches(keys, values)
            for k, p, c in zip(uk.tolist(), points, counts.tolist(), strict=True):
                into.setdefault(k, []).append((p, c))
        for f, remap, rank_bins_, rank_joins in zip(ordered, remaps, bins, joins, strict=True):
            sks = [
                Skeleton(**{**_fields(sk), "sym": remap[sk.sym].astype(np.int32),
                            **{col: np.stack([b[q] for b in sets]) for q, col in
                               enumerate(("dur_bin", "delay_bin", "wait_bin"))},
                            "join_bin": np.stack(j)})
                for sk, sets, j in zip(f.skeletons, rank_bins_, rank_joins, strict=True)
            ]  # fmt: skip
            k = b"\x01".join(sk.structure_key() for sk in sks)
            if k not in classes:
                classes[k] = len(skeletons)
                skeletons.append([sk.to_json() for sk in sks])
            rank_class.append(classes[k])
        first = min(fits, key=lambda f: f.rank)
        out_members.append({
            "config": _common_config(fits),
            "world_size": max(f.world_size for f in fits),
            "ranks": sorted(f.rank for f in fits),
            "rank_class": rank_class,
            "offset_ns": [int(offset[i]) for i in by_rank],
            "step_pad_ns": [list(fits[i].step_pad_ns) for i in by_rank],
            "proc_start_ns": [fits[i].proc_start_ns for i in by_rank],
            "groups": first.groups,
            "steps": min(f.steps for f in fits),
            "variant_steps": list(variant_steps[mi]) if variant_steps else [0],
            "variant_weight": [len(w) for w in variant_weights[mi]] if variant_weights else [1],
            "step_ns": float(np.mean([f.step_ns for f in fits])),
            "tasks_per_step": float(np.mean([f.tasks / max(f.steps, 1) for f in fits])),
            "calibration": first.calibration,
            "params": list(first.params),
            "skeletons": skeletons,
        })  # fmt: skip
    sym_class = [0] * len(table)  # (the keys' names and shapes never leave this function)
    for (c, _, _, _), gid in table.items():
        sym_class[gid] = c
    return {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "fitted_on": {
            "sources": len(members),
            "ranks": sum(len(m) for m in members),
            "steps": sum(f.steps for m in members for f in m),
            "tasks": sum(f.tasks for m in members for f in m),
            "symbols": len(table),
        },
        "classes": list(CLASSES),
        "symbol_class": sym_class,
        "durations": _merged(dur),
        "waits": _merged(wait),
        "delays": _merged(delay),
        "members": out_members,
    }


def _fields(sk: Skeleton) -> dict[str, Any]:
    return {k: getattr(sk, k) for k in Skeleton.__dataclass_fields__}


def _global(keys: NDArray[np.int64], remap: NDArray[np.int64], shift: int) -> NDArray[np.int64]:
    """Keys with their local symbol replaced by the model's (``kind << shift | symbol``)."""
    if not shift:
        return remap[keys]
    low = keys & ((1 << shift) - 1)
    return ((keys >> shift) << shift) | remap[low]


def _merged(sketches: dict[int, list[tuple[NDArray[np.int64], int]]]) -> dict[str, Any]:
    """The sketch table: keys sorted (a key is fitted once, on its member's pooled sample)."""
    keys = sorted(sketches)
    if any(len(sketches[k]) != 1 for k in keys):  # pragma: no cover - symbols are per member
        raise ValueError("a sketch key was fitted twice")
    return {"key": keys, "count": [sketches[k][0][1] for k in keys],
            "points": [sketches[k][0][0].tolist() for k in keys]}  # fmt: skip


def _common_config(fits: list[RankFit]) -> dict[str, int]:
    """Values every rank that detected them agrees on (the first rank's when they differ)."""
    out: dict[str, int] = {}
    for f in sorted(fits, key=lambda f: f.rank):
        for k, v in f.config.items():
            out.setdefault(k, v)
    return out
