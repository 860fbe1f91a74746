"""One training step of one rank with every name taken out: the structure a synthetic model keeps.

A :class:`Skeleton` holds the tasks of one step (processor slot, kind, op class, symbol), every
dependency between them, the runtime waits, the communication records (type, size, process
group, relative peer and sequence number), the step span and the layer groups found in it. It
holds no durations and no delays: those are drawn from the model's fitted distributions, keyed
by the tasks' *symbols*. A symbol is an anonymous integer for one distinct (op class, op name,
recorded shapes) of the sources: tasks that ran the same op on the same shapes share a
distribution; the names themselves never leave the fitting process.

Which tasks belong to step ``s`` (its window runs from the step's recorded start to the next
step's start; the last step ends with its span):

* a CPU task, by its recorded start;
* a GPU task, by the step of the runtime call that launched it (its ``LAUNCH`` edge), else by
  its recorded start.

Dependencies and waits that cross the window are left out (the sampler joins consecutive steps
by program order); each processor's ``<start>`` anchor belongs to no step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_tasks import START
from lumos.graph.kinds import AnnotationKind, DepKind
from lumos.graph.model import ExecGraph

__all__ = ["LayerSpec", "Skeleton", "extract_step", "step_of_tasks"]


@dataclass(frozen=True)
class LayerSpec:
    """A layer group of the step: ``count`` blocks of thread tasks (skeleton indices)."""

    proc: int
    level: str
    phase: str
    blocks: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, eq=False)
class Skeleton:
    """One step of one rank, name-free (see the module docstring). Tasks are listed in
    ``(proc, order)`` order; ``sym`` indexes the model's symbol table."""

    proc_kind: NDArray[np.int8]
    proc_device: NDArray[np.int32]
    proc: NDArray[np.int32]
    kind: NDArray[np.int8]
    cls: NDArray[np.int16]
    sym: NDArray[np.int32]
    edge_src: NDArray[np.int32]
    edge_dst: NDArray[np.int32]
    edge_kind: NDArray[np.int8]
    wait_task: NDArray[np.int32]
    wait_kind: NDArray[np.int8]
    wait_target: NDArray[np.int32]
    wait_device: NDArray[np.int32]
    wait_record: NDArray[np.int32]
    comm_task: NDArray[np.int32]
    comm_kind: NDArray[np.int8]
    comm_size: NDArray[np.int64]
    comm_pg: NDArray[np.int32]
    comm_seq: NDArray[np.int64]  # relative to the step's first per group (recorded order if none)
    comm_peer: NDArray[np.int32]  # peer - rank; 0 = none (a rank never sends to itself)
    comm_tag: NDArray[np.int64]
    #: Bin sets, one row per source step of this structure: where each task's duration, edge's
    #: delay, collective's wait sat in its distribution (:func:`lumos.synth.sketch.rank_bins`),
    #: and per processor the bin of the program-order gap from the previous step into this one.
    dur_bin: NDArray[np.int8]  # (sets, tasks)
    delay_bin: NDArray[np.int8]  # (sets, edges)
    wait_bin: NDArray[np.int8]  # (sets, collectives)
    join_bin: NDArray[np.int8]  # (sets, processors)
    step_proc: int
    step_first: int
    step_last: int
    layers: tuple[LayerSpec, ...] = ()

    @property
    def num_tasks(self) -> int:
        return len(self.proc)

    _ARRAYS = (
        "proc_kind", "proc_device", "proc", "kind", "cls", "sym", "edge_src", "edge_dst",
        "edge_kind", "wait_task", "wait_kind", "wait_target", "wait_device", "wait_record",
        "comm_task", "comm_kind", "comm_size", "comm_pg", "comm_seq", "comm_peer", "comm_tag",
        "dur_bin", "delay_bin", "wait_bin", "join_bin",
    )  # fmt: skip

    @property
    def bin_sets(self) -> int:
        return int(self.dur_bin.shape[0])

    def shape_key(self) -> bytes:
        """Bytes equal for two skeletons of the same structure, whatever their bins."""
        parts = [np.ascontiguousarray(getattr(self, k)).tobytes() for k in self._ARRAYS
                 if not k.endswith("_bin")]  # fmt: skip
        parts.append(repr((self.step_proc, self.step_first, self.step_last)).encode())
        return b"\x00".join(parts)

    def structure_key(self) -> bytes:
        """Bytes equal for two skeletons with the same structure (ranks that can share one)."""
        parts = [np.ascontiguousarray(getattr(self, k)).tobytes() for k in self._ARRAYS]
        parts.append(repr((self.step_proc, self.step_first, self.step_last, self.layers)).encode())
        return b"\x00".join(parts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k).tolist() for k in self._ARRAYS}
        out["step"] = [self.step_proc, self.step_first, self.step_last]
        out["layers"] = [
            {
                "proc": s.proc,
                "level": s.level,
                "phase": s.phase,
                "blocks": [list(b) for b in s.blocks],
            }
            for s in self.layers
        ]
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Skeleton:
        dtypes = {f: np.dtype(t) for f, t in _DTYPES.items()}
        arrays = {k: np.asarray(d[k], dtype=dtypes[k]) for k in cls._ARRAYS}
        n = {
            "dur_bin": len(arrays["proc"]),
            "delay_bin": len(arrays["edge_src"]),
            "wait_bin": len(arrays["comm_task"]),
            "join_bin": len(arrays["proc_kind"]),
        }
        for k, width in n.items():  # (sets, width), also when width is 0
            arrays[k] = arrays[k].reshape(-1, width) if width else arrays[k].reshape(
                max(len(d[k]), 1), 0)  # fmt: skip
        sp, sf, sl = (int(x) for x in d["step"])
        layers = tuple(
            LayerSpec(int(s["proc"]), str(s["level"]), str(s["phase"]),
                      tuple(tuple(int(i) for i in b) for b in s["blocks"]))
            for s in d.get("layers", [])
        )  # fmt: skip
        return cls(**arrays, step_proc=sp, step_first=sf, step_last=sl, layers=layers)


_DTYPES = {
    "proc_kind": "int8", "proc_device": "int32", "proc": "int32", "kind": "int8",
    "cls": "int16", "sym": "int32", "edge_src": "int32", "edge_dst": "int32",
    "edge_kind": "int8", "wait_task": "int32", "wait_kind": "int8", "wait_target": "int32",
    "wait_device": "int32", "wait_record": "int32", "comm_task": "int32", "comm_kind": "int8",
    "comm_size": "int64", "comm_pg": "int32", "comm_seq": "int64", "comm_peer": "int32",
    "comm_tag": "int64", "dur_bin": "int8", "delay_bin": "int8", "wait_bin": "int8",
    "join_bin": "int8",
}  # fmt: skip


def step_of_tasks(g: ExecGraph) -> NDArray[np.int32]:
    """Per task, its step (0-based in time order, see the module docstring), -1 for none."""
    t, a = g.tasks, g.annotations
    rows = np.flatnonzero(a.kind == int(AnnotationKind.STEP))
    out = np.full(g.num_tasks, -1, dtype=np.int32)
    if len(rows) == 0:
        return out
    procs, counts = np.unique(a.processor_idx[rows], return_counts=True)
    rows = rows[a.processor_idx[rows] == procs[np.argmax(counts)]]
    rows = rows[np.argsort(a.ts_ns[rows], kind="stable")]
    starts = a.ts_ns[rows]
    end = int(a.ts_ns[rows[-1]] + a.dur_ns[rows[-1]])
    s = np.searchsorted(starts, t.ts_ns, side="right") - 1
    s[(t.ts_ns >= end) | (t.event_idx == START)] = -1
    out[:] = s
    e = g.edges
    launch = e.kind == int(DepKind.LAUNCH)
    out[e.dst[launch]] = out[e.src[launch]]
    return out


def extract_step(
    g: ExecGraph,
    step: NDArray[np.int32],
    s: int,
    sym: NDArray[np.int32],
    cls: NDArray[np.int16],
    layers: tuple[tuple[int, str, str, tuple[NDArray[np.int64], ...]], ...] = (),
) -> tuple[Skeleton, tuple[NDArray[np.int64], ...]]:
    """The skeleton of step ``s`` of ``g`` (``step`` from :func:`step_of_tasks`; ``sym`` and
    ``cls`` per task of ``g``). ``layers`` are the step's layer groups as ``(processor, level,
    phase, blocks of task indices of g)``; blocks losing tasks to the window are left out.
    Also returns which tasks, edges and collective tasks of ``g`` the skeleton's tasks, edges
    and collectives are, and per processor the program-order edge entering the step (-1 for
    none): its quantile bins are left zero for the caller to fill."""
    t = g.tasks
    sel = np.flatnonzero(step == s)
    sel = sel[np.lexsort((t.order[sel], t.processor_idx[sel]))]
    local = np.full(g.num_tasks, -1, dtype=np.int64)
    local[sel] = np.arange(len(sel))
    e = g.edges
    ek = (local[e.src] >= 0) & (local[e.dst] >= 0)
    w = g.waits
    wk = local[w.task_idx] >= 0
    has_rec = w.record_task_idx >= 0
    wk &= ~has_rec | (local[np.where(has_rec, w.record_task_idx, 0)] >= 0)
    comm_tasks = sel[t.comm_idx[sel] >= 0]
    rows = t.comm_idx[comm_tasks]
    c = g.comms
    seq = c.seq_id[rows].copy()
    for pg in np.unique(c.pg_idx[rows]).tolist():
        m = (c.pg_idx[rows] == pg) & (seq >= 0)
        if m.any():
            seq[m] -= seq[m].min()
        # unnumbered collectives pair up across ranks by recorded start within their group
        # (lumos.graph.algorithms.match_collectives); a sample has no recording to order
        # them by (its collectives sit on several threads), so they get that order as numbers
        free = np.flatnonzero((c.pg_idx[rows] == pg) & (seq < 0))
        if len(free) and not m.any():
            by_start = free[np.lexsort((comm_tasks[free], t.ts_ns[comm_tasks[free]]))]
            seq[by_start] = np.arange(len(free))
    peer = np.where(c.peer_rank[rows] >= 0, c.peer_rank[rows] - g.rank, 0)
    a = g.annotations
    srows = np.flatnonzero((a.kind == int(AnnotationKind.STEP)) & (a.first_task_idx >= 0))
    srows = srows[np.argsort(a.ts_ns[srows], kind="stable")]
    if len(sel) == 0:
        raise ValueError(f"step {s} of rank {g.rank} holds no task")
    mine = [r for r in srows.tolist() if local[a.first_task_idx[r]] >= 0]
    if mine:
        r = mine[0]
        step_span = (int(a.processor_idx[r]), int(local[a.first_task_idx[r]]),
                     int(local[a.last_task_idx[r]]))  # fmt: skip
        if step_span[2] < 0:  # the span's last task fell outside the window
            on = np.flatnonzero(t.processor_idx[sel] == step_span[0])
            step_span = (step_span[0], step_span[1], int(on[-1]))
    else:
        p = int(t.processor_idx[sel[0]])
        on = np.flatnonzero(t.processor_idx[sel] == p)
        step_span = (p, int(on[0]), int(on[-1]))
    specs = []
    for proc, level, phase, blocks in layers:
        lb = [local[b] for b in blocks]
        if all((x >= 0).all() for x in lb):
            specs.append(LayerSpec(proc, level, phase, tuple(tuple(x.tolist()) for x in lb)))
    procs = g.processors
    return Skeleton(
        proc_kind=procs.kind.copy(),
        proc_device=procs.device.copy(),
        proc=t.processor_idx[sel],
        kind=t.kind[sel],
        cls=cls[sel],
        sym=sym[sel],
        edge_src=local[e.src[ek]].astype(np.int32),
        edge_dst=local[e.dst[ek]].astype(np.int32),
        edge_kind=e.kind[ek],
        wait_task=local[w.task_idx[wk]].astype(np.int32),
        wait_kind=w.kind[wk],
        wait_target=w.target_processor_idx[wk],
        wait_device=w.device[wk],
        wait_record=np.where(has_rec[wk], local[np.where(has_rec, w.record_task_idx, 0)][wk],
                             -1).astype(np.int32),
        comm_task=local[comm_tasks].astype(np.int32),
        comm_kind=c.kind[rows],
        comm_size=c.size_bytes[rows],
        comm_pg=c.pg_idx[rows],
        comm_seq=seq,
        comm_peer=peer.astype(np.int32),
        comm_tag=c.tag[rows],
        dur_bin=np.zeros((1, len(sel)), np.int8),
        delay_bin=np.zeros((1, int(ek.sum())), np.int8),
        wait_bin=np.zeros((1, len(comm_tasks)), np.int8),
        join_bin=np.zeros((1, len(procs.kind)), np.int8),
        step_proc=step_span[0],
        step_first=step_span[1],
        step_last=step_span[2],
        layers=tuple(specs),
    ), (sel, np.flatnonzero(ek), comm_tasks, _joins(g, local))  # fmt: skip


def _joins(g: ExecGraph, local: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per processor, the program-order edge from outside the step into its first task there."""
    e = g.edges
    intra = np.isin(e.kind, (int(DepKind.INTRA_THREAD), int(DepKind.INTRA_STREAM)))
    into = np.flatnonzero(intra & (local[e.src] < 0) & (local[e.dst] >= 0))
    out = np.full(len(g.processors), -1, dtype=np.int64)
    out[g.tasks.processor_idx[e.dst[into]]] = into
    return out
