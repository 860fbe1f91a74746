"""Memory under model-size what-ifs: allocations resized by the shapes they depend on.

Copies and removals of layers or micro-batches need nothing here: memory rows hang off their
tasks' source events (:mod:`lumos.graph.memory`), so a copied task carries copies of them, and
a free frees every copy of its allocation (:mod:`lumos.report.memory`). Schedule changes need
nothing either: the timeline follows the simulated times, so GPipe keeps every micro-batch's
activations alive until its backward and 1F1B fewer.

A shape change (hidden, FFN, sequence, micro-batch size, heads) resizes each allocation by the
rule that re-times its op (:mod:`lumos.estimate.shapes`): the recorded "Input Dims" of the op
that made it (the nearest op around it that recorded a tensor shape) are mapped into the new
configuration, and the bytes scale with the op's output elements, new over old:

* matrix products (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``): rows of
  the first operand times columns of the second;
* ``cat``: the sum of its inputs; ``embedding`` / ``index_select``: indices times row width;
* everything else: its largest input (element-wise ops and their backwards, norms, softmax,
  the optimizer's per-parameter temporaries).

Resident state (memory held when the recording began: weights, gradients, optimizer state)
scales with the parameter count, new over old (:func:`resident_ratio`), inferred from the
weights the first step's forward reads (matrix products' weights and biases, embedding tables,
norms' weights), each mapped into the new configuration: a weight read inside a forward layer
block (:mod:`lumos.estimate.layers`) is a layer's and counts once more per added layer, every
other one is the model's own (embeddings, final norm, LM head). Only a graph where no forward
layer block was found falls back to telling them apart by shape: an embedding table or a weight
with a vocabulary-sized dimension is the model's own (which takes an FFN as wide as the
vocabulary for the model's own too).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.estimate.layers import (
    BACKWARD_PATTERN,
    OPTIMIZER_PATTERN,
    LayerMap,
    forward_layer_spans,
    marked,
)
from lumos.estimate.shapes import Dims, _Mapper, decoded_dims, map_dims
from lumos.graph.model import AnnotationKind, ExecGraph

__all__ = ["out_elements", "resident_ratio", "resize_memory", "scale_resident", "with_vocab"]

_GEMM = re.compile(r"^aten::(mm|bmm|matmul)$")
_ADD_GEMM = re.compile(r"^aten::(addmm|baddbmm)$")


def _prod(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


def out_elements(name: str, dims: list[Any]) -> int:
    """Elements an op with recorded ``dims`` writes (see the module docstring); 0 unknown."""
    tensors = [d for d in dims if isinstance(d, list) and d and isinstance(d[0], int)]
    lists = [d for d in dims if isinstance(d, list) and d and isinstance(d[0], list)]
    if _GEMM.search(name) and len(tensors) >= 2:
        return _prod(tensors[0][:-1]) * tensors[1][-1]
    if _ADD_GEMM.search(name) and len(tensors) >= 3:
        return _prod(tensors[1][:-1]) * tensors[2][-1]
    if name == "aten::linear" and len(tensors) >= 2:
        return _prod(tensors[0][:-1]) * tensors[1][0]
    if name == "aten::embedding" and len(tensors) >= 2:
        return _prod(tensors[1]) * tensors[0][-1]
    if name == "aten::index_select" and len(tensors) >= 2:
        return _prod(tensors[-1]) * _prod(tensors[0][1:])
    if name == "aten::cat" and lists:
        return sum(_prod(s) for s in lists[0] if isinstance(s, list))
    sizes = [_prod(t) for t in tensors] + [
        sum(_prod(s) for s in group if isinstance(s, list)) for group in lists
    ]
    return max(sizes, default=0)


def resize_memory(
    g: ExecGraph,
    old: Dims,
    new: Dims,
    inside_layer: NDArray[np.bool_],
    params: NDArray[np.bool_] | None,
) -> tuple[ExecGraph, int]:
    """``g`` with each allocation and free resized for configuration ``new``; ``inside_layer``
    and ``params`` (per task) give the op's context as :func:`~lumos.estimate.shapes.retime`
    takes it. Returns the graph and how many rows were resized."""
    mem = g.memory
    if mem is None or not len(mem):
        return g, 0
    # each row's context: that of a task carrying its anchor
    ev = g.tasks.event_idx
    order = np.argsort(ev, kind="stable")
    k = np.searchsorted(ev[order], mem.event_idx)
    found = (k < ev.size) & (ev[order[np.minimum(k, ev.size - 1)]] == mem.event_idx)
    task = np.where(found, order[np.minimum(k, ev.size - 1)], -1)
    ctx = np.zeros(len(mem), dtype=np.int64)
    ctx[task >= 0] = inside_layer[task[task >= 0]].astype(np.int64)
    if params is not None:
        ctx[(task >= 0) & params[np.maximum(task, 0)]] = 2
    shaped = mem.shape_dims_idx >= 0
    key = (mem.shape_name_idx.astype(np.int64) * (len(mem.shape_dims) + 1)
           + mem.shape_dims_idx) * 3 + ctx  # fmt: skip
    uniq, inv = np.unique(key[shaped], return_inverse=True)
    mapper = _Mapper(*with_vocab(g, old, new))
    ratio_u = np.ones(uniq.size)
    for i, u in enumerate(uniq.tolist()):
        c, rest = u % 3, u // 3
        name = mem.op_names[rest // (len(mem.shape_dims) + 1)]
        dims = _decode(mem.shape_dims[rest % (len(mem.shape_dims) + 1)])
        if dims is None:
            continue
        before = out_elements(name, dims)
        if before > 0:
            after = out_elements(name, map_dims(name, dims, mapper, c >= 1, params=c == 2))
            ratio_u[i] = after / before
    ratio = np.ones(len(mem))
    ratio[shaped] = ratio_u[inv.ravel()]
    # a free releases what its allocation took, whatever op frees it
    frees = np.flatnonzero(mem.alloc_row >= 0)
    ratio[frees] = ratio[mem.alloc_row[frees]]
    changed = int((ratio != 1.0).sum())
    return g.replace(memory=mem.scaled(ratio)), changed


_PARAM_OPS = ("aten::addmm", "aten::mm", "aten::embedding", "aten::layer_norm",
              "aten::rms_norm")  # fmt: skip


def _weights(name: str, d: list[Any]) -> int:
    """Parameter elements an op reads: a matrix product's weight (its last 2-D input) and
    bias, ``linear``'s weight and bias, an embedding's table, a norm's 1-D weights."""
    shapes = [x for x in d if isinstance(x, list) and x and all(isinstance(v, int) for v in x)]
    mats = [x for x in shapes if len(x) == 2]
    if name in ("aten::addmm", "aten::mm"):
        bias = _prod(shapes[0]) if name == "aten::addmm" and len(shapes[0]) == 1 else 0
        return _prod(mats[-1]) + bias if mats else 0
    if name == "aten::linear":
        return sum(_prod(x) for x in shapes[1:] if len(x) <= 2)
    if name == "aten::embedding":
        return _prod(shapes[0]) if shapes and len(shapes[0]) == 2 else 0
    return sum(_prod(x) for x in shapes if len(x) == 1)


def with_vocab(g: ExecGraph, old: Dims, new: Dims) -> tuple[Dims, Dims]:
    """``old``/``new`` with the vocabulary filled in where the baseline did not find it: the
    rows of the largest embedding table whose rows are not the sequence (a position table's
    are). Without it a vocabulary that equals another quantity (2 x FFN, say) would be resized
    as that quantity."""
    if old.vocab > 0:
        return old, new
    dec = decoded_dims(g)
    emb = g.names.index("aten::embedding") if "aten::embedding" in g.names else -1
    a = g.annotations
    rows = [int(a.dims_idx[i]) for i in np.flatnonzero((a.name_idx == emb) & (a.dims_idx >= 0))]
    if g.task_dims_idx is not None:
        t = np.flatnonzero((g.tasks.name_idx == emb) & (g.task_dims_idx >= 0))
        rows += [int(g.task_dims_idx[i]) for i in t.tolist()]
    tables = []
    for r in set(rows):
        d = dec[r]
        if (
            d
            and isinstance(d[0], list)
            and len(d[0]) == 2
            and all(isinstance(x, int) for x in d[0])
        ):
            tables.append(d[0])
    tables = [x for x in tables if x[0] != old.seq]
    if not tables:
        return old, new
    vocab = max(tables, key=_prod)[0]
    return replace(old, vocab=vocab), replace(new, vocab=vocab)


def resident_ratio(
    g: ExecGraph, old: Dims, new: Dims, layers_ratio: float, layers: LayerMap | None = None
) -> float:
    """New over old parameters of ``g``'s model part (see the module docstring); the layers'
    share is multiplied by ``layers_ratio`` too. ``layers_ratio`` when no weight is seen.

    ``layers`` is :func:`~lumos.estimate.layers.find_layers` of ``g`` itself (its blocks index
    ``g``'s tasks): an op whose first task runs inside one of its forward layer blocks
    (:func:`~lumos.estimate.layers.forward_layer_spans`) reads a layer's weights, any other op
    the model's own. Without it, or when it has no forward layer block, the vocabulary test of
    the module docstring decides."""
    if g.task_dims_idx is None:
        return layers_ratio
    in_layer = forward_layer_spans(g, layers) if layers is not None else None
    dec = decoded_dims(g)
    indptr, perm = g.processor_order()
    back = marked(g, BACKWARD_PATTERN, indptr, perm) | marked(g, OPTIMIZER_PATTERN, indptr, perm)
    a, t = g.annotations, g.tasks
    steps = np.flatnonzero(a.kind == int(AnnotationKind.STEP))
    lo = int(a.ts_ns[steps[0]]) if len(steps) else -(2**62)
    hi = int(a.ts_ns[steps[0]] + a.dur_ns[steps[0]]) if len(steps) else 2**62
    wanted = np.fromiter((n in _PARAM_OPS for n in g.names), bool, len(g.names))
    ops = [(int(a.name_idx[i]), int(a.dims_idx[i]), int(a.first_task_idx[i]))
           for i in np.flatnonzero((a.dims_idx >= 0) & (a.first_task_idx >= 0)
                                   & wanted[a.name_idx]).tolist()]  # fmt: skip
    ops += [(int(t.name_idx[i]), int(g.task_dims_idx[i]), i)
            for i in np.flatnonzero((g.task_dims_idx >= 0) & wanted[t.name_idx]).tolist()]  # fmt: skip
    old, new = with_vocab(g, old, new)
    mapper = _Mapper(old, new)
    vocab = old.quantities().get("vocab", -1)
    totals = np.zeros((2, 2))  # [outside, inside] x [old, new]
    for name_idx, di, first in ops:
        d = dec[di]
        if not d or back[first] or not lo <= int(t.ts_ns[first]) < hi:
            continue
        name = g.names[name_idx]
        w = _weights(name, d)
        if w <= 0:
            continue
        if in_layer is not None:
            outside = not in_layer[first]
        else:
            flat = [x for s in d if isinstance(s, list)
                    for x in (s if s and isinstance(s[0], int) else [])]  # fmt: skip
            outside = name == "aten::embedding" or vocab in flat
        totals[int(not outside)] += (w, _weights(name, map_dims(name, d, mapper, not outside)))
    before = totals[0, 0] + totals[1, 0]
    if before <= 0:
        return layers_ratio
    return float((totals[0, 1] + layers_ratio * totals[1, 1]) / before)


def scale_resident(g: ExecGraph, ratio: float) -> ExecGraph:
    """``g`` with the memory resident before its recording began scaled by ``ratio``."""
    if g.memory is None or ratio == 1.0:
        return g
    return g.replace(memory=replace(g.memory, base_bytes=round(g.memory.base_bytes * ratio)))


def _decode(text: str) -> list[Any] | None:
    try:
        v = json.loads(text)
    except ValueError:
        return None
    return v if isinstance(v, list) else None
