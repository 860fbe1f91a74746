"""Fit a synthetic workload model from traces: ``lumos synth fit``.

The model is a small probabilistic grammar of the training iteration, with fitted distributions
at its leaves::

    workload      -> step^S                              (S = --steps)
    step          -> skeleton of the rank's class         (one per distinct rank structure)
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
family, with the configuration lumos detects in it (:mod:`lumos.estimate.baseline`). Symbols
(an anonymous id per distinct op class, name and shapes) of ops with recorded shapes are shared
across members, so an op run on the same shapes in several configurations pools its samples;
an op without recorded shapes is a symbol of its member only. The representative step of a rank is its
middle step (index ``n // 2``: past the warm-up of the first); durations are fitted on every
step.

Each source is built the way ``lumos replay`` builds it (ranks in parallel processes, aligned
on one clock), then each rank gives its skeleton and sketches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.errors import InputError, LumosError
from lumos.graph.build_tasks import START
from lumos.graph.model import ExecGraph, Workload
from lumos.synth.classes import CLASSES, task_classes
from lumos.synth.skeleton import Skeleton, extract_step, step_of_tasks
from lumos.synth.sketch import fit_sketches, merge_sketches, rank_bins

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
    skeleton: Skeleton
    #: ``(keys, values)`` of every fitted duration, delay and wait (keys use local symbols),
    #: and the row of each skeleton task, edge and collective among them
    durations: tuple[NDArray[np.int64], NDArray[np.int64]]
    delays: tuple[NDArray[np.int64], NDArray[np.int64]]
    waits: tuple[NDArray[np.int64], NDArray[np.int64]]
    rows: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]
    join_rows: NDArray[np.int64]  # per processor, the row among the delays, -1 none
    groups: list[dict[str, Any]]
    config: dict[str, int]
    steps: int
    step_ns: float
    tasks: int
    step_start_ns: int  # recorded start of the representative step (the trace's clock)
    step_pad_ns: tuple[int, int]  # the step span's lead before its first task, tail after its last
    params: tuple[int, int]  # forward weights outside and inside the layers (lumos.estimate)
    calibration: dict[str, int] = field(default_factory=dict)


def fit_rank(g: ExecGraph) -> RankFit:
    """Skeleton of ``g``'s middle step and sketches of every step's durations and delays."""
    t = g.tasks
    cls = task_classes(g)
    dims = g.task_dims_idx if g.task_dims_idx is not None else np.full(len(t), -1, np.int32)
    key = np.stack([cls.astype(np.int64), t.name_idx.astype(np.int64), dims.astype(np.int64)], 1)
    uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    sym: NDArray[np.int32] = inverse.reshape(-1).astype(np.int32)
    symbols = [
        (int(c), g.names[int(n)], g.dims[int(d)] if d >= 0 else "") for c, n, d in uniq.tolist()
    ]
    step = step_of_tasks(g)
    n_steps = int(step.max()) + 1 if len(step) else 0
    if n_steps == 0:
        raise InputError(
            f"rank {g.rank}", "no ProfilerStep in the trace: nothing to learn a step from"
        )
    rep = n_steps // 2
    in_step = (step >= 0) & (t.event_idx != START)
    e = g.edges
    e_in = in_step[e.src] & in_step[e.dst]
    comm = in_step & (t.comm_idx >= 0)
    # a collective's own cost is its transfer; the waiting for peers is drawn apart
    wait = np.zeros(len(t), dtype=np.int64)
    wait[comm] = g.comms.wait_ns[t.comm_idx[comm]]
    cost = np.maximum(t.dur_ns - wait, 0)
    from lumos.estimate.layers import find_layers

    layers = tuple(
        (grp.processor_idx, grp.level, grp.phase, grp.blocks)
        for grp in find_layers(g).groups
        if grp.step == rep and grp.level == "layer" and grp.parent == (-1, -1)
    )
    delay_key = (e.kind.astype(np.int64) << KIND_SHIFT) | sym[e.dst].astype(np.int64)
    skel, (tasks, edges, comm_tasks, joins) = extract_step(g, step, rep, sym, cls, layers)
    row_of_task = np.cumsum(in_step) - 1
    row_of_edge = np.cumsum(e_in) - 1
    row_of_comm = np.cumsum(comm) - 1
    a = g.annotations
    from lumos.graph.kinds import AnnotationKind

    steps_ns = a.dur_ns[a.kind == int(AnnotationKind.STEP)]
    return RankFit(
        rank=g.rank,
        world_size=g.world_size,
        symbols=symbols,
        skeleton=skel,
        durations=(sym[in_step].astype(np.int64), cost[in_step]),
        delays=(delay_key[e_in], e.delay_ns[e_in]),
        waits=(sym[comm].astype(np.int64), wait[comm]),
        rows=(row_of_task[tasks], row_of_edge[edges], row_of_comm[comm_tasks]),
        join_rows=np.where(
            (joins >= 0) & e_in[np.maximum(joins, 0)], row_of_edge[np.maximum(joins, 0)], -1
        ),
        groups=[{"ranks": list(pg.ranks), "backend": pg.backend} for pg in g.process_groups],
        config=_config(g),
        steps=n_steps,
        step_ns=float(steps_ns.mean()) if len(steps_ns) else 0.0,
        tasks=int(in_step.sum()),
        step_start_ns=int(t.ts_ns[np.flatnonzero(step == rep)].min()),
        step_pad_ns=_pad(g, rep),
        params=_params(g),
        calibration={k: int(v) for k, v in g.calibration.items()},
    )


def _params(g: ExecGraph) -> tuple[int, int]:
    """Forward weights outside and inside the layers: how gradient bytes grow with layers."""
    from lumos.estimate.layers import find_layers
    from lumos.estimate.reshape import forward_params

    outside, inside = forward_params(g, find_layers(g), None)
    return int(outside), int(inside)


def _pad(g: ExecGraph, rep: int) -> tuple[int, int]:
    from lumos.graph.kinds import AnnotationKind

    a = g.annotations
    rows = np.flatnonzero((a.kind == int(AnnotationKind.STEP)) & (a.first_task_idx >= 0))
    rows = rows[np.argsort(a.ts_ns[rows], kind="stable")]
    if rep >= len(rows):
        return (0, 0)
    return (int(a.lead_ns[rows[rep]]), int(a.tail_ns[rows[rep]]))


def _config(g: ExecGraph) -> dict[str, int]:
    from lumos.estimate.baseline import detect_baseline

    try:
        return dict(detect_baseline(Workload.of(g)).values)
    except LumosError:
        return {}


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
    for p in paths:
        w, _ = build_workload([p], workers=workers, dask_address=dask_address, on_done=on_done)
        fits = [fit_rank(g) for g in w.graphs]
        members.append(fits)
        start = [f.step_start_ns for f in fits]
        shared = shared_clock_origin(w.graphs) is not None
        offsets.append([s - min(start) if shared else 0 for s in start])
    return merge_fits(members, offsets)


def merge_fits(
    members: list[list[RankFit]], offsets: list[list[int]] | None = None
) -> dict[str, Any]:
    """One model from the per-rank fits of each member (job); ``offsets`` are each rank's
    arrival at the representative step after the job's first (0 when clocks differ)."""
    table: dict[tuple[int, str, str], int] = {}
    dur: dict[int, list[tuple[NDArray[np.int64], int]]] = {}
    wait: dict[int, list[tuple[NDArray[np.int64], int]]] = {}
    delay: dict[int, list[tuple[NDArray[np.int64], int]]] = {}
    sample_names = ("durations", "delays", "waits")
    out_members = []
    for mi, fits in enumerate(members):
        offset = offsets[mi] if offsets else [0] * len(fits)
        by_rank = sorted(range(len(fits)), key=lambda i: fits[i].rank)
        classes: dict[bytes, int] = {}
        skeletons: list[dict[str, Any]] = []
        rank_class = []
        ordered = sorted(fits, key=lambda f: f.rank)
        # an op with recorded shapes is the same symbol in every source; one without is
        # this source's own (its cost may depend on a configuration nothing records)
        remaps = [np.array([table.setdefault(s if s[2] else (*s[:2], f"#{mi}"), len(table))
                            for s in f.symbols], dtype=np.int64) for f in ordered]  # fmt: skip
        # one sample per quantity over every rank of the job: sketches, and each skeleton
        # value's slice of it
        bins: list[list[NDArray[np.int8]]] = [[] for _ in ordered]
        joins: list[NDArray[np.int8]] = []
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
                bins[i].append(mine[f.rows[q]])
                if name == "delays":
                    joins.append(np.where(f.join_rows >= 0, mine[np.maximum(f.join_rows, 0)]
                                          if n else 0, 0).astype(np.int8))  # fmt: skip
                start += n
            uk, points, counts = fit_sketches(keys, values)
            for k, p, c in zip(uk.tolist(), points, counts.tolist(), strict=True):
                into.setdefault(k, []).append((p, c))
        for f, remap, (b_dur, b_delay, b_wait), b_join in zip(ordered, remaps, bins, joins,
                                                              strict=True):  # fmt: skip
            sk = Skeleton(
                **{
                    **_fields(f.skeleton),
                    "sym": remap[f.skeleton.sym].astype(np.int32),
                    "dur_bin": b_dur,
                    "delay_bin": b_delay,
                    "wait_bin": b_wait,
                    "join_bin": b_join,
                }
            )
            k = sk.structure_key()
            if k not in classes:
                classes[k] = len(skeletons)
                skeletons.append(sk.to_json())
            rank_class.append(classes[k])
        first = min(fits, key=lambda f: f.rank)
        out_members.append({
            "config": _common_config(fits),
            "world_size": max(f.world_size for f in fits),
            "ranks": sorted(f.rank for f in fits),
            "rank_class": rank_class,
            "offset_ns": [int(offset[i]) for i in by_rank],
            "step_pad_ns": [list(fits[i].step_pad_ns) for i in by_rank],
            "groups": first.groups,
            "steps": min(f.steps for f in fits),
            "step_ns": float(np.mean([f.step_ns for f in fits])),
            "tasks_per_step": float(np.mean([f.tasks / max(f.steps, 1) for f in fits])),
            "calibration": first.calibration,
            "params": list(first.params),
            "skeletons": skeletons,
        })  # fmt: skip
    sym_class = [0] * len(table)  # (the keys' names and shapes never leave this function)
    for (c, _, _), gid in table.items():
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
    keys = sorted(sketches)
    points, counts = [], []
    for k in keys:
        parts = sketches[k]
        if len(parts) == 1:
            points.append(parts[0][0].tolist())
            counts.append(parts[0][1])
        else:
            c = np.array([n for _, n in parts], dtype=np.int64)
            points.append(merge_sketches(np.stack([p for p, _ in parts]), c).tolist())
            counts.append(int(c.sum()))
    return {"key": keys, "count": counts, "points": points}


def _common_config(fits: list[RankFit]) -> dict[str, int]:
    """Values every rank that detected them agrees on (the first rank's when they differ)."""
    out: dict[str, int] = {}
    for f in sorted(fits, key=lambda f: f.rank):
        for k, v in f.config.items():
            out.setdefault(k, v)
    return out
