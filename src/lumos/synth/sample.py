"""Draw workloads from a synthetic model: ``lumos synth sample``.

A sample of ``ranks`` ranks and ``steps`` steps is built in three moves (see
:mod:`lumos.synth.fit` for the grammar):

1. *Structure*, once per rank class (:mod:`lumos.synth.structure`): each of the class's step
   variants becomes a one-step graph whose task names are ``<class>#<symbol>`` (``gemm#17``: no
   name from the sources); ``layers`` resizes its layer groups
   (:func:`lumos.estimate.blocks.resize_groups`; the gradient collectives then carry the
   weights the new layers add, re-timed per rank as ``lumos estimate`` does); ``steps`` copies
   are chained, each variant as often as its weight says, in an order the seed shuffles.
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
from lumos.graph.build_tasks import START
from lumos.graph.kinds import AnnotationKind
from lumos.graph.model import (
    Comms,
    ExecGraph,
    ProcessGroup,
    Tasks,
    Workload,
)
from lumos.synth.fit import KIND_SHIFT
from lumos.synth.sketch import POINTS, draw
from lumos.synth.structure import class_structure

__all__ = ["Plan", "plan_sample", "sample_rank", "sample_workload", "stamp", "structure",
           "structures"]  # fmt: skip


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
    #: The step variant of each copy (the same on every rank).
    variant_order: tuple[int, ...] = ()

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
    order = variant_order(m.get("variant_weight") or [1], n_steps, seed)
    return Plan(model, member, world, rank_list, n_steps, layers, seed, order)


def variant_order(weights: Sequence[int], steps: int, seed: int) -> tuple[int, ...]:
    """Which step variant each of ``steps`` copies runs: each variant as many times as its
    share of ``weights`` (largest remainders), in an order shuffled by ``seed``."""
    w = np.asarray(weights, dtype=np.float64)
    quota = w / w.sum() * steps
    counts = np.floor(quota).astype(np.int64)
    rest = steps - int(counts.sum())
    counts[np.argsort(-(quota - counts), kind="stable")[:rest]] += 1
    order = np.repeat(np.arange(len(w)), counts)
    np.random.default_rng([seed, 1 << 20]).shuffle(order)
    return tuple(int(i) for i in order)


def structure(plan: Plan, cls: int) -> ExecGraph:
    """The graph of rank class ``cls`` under ``plan``, value columns holding bins (see
    :mod:`lumos.synth.structure`)."""
    variants = plan.model["members"][plan.member]["skeletons"][cls]
    return class_structure(variants, plan.variant_order, plan.model["classes"], plan.layers,
                           plan.seed)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# values and ranks


class _Sketches:
    """A model's sketch table with its keys sorted for lookup."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        self.key = np.asarray(table["key"], dtype=np.int64)
        self.points = np.asarray(table["points"], dtype=np.int64).reshape(
            len(self.key), 2 * POINTS - 1
        )
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
    # a rank's arrival: its anchors release its processors as late as the source rank's were,
    # and a processor nothing else releases as late after that as in the source's step
    src_i = m["ranks"].index(plan.source_rank(rank))
    anchor = np.flatnonzero(t.event_idx[e.src] == START)
    proc = t.processor_idx[e.src[anchor]]
    arrival = int((m.get("offset_ns") or [0] * len(m["ranks"]))[src_i])
    starts = np.asarray((m.get("proc_start_ns") or [[0] * len(g.processors)] * len(m["ranks"]))
                        [src_i], dtype=np.int64)  # fmt: skip
    delay[anchor] = arrival + starts[proc]
    peer = np.where(c.peer_rank != 0, (rank + c.peer_rank) % plan.world_size, -1)
    comms = c.replace(peer_rank=peer.astype(np.int32), wait_ns=wait)
    procs = g.processors.replace(pid=np.full(len(g.processors), rank, np.int64))
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
    from lumos.estimate.params import ForwardParams
    from lumos.estimate.reshape import resize_comms

    outside, inside = (int(x) for x in m.get("params") or (0, 0))
    ratio = ForwardParams(outside, inside, outside, inside).ratio(
        layers / int(m["config"]["layers"])
    )
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


def structures(plan: Plan) -> dict[int, ExecGraph]:
    """The structure of every rank class ``plan`` draws ranks from (see :func:`structure`)."""
    return {c: structure(plan, c) for c in sorted({plan.class_of(r) for r in plan.ranks})}


def sample_workload(
    plan: Plan, *, timestamps: bool = True, shapes: Mapping[int, ExecGraph] | None = None
) -> Workload:
    """Every rank of ``plan`` in memory, stamped with its own simulated times unless
    ``timestamps`` is false (see :mod:`lumos.synth.files` to stream many ranks to files);
    ``shapes`` may pass :func:`structures` in when the caller has them."""
    shapes = structures(plan) if shapes is None else shapes
    w = Workload(tuple(sample_rank(plan, r, shapes[plan.class_of(r)]) for r in plan.ranks))
    return stamp(w) if timestamps else w
