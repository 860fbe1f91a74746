"""Draw workloads from a synthetic model: ``lumos synth sample``.

A sample of ``ranks`` ranks and ``steps`` steps is built in three moves (see
:mod:`lumos.synth.fit` for the grammar):

1. *Structure*, once per rank class: the class's step skeleton becomes a one-step graph whose
   task names are ``<class>#<symbol>`` (``gemm#17``: no name from the sources); ``layers``
   resizes its layer groups (:func:`lumos.estimate.blocks.resize_groups`; the gradient
   collectives then carry the weights the new layers add, re-timed per rank as ``lumos
   estimate`` does); the step is then
   repeated ``steps`` times, each copy after the previous one on every processor, its
   collectives numbered apart (``seq + copy * SEQ_STEP``) so that they pair up across ranks.
2. *Values*, per rank: every task's duration, every edge's delay and every collective's wait
   drawn from the model's sketches (a delay whose (kind, symbol) the model never saw is 0).
   The generator is seeded with ``(seed, rank)``: the same seed gives the same bytes, whatever
   the number of worker processes.
3. *Ranks*: every processor starts with a ``<start>`` anchor that releases it at the source
   rank's arrival (its representative step began that long after the job's first rank's, on
   one clock); rank ``r`` takes the class of source rank ``r`` (or of ``source_ranks[r mod R]``
   when sampling more ranks than the source had); process groups spanning the source's whole
   world span the new one; smaller groups are tiled (group ``G`` of the ``q``-th tile is
   ``{g + q * W}``); a point-to-point peer keeps its offset from the rank (modulo the world).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
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
    ProcessGroup,
    Processors,
    Tasks,
    Waits,
    Workload,
    order_within,
)
from lumos.synth.fit import KIND_SHIFT
from lumos.synth.skeleton import Skeleton
from lumos.synth.sketch import draw

__all__ = ["SEQ_STEP", "Plan", "plan_sample", "sample_rank", "sample_workload"]

#: Collective sequence numbers of step copy ``k`` start at ``k * SEQ_STEP``.
SEQ_STEP = 1 << 24


@dataclass(frozen=True)
class Plan:
    """What to sample: the model, which member, ranks, steps, layers and seed."""

    model: Mapping[str, Any]
    member: int
    world_size: int
    ranks: tuple[int, ...]
    steps: int
    layers: int | None
    seed: int

    @cached_property
    def _m(self) -> Mapping[str, Any]:
        return self.model["members"][self.member]

    def source_rank(self, rank: int) -> int:
        src = self._m["ranks"]
        return rank if rank in src else src[rank % len(src)]

    def class_of(self, rank: int) -> int:
        src = self._m["ranks"]
        return int(self._m["rank_class"][src.index(self.source_rank(rank))])


def plan_sample(
    model: Mapping[str, Any],
    *,
    ranks: int | None = None,
    steps: int | None = None,
    config: Mapping[str, int] | None = None,
    seed: int = 0,
) -> Plan:
    """Check the request against the model and pick the member to sample from: the one whose
    detected configuration matches every requested value but ``layers``, nearest in layers."""
    members = model["members"]
    want = dict(config or {})
    layers = want.pop("layers", None)
    fits = [i for i, m in enumerate(members)
            if all(m["config"].get(k) == v for k, v in want.items())]  # fmt: skip
    if not fits:
        seen = "; ".join(
            ", ".join(f"{k}={v}" for k, v in sorted(m["config"].items()) if k in want) or "?"
            for m in members
        )
        asked = ", ".join(f"{k}={v}" for k, v in sorted(want.items()))
        raise ConfigError(
            f"no fitted configuration has {asked} (fitted: {seen}); fit the model on a trace "
            "with those values too"
        )
    if layers is not None:
        if layers < 1:
            raise ConfigError(f"layers must be at least 1, not {layers}")

        def dist(i: int) -> float:
            n = members[i]["config"].get("layers")
            return abs(np.log(layers / n)) if n else np.inf

        fits.sort(key=dist)
        if not np.isfinite(dist(fits[0])):
            raise ConfigError("the model found no layers in its sources; --layers needs them")
    member = fits[0]
    m = members[member]
    if ranks is None:
        world, rank_list = int(m["world_size"]), tuple(m["ranks"])
    else:
        if ranks < 1:
            raise ConfigError(f"ranks must be at least 1, not {ranks}")
        world, rank_list = ranks, tuple(range(ranks))
    n_steps = int(m["steps"]) if steps is None else steps
    if n_steps < 1:
        raise ConfigError(f"steps must be at least 1, not {n_steps}")
    if layers == m["config"].get("layers"):
        layers = None
    return Plan(model, member, world, rank_list, n_steps, layers, seed)


# ---------------------------------------------------------------------------------------------
# structure


def step_graph(skel: Skeleton, classes: Sequence[str]) -> ExecGraph:
    """One step of ``skel`` as a graph whose value columns (task ``dur_ns``, edge
    ``delay_ns``, collective ``wait_ns``) hold each value's quantile *bin*, not a time: edits
    (resize, tile) copy them with their tasks, and :func:`sample_rank` draws the times."""
    syms, name_idx = np.unique(skel.sym, return_inverse=True)
    names = tuple(f"{classes[int(skel.cls[np.argmax(skel.sym == s)])]}#{int(s)}" for s in syms)
    names = (*names, "ProfilerStep#0")
    n = skel.num_tasks
    procs = Processors.create(
        kind=skel.proc_kind,
        pid=np.zeros(len(skel.proc_kind), np.int64),
        tid=np.arange(len(skel.proc_kind), dtype=np.int64),
        device=skel.proc_device,
    )
    comm_idx = np.full(n, -1, np.int32)
    comm_idx[skel.comm_task] = np.arange(len(skel.comm_task), dtype=np.int32)
    tasks = Tasks.create(
        name_idx=name_idx.reshape(-1).astype(np.int32), kind=skel.kind, processor_idx=skel.proc,
        order=order_within(skel.proc), dur_ns=skel.dur_bin.astype(np.int64), ts_ns=0,
        event_idx=-1,
        comm_idx=comm_idx,
    )  # fmt: skip
    edges = Edges.create(
        src=skel.edge_src, dst=skel.edge_dst, kind=skel.edge_kind,
        delay_ns=skel.delay_bin.astype(np.int64),
    )  # fmt: skip
    waits = Waits.create(
        task_idx=skel.wait_task, kind=skel.wait_kind, target_processor_idx=skel.wait_target,
        device=skel.wait_device, record_task_idx=skel.wait_record,
    )  # fmt: skip
    comms = Comms.create(
        kind=skel.comm_kind, size_bytes=skel.comm_size, pg_idx=skel.comm_pg, seq_id=skel.comm_seq,
        peer_rank=skel.comm_peer, tag=skel.comm_tag, wait_ns=skel.wait_bin.astype(np.int64),
    )  # fmt: skip
    ann = Annotations.create(
        name_idx=np.array([len(names) - 1], np.int32),
        kind=np.array([int(AnnotationKind.STEP)], np.int8),
        processor_idx=np.array([skel.step_proc], np.int32),
        first_task_idx=np.array([skel.step_first], np.int32),
        last_task_idx=np.array([skel.step_last], np.int32),
        ts_ns=np.zeros(1, np.int64), dur_ns=np.zeros(1, np.int64),
    )  # fmt: skip
    return ExecGraph(names, procs, tasks, edges, waits, ann, comms)


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


def tile_steps(g: ExecGraph, steps: int, join_bin: NDArray[np.int8] | None = None) -> ExecGraph:
    """``steps`` copies of the one-step graph ``g``, each after the previous one; the
    program-order edge from one copy into the next on processor ``p`` carries bin
    ``join_bin[p]``."""
    if steps == 1:
        return g
    n, t = g.num_tasks, g.tasks
    off = (np.arange(steps, dtype=np.int64) * n)[:, None]
    per_proc = np.bincount(t.processor_idx, minlength=len(g.processors)).astype(np.int64)
    k = np.repeat(np.arange(steps, dtype=np.int64), n)
    proc = np.tile(t.processor_idx, steps)
    tasks = Tasks.create(
        name_idx=np.tile(t.name_idx, steps), kind=np.tile(t.kind, steps), processor_idx=proc,
        order=(np.tile(t.order, steps) + k * per_proc[proc]).astype(np.int32),
        dur_ns=np.tile(t.dur_ns, steps), ts_ns=0, event_idx=-1,
        comm_idx=np.where(np.tile(t.comm_idx, steps) >= 0,
                          np.tile(t.comm_idx, steps) + k.astype(np.int32) * len(g.comms), -1),
    )  # fmt: skip
    e = g.edges
    # program order from one copy into the next: last task -> first task of each processor
    indptr, perm = g.processor_order()
    nonempty = np.flatnonzero(per_proc > 0)
    first, last = perm[indptr[nonempty]], perm[indptr[nonempty + 1] - 1]
    stream = g.processors.kind[nonempty] == int(ProcessorKind.STREAM)
    jk = np.where(stream, int(DepKind.INTRA_STREAM), int(DepKind.INTRA_THREAD)).astype(np.int8)
    ko = off[:-1]
    edges = Edges.create(
        src=np.concatenate([(e.src + off).reshape(-1), (last + ko).reshape(-1)]).astype(np.int32),
        dst=np.concatenate([(e.dst + off).reshape(-1), (first + off[1:]).reshape(-1)])
        .astype(np.int32),
        kind=np.concatenate([np.tile(e.kind, steps), np.tile(jk, steps - 1)]),
        delay_ns=np.concatenate([
            np.tile(e.delay_ns, steps),
            np.tile(np.zeros(len(nonempty), np.int64) if join_bin is None
                    else join_bin[nonempty].astype(np.int64), steps - 1),
        ]),
    )  # fmt: skip
    w = g.waits
    waits = Waits.create(
        task_idx=(w.task_idx + off).reshape(-1).astype(np.int32), kind=np.tile(w.kind, steps),
        target_processor_idx=np.tile(w.target_processor_idx, steps),
        device=np.tile(w.device, steps),
        record_task_idx=np.where(np.tile(w.record_task_idx, steps) >= 0,
                                 (w.record_task_idx + off).reshape(-1), -1).astype(np.int32),
    )  # fmt: skip
    c = g.comms
    kc = np.repeat(np.arange(steps, dtype=np.int64), len(c))
    seq = np.tile(c.seq_id, steps)
    comms = c.concat([c] * steps).replace(seq_id=np.where(seq >= 0, seq + kc * SEQ_STEP, -1))
    a = g.annotations
    step_rows = a.kind == int(AnnotationKind.STEP)
    a = a.take(step_rows)
    names = (*g.names[:-1], *(f"ProfilerStep#{i}" for i in range(steps)))
    ka = np.repeat(np.arange(steps, dtype=np.int64), len(a))
    ann = Annotations.concat([a] * steps).replace(
        name_idx=(len(g.names) - 1 + ka).astype(np.int32),
        first_task_idx=(np.tile(a.first_task_idx, steps) + ka * n).astype(np.int32),
        last_task_idx=(np.tile(a.last_task_idx, steps) + ka * n).astype(np.int32),
    )  # fmt: skip
    return ExecGraph(names, g.processors, tasks, edges, waits, ann, comms)


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
    e = g.edges
    edges = Edges.concat([e, Edges.create(
        src=(g.num_tasks + has).astype(np.int32), dst=perm[indptr[has]].astype(np.int32),
        kind=np.where(stream[has], int(DepKind.INTRA_STREAM), int(DepKind.INTRA_THREAD))
        .astype(np.int8),
        delay_ns=np.zeros(len(has), np.int64),
    )])  # fmt: skip
    return dataclasses.replace(g, names=names, tasks=tasks, edges=edges)


def structure(plan: Plan, cls: int) -> ExecGraph:
    """The graph of rank class ``cls`` under ``plan`` (value columns hold bins, see
    :func:`step_graph`)."""
    skel = Skeleton.from_json(plan.model["members"][plan.member]["skeletons"][cls])
    g = step_graph(skel, plan.model["classes"])
    if plan.layers is not None:
        g = resize_layers(g, skel, plan.layers)
    return with_anchors(tile_steps(g, plan.steps, skel.join_bin))


# ---------------------------------------------------------------------------------------------
# values and ranks


class _Sketches:
    """A model's sketch table with its keys sorted for lookup."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        self.key = np.asarray(table["key"], dtype=np.int64)
        self.points = np.asarray(table["points"], dtype=np.int64).reshape(len(self.key), -1)
        self.count = np.asarray(table["count"], dtype=np.int64)

    def draw(
        self, keys: NDArray[np.int64], bins: NDArray[np.int8], rng: np.random.Generator
    ) -> NDArray[np.int64]:
        out = np.zeros(len(keys), dtype=np.int64)
        if len(self.key) == 0:
            return out
        pos = np.minimum(np.searchsorted(self.key, keys), len(self.key) - 1)
        hit = self.key[pos] == keys
        out[hit] = draw(self.points, pos[hit], rng, bins[hit], self.count)
        return out


def _symbols(g: ExecGraph) -> NDArray[np.int64]:
    """Per task, the symbol its name ``<class>#<symbol>`` carries."""
    per_name = np.array([int(s.rsplit("#", 1)[1]) if "#" in s and not s.startswith("Profiler")
                         else -1 for s in g.names], dtype=np.int64)  # fmt: skip
    return per_name[g.tasks.name_idx]


def sample_rank(plan: Plan, rank: int, shape: ExecGraph | None = None) -> ExecGraph:
    """Rank ``rank`` of ``plan``: its class's structure with values drawn (``shape`` may pass
    that structure in when many ranks share it)."""
    g = structure(plan, plan.class_of(rank)) if shape is None else shape
    m = plan.model["members"][plan.member]
    rng = np.random.default_rng([plan.seed, rank])
    sym = _symbols(g)
    t, e, c = g.tasks, g.edges, g.comms
    bins = (t.dur_ns.astype(np.int8), e.delay_ns.astype(np.int8), c.wait_ns.astype(np.int8))
    dur = _Sketches(plan.model["durations"]).draw(sym, bins[0], rng)
    delay = _Sketches(plan.model["delays"]).draw(
        (e.kind.astype(np.int64) << KIND_SHIFT) | sym[e.dst], bins[1], rng
    )
    comm_task = np.flatnonzero(t.comm_idx >= 0)
    wait = np.zeros(len(c), dtype=np.int64)
    rows = t.comm_idx[comm_task]
    wait[rows] = _Sketches(plan.model["waits"]).draw(sym[comm_task], bins[2][rows], rng)
    dur[comm_task] += wait[t.comm_idx[comm_task]]  # the sketch is the transfer
    delay = np.maximum(delay, -dur[e.src])
    # a rank's arrival: its anchors release its threads as late as the source rank's were
    anchor = t.event_idx[e.src] == START
    thread = g.processors.kind[t.processor_idx[e.src]] == int(ProcessorKind.THREAD)
    offsets = m.get("offset_ns") or [0] * len(m["ranks"])
    delay[anchor] = np.where(thread[anchor], offsets[m["ranks"].index(plan.source_rank(rank))], 0)
    peer = np.where(c.peer_rank != 0, (rank + c.peer_rank) % plan.world_size, -1)
    comms = c.replace(peer_rank=peer.astype(np.int32), wait_ns=wait)
    procs = g.processors.replace(pid=np.full(len(g.processors), rank, np.int64))
    src_i = m["ranks"].index(plan.source_rank(rank))
    lead, tail = (m.get("step_pad_ns") or [[0, 0]] * len(m["ranks"]))[src_i]
    a = g.annotations
    step = a.kind == int(AnnotationKind.STEP)
    ann = a.replace(
        lead_ns=np.where(step, lead, a.lead_ns), tail_ns=np.where(step, tail, a.tail_ns)
    )
    out = dataclasses.replace(
        g,
        processors=procs,
        tasks=t.replace(dur_ns=dur),
        edges=e.replace(delay_ns=delay),
        comms=comms,
        annotations=ann,
        process_groups=_groups(m, plan, rank),
        rank=rank,
        world_size=plan.world_size,
        calibration=dict(m.get("calibration", {})),
    )
    if plan.layers is not None:
        out = _grow_gradients(out, m, plan.layers)
    return out


def _grow_gradients(g: ExecGraph, m: Mapping[str, Any], layers: int) -> ExecGraph:
    """More layers hold more weights: gradient collectives carry (and take) that much more,
    re-timed as ``lumos estimate`` does (:func:`lumos.estimate.reshape.resize_comms`)."""
    from lumos.estimate.reshape import resize_comms

    outside, inside = m.get("params") or (0, 0)
    old = int(m["config"]["layers"])
    ratio = (outside + inside * layers / old) / (outside + inside) if outside + inside else (
        layers / old)  # fmt: skip
    (out,), _ = resize_comms([g], ratio, 1.0)
    return out


def _groups(m: Mapping[str, Any], plan: Plan, rank: int) -> tuple[ProcessGroup, ...]:
    """Process groups of ``rank``, in the source's order (comms keep their group index)."""
    w_src = int(m["world_size"])
    q = rank // w_src if plan.world_size != w_src else 0
    out: list[ProcessGroup] = []
    for i, pg in enumerate(m["groups"]):
        ranks = tuple(int(r) for r in pg["ranks"])
        if plan.world_size != w_src and sorted(ranks) == list(range(w_src)):
            ranks, name = tuple(range(plan.world_size)), str(i)
        elif plan.world_size != w_src:
            ranks = tuple(r + q * w_src for r in ranks if r + q * w_src < plan.world_size)
            name = f"{i}.{q}"
        else:
            name = str(i)
        out.append(ProcessGroup(name, ranks, "", str(pg.get("backend", ""))))
    return tuple(out)


def stamp(workload: Workload) -> Workload:
    """``workload`` with recorded times set to its own simulation: task starts, step spans.
    A sample then reads like a recording of itself (Perfetto, Kineto output, ``measured``)."""
    from lumos.sim import simulate

    r = simulate(workload)
    out = []
    for gi, g in enumerate(workload.graphs):
        lo, hi = r.annotation_spans(gi)
        a = g.annotations.replace(ts_ns=np.maximum(lo, 0), dur_ns=np.maximum(hi - lo, 0))
        tasks, comms = _as_recorded(g, r.starts(gi), r.ends(gi))
        out.append(dataclasses.replace(g, tasks=tasks, comms=comms, annotations=a))
    return Workload(tuple(out), workload.diagnostics)


def _as_recorded(
    g: ExecGraph, start: NDArray[np.int64], end: NDArray[np.int64]
) -> tuple[Tasks, Comms]:
    """Tasks stamped with simulated starts, collectives the way a trace records them: from the
    rank's own arrival (its latest dependency) to the end, the waiting for peers in
    ``wait_ns``. The transfer (duration less wait) is the simulated one, so a reader that
    derives waits from arrivals (``lumos.graph.build_ranks``) replays the same times."""
    t, e = g.tasks, g.edges
    comm = t.comm_idx >= 0
    into = comm[e.dst]
    ready = np.full(g.num_tasks, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(ready, e.dst[into], np.maximum(end[e.src[into]] + e.delay_ns[into],
                                                 start[e.src[into]]))  # fmt: skip
    ready = np.minimum(ready, start)
    ready[ready == np.iinfo(np.int64).min] = start[ready == np.iinfo(np.int64).min]
    ts = np.where(comm, ready, start)
    dur = np.where(comm, end - ready, t.dur_ns)
    wait = g.comms.wait_ns.copy()
    rows = t.comm_idx[comm]
    wait[rows] = start[comm] - ready[comm]
    return t.replace(ts_ns=ts, dur_ns=dur), g.comms.replace(wait_ns=wait)


def sample_workload(plan: Plan, *, timestamps: bool = True) -> Workload:
    """Every rank of ``plan`` in memory, stamped with its own simulated times unless
    ``timestamps`` is false (see :mod:`lumos.synth.write` to stream many ranks to files)."""
    shapes: dict[int, ExecGraph] = {}
    graphs = []
    for r in plan.ranks:
        cls = plan.class_of(r)
        if cls not in shapes:
            shapes[cls] = structure(plan, cls)
        graphs.append(sample_rank(plan, r, shapes[cls]))
    w = Workload(tuple(graphs))
    return stamp(w) if timestamps else w
