"""Per-rank analysis tables of a run, recorded or simulated (what HTA and TraceLens users expect).

Each function takes a :class:`~lumos.report.timeline.Timeline` and returns a
:class:`~lumos.report.table.Table` with ``view`` (``measured``/``predicted``) and ``rank`` first.
Only tasks that start inside a rank's window (its ProfilerSteps) are counted.

Words, as everywhere in lumos (the breakdown uses the same ones):

* **compute** is any GPU task that is not communication (kernels, copies, memsets);
  **communication** is a collective or p2p kernel (NCCL/RCCL) or a host collective span (gloo).
* **exposed** time of a compute task is the part of it during which no communication runs on
  its device; of a communication task, the part during which no compute runs. **overlapped**
  is the rest: time hidden behind the other kind of work.
* a stream is **idle** when it runs nothing; each idle gap is charged to what the next task
  on the stream waited for last: its launch (**host_bound**: the CPU had not issued it yet),
  another stream's compute (**other_stream**), communication (**comm_wait**: an event on a
  communication kernel, or a collective), or nothing found (**other**, which also holds the
  time before the stream's first task and after its last one in the window).

=================  ===========================================================================
table              one row per
=================  ===========================================================================
``kernels``        GPU kernel name: count, total, mean, share of GPU time, exposed, class
``ops``            op that launched GPU work (see :mod:`lumos.report.ops`): calls, kernels, GPU
                   time, exposed, share, host time of the op's spans
``streams``        GPU stream: busy, idle split into host_bound / other_stream / comm_wait / other
``collectives``    communication task: size, duration, overlapped and exposed, algorithm
                   bandwidth (size / duration), recorded wait for peers
``steps``          ProfilerStep: its duration
=================  ===========================================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_tasks import START
from lumos.graph.model import (
    COMM_TASK_KINDS,
    GPU_TASK_KINDS,
    Annotations,
    CommType,
    DepKind,
    ExecGraph,
    ProcessorKind,
    TaskKind,
)
from lumos.report.metrics import interval_union
from lumos.report.ops import kernel_class, task_ops
from lumos.report.table import Table
from lumos.report.timeline import Timeline

__all__ = [
    "collectives_table",
    "kernels_table",
    "ops_table",
    "ready_times",
    "steps_table",
    "streams_table",
]

_GPU = np.array(GPU_TASK_KINDS, np.int8)
_COMM = np.array(COMM_TASK_KINDS, np.int8)


def _covered(us: NDArray[np.int64], ue: NDArray[np.int64], s: NDArray[Any], e: NDArray[Any]
             ) -> NDArray[np.int64]:  # fmt: skip
    """Per interval ``[s, e)``, how much of it the disjoint sorted union ``[us, ue)`` covers."""
    cum = np.r_[0, np.cumsum(ue - us)].astype(np.int64)

    def upto(x: NDArray[Any]) -> NDArray[np.int64]:
        k = np.searchsorted(us, x, side="right") - 1
        kk = np.maximum(k, 0)
        inside = np.minimum(x, ue[kk]) - us[kk] if len(us) else np.zeros(len(x), np.int64)
        return np.where(k >= 0, cum[kk] + inside, 0).astype(np.int64)

    return upto(np.asarray(e, np.int64)) - upto(np.asarray(s, np.int64))


def _gpu_selection(tl: Timeline, gi: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """GPU tasks (host collective spans on a CPU-only rank) starting in the window, and the
    exposed time of each (see the module docstring)."""
    g = tl.graphs[gi]
    t = g.tasks
    s, e = tl.starts[gi], tl.ends[gi]
    t0, t1 = tl.windows[gi]
    gpu = np.isin(t.kind, _GPU)
    if not gpu.any():  # gloo: host ops are the compute, host collective spans the comm
        gpu = np.isin(t.kind, (int(TaskKind.CPU_OP), int(TaskKind.CPU_COMM)))
    sel = np.flatnonzero(gpu & (s >= t0) & (s < t1) & (t.event_idx != START))
    comm = np.isin(t.kind[sel], _COMM)
    exposed = np.zeros(len(sel), np.int64)
    dev = g.processors.device[t.processor_idx[sel]]
    for d in np.unique(dev).tolist():
        on = dev == d
        for mine, other in ((on & ~comm, on & comm), (on & comm, on & ~comm)):
            us, ue = interval_union(s[sel[other]], e[sel[other]])
            i = sel[mine]
            exposed[mine] = (e[i] - s[i]) - _covered(us, ue, s[i], e[i])
    return sel, exposed


def _grouped(keys: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, inv.reshape(-1)


def kernels_table(tl: Timeline) -> Table:
    """Per rank and kernel name, busiest first: ``count, total_ns, mean_ns, share`` (of the
    rank's GPU time), ``exposed_ns, exposed_share`` (of the kernel's own time), ``class``."""
    cols = ("view", "rank", "kernel", "class", "count", "total_ns", "mean_ns", "share",
            "exposed_ns", "exposed_share")  # fmt: skip
    rows: list[tuple[Any, ...]] = []
    for gi, g in enumerate(tl.graphs):
        sel, exposed = _gpu_selection(tl, gi)
        dur = tl.ends[gi][sel] - tl.starts[gi][sel]
        names, inv = _grouped(g.tasks.name_idx[sel].astype(np.int64))
        tot = np.bincount(inv, dur, len(names)).astype(np.int64)
        exp = np.bincount(inv, exposed, len(names)).astype(np.int64)
        cnt = np.bincount(inv, minlength=len(names))
        kind = np.zeros(len(names), np.int64)
        kind[inv] = g.tasks.kind[sel]
        all_ns = max(int(tot.sum()), 1)
        for k in np.lexsort((names, -tot)).tolist():
            name = g.names[int(names[k])]
            rows.append((tl.view, g.rank, name, kernel_class(name, int(kind[k])), int(cnt[k]),
                         int(tot[k]), int(tot[k]) / int(cnt[k]), int(tot[k]) / all_ns,
                         int(exp[k]), int(exp[k]) / max(int(tot[k]), 1)))  # fmt: skip
    return Table("kernels", cols, rows)


def ops_table(tl: Timeline) -> Table:
    """Per rank and op that launched GPU work, most GPU time first: ``calls`` (op instances
    that launched any), ``kernels``, ``gpu_ns``, ``mean_gpu_ns`` (per call), ``share`` (of the
    rank's GPU time), ``exposed_ns``; where the recorded shapes say what the op computed (see
    :mod:`lumos.ingest.op_work`): ``flops`` and ``bytes`` of those calls and the rates their
    GPU time achieved, ``tflops`` and ``gb_per_s`` (empty when unknown). GPU work whose launch
    is not in the trace is ``(unattributed)``."""
    cols = ("view", "rank", "op", "calls", "kernels", "gpu_ns", "mean_gpu_ns", "share",
            "exposed_ns", "flops", "tflops", "bytes", "gb_per_s")  # fmt: skip
    rows: list[tuple[Any, ...]] = []
    for gi, g in enumerate(tl.graphs):
        sel, exposed = _gpu_selection(tl, gi)
        op, inst = task_ops(g)
        dur = tl.ends[gi][sel] - tl.starts[gi][sel]
        keys, inv = _grouped(op[sel].astype(np.int64))
        tot = np.bincount(inv, dur, len(keys)).astype(np.int64)
        exp = np.bincount(inv, exposed, len(keys)).astype(np.int64)
        cnt = np.bincount(inv, minlength=len(keys))
        pairs, pair_of = np.unique(np.c_[inv, inst[sel]], axis=0, return_inverse=True)
        pair_ns = np.bincount(pair_of.reshape(-1), dur, len(pairs))
        calls = np.bincount(pairs[:, 0], minlength=len(keys))
        work = [
            _per_op(g.annotations, pairs, pair_ns, col, len(keys)) for col in ("flops", "bytes")
        ]
        all_ns = max(int(tot.sum()), 1)
        label = [g.names[int(k)] if k >= 0 else "(unattributed)" for k in keys.tolist()]
        for k in sorted(range(len(keys)), key=lambda k: (-int(tot[k]), label[k])):
            (fl, fl_ns), (by, by_ns) = ((int(w[0][k]), int(w[1][k])) for w in work)
            rows.append((tl.view, g.rank, label[k], int(calls[k]), int(cnt[k]), int(tot[k]),
                         int(tot[k]) / max(int(calls[k]), 1), int(tot[k]) / all_ns,
                         int(exp[k]), fl, fl / fl_ns / 1e3 if fl_ns else None, by,
                         by / by_ns if by_ns else None))  # fmt: skip
    return Table("ops", cols, rows)


def _per_op(
    ann: Annotations, pairs: NDArray[np.int64], pair_ns: NDArray[Any], col: str, n: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per op: the ``col`` work (flops or bytes) of its calls that know it, and their GPU time.
    ``pairs`` are ``(op, call)`` with ``pair_ns`` GPU time each; a call below ``len(ann)`` is a
    span whose work the annotation holds."""
    call = pairs[:, 1]
    is_span = (call >= 0) & (call < len(ann))
    work = np.zeros(len(pairs), np.int64)
    work[is_span] = getattr(ann, col)[call[is_span]]
    known = work > 0
    return (
        np.bincount(pairs[:, 0], work, n).astype(np.int64),
        np.bincount(pairs[:, 0], np.where(known, pair_ns, 0), n).astype(np.int64),
    )


def _binding_edges(g: ExecGraph, s: NDArray[np.int64], e: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per task, the in-edge that released it last (largest ``end(src) + delay``), -1 none."""
    ed = g.edges
    ready = e[ed.src] + ed.delay_ns
    order = np.lexsort((ready, ed.dst))
    dst = ed.dst[order]
    last = np.r_[dst[1:] != dst[:-1], True] if len(dst) else np.zeros(0, bool)
    out = np.full(g.num_tasks, -1, np.int64)
    out[dst[last]] = order[last]
    return out


def ready_times(g: ExecGraph, s: NDArray[np.int64], e: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per task, when it could have started: the latest of its in-edges' ``end(src) + delay``
    and the end of the task before it on its processor (its start when it has neither, and
    never after its start). For a collective this is the rank's *arrival*: a simulated
    collective starts on every rank at the last arrival."""
    ed = g.edges
    ready = np.full(g.num_tasks, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(ready, ed.dst, e[ed.src] + ed.delay_ns)
    _, perm = g.processor_order()
    same = np.diff(g.tasks.processor_idx[perm]) == 0 if len(perm) else np.zeros(0, bool)
    prev, nxt = perm[:-1][same], perm[1:][same]
    ready[nxt] = np.maximum(ready[nxt], e[prev])
    return np.where(ready == np.iinfo(np.int64).min, s, np.minimum(ready, s))


def streams_table(tl: Timeline) -> Table:
    """Per rank and GPU stream: ``window_ns, busy_ns, idle_ns`` and the idle split
    ``host_bound_ns + other_stream_ns + comm_wait_ns + other_ns = idle_ns`` (see the module
    docstring), each gap clipped to the window."""
    cols = ("view", "rank", "stream", "window_ns", "busy_ns", "idle_ns", "host_bound_ns",
            "other_stream_ns", "comm_wait_ns", "other_ns")  # fmt: skip
    rows: list[tuple[Any, ...]] = []
    for gi, g in enumerate(tl.graphs):
        t, p = g.tasks, g.processors
        s, e = tl.starts[gi], tl.ends[gi]
        t0, t1 = tl.windows[gi]
        bind = _binding_edges(g, s, e)
        ed = g.edges
        ptr, perm = g.processor_order()
        for q in np.flatnonzero(p.kind == int(ProcessorKind.STREAM)).tolist():
            tasks = perm[ptr[q] : ptr[q + 1]]
            tasks = tasks[t.event_idx[tasks] != START]
            cs, ce = np.clip(s[tasks], t0, t1), np.clip(e[tasks], t0, t1)
            busy = int((ce - cs).sum())
            gap = np.maximum(cs[1:] - ce[:-1], 0)
            b = bind[tasks[1:]]
            kind = np.where(b >= 0, ed.kind[np.maximum(b, 0)], -1)
            src_comm = np.isin(t.kind[ed.src[np.maximum(b, 0)]], _COMM) & (b >= 0)
            host = kind == int(DepKind.LAUNCH)
            cwait = ((kind == int(DepKind.INTER_STREAM)) & src_comm) | np.isin(
                kind, (int(DepKind.COLLECTIVE), int(DepKind.P2P))
            )
            other_stream = (kind == int(DepKind.INTER_STREAM)) & ~src_comm
            window = t1 - t0
            idle = window - busy
            split = [int(gap[m].sum()) for m in (host, other_stream, cwait)]
            rows.append((tl.view, g.rank, p.label[q], window, busy, idle, *split,
                         idle - sum(split)))  # fmt: skip
    return Table("streams", cols, rows)


def collectives_table(tl: Timeline) -> Table:
    """Per communication task in the window, in start order: ``collective`` (its type),
    ``pg``, ``seq``, ``size_bytes`` (-1 unknown), ``start_ns`` (from the window start),
    ``dur_ns``, ``overlapped_ns`` / ``exposed_ns`` against compute on its device,
    ``overlap_share``, ``algbw_gb_per_s`` (size / duration; empty when the size is unknown)
    and ``recorded_wait_ns`` (the part of the recorded kernel spent waiting for peers)."""
    cols = ("view", "rank", "index", "name", "collective", "pg", "seq", "size_bytes",
            "start_ns", "dur_ns", "overlapped_ns", "exposed_ns", "overlap_share",
            "algbw_gb_per_s", "recorded_wait_ns")  # fmt: skip
    rows: list[tuple[Any, ...]] = []
    for gi, g in enumerate(tl.graphs):
        t, c = g.tasks, g.comms
        sel, exposed = _gpu_selection(tl, gi)
        comm = np.isin(t.kind[sel], _COMM)
        s, e = tl.starts[gi], tl.ends[gi]
        idx, exp = sel[comm], exposed[comm]
        order = np.lexsort((idx, s[idx]))
        for n, k in enumerate(order.tolist()):
            i = int(idx[k])
            dur = int(e[i] - s[i])
            ci = int(t.comm_idx[i])
            size = int(c.size_bytes[ci]) if ci >= 0 and c.size_bytes[ci] > 0 else -1
            ctype = CommType(int(c.kind[ci])).name.lower() if ci >= 0 else "unknown"
            rows.append((
                tl.view, g.rank, n, g.task_name(i), ctype,
                g.process_group_name(int(c.pg_idx[ci])) if ci >= 0 else "",
                int(c.seq_id[ci]) if ci >= 0 else -1, size, int(s[i]) - tl.windows[gi][0], dur,
                dur - int(exp[k]), int(exp[k]), (dur - int(exp[k])) / dur if dur else 0.0,
                size / dur if size > 0 and dur > 0 else None,
                int(c.wait_ns[ci]) if ci >= 0 else 0,
            ))  # fmt: skip
    return Table("collectives", cols, rows)


def steps_table(tl: Timeline) -> Table:
    """Per rank and ProfilerStep: ``step, dur_ns``."""
    rows = [(tl.view, g.rank, name, ns) for g, st in zip(tl.graphs, tl.steps, strict=True)
            for name, ns in st]  # fmt: skip
    return Table("steps", ("view", "rank", "step", "dur_ns"), rows)
