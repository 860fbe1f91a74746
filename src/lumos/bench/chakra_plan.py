"""A Chakra ET as a :class:`~lumos.bench.plan.RankPlan`: ops by class and recorded work.

A Chakra node names an op but holds no arguments to call it with, so what runs is chosen by
the op's class (:func:`lumos.bench.classes.op_class`) and the work the ET recorded:

===========================  ==============================================================
op                           runs as (a :class:`~lumos.bench.plan.WorkCall`)
===========================  ==============================================================
gemm, conv, attention        a matrix product of the recorded FLOPs (square, ``2 n^3``)
with recorded FLOPs
any op with recorded bytes   an element-wise add moving those bytes
memory (view, alloc)         a view: no data moves, as recorded
no recorded work             held for its recorded duration (``emulated``), or skipped
collective, send, recv       a :class:`~lumos.bench.plan.CommCall` of the recorded kind,
                             size, group and peer
===========================  ==============================================================

An ET lumos wrote (``lumos convert``, ``lumos synth sample``, ``lumos estimate --chakra``)
reads back as its execution graph (:func:`lumos.chakra.mapping.from_chakra`); what runs is each
outermost op: an op span on a CPU thread (``aten::linear``, with the FLOPs of the ``addmm``
inside it) or a compute task outside any span (a kernel, a leaf CPU op, a synthetic task). The
graph is replayed once to order them (by predicted start) and put each in its step. An
emulating run also keeps the time each thread spent between ops as recorded (the edge delay
before an op, the framework's overhead): before an op it waits until that long has passed
since the op before it ended, its own overhead included. Another
tool's ET runs node by node in file order, its work from the ``num_ops`` (FLOPs) and
``tensor_size`` (bytes) attributes, as one step ``ProfilerStep#0``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lumos.bench.classes import op_class
from lumos.bench.plan import CommCall, Item, RankPlan, Skips, Step, TensorSpec, WorkCall
from lumos.graph.model import AnnotationKind, CommType, DepKind, ExecGraph, TaskKind

__all__ = ["NO_WORK", "plan_chakra_file", "plan_graph"]

#: The reason an op with no recorded work is skipped (or, emulating, held for its duration).
NO_WORK = "no recorded work (FLOPs or bytes) in the ET"
_COMPUTE = (TaskKind.CPU_OP, TaskKind.KERNEL, TaskKind.MEMCPY, TaskKind.MEMSET)
_COMM_KIND = {CommType.ALL_REDUCE: "all_reduce", CommType.REDUCE: "reduce",
              CommType.ALL_GATHER: "all_gather", CommType.GATHER: "gather",
              CommType.SCATTER: "scatter", CommType.BROADCAST: "broadcast",
              CommType.ALL_TO_ALL: "all_to_all", CommType.REDUCE_SCATTER: "reduce_scatter",
              CommType.REDUCE_SCATTER_BLOCK: "reduce_scatter", CommType.BARRIER: "barrier",
              CommType.SEND: "send", CommType.RECV: "recv"}  # fmt: skip


#: An operator's name (``aten::addmm``, ``fbgemm::...``), not a wrapper's: autograd nodes
#: (``autograd::engine::evaluate_function: ...``) and framework hooks (``torch::autograd::...``,
#: ``torch.distributed.ddp.reducer::...``) hold ops, they are not ops.
_OP_NAME = re.compile(r"^(?!autograd::|torch::|torch\.)[A-Za-z_]\w*::[\w.]+$")


def _is_op_name(name: str) -> bool:
    return _OP_NAME.match(name) is not None


def _work(
    node_id: int, name: str, flops: int, nbytes: int, dur_ns: int, gpu: bool, gap_ns: int = 0
) -> WorkCall:
    cls = op_class(name)
    common: dict[str, Any] = {"on_gpu": gpu, "dur_ns": dur_ns, "gap_ns": max(gap_ns, 0)}
    if cls in ("gemm", "conv", "attention") and flops > 0:
        n = max(1, round((flops / 2) ** (1 / 3)))
        return WorkCall(node_id, name, cls, flops=flops, mkn=(1, n, n, n), **common)
    if nbytes > 0:
        return WorkCall(node_id, name, cls, bytes=nbytes, **common)
    return WorkCall(node_id, name, cls, no_work=cls != "memory", **common)


def _comm(
    g: ExecGraph, task: int, slots: list[TensorSpec], run_ranks: Sequence[int]
) -> CommCall | None:
    c = g.comms
    row = int(g.tasks.comm_idx[task])
    kind = _COMM_KIND.get(CommType(int(c.kind[row])))
    if kind is None:
        return None
    size = max(int(c.size_bytes[row]), 0)
    pg = int(c.pg_idx[row])
    group = g.process_groups[pg].ranks if 0 <= pg < len(g.process_groups) else ()
    peer = int(c.peer_rank[row])
    within = group or tuple(run_ranks)
    if peer >= 0:  # recorded as a global rank; the plan's peers are within their group
        peer = within.index(peer) if peer in within else -1
    per = size // max(len(group) or g.world_size, 1)
    shapes = {"all_gather": (per, size), "reduce_scatter": (size, per)}.get(kind, (size, size))
    ins = _buffer(slots, shapes[0])
    outs = _buffer(slots, shapes[1]) if kind in ("all_gather", "reduce_scatter") else ins
    return CommCall(node_id=task, name=g.names[int(g.tasks.name_idx[task])], kind=kind,
                    inputs=ins, outputs=outs, size_bytes=size, dtype="uint8",
                    group=tuple(group) or None, peer=peer)  # fmt: skip


def _buffer(slots: list[TensorSpec], nbytes: int) -> tuple[int, ...]:
    slots.append(TensorSpec((max(nbytes, 1),), None, "unsigned char", on_gpu=True,
                            storage=-2 - len(slots)))  # fmt: skip
    return (len(slots) - 1,)


def _outer_spans(g: ExecGraph) -> tuple[np.ndarray, list[int]]:
    """Per task, the outermost op span (annotation) holding it (-1 none); and those spans."""
    a = g.annotations
    _, perm = g.processor_order()
    pos = np.empty(g.num_tasks, dtype=np.int64)
    pos[perm] = np.arange(g.num_tasks)
    owner = np.full(g.num_tasks, -1, dtype=np.int64)
    spans = [i for i in np.flatnonzero((a.kind == AnnotationKind.USER) & (a.first_task_idx >= 0))
             .tolist() if _is_op_name(g.names[int(a.name_idx[i])])]  # fmt: skip
    # widest first: a span inside one already placed keeps its owner
    spans.sort(key=lambda i: -(pos[a.last_task_idx[i]] - pos[a.first_task_idx[i]]))
    outer = []
    for i in spans:
        lo, hi = int(pos[a.first_task_idx[i]]), int(pos[a.last_task_idx[i]]) + 1
        tasks = perm[lo:hi]
        if (owner[tasks] >= 0).any():
            continue
        owner[tasks] = i
        outer.append(i)
    launch = g.edges.kind == DepKind.LAUNCH
    owner[g.edges.dst[launch]] = owner[g.edges.src[launch]]
    return owner, outer


def _gaps(g: ExecGraph, owner: np.ndarray) -> np.ndarray:
    """Per task, the recorded overhead before it on its thread (its intra-thread edge delay),
    less the tail of the op span its predecessor ends (a span's time holds its tail)."""
    a, e = g.annotations, g.edges
    out = np.zeros(g.num_tasks, dtype=np.int64)
    thread = e.kind == DepKind.INTRA_THREAD
    out[e.dst[thread]] = e.delay_ns[thread]
    prev = e.src[thread]
    span = owner[prev]
    ends_span = (span >= 0) & (a.last_task_idx[np.maximum(span, 0)] == prev)
    out[e.dst[thread]] -= np.where(ends_span, a.tail_ns[np.maximum(span, 0)], 0)
    return np.maximum(out, 0)


def _inner_work(g: ExecGraph, span: int) -> tuple[int, int]:
    """FLOPs and bytes of ``span`` and the spans nested in it on its thread."""
    a = g.annotations
    same = (
        (a.processor_idx == a.processor_idx[span])
        & (a.ts_ns >= a.ts_ns[span])
        & (a.ts_ns + a.dur_ns <= a.ts_ns[span] + a.dur_ns[span])
    )
    return int(a.flops[same].sum()), int(a.bytes[same].sum())


def plan_graph(
    g: ExecGraph, *, rank: int, run_ranks: Sequence[int], source: str,
    source_ns: Mapping[str, int] | None = None,
) -> RankPlan:  # fmt: skip
    """The plan of one rank's execution graph (see the module docstring)."""
    from lumos.graph.model import Workload
    from lumos.sim import simulate

    result = simulate(Workload((g,)))
    start = result.starts(0)
    owner, outer = _outer_spans(g)
    lo, _hi = result.annotation_spans(0)
    a, t = g.annotations, g.tasks
    gap_before = _gaps(g, owner)
    units: list[tuple[int, Item]] = []
    slots: list[TensorSpec] = []
    skipped, comm_skipped = Skips(), Skips()
    ops_total = comms_total = 0
    for i in outer:
        name = g.names[int(a.name_idx[i])]
        if op_class(name) == "communication":
            continue  # the op that hands a collective over; the collective is its own task
        flops, nbytes = _inner_work(g, i)
        ops_total += 1
        gap = int(gap_before[a.first_task_idx[i]] - a.lead_ns[i])
        units.append((int(lo[i]), _work(i, name, flops, nbytes, int(a.dur_ns[i]), False, gap)))
    for task in range(g.num_tasks):
        kind = int(t.kind[task])
        if kind in (TaskKind.COMM, TaskKind.CPU_COMM) and t.comm_idx[task] >= 0:
            comms_total += 1
            call = _comm(g, task, slots, run_ranks)
            if call is None or (call.group and not set(call.group) <= set(run_ranks)):
                comm_skipped.add("a collective of unknown kind or outside this run",
                                 g.names[int(t.name_idx[task])])  # fmt: skip
                continue
            units.append((int(start[task]), call))
        elif kind in _COMPUTE and owner[task] < 0 and t.event_idx[task] >= -1:
            name = g.names[int(t.name_idx[task])]
            if op_class(name) == "communication":
                continue
            ops_total += 1
            gpu = kind != TaskKind.CPU_OP
            gap = 0 if gpu else int(gap_before[task])
            units.append((int(start[task]),
                          _work(task, name, 0, 0, int(t.dur_ns[task]), gpu, gap)))  # fmt: skip
    return RankPlan(rank=rank, world_size=len(run_ranks), source=source,
                    steps=_steps(g, result, units, source_ns or {}), tensors=tuple(slots),
                    ops_total=ops_total, comms_total=comms_total, skipped=skipped,
                    comm_skipped=comm_skipped, host_only=_host_only(u for _, u in units))  # fmt: skip


def _host_only(items: Any) -> bool:
    """No op recorded on an accelerator (collectives' buffers are made up: they do not say)."""
    return not any(isinstance(it, WorkCall) and it.on_gpu for it in items)


def _steps(g: ExecGraph, result: Any, units: list[tuple[int, Item]],
           source_ns: Mapping[str, int]) -> tuple[Step, ...]:  # fmt: skip
    a = g.annotations
    lo, _ = result.annotation_spans(0)
    steps = sorted((int(lo[i]), g.names[int(a.name_idx[i])])
                   for i in np.flatnonzero(a.kind == AnnotationKind.STEP).tolist()
                   if lo[i] >= 0)  # fmt: skip
    if not steps:
        steps = [(-(2**62), "ProfilerStep#0")]
    starts = np.asarray([s for s, _ in steps], dtype=np.int64)
    per: list[list[Item]] = [[] for _ in steps]
    for at, item in sorted(units, key=lambda u: (u[0], u[1].node_id)):
        k = max(int(np.searchsorted(starts, at, side="right")) - 1, 0)
        per[k].append(item)
    return tuple(Step(name, tuple(items), source_ns.get(name))
                 for (_, name), items in zip(steps, per, strict=True) if items)  # fmt: skip


def _foreign(trace: Any, *, rank: int, run_ranks: Sequence[int]) -> RankPlan:
    """Another tool's Chakra ET, node by node (see the module docstring)."""
    from lumos.chakra.schema import NodeType

    slots: list[TensorSpec] = []
    items: list[Item] = []
    skipped, comm_skipped = Skips(), Skips()
    ops_total = comms_total = 0
    kinds = {int(k): v for k, v in _COMM_KIND.items() if 0 <= int(k) < 100}
    for idx in range(trace.num_nodes):
        ntype = int(trace.node_type[idx])
        name = trace.name_of(idx)
        attrs = {x.name: x.value for x in trace.attrs_of(idx)}
        dur_ns = int(trace.duration_micros[idx]) * 1000
        if ntype == NodeType.COMP_NODE:
            ops_total += 1
            items.append(_work(idx, name, int(attrs.get("num_ops", 0) or 0),
                               int(attrs.get("tensor_size", 0) or 0), dur_ns,
                               not attrs.get("is_cpu_op", False)))  # fmt: skip
        elif ntype in (NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE):
            comms_total += 1
            size = int(attrs.get("comm_size", 0) or 0)
            if ntype == NodeType.COMM_COLL_NODE:
                kind = kinds.get(int(attrs.get("comm_type", -1)))
                peer = -1
            else:
                kind = "send" if ntype == NodeType.COMM_SEND_NODE else "recv"
                peer = int(attrs.get("comm_dst" if kind == "send" else "comm_src", -1))
            if kind is None or (peer >= 0 and peer not in run_ranks):
                comm_skipped.add("a collective of unknown kind or outside this run", name)
                continue
            per = size // max(len(run_ranks), 1)
            ins = _buffer(slots, per if kind == "all_gather" else size)
            outs = (
                _buffer(slots, size if kind == "all_gather" else per)
                if kind in ("all_gather", "reduce_scatter")
                else ins
            )
            items.append(CommCall(node_id=idx, name=name, kind=kind, inputs=ins, outputs=outs,
                                  size_bytes=size, dtype="uint8",
                                  peer=list(run_ranks).index(peer) if peer >= 0 else -1))  # fmt: skip
    return RankPlan(rank=rank, world_size=len(run_ranks), source=str(trace.path),
                    steps=(Step("ProfilerStep#0", tuple(items)),) if items else (),
                    tensors=tuple(slots), ops_total=ops_total, comms_total=comms_total,
                    skipped=skipped, comm_skipped=comm_skipped, host_only=_host_only(items),
                    notes=("not written by lumos: nodes run in file order, as one step",))  # fmt: skip


def plan_chakra_file(
    path: str, *, rank: int, run_ranks: Sequence[int], source_ns: Mapping[str, int] | None = None
) -> RankPlan:
    """The plan of one rank's Chakra ET file (see the module docstring)."""
    from lumos.chakra.io import read_chakra
    from lumos.chakra.mapping import from_chakra, is_lumos_trace
    from lumos.chakra.trace import ChakraTrace

    trace = read_chakra(path)
    assert isinstance(trace, ChakraTrace)  # a file path reads as one trace
    if not is_lumos_trace(trace):
        return _foreign(trace, rank=rank, run_ranks=run_ranks)
    world = max(len(run_ranks), max(run_ranks) + 1)
    g = from_chakra(trace, world_size=world)
    return plan_graph(g, rank=rank, run_ranks=run_ranks, source=path, source_ns=source_ns)
