"""Re-time the GPU side of a model-size what-if: kernels scale with the op that launched them.

On a GPU trace an op's work runs in the kernels it launched; its host span is dispatch (argument
checks, allocator, the launch call), which does not grow with the tensors. :func:`retime_device`
therefore

1. attributes each kernel, copy and set on a stream to its *call*: the innermost op span holding
   the runtime call that launched it (:func:`lumos.report.ops.task_ops`, the attribution HTA and
   TraceLens use);
2. sums each call's device time and fits, per op name, ``device_ns = a + c * work`` over the
   trace's own calls (work as :func:`lumos.estimate.shapes.work_of` counts it, with the same
   dimension mapping as host ops), where a name comes in at least two sizes; otherwise a fixed
   cost per kernel (the trace's 10th-percentile kernel duration) plus the rest in proportion to
   work;
3. scales every task of a call by that call's new-over-old device time.

Communication kernels are left to :func:`lumos.estimate.reshape.resize_comms` (bytes, not
FLOPs). :func:`launching_spans` marks the host spans that launched device work, whose own time
:func:`lumos.estimate.shapes.retime_spans` keeps.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from lumos.estimate.shapes import Dims, ShapeModel, _Mapper, _ratios, fitted_model, work_of
from lumos.graph.model import AnnotationKind, DepKind, ExecGraph, TaskKind
from lumos.report.ops import task_ops

__all__ = ["device_calls", "fit_device_model", "launching_spans", "retime_device"]

_DEVICE_WORK = (int(TaskKind.KERNEL), int(TaskKind.MEMCPY), int(TaskKind.MEMSET))


class DeviceCalls:
    """The device work of ``g`` grouped by the op call that launched it.

    ``tasks``: GPU task indices with a call whose shapes are recorded; ``inv``: each one's call
    (index into the per-call arrays); per call: ``name_idx``, ``dims_idx``, ``first_task``
    (where the call starts, for its layer) and ``device_ns`` (its tasks' summed durations).
    """

    def __init__(self, g: ExecGraph) -> None:
        t, a = g.tasks, g.annotations
        empty = np.zeros(0, dtype=np.int64)
        self.tasks, self.inv = empty, empty
        self.name_idx, self.dims_idx, self.first_task, self.device_ns = empty, empty, empty, empty
        self.unattributed = 0
        gpu = np.flatnonzero(np.isin(t.kind, _DEVICE_WORK))
        if not len(gpu) or g.task_dims_idx is None:
            return
        op, call = task_ops(g)
        c = call[gpu].astype(np.int64)
        n_a = len(a)
        span = (c >= 0) & (c < n_a)
        own = c >= n_a
        dims = np.full(len(gpu), -1, dtype=np.int64)
        dims[span] = a.dims_idx[c[span]]
        dims[own] = g.task_dims_idx[c[own] - n_a]
        first = np.full(len(gpu), -1, dtype=np.int64)
        first[span] = a.first_task_idx[c[span]]
        first[own] = c[own] - n_a
        ok = (c >= 0) & (dims >= 0) & (first >= 0)
        self.unattributed = int((~ok).sum())
        self.tasks = gpu[ok]
        calls, self.inv = np.unique(c[ok], return_inverse=True)
        pick = np.zeros(len(calls), dtype=np.int64)
        pick[self.inv] = np.arange(len(self.inv))
        self.name_idx = op[self.tasks][pick].astype(np.int64)
        self.dims_idx = dims[ok][pick]
        self.first_task = first[ok][pick]
        self.device_ns = np.bincount(
            self.inv, weights=t.dur_ns[self.tasks].astype(np.float64), minlength=len(calls)
        ).astype(np.int64)


def device_calls(g: ExecGraph) -> DeviceCalls:
    """:class:`DeviceCalls` of ``g``."""
    return DeviceCalls(g)


def fit_device_model(graphs: list[ExecGraph]) -> ShapeModel:
    """Per op name ``device_ns = a + c * work`` over every call with device work in ``graphs``
    (names seen in at least two sizes, the largest 1.5x the smallest); the floor, for the other
    names, is the 10th-percentile duration of one device task."""
    by_name: dict[str, list[tuple[float, float]]] = {}
    durations: list[NDArray[np.int64]] = []
    from lumos.estimate.shapes import decoded_dims

    for g in graphs:
        dc = device_calls(g)
        if not len(dc.tasks):
            continue
        durations.append(g.tasks.dur_ns[dc.tasks].astype(np.int64))
        dec = decoded_dims(g)
        for name_i, dims_i, ns in zip(
            dc.name_idx.tolist(), dc.dims_idx.tolist(), dc.device_ns.tolist(), strict=True
        ):
            d = dec[dims_i]
            w = work_of(g.names[name_i], d) if d is not None else 0.0
            if w > 0:
                by_name.setdefault(g.names[name_i], []).append((w, float(ns)))
    floor = float(np.percentile(np.concatenate(durations), 10)) if durations else 0.0
    return fitted_model(by_name, floor)


def retime_device(
    g: ExecGraph,
    dur: NDArray[np.int64],
    old: Dims,
    new: Dims,
    model: ShapeModel,
    task_layer: NDArray[np.int32],
    params: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.int64], dict[str, int]]:
    """``dur`` with every GPU task of ``g`` re-timed as the call that launched it would run with
    the shapes of ``new``; counts ``device_retimed`` (tasks) and ``device_kept`` (GPU tasks
    whose call has no shapes or no work)."""
    dc = device_calls(g)
    out = dur.copy()
    if not len(dc.tasks):
        return out, {"device_retimed": 0, "device_kept": dc.unattributed}
    inside = (task_layer[dc.first_task] >= 0).astype(np.int64)
    if params is not None:
        inside[params[dc.first_task]] = 2
    ratio, has = _ratios(g, dc.name_idx, dc.dims_idx, inside, dc.device_ns, _Mapper(old, new),
                         model)  # fmt: skip
    r = ratio[dc.inv]
    moved = has[dc.inv] & (r != 1.0)
    sel = dc.tasks[moved]
    out[sel] = np.rint(out[sel] * r[moved]).astype(np.int64)
    kept = dc.unattributed + int((~has[dc.inv]).sum())
    return out, {"device_retimed": int(moved.sum()), "device_kept": kept}


def launching_spans(g: ExecGraph) -> NDArray[np.bool_]:
    """Per annotation: a ``USER`` op span that holds a runtime call launching device work (its
    host time is dispatch, which the tensors' size does not change)."""
    a, t, e = g.annotations, g.tasks, g.edges
    out = np.zeros(len(a), dtype=bool)
    launch = e.src[e.kind == int(DepKind.LAUNCH)]
    if not len(launch):
        return out
    spans = np.flatnonzero((a.kind == int(AnnotationKind.USER)) & (a.dur_ns > 0))
    for p in np.unique(t.processor_idx[launch]).tolist():
        at = np.sort(t.ts_ns[launch[t.processor_idx[launch] == p]])
        on_p = spans[a.processor_idx[spans] == p]
        lo = np.searchsorted(at, a.ts_ns[on_p], side="left")
        hi = np.searchsorted(at, a.ts_ns[on_p] + a.dur_ns[on_p], side="left")
        out[on_p[hi > lo]] = True
    return out
