"""Change the number of pipeline stages (``pp``): each traced stage split into ``k`` stages.

A pipeline run of ``p`` stages, each rank one stage (no data parallelism inside the pipeline),
becomes a run of ``p' = k x p`` stages holding ``layers / p'`` layers each. New stage
``s' = k x s + j`` is a copy of traced stage ``s`` with:

* its layer blocks (forward, backward, per-layer optimizer updates; in every micro-batch)
  resized to the new layer count, by :func:`~lumos.estimate.blocks.resize_groups`;
* its work before and after the layers in each micro-batch block handed to the neighbour that
  now does it: the first stage's embedding stays on sub-stage ``j = 0`` only, the last stage's
  head and loss on ``j = k - 1`` only. On the other sub-stages that work takes no time and its
  first op becomes the point-to-point message the new boundary needs (a forward receive
  where the embedding was, a send where the head was, and their backward counterparts), with
  the median transfer time and size of the trace's own messages of that direction;
* its messages addressed to the new neighbours (stage ``s'`` sends forward to ``s' + 1``);
* a multi-tensor optimizer (no per-layer updates to copy) re-timed by the stage's new share
  of the parameters.

The schedule found in the trace is kept: all forwards then all backwards (GPipe) is the same
order for any number of stages; ``schedule=1f1b`` re-orders the new stages as well. Messages keep
their size (activations do not depend on ``pp``). What is not modelled: the embedding and head
layers' share of the optimizer step stays on every copy of their stage, and a collective over
the whole job keeps its traced transfer time with more participants.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from lumos.errors import ConfigError
from lumos.estimate.blocks import resize_groups
from lumos.estimate.layers import LayerMap
from lumos.estimate.pipeline import traced_stages
from lumos.graph.kinds import CommType, DepKind, ProcessorKind, TaskKind
from lumos.graph.model import ExecGraph, ProcessGroup, Workload

__all__ = ["Boundary", "restage"]

_SEND, _RECV = int(CommType.SEND), int(CommType.RECV)


class Boundary:
    """A point-to-point message a new stage boundary needs: the trace's own messages of one
    kind give its name, size and transfer time (medians)."""

    def __init__(self, workload: Workload, kind: int) -> None:
        names: list[str] = []
        sizes: list[int] = []
        transfer: list[int] = []
        for g in workload.graphs:
            t, c = g.tasks, g.comms
            has = np.flatnonzero(t.comm_idx >= 0)
            ci = t.comm_idx[has]
            sel = c.kind[ci] == kind
            if (g.processors.kind[t.processor_idx[has[sel]]] != int(ProcessorKind.THREAD)).any():
                raise ConfigError("pp: the trace's point-to-point messages run on GPU streams; "
                                  "changing pp needs them recorded as CPU ops (gloo) for now")  # fmt: skip
            names += [g.names[i] for i in t.name_idx[has[sel]].tolist()]
            sizes += c.size_bytes[ci[sel]].tolist()
            transfer += (t.dur_ns[has[sel]] - c.wait_ns[ci[sel]]).tolist()
        if not names:
            raise ConfigError(f"pp: the trace has no {CommType(kind).name.lower()} to model a "
                              "new stage boundary on")  # fmt: skip
        self.kind = kind
        self.name = max(sorted(set(names)), key=names.count)
        self.size_bytes = int(np.median(sizes))
        self.transfer_ns = max(int(np.median(transfer)), 0)


def _split_block(
    g: ExecGraph, block: NDArray[np.int64], layers: Sequence[NDArray[np.int64]]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Tasks of a micro-batch block's thread before its first layer block and after its last
    (each in program order)."""
    t = g.tasks
    inner = np.concatenate(layers)
    lo, hi = t.order[inner].min(), t.order[inner].max()
    return block[t.order[block] < lo], block[t.order[block] > hi]


class _Editor:
    """Column copies of one graph that boundary edits write into."""

    def __init__(self, g: ExecGraph) -> None:
        self.g = g
        self.names = list(g.names)
        self.name_idx = g.tasks.name_idx.copy()
        self.kind = g.tasks.kind.copy()
        self.dur = g.tasks.dur_ns.copy()
        self.comm_idx = g.tasks.comm_idx.copy()
        self.delay = g.edges.delay_ns.copy()
        self.dims = None if g.task_dims_idx is None else g.task_dims_idx.copy()
        self.new_comms: list[tuple[int, int, int]] = []  # kind, size, peer
        self.zeroed = 0
        self.converted = 0
        e = g.edges
        self._launch = e.kind == int(DepKind.LAUNCH)
        self._intra_into = e.dst
        self._intra = np.isin(e.kind, [int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)])

    def hand_over(self, tasks: NDArray[np.int64], msg: Boundary, peer: int) -> None:
        """``tasks`` (thread ops in program order) take no time, their first one becomes
        message ``msg`` to or from ``peer``."""
        if not len(tasks):
            raise ConfigError("pp: a micro-batch block has no work outside its layers to turn "
                              "into the new stage boundary")  # fmt: skip
        e = self.g.edges
        gone = np.zeros(self.g.num_tasks, dtype=bool)
        gone[tasks] = True
        gone[e.dst[self._launch & gone[e.src]]] = True
        first = int(tasks[0])
        keep_gap = self._intra & (e.dst == first)
        self.delay[self._intra & gone[e.dst] & ~keep_gap] = 0
        self.dur[gone] = 0
        self.zeroed += int(gone.sum()) - 1
        if msg.name not in self.names:
            self.names.append(msg.name)
        self.name_idx[first] = self.names.index(msg.name)
        self.kind[first] = int(TaskKind.CPU_COMM)
        self.dur[first] = msg.transfer_ns
        self.comm_idx[first] = len(self.g.comms) + len(self.new_comms)
        self.new_comms.append((msg.kind, msg.size_bytes, peer))
        if self.dims is not None:
            self.dims[first] = -1
        self.converted += 1

    def graph(self) -> ExecGraph:
        g, c = self.g, self.g.comms
        k = len(self.new_comms)
        cols = np.array(self.new_comms, dtype=np.int64).reshape(k, 3)
        comms = c.create(
            kind=np.concatenate([c.kind, cols[:, 0].astype(np.int8)]),
            size_bytes=np.concatenate([c.size_bytes, cols[:, 1]]),
            pg_idx=np.concatenate([c.pg_idx, np.full(k, -1, np.int32)]),
            seq_id=np.concatenate([c.seq_id, np.full(k, -1, np.int64)]),
            peer_rank=np.concatenate([c.peer_rank, cols[:, 2].astype(np.int32)]),
            tag=np.concatenate([c.tag, np.full(k, -1, np.int64)]),
            wait_ns=np.concatenate([c.wait_ns, np.zeros(k, np.int64)]),
        )
        tasks = g.tasks.replace(name_idx=self.name_idx, kind=self.kind, dur_ns=self.dur,
                                comm_idx=self.comm_idx)  # fmt: skip
        return g.replace(names=tuple(self.names), tasks=tasks, comms=comms,
                         edges=g.edges.replace(delay_ns=self.delay),
                         task_dims_idx=self.dims)  # fmt: skip


def _sub_stage(
    g: ExecGraph,
    lm: LayerMap,
    where: tuple[int, int, int, int],
    msgs: tuple[Boundary, Boundary],
    new_count: int,
) -> tuple[ExecGraph, int, int]:
    """Sub-stage ``j`` of ``k`` of traced stage ``s`` of ``p`` (``where``), as new stage
    ``k x s + j``: boundary work handed over, layers resized, messages re-addressed. Returns
    the graph, tasks zeroed and messages added."""
    s, j, k, p = where
    new = k * s + j
    recv, send = msgs
    ed = _Editor(g)
    mb = lm.microbatch_groups()
    layers_in: dict[tuple[int, int], list[NDArray[np.int64]]] = {}
    index = {id(x): i for i, x in enumerate(lm.groups)}
    for x in lm.layer_groups():
        if x.parent[0] >= 0:
            layers_in.setdefault(x.parent, []).extend(x.blocks)
    for grp in mb:
        gi = index[id(grp)]
        for b, block in enumerate(grp.blocks):
            inner = layers_in.get((gi, b))
            if not inner:
                raise ConfigError(f"pp: rank {g.rank} has a micro-batch block without layers")
            pre, post = _split_block(g, block, inner)
            if grp.phase == "forward":
                if j > 0 and s == 0:  # the embedding stays on sub-stage 0
                    ed.hand_over(pre, recv, new - 1)
                if j < k - 1 and s == p - 1:  # the head and loss stay on the last sub-stage
                    ed.hand_over(post, send, new + 1)
            else:
                if j < k - 1 and s == p - 1:
                    ed.hand_over(pre, recv, new + 1)
                if j > 0 and s == 0:
                    ed.hand_over(post, send, new - 1)
    out = ed.graph()
    groups = [x for x in lm.layer_groups() if x.phase != "optimizer" or x.count == lm.num_layers]
    out, _ = resize_groups(out, groups, [new_count] * len(groups))
    return out, ed.zeroed, ed.converted


def _readdress(g: ExecGraph, stage: dict[int, int], k: int, new: int, new_pp: int) -> ExecGraph:
    """``g`` as rank ``new`` of ``new_pp``: messages to the traced stage before (after) it go
    to the new stage before (after) it; the job-wide groups span the new ranks."""
    c = g.comms
    me = new // k
    peer = c.peer_rank.copy()
    p2p = np.isin(c.kind, [_SEND, _RECV]) & (peer >= 0)
    old_stage = np.array([stage.get(int(r), -1) for r in peer[p2p].tolist()], dtype=np.int64)
    peer[p2p] = np.where(old_stage < me, new - 1, np.where(old_stage > me, new + 1, peer[p2p]))
    world = tuple(range(new_pp))
    pgs = tuple(
        ProcessGroup(name=pg.name, ranks=world, desc=pg.desc, backend=pg.backend)
        if len(pg.ranks) == len(stage) else pg
        for pg in g.process_groups
    )  # fmt: skip
    return g.replace(comms=c.replace(peer_rank=peer), rank=new, world_size=new_pp,
                     process_groups=pgs)  # fmt: skip


def restage(
    workload: Workload, maps: Sequence[LayerMap], layers: int, new_pp: int
) -> tuple[Workload, dict[str, int]]:
    """``workload`` (a pipeline of ``len(maps)`` stages) as ``new_pp`` stages of
    ``layers / new_pp`` layers each (see the module docstring). Returns the new workload and
    counts for the edit record: ``tasks_zeroed``, ``messages_added``."""
    stage, _ = traced_stages(workload, list(maps), f"pp={new_pp}")
    p = len(stage)
    if new_pp % p:
        raise ConfigError(f"pp={new_pp}: the traced {p} stages split or merge evenly only into "
                          f"a multiple or a divisor of {p}")  # fmt: skip
    if layers % new_pp:
        raise ConfigError(f"pp={new_pp}: layers={layers} do not split evenly into {new_pp} stages")
    k = new_pp // p
    msgs = (Boundary(workload, _RECV), Boundary(workload, _SEND))
    by_rank = {g.rank: (g, lm) for g, lm in zip(workload.graphs, maps, strict=True)}
    out: list[ExecGraph] = []
    zeroed = added = 0
    for rank in sorted(stage, key=stage.__getitem__):
        g, lm = by_rank[rank]
        s = stage[rank]
        for j in range(k):
            g2 = _readdress(g, stage, k, k * s + j, new_pp)
            g2, z, a = _sub_stage(g2, lm, (s, j, k, p), msgs, layers // new_pp)
            out.append(g2)
            zeroed += z
            added += a
    return Workload(tuple(out), workload.diagnostics.copy()), {
        "tasks_zeroed": zeroed,
        "messages_added": added,
    }
