"""Re-timing edits on an execution graph: pure functions, graph in, new graph out.

:func:`scale_by_name` answers "what if these ran ``f`` times as long": every task whose name
matches, and every *CPU-only span* whose name matches (a parent op kept as a USER annotation
that launched nothing: ``aten::t``, the data loader, ``zero_grad``) with everything it did: the
tasks inside it and the untraced CPU time between them (the intra-thread delays inside the
span's recorded interval).

=======================  =========================================================
what matches             what is scaled
=======================  =========================================================
a task (leaf op, call,   its duration; for a communication task only its transfer:
kernel, collective)      the waiting for peers (``Comms.wait_ns``) is no cost of it
a CPU-only span          the tasks inside it and the share of each intra-thread
                         delay that lies inside its interval
=======================  =========================================================

Spans that launch GPU work (``aten::layer_norm``, ``deep_ep::...::dispatch``) are left alone:
a pattern written for kernel names (``layer_norm``, ``dispatch``) then scales the kernels it
meant, not the CPU side of the ops that share their names.

Waits (a thread's reaction to being released), launch latencies and GPU gaps are not costs of
the op and are never scaled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.errors import ConfigError
from lumos.graph.model import AnnotationKind, DepKind, ExecGraph, TaskKind

__all__ = ["ScaleRecord", "scale_by_name", "slow_down"]


@dataclass(frozen=True)
class ScaleRecord:
    """What one pattern changed: tasks re-timed, spans matched, delays re-timed."""

    pattern: str
    factor: float
    tasks: int
    spans: int
    delays: int


def scale_by_name(
    graph: ExecGraph, scale: Sequence[tuple[str, float]]
) -> tuple[ExecGraph, tuple[ScaleRecord, ...]]:
    """Apply each ``(regex, factor)`` (see the module docstring); factors of several patterns
    that select the same task multiply. A pattern that selects nothing is a
    :class:`~lumos.errors.ConfigError`: a typo would otherwise answer with the unchanged run."""
    t = graph.tasks
    factor = np.ones(graph.num_tasks, dtype=np.float64)
    e = graph.edges
    intra = np.flatnonzero(e.kind == int(DepKind.INTRA_THREAD))
    gap_lo = t.ts_ns[e.src[intra]] + t.dur_ns[e.src[intra]]
    gap_hi = t.ts_ns[e.dst[intra]]
    delay = e.delay_ns[intra].astype(np.float64)
    records = []
    cpu_only = _cpu_only_spans(graph)
    for pattern, f in scale:
        match = re.compile(pattern).search
        tasks = graph.name_mask(match)
        a = graph.annotations
        span_names = np.fromiter((bool(match(n)) for n in graph.names), bool, len(graph.names))
        spans = np.flatnonzero((a.kind == int(AnnotationKind.USER)) & span_names[a.name_idx])
        spans = spans[cpu_only[spans]]
        covered = tasks.copy()
        inside = np.zeros(intra.size, dtype=np.int64)
        for p in np.unique(a.processor_idx[spans]).tolist():
            sel = spans[a.processor_idx[spans] == p]
            lo, hi = _union(a.ts_ns[sel], a.ts_ns[sel] + a.dur_ns[sel])
            on_p = t.processor_idx == p
            covered |= on_p & (_measure(lo, hi, t.ts_ns + t.dur_ns) - _measure(lo, hi, t.ts_ns)
                               >= t.dur_ns)  # fmt: skip
            e_on_p = t.processor_idx[e.src[intra]] == p
            inside[e_on_p] = _measure(lo, hi, gap_hi[e_on_p]) - _measure(lo, hi, gap_lo[e_on_p])
        n_tasks = int(covered.sum())
        if n_tasks == 0 and spans.size == 0:
            raise ConfigError(f"--scale {pattern!r} matches no task of rank {graph.rank}")
        factor[covered] *= f
        part = np.minimum(inside, np.maximum(delay, 0))
        delay = delay + (f - 1.0) * part
        records.append(ScaleRecord(pattern, f, n_tasks, int(spans.size), int((part > 0).sum())))
    row = t.comm_idx
    wait = np.zeros(graph.num_tasks, dtype=np.int64)
    if len(graph.comms):
        wait = np.where(row >= 0, graph.comms.wait_ns[np.maximum(row, 0)], 0)
    wait = np.minimum(wait, t.dur_ns)
    dur = np.rint(wait + (t.dur_ns - wait) * factor).astype(np.int64)
    new_delay = e.delay_ns.copy()
    new_delay[intra] = np.rint(delay).astype(np.int64)
    out = graph.with_durations(dur).replace(edges=e.replace(delay_ns=new_delay))
    return out, tuple(records)


def _cpu_only_spans(graph: ExecGraph) -> NDArray[np.bool_]:
    """Per annotation: every task it covers (first to last, in processor order) is a CPU op,
    or it covers none."""
    a, t = graph.annotations, graph.tasks
    _, perm = graph.processor_order()
    pos = np.empty(graph.num_tasks, dtype=np.int64)
    pos[perm] = np.arange(graph.num_tasks)
    other = np.concatenate(([0], np.cumsum(t.kind[perm] != int(TaskKind.CPU_OP))))
    has = a.first_task_idx >= 0
    lo = pos[np.maximum(a.first_task_idx, 0)]
    hi = pos[np.maximum(a.last_task_idx, 0)] + 1
    same = t.processor_idx[np.maximum(a.last_task_idx, 0)] == a.processor_idx
    cpu_only = has & same & (lo < hi) & (other[hi] - other[lo] == 0)
    return cpu_only | ~has  # a span with no task inside launched nothing


def _union(
    lo: NDArray[np.int64], hi: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Disjoint sorted intervals covering the union of ``[lo, hi)``."""
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.ones(lo.size, dtype=bool)
    new[1:] = lo[1:] > reach[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], lo.size) - 1
    return lo[starts], reach[ends]


def _measure(
    lo: NDArray[np.int64], hi: NDArray[np.int64], x: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Length of the union of disjoint sorted ``[lo, hi)`` that lies before each ``x``."""
    full = np.concatenate(([0], np.cumsum(hi - lo)))
    k = np.searchsorted(lo, x, side="right")  # intervals starting at or before x
    km = np.maximum(k - 1, 0)
    partial = np.where(k > 0, np.clip(x - lo[km], 0, hi[km] - lo[km]), 0)
    return full[km] + partial


def slow_down(graph: ExecGraph, factor: float) -> ExecGraph:
    """A straggling rank: every task but communication, and the CPU overhead between tasks
    (intra-thread delays), take ``factor`` times as long. Waits, launch latencies and the
    collectives' transfers are unchanged: the other ranks feel it only through what waits for
    this one."""
    if not factor > 0:
        raise ConfigError(f"slow_down: factor must be > 0, got {factor}")
    t, e = graph.tasks, graph.edges
    comm = np.isin(t.kind, [int(TaskKind.COMM), int(TaskKind.CPU_COMM)])
    dur = np.where(comm, t.dur_ns, np.rint(t.dur_ns * factor)).astype(np.int64)
    intra = e.kind == int(DepKind.INTRA_THREAD)
    delay = np.where(intra, np.rint(e.delay_ns * factor), e.delay_ns).astype(np.int64)
    return graph.with_durations(dur).replace(edges=e.replace(delay_ns=delay))
