"""Whether the repeats :func:`~lumos.estimate.layers.find_layers` found are the model's layers,
decided for the whole job, not for each rank alone.

``find_layers`` reports every long repeat of every thread, and most traces hold repeats that are
not layers: a loop over the parameters, the small MLPs of a recommender, the iterations of a
benchmark that marks no steps. A count is accepted only when it holds up on every rank:

==================  =========================================================================
check               a rank declines when
==================  =========================================================================
steps               the trace marks no steps (``ProfilerStep``) and the repeats come from the
                    op sequence: repeated iterations look the same as repeated layers (module
                    annotations name their blocks and need no steps: the trace's window is the
                    step)
not a loop          a repeat whose blocks are themselves a unit of fewer than
                    :data:`~lumos.estimate.layers.MIN_PERIOD` ops repeated
                    (``aten::as_strided`` x 10) is a loop, not a layer; it is left out
forward = backward  a step that runs a backward holds no backward repeat with as many blocks as
                    a forward one (training runs one backward block per forward layer)
every step          no count passes in every step (a model's depth does not change per step)
share of the step   the layers, with the device work they launch, cover less than
                    :data:`MIN_STEP_SHARE` of the step
==================  =========================================================================

Across ranks: ranks of one job run the same model (data-parallel replicas; lumos's layer edits
also need the same number on every pipeline stage), so the count must be one that every rank
accepts (the largest total share among them); when a rank declines, or no count is shared, every
rank declines with the reason, which names the disagreement.

Why :data:`MIN_STEP_SHARE` is 10 %: a model's layers are its bulk. In lumos's own recordings
(``tests/data``, the bundled example) they cover 54-93 % of a data-parallel rank's step, and
27-57 % of a pipeline stage's, which waits out its bubble; all the repeats of param's DLRM run
(8 ranks), none of them layers, cover 0.9-7.7 % of a rank's step. A tenth sits between.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from lumos.estimate.layers import BACKWARD_PATTERN, MIN_PERIOD, Group, LayerMap, marked
from lumos.graph.kinds import AnnotationKind, DepKind, TaskKind
from lumos.graph.model import ExecGraph, Workload

__all__ = ["MIN_STEP_SHARE", "LayerVerdict", "RankLayers", "judge_layers"]

#: The layers must cover at least this share of the step (see the module docstring).
MIN_STEP_SHARE = 0.10


@dataclass(frozen=True)
class RankLayers:
    """One rank's answer: ``layers`` (None when declined) and the ``reason`` it declined;
    ``found``, the count that held up on this rank alone (None if none did), and ``share``, the
    share of the rank's steps its layers (or the best rejected repeats) cover."""

    rank: int
    layers: int | None
    reason: str = ""
    share: float = 0.0
    found: int | None = None


@dataclass(frozen=True)
class LayerVerdict:
    """The job's answer: one entry per graph of the workload, in its order; ``reason`` says why
    the job declined ("" when it did not)."""

    ranks: tuple[RankLayers, ...]
    reason: str = ""

    @property
    def layers(self) -> int | None:
        """The count every rank accepted, or None."""
        counts = {r.layers for r in self.ranks}
        return counts.pop() if len(counts) == 1 and None not in counts else None


def judge_layers(workload: Workload, maps: tuple[LayerMap, ...]) -> LayerVerdict:
    """The job's verdict on the layer maps of its graphs (see the module docstring)."""
    own = [_judge_rank(g, lm) for g, lm in zip(workload.graphs, maps, strict=True)]
    if not own:
        return LayerVerdict((), "no ranks")
    found = {r.found for r in own}
    if len(found) == 1 and None not in found:
        return LayerVerdict(tuple(replace(r, layers=r.found) for r in own))
    why = _summary(own) if found == {None} else _disagreement(own)
    return LayerVerdict(tuple(replace(r, reason=r.reason or why) for r in own), why)


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _summary(own: list[RankLayers]) -> str:
    """Every rank declined: their reasons, ranks with the same kind of reason together."""
    if len(own) == 1:
        return own[0].reason
    by_kind: dict[str, list[RankLayers]] = defaultdict(list)
    for r in own:
        by_kind[r.reason.split(":", 1)[0].split(" (", 1)[0]].append(r)
    parts = [f"{_ranks([r.rank for r in rs])}: {rs[0].reason}" for rs in by_kind.values()]
    return "every rank declines; " + "; ".join(parts)


def _disagreement(own: list[RankLayers]) -> str:
    """Some ranks hold up on their own: which rank found what."""
    found: dict[str, list[int]] = defaultdict(list)
    for r in own:
        found[f"{r.found} layers" if r.found else f"none ({r.reason})"].append(r.rank)
    return "ranks disagree: " + "; ".join(f"{_ranks(rs)} find {w}" for w, rs in found.items())


# -- one rank ---------------------------------------------------------------------------------


def _judge_rank(g: ExecGraph, lm: LayerMap) -> RankLayers:
    """The count that holds up on ``g`` alone (``found``), or the reason none does."""
    layer_groups = lm.layer_groups()
    if not layer_groups:
        return RankLayers(g.rank, None, "no repeated layers found")
    windows = _step_windows(g, whole_run=lm.how.startswith("module annotations"))
    if not windows:
        return RankLayers(g.rank, None, "no steps marked (ProfilerStep): repeats of the op "
                          "sequence cannot be told from repeated iterations")  # fmt: skip
    step_of = [_step_index(g, x, windows) for x in layer_groups]
    is_loop = [x.phase != "optimizer" and _loop_unit(g, x) > 0 for x in layer_groups]
    loops = [x for x, loop in zip(layer_groups, is_loop, strict=True) if loop]
    stacks: list[Group] = []
    fwd: dict[int, set[int]] = defaultdict(set)
    bwd: dict[int, set[int]] = defaultdict(set)
    for x, k, loop in zip(layer_groups, step_of, is_loop, strict=True):
        if k >= 0 and x.phase != "optimizer" and not loop:
            stacks.append(x)
            (fwd if x.phase == "forward" else bwd)[k].add(x.count)
    if not fwd:
        if loops:
            return RankLayers(g.rank, None, _loop_reason(g, loops, bwd))
        return RankLayers(g.rank, None, "no repeated forward layers found")
    cands = _per_step(fwd, bwd, _backward_steps(g, windows))
    if isinstance(cands, str):
        return RankLayers(g.rank, None, cands)
    steps_ns = max(sum(hi - lo for lo, hi in windows), 1)
    counts = sorted({x.count for x in stacks})
    kept = [x for x, loop in zip(layer_groups, is_loop, strict=True) if not loop]
    shares = {c: _share(g, [x for x in kept if x.count == c], windows) / steps_ns
              for c in counts}  # fmt: skip
    passed = [c for c in sorted(cands) if shares[c] >= MIN_STEP_SHARE]
    if not passed:
        best = max(shares[c] for c in cands)
        return RankLayers(g.rank, None, f"repeats cover {best * 100:.1f} % of the step "
                          f"(a model's layers cover at least {MIN_STEP_SHARE * 100:.0f} %)",
                          best)  # fmt: skip
    big = [c for c in counts if shares[c] >= MIN_STEP_SHARE]
    if len(big) > 1:
        return RankLayers(g.rank, None, f"several stacks: repeats of {_counts(big)} blocks each "
                          f"cover at least {MIN_STEP_SHARE * 100:.0f} % of the step (stages of "
                          "layers of different shapes, as in a ResNet, not one stack)",
                          max(shares[c] for c in big))  # fmt: skip
    return RankLayers(g.rank, None, "", shares[passed[0]], passed[0])


def _per_step(
    fwd: dict[int, set[int]], bwd: dict[int, set[int]], runs_backward: list[bool]
) -> set[int] | str:
    """The forward counts that every step shows, with as many backward blocks where the step
    runs a backward; or why there are none."""
    cands: list[set[int]] = []
    for k, back in enumerate(runs_backward):
        here = set(fwd.get(k, set()))
        if back and here:
            if not bwd.get(k):
                return (f"forward and backward disagree: {_counts(here)} forward blocks, no "
                        "backward repeat that is not a loop, although the step runs a "
                        "backward")  # fmt: skip
            if not here & bwd[k]:
                return (f"forward and backward disagree: forward repeats of {_counts(here)} "
                        f"blocks, backward repeats of {_counts(bwd[k])}: no backward block per "
                        "forward layer")  # fmt: skip
            here &= bwd[k]
        cands.append(here)
    common = set.intersection(*cands)
    if not common:
        per_step = ", ".join(_counts(c) or "none" for c in cands)
        return f"steps disagree: the steps' layer counts are {per_step}"
    return common


def _counts(values: set[int] | list[int]) -> str:
    """``{2, 5, 3}`` -> ``"5, 3 and 2"``."""
    v = [str(x) for x in sorted(values, reverse=True)]
    if len(v) < 2:
        return "".join(v)
    return ", ".join(v[:-1]) + " and " + v[-1]


def _step_windows(g: ExecGraph, whole_run: bool) -> list[tuple[int, int]]:
    """``(start, end)`` of each recorded step in time order; the whole run when ``whole_run``
    and the trace marks none."""
    a, t = g.annotations, g.tasks
    st = np.flatnonzero((a.kind == int(AnnotationKind.STEP)) & (a.dur_ns > 0))
    if len(st):
        order = np.argsort(a.ts_ns[st], kind="stable")
        return [(int(a.ts_ns[i]), int(a.ts_ns[i] + a.dur_ns[i])) for i in st[order].tolist()]
    if whole_run and len(t):
        return [(int(t.ts_ns.min()), int((t.ts_ns + t.dur_ns).max()))]
    return []


def _step_index(g: ExecGraph, x: Group, windows: list[tuple[int, int]]) -> int:
    ts = int(g.tasks.ts_ns[x.blocks[0][0]])
    for k, (lo, hi) in enumerate(windows):
        if lo <= ts < hi:
            return k
    return -1


def _backward_steps(g: ExecGraph, windows: list[tuple[int, int]]) -> list[bool]:
    """Per step: whether any CPU op in it is backward work (named so or under autograd)."""
    indptr, perm = g.processor_order()
    back = marked(g, BACKWARD_PATTERN, indptr, perm)
    t = g.tasks
    ts = np.sort(t.ts_ns[back & (t.kind == int(TaskKind.CPU_OP))])
    return [bool(np.searchsorted(ts, hi, "left") > np.searchsorted(ts, lo, "left"))
            for lo, hi in windows]  # fmt: skip


def _loop_unit(g: ExecGraph, x: Group) -> int:
    """The length of the short unit (under MIN_PERIOD ops, same names and shapes) that a block
    of ``x`` repeats, or 0 when it repeats none."""
    block = x.blocks[0]
    sym = g.tasks.name_idx[block].astype(np.int64) * (len(g.dims) + 2)
    if g.task_dims_idx is not None:
        sym = sym + g.task_dims_idx[block] + 1
    for p in range(1, min(MIN_PERIOD, len(block))):
        if np.array_equal(sym[p:], sym[:-p]):
            return p
    return 0


def _loop_reason(g: ExecGraph, loops: list[Group], bwd: dict[int, set[int]]) -> str:
    x = loops[0]
    unit = _loop_unit(g, x)
    names = " ".join(dict.fromkeys(g.task_name(int(t)) for t in x.blocks[0][:unit]))
    why = (f"the forward repeats are loops, not layers ({x.count} blocks of {x.period} ops "
           f"repeating {names} every {unit} op{'s' if unit > 1 else ''})")  # fmt: skip
    back = sorted(set().union(*bwd.values())) if bwd else []
    return why + (f"; backward repeats of {_counts(back)} blocks" if back else "")


def _share(g: ExecGraph, groups: list[Group], windows: list[tuple[int, int]]) -> int:
    """Time (ns) inside the steps covered by the blocks of ``groups``: from each block's first
    op to the end of its last op or of the device work its ops launched, whichever is later."""
    if not groups:
        return 0
    t = g.tasks
    end = t.ts_ns + t.dur_ns
    e = g.edges
    launch = e.kind == int(DepKind.LAUNCH)
    launched_end = np.full(g.num_tasks + 1, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(launched_end, e.src[launch], end[e.dst[launch]])
    _, perm = g.processor_order()
    pos = np.empty(g.num_tasks, dtype=np.int64)
    pos[perm] = np.arange(g.num_tasks)
    in_order = np.append(np.maximum(launched_end[perm], end[perm]), 0)
    blocks = [b for x in groups for b in x.blocks]
    lo = np.array([pos[b].min() for b in blocks], dtype=np.int64)
    hi = np.array([pos[b].max() + 1 for b in blocks], dtype=np.int64)
    starts = np.array([t.ts_ns[b].min() for b in blocks], dtype=np.int64)
    ends = np.maximum.reduceat(in_order, np.column_stack([lo, hi]).ravel())[::2]
    return _covered(starts, ends, windows)


def _covered(starts: NDArray[np.int64], ends: NDArray[np.int64], windows) -> int:
    """Length of the union of ``[starts, ends)`` intersected with the union of ``windows``."""
    order = np.argsort(starts, kind="stable")
    merged: list[list[int]] = []
    for s, e in zip(starts[order].tolist(), ends[order].tolist(), strict=True):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in merged for lo, hi in windows)
