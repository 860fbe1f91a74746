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
scales with the parameter count, new over old (:func:`resident_ratio`): the weights the first
step's forward reads, the model's own and its layers' (each counted once more per added layer),
mapped into the new configuration, as :func:`lumos.estimate.params.forward_params` counts them
for every edit that scales with the parameters (the gradient collectives' bytes among them).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.estimate.layers import LayerMap
from lumos.estimate.params import forward_params, with_vocab
from lumos.estimate.shapes import Dims, _Mapper, map_dims
from lumos.graph.model import ExecGraph

__all__ = ["out_elements", "resident_ratio", "resize_memory", "scale_resident"]

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


def resident_ratio(
    g: ExecGraph, old: Dims, new: Dims, layers_ratio: float, layers: LayerMap | None = None
) -> float:
    """New over old parameters of ``g``'s model part, the layers' share multiplied by
    ``layers_ratio`` too: :func:`~lumos.estimate.params.forward_params` (``layers`` is
    :func:`~lumos.estimate.layers.find_layers` of ``g`` itself; without it, or when it has no
    forward layer block, weights are told apart by shape). ``layers_ratio`` when no weight is
    seen."""
    return forward_params(g, layers, old, new).ratio(layers_ratio)


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
