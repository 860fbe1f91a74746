"""Re-time a whole class of work: ``--scale @compute=0.5``, ``@comm``, ``@host``.

A class selector stands for what a what-if in users' words changes, where a name pattern cannot
say it for every trace:

==============  ===============================================================================
selector        what is scaled
==============  ===============================================================================
``@compute``    the compute: every GPU kernel, copy and set that is not communication; on a
                trace with no GPU work (a CPU-only job) every CPU op, which is where it computes,
                with the untraced time inside ``aten::`` ops (a parent op's own work between
                its children, :func:`cpu_op_gap_share`)
``@comm``       the transfer of every collective and point-to-point task (kernels on a stream
                and host-side spans alike); the waiting for peers (``Comms.wait_ns``) is kept
``@host``       what the CPU spends driving the GPU: CPU ops and runtime calls, the untraced CPU
                time between them (intra-thread delays) and the launch latency (launch edges);
                on a CPU-only job the time between ops outside any ``aten::`` op (framework
                and Python overhead)
==============  ===============================================================================

Waits for other threads, streams or peers are never scaled: the simulation decides them.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.errors import ConfigError
from lumos.graph.edits import _measure, _union
from lumos.graph.model import AnnotationKind, DepKind, ExecGraph, TaskKind

__all__ = ["CLASSES", "cpu_op_gap_share", "has_gpu_compute", "scale_class"]

#: The selectors and what each scales, for ``--help`` and error messages.
CLASSES: dict[str, str] = {
    "@compute": "GPU kernels, copies and sets that are not communication (CPU ops on a CPU job)",
    "@comm": "collective and point-to-point transfers (waiting for peers kept)",
    "@host": "CPU ops, runtime calls, CPU time between them and launch latency",
}

_GPU_COMPUTE = (int(TaskKind.KERNEL), int(TaskKind.MEMCPY), int(TaskKind.MEMSET))
_COMM = (int(TaskKind.COMM), int(TaskKind.CPU_COMM))


def has_gpu_compute(graph: ExecGraph) -> bool:
    """Whether ``graph`` runs compute on a GPU (any kernel, copy or set that is not comm)."""
    return bool(np.isin(graph.tasks.kind, _GPU_COMPUTE).any())


def cpu_op_gap_share(graph: ExecGraph) -> NDArray[np.float64]:
    """Per edge, the share of its recorded gap (source end to destination start, intra-thread
    edges only) that lies inside an ``aten::`` op span on its thread: on a CPU-only job that is
    the op's own computing between its children (``aten::addmm`` runs its product between an
    ``expand`` and a ``copy_``); 0 elsewhere and on every edge of a job with GPU compute."""
    e, t, a = graph.edges, graph.tasks, graph.annotations
    out = np.zeros(len(e), dtype=np.float64)
    if has_gpu_compute(graph):
        return out
    intra = np.flatnonzero(e.kind == int(DepKind.INTRA_THREAD))
    aten = np.fromiter((n.startswith("aten::") for n in graph.names), bool, len(graph.names))
    spans = np.flatnonzero((a.kind == int(AnnotationKind.USER)) & aten[a.name_idx] & (a.dur_ns > 0))
    if not len(intra) or not len(spans):
        return out
    lo_gap = (t.ts_ns[e.src[intra]] + t.dur_ns[e.src[intra]]).astype(np.int64)
    hi_gap = np.maximum(t.ts_ns[e.dst[intra]].astype(np.int64), lo_gap)
    proc = t.processor_idx[e.src[intra]]
    for p in np.unique(a.processor_idx[spans]).tolist():
        sel = spans[a.processor_idx[spans] == p]
        lo, hi = _union(
            a.ts_ns[sel].astype(np.int64), (a.ts_ns[sel] + a.dur_ns[sel]).astype(np.int64)
        )
        on = proc == p
        inside = _measure(lo, hi, hi_gap[on]) - _measure(lo, hi, lo_gap[on])
        width = hi_gap[on] - lo_gap[on]
        out[intra[on]] = np.where(width > 0, inside / np.maximum(width, 1), 0.0)
    return out


def scale_class(graph: ExecGraph, selector: str, factor: float) -> tuple[ExecGraph, int]:
    """``graph`` with the work of ``selector`` (a key of :data:`CLASSES`) taking ``factor``
    times as long; also how many tasks and delays changed. ConfigError for an unknown
    selector or a negative factor."""
    if selector not in CLASSES:
        raise ConfigError(f"--scale {selector!r}: unknown class (choose from "
                          f"{', '.join(CLASSES)}, or give a name pattern)")  # fmt: skip
    if not factor >= 0:
        raise ConfigError(f"--scale {selector}={factor}: FACTOR must be >= 0")
    t, e = graph.tasks, graph.edges
    gpu = has_gpu_compute(graph)
    dur = t.dur_ns.astype(np.int64).copy()
    delay = e.delay_ns.astype(np.int64).copy()
    inside = cpu_op_gap_share(graph)  # all 0 on a GPU job
    intra = (e.kind == int(DepKind.INTRA_THREAD)) & (delay > 0)
    if selector == "@compute":
        sel = np.isin(t.kind, _GPU_COMPUTE) if gpu else t.kind == int(TaskKind.CPU_OP)
        dur[sel] = np.rint(dur[sel] * factor).astype(np.int64)
        ops = intra & (inside > 0)
        delay[ops] = np.rint(delay[ops] * (1 + (factor - 1) * inside[ops])).astype(np.int64)
        changed = int(sel.sum()) + int(ops.sum())
    elif selector == "@comm":
        sel = np.isin(t.kind, _COMM)
        wait = np.zeros(len(dur), dtype=np.int64)
        if len(graph.comms):
            row = t.comm_idx
            wait = np.where(row >= 0, graph.comms.wait_ns[np.maximum(row, 0)], 0)
        wait = np.minimum(wait, dur)
        dur[sel] = np.rint(wait[sel] + (dur[sel] - wait[sel]) * factor).astype(np.int64)
        changed = int(sel.sum())
    else:
        sel = (
            np.isin(t.kind, (int(TaskKind.CPU_OP), int(TaskKind.RUNTIME)))
            if gpu
            else t.kind == int(TaskKind.RUNTIME)
        )
        dur[sel] = np.rint(dur[sel] * factor).astype(np.int64)
        edges = (intra | (e.kind == int(DepKind.LAUNCH))) & (delay > 0) & (inside < 1)
        outside = 1.0 - inside[edges]
        delay[edges] = np.rint(delay[edges] * (1 + (factor - 1) * outside)).astype(np.int64)
        changed = int(sel.sum()) + int(edges.sum())
    out = graph.with_durations(dur).replace(edges=e.replace(delay_ns=delay))
    return out, changed
