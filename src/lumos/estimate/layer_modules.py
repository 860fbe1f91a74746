"""Layers from module annotations: the repeated module class of a trace recorded with its Python
stack (``nn.Module: TransformerBlock_3`` spans, :data:`~lumos.graph.build_spans.MODULE_PREFIX`).

The *layer class* is the module class with at least two instances (``_0``, ``_1``...) with the
most instances among those whose outermost calls cover at least :data:`COVER_SHARE` of what the
widest such class covers (a stage wrapping two blocks covers what the blocks cover: the blocks
are the layers; a norm inside each block covers little). Each outermost call of it in the forward (its
first op not under an autograd or ``Backward`` span) is one forward layer block: the thread's ops
from the call's first to its last. A call made again inside the backward (activation
checkpointing recomputes its forward there) is not a forward layer. Backward and optimizer
layers are still found as repeats (:mod:`lumos.estimate.layers`): the trace does not say which
backward ops belong to which module call.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_spans import MODULE_PREFIX
from lumos.graph.kinds import AnnotationKind, ProcessorKind
from lumos.graph.model import ExecGraph

__all__ = ["ModuleLayers", "module_layers"]

_INSTANCE = re.compile(r"_\d+$")
#: A class covering this share of the widest class's ops is preferred when it has more
#: instances (ResNet's blocks over the stages that hold them).
COVER_SHARE = 0.9


@dataclass(frozen=True)
class ModuleLayers:
    """The forward layer blocks a trace's module annotations give: ``blocks[p]`` are thread
    ``p``'s blocks in time order (arrays of task indices in program order)."""

    module: str
    blocks: dict[int, list[NDArray[np.int64]]]

    @property
    def count(self) -> int:
        return sum(len(b) for b in self.blocks.values())


def module_layers(
    g: ExecGraph, real: NDArray[np.bool_], backward: NDArray[np.bool_]
) -> ModuleLayers | None:
    """The layer class's forward blocks (see the module docstring), made of the tasks ``real``
    marks; None when the trace has no module class with two or more instances."""
    a = g.annotations
    names = g.names
    is_module = np.fromiter((n.startswith(MODULE_PREFIX) for n in names), bool, len(names))
    threads = g.processors.kind == int(ProcessorKind.THREAD)
    sel = np.flatnonzero(
        (a.kind == int(AnnotationKind.USER))
        & is_module[a.name_idx]
        & (a.first_task_idx >= 0)
        & threads[a.processor_idx]
    )
    if not len(sel):
        return None
    perm = g.processor_order()[1]
    pos = np.empty(g.num_tasks, dtype=np.int64)
    pos[perm] = np.arange(g.num_tasks)
    instances: dict[str, set[str]] = defaultdict(set)
    calls: dict[str, list[int]] = defaultdict(list)
    for i in sel.tolist():
        name = names[a.name_idx[i]][len(MODULE_PREFIX) :]
        cls = _INSTANCE.sub("", name)
        instances[cls].add(name)
        calls[cls].append(i)
    outer = {c: _outermost(a, pos, calls[c]) for c in instances if len(instances[c]) >= 2}
    if not outer:
        return None
    cover = {c: int(sum(hi - lo + 1 for _, lo, hi in v)) for c, v in outer.items()}
    best = max(cover.values())
    # the finest class covering nearly as much as the widest: blocks, not the stages they form
    near = [c for c in sorted(outer) if cover[c] >= COVER_SHARE * best]
    cls = max(near, key=lambda c: (len(instances[c]), cover[c]))
    blocks: dict[int, list[NDArray[np.int64]]] = defaultdict(list)
    for span, lo, hi in outer[cls]:
        first = int(a.first_task_idx[span])
        if backward[first]:
            continue
        members = perm[lo : hi + 1]
        members = members[real[members]]
        if len(members):
            blocks[int(g.tasks.processor_idx[first])].append(members)
    if not any(len(b) >= 2 for b in blocks.values()):
        return None
    return ModuleLayers(cls, dict(blocks))


def _outermost(a, pos: NDArray[np.int64], spans: list[int]) -> list[tuple[int, int, int]]:
    """``(span, first, last)`` (positions in processor order) of the calls not inside another
    call of the same class, in time order."""
    idx = np.asarray(spans, dtype=np.int64)
    lo, hi = pos[a.first_task_idx[idx]], pos[a.last_task_idx[idx]]
    out: list[tuple[int, int, int]] = []
    end = -1
    for k in np.lexsort((-hi, lo)).tolist():
        if lo[k] > end:
            out.append((int(idx[k]), int(lo[k]), int(hi[k])))
            end = int(hi[k])
    return out
