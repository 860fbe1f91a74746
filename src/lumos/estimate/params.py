"""The parameters a step's forward reads, outside the layers and inside them, in the recorded
configuration and in another one: the one count behind every edit that scales with the model's
size (gradient collectives and the optimizer in :mod:`lumos.estimate.reshape`, resident memory
in :mod:`lumos.estimate.memory_edit`, a synthesized job's gradients in :mod:`lumos.synth`).

The weights are read off the first step's forward ops with recorded "Input Dims" (ops, or spans
over the kernel launches a GPU op records; backward and optimizer ops left out): a matrix
product's weight (its last 2-D input) and bias, an embedding's table, a norm's 1-D weights
(:func:`op_params`). Each is the model's own (embeddings, final norm, LM head) or a layer's,
counted once per layer:

* with a layer map that has forward layer blocks (:func:`~lumos.estimate.layers.find_layers`
  of the same graph), a weight whose op's first task lies within one of them
  (:func:`~lumos.estimate.layers.forward_layer_spans`: the kernel launches an ``aten::addmm``
  span holds on a GPU trace included) is a layer's, any other the model's own;
* without one, by shape: an embedding table, or a weight with a vocabulary-sized dimension, is
  the model's own, the rest a layer's (which takes an FFN as wide as the vocabulary for the
  model's own too).

Each weight's shape is mapped into the new configuration by the rules that re-time its op
(:func:`~lumos.estimate.shapes.map_dims`), the vocabulary filled in first where the baseline
lacks it (:func:`with_vocab`), so a table of vocabulary rows keeps them whatever else equals
the vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lumos.estimate.layers import (
    BACKWARD_PATTERN,
    OPTIMIZER_PATTERN,
    LayerMap,
    forward_layer_spans,
    marked,
)
from lumos.estimate.shapes import Dims, _Mapper, decoded_dims, map_dims
from lumos.graph.kinds import AnnotationKind
from lumos.graph.model import ExecGraph

__all__ = ["PARAM_OPS", "ForwardParams", "forward_params", "op_params", "with_vocab"]

#: Ops whose inputs include weights.
PARAM_OPS = ("aten::addmm", "aten::mm", "aten::embedding", "aten::layer_norm", "aten::rms_norm")


def _prod(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


def op_params(name: str, d: list[Any]) -> int:
    """Parameter elements an op with recorded ``d`` reads: a matrix product's weight (its last
    2-D input) and ``addmm``'s bias, an embedding's table, a norm's 1-D weights; 0 for an op
    outside :data:`PARAM_OPS` reading none of these."""
    shapes = [x for x in d if isinstance(x, list) and x and all(isinstance(v, int) for v in x)]
    if name in ("aten::addmm", "aten::mm"):
        mats = [x for x in shapes if len(x) == 2]
        if not mats:
            return 0
        bias = _prod(shapes[0]) if name == "aten::addmm" and len(shapes[0]) == 1 else 0
        return _prod(mats[-1]) + bias
    if name == "aten::embedding":
        return _prod(shapes[0]) if shapes and len(shapes[0]) == 2 else 0
    if name in PARAM_OPS:
        return sum(_prod(x) for x in shapes if len(x) == 1)
    return 0


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


@dataclass(frozen=True)
class ForwardParams:
    """Parameter elements the forward reads: the model's own (``outside``) and all layers' of
    the rank (``inside``), recorded (``_old``) and mapped into the new configuration
    (``_new``; equal to the recorded ones when no new configuration was given)."""

    outside_old: int
    inside_old: int
    outside_new: int
    inside_new: int

    @property
    def old(self) -> int:
        return self.outside_old + self.inside_old

    def ratio(self, layers_ratio: float = 1.0) -> float:
        """New over old parameters when, besides the shapes, the layers are ``layers_ratio``
        times as many (their share grows with them); ``layers_ratio`` when no weight was
        seen."""
        if self.old <= 0:
            return layers_ratio
        return (self.outside_new + layers_ratio * self.inside_new) / self.old


def forward_params(
    g: ExecGraph, layers: LayerMap | None, old: Dims | None = None, new: Dims | None = None
) -> ForwardParams:
    """The parameters ``g``'s first step's forward reads, outside and inside its layers (see
    the module docstring), recorded and in configuration ``new`` (``old`` is the recorded
    one: its sequence and vocabulary tell the tables apart; unknown when not given).
    ``layers`` is :func:`~lumos.estimate.layers.find_layers` of ``g`` itself (its blocks
    index ``g``'s tasks); without it, or when it has no forward layer block, the shape test
    decides. All zero when ``g`` recorded no shapes."""
    if g.task_dims_idx is None:
        return ForwardParams(0, 0, 0, 0)
    old = old if old is not None else Dims()
    old, new_dims = with_vocab(g, old, new if new is not None else old)
    mapper = _Mapper(old, new_dims) if new is not None else None
    in_layer = forward_layer_spans(g, layers) if layers is not None else None
    vocab = old.quantities().get("vocab", -1)
    dec = decoded_dims(g)
    indptr, perm = g.processor_order()
    back = marked(g, BACKWARD_PATTERN, indptr, perm) | marked(g, OPTIMIZER_PATTERN, indptr, perm)
    a, t = g.annotations, g.tasks
    steps = np.flatnonzero(a.kind == int(AnnotationKind.STEP))
    lo = int(a.ts_ns[steps[0]]) if len(steps) else -(2**62)
    hi = int(a.ts_ns[steps[0]] + a.dur_ns[steps[0]]) if len(steps) else 2**62
    wanted = np.fromiter((n in PARAM_OPS for n in g.names), bool, len(g.names))
    ops = [(int(a.name_idx[i]), int(a.dims_idx[i]), int(a.first_task_idx[i]))
           for i in np.flatnonzero((a.dims_idx >= 0) & (a.first_task_idx >= 0)
                                   & wanted[a.name_idx]).tolist()]  # fmt: skip
    ops += [(int(t.name_idx[i]), int(g.task_dims_idx[i]), i)
            for i in np.flatnonzero((g.task_dims_idx >= 0) & wanted[t.name_idx]).tolist()]  # fmt: skip
    totals = [[0, 0], [0, 0]]  # [outside, inside] x [old, new]
    for name_idx, di, first in ops:
        d = dec[di]
        if not d or back[first] or not lo <= int(t.ts_ns[first]) < hi:
            continue
        name = g.names[name_idx]
        w = op_params(name, d)
        if w <= 0:
            continue
        if in_layer is not None:
            inside = bool(in_layer[first])
        else:
            flat = [x for s in d if isinstance(s, list)
                    for x in (s if s and isinstance(s[0], int) else [])]  # fmt: skip
            inside = not (name == "aten::embedding" or vocab in flat)
        mapped = w if mapper is None else op_params(name, map_dims(name, d, mapper, inside))
        totals[int(inside)][0] += w
        totals[int(inside)][1] += mapped
    (out_old, out_new), (in_old, in_new) = totals
    return ForwardParams(out_old, in_old, out_new, in_new)
