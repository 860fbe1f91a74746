"""Edit a workload into another model configuration: micro-batches, layers, then shapes.

:func:`reshape_workload` applies, in this order, each edit being a pure function on graphs:

1. ``microbatches``: every micro-batch group of every rank gets the new count of blocks
   (:func:`~lumos.estimate.blocks.resize_groups`); the schedule found in the trace is kept
   (all forwards then all backwards stays that way). The micro-batch size is unchanged, so the
   global batch grows with the count.
2. ``layers``: every layer group (forward, backward, optimizer; inside each micro-batch) of every
   rank gets ``count + (new - old) / pp`` blocks; the gradient all-reduces grow with the
   parameters (step 4).
3. ``hidden``, ``ffn``, ``heads``, ``seq``, ``microbatch_size``: every op with recorded shapes is
   re-timed by :mod:`lumos.estimate.shapes`.
4. Communication is re-sized by the bytes it moves: gradient collectives (all-reduce,
   reduce-scatter, all-gather) by rank 0's parameter count (the forward's weights, outside and
   inside the layers: :func:`~lumos.estimate.params.forward_params`, the count that scales
   resident memory too), point-to-point messages by the activation size ``b x s x hidden``;
   its transfer is re-timed by ``a + c x bytes`` fitted on the trace's own collectives of that
   kind (proportional when they all have one size). The time spent waiting for peers is left
   to the simulation.

5. ``schedule``: each rank's micro-batch blocks re-ordered (:mod:`lumos.estimate.pipeline`).

``pp``: more stages (a multiple of the traced ones) are applied before the layers and together
with them, each stage split by :func:`~lumos.estimate.stages.restage` into stages of
``layers / pp`` layers; fewer (a divisor) after the layers, neighbouring stages merged onto one
rank by :func:`~lumos.estimate.merge.merge_stages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from lumos.errors import ConfigError
from lumos.estimate.baseline import Baseline
from lumos.estimate.blocks import resize_groups
from lumos.estimate.edit import Edit
from lumos.estimate.layers import (
    OPTIMIZER_PATTERN,
    find_layers,
    is_comm_issuer,
    marked,
)
from lumos.estimate.memory_edit import resident_ratio, resize_memory, scale_resident
from lumos.estimate.needs import require
from lumos.estimate.params import forward_params
from lumos.estimate.pipeline import reschedule
from lumos.estimate.pipeline_edits import interleave_edit, merge_edit, split_edit
from lumos.estimate.pipeline_edits import refuse_sends_in_flight as _refuse_in_flight
from lumos.estimate.shapes import (
    Dims,
    fit_line,
    fit_shape_model,
    retime,
    retime_spans,
)
from lumos.estimate.shapes_device import fit_device_model, launching_spans, retime_device
from lumos.graph.kinds import CommType, DepKind, TaskKind
from lumos.graph.model import ExecGraph, Workload

__all__ = ["MODEL_KEYS", "Edit", "reshape_workload", "resize_comms"]

MODEL_KEYS = ("layers", "hidden", "ffn", "heads", "seq", "microbatches", "microbatch_size", "pp")
_PIPELINE_KEYS = {"microbatches", "pp"}
_SHAPE_KEYS = ("hidden", "ffn", "heads", "seq", "microbatch_size")
_GRAD = (int(CommType.ALL_REDUCE), int(CommType.REDUCE_SCATTER), int(CommType.ALL_GATHER))
_P2P = (int(CommType.SEND), int(CommType.RECV))


def reshape_workload(
    workload: Workload,
    base: Baseline,
    changes: Mapping[str, int],
    schedule: str | None = None,
    chunks: int | None = None,
) -> tuple[Workload, list[Edit]]:
    """``workload`` edited into the configuration ``base`` with ``changes`` applied, then its
    micro-batches put in the order of ``schedule`` (``gpipe``, ``1f1b``, or ``interleaved``
    with ``chunks`` model chunks per rank, default 2) when given."""
    unknown = sorted(set(changes) - set(MODEL_KEYS))
    if unknown:
        raise ConfigError(f"unknown model key {unknown[0]!r} (known: {', '.join(MODEL_KEYS)})")
    # setting a pipeline value to the one the trace has edits nothing: nothing to refuse
    if any(changes[k] != base.values.get(k) for k in _PIPELINE_KEYS & set(changes)) or schedule:
        _refuse_in_flight(workload)
    edits: list[Edit] = []
    pp = base.values.get("pp", 1)
    graphs = list(workload.graphs)
    maps = list(base.layer_maps) or [find_layers(g) for g in graphs]
    base_maps = maps  # index the baseline's graphs; ``maps`` follows the edited ones
    param_ratio = 1.0
    if "microbatches" in changes:
        m_old, m_new = base.need("microbatches"), changes["microbatches"]
        if m_new < 1:
            raise ConfigError(f"microbatches={m_new}: needs at least 1")
        if m_new != m_old:
            if m_old < 2:
                raise ConfigError("microbatches: the trace shows no micro-batch blocks to copy "
                                  "(a pipeline run with at least 2 micro-batches is needed)")  # fmt: skip
            graphs, e = _resize(graphs, maps, "microbatch", lambda c: c * m_new // m_old)
            edits.append(replace(e, name=f"microbatches {m_old} -> {m_new}"))
            maps = [find_layers(g) for g in graphs]
    old_layers = base.values.get("layers", -1)
    if "pp" in changes and changes["pp"] > pp:
        new_pp = changes["pp"]
        layers = changes.get("layers", base.need("layers"))
        restaged, e = split_edit(workload.replace_graphs(graphs), maps, (pp, new_pp),
                                 (old_layers, layers))  # fmt: skip
        graphs = list(restaged.graphs)
        maps = [find_layers(g) for g in graphs]
        edits.append(e)
        pp = new_pp
    elif "layers" in changes and changes["layers"] != old_layers:
        new = changes["layers"]
        old = base.need("layers")
        if new % pp or new < pp:
            raise ConfigError(f"layers={new}: must be a positive multiple of pp={pp}")
        delta = (new - old) // pp
        graphs, e = _resize(graphs, maps, "layer", lambda c: max(c + delta, 0))
        edits.append(replace(e, name=f"layers {old} -> {new}"))
        maps = [find_layers(g) for g in graphs]
        param_ratio = _param_ratio(workload, base, new / old, None)
        graphs, n_opt = scale_optimizer(graphs, maps, param_ratio)
        if n_opt:
            edits.append(Edit(name="optimizer re-timed", tasks_retimed=n_opt,
                              model="time in proportion to the parameters it updates",
                              detail=f"multi-tensor optimizer (no per-layer updates to copy): "
                                     f"parameters x{param_ratio:.3f}"))  # fmt: skip
    if "pp" in changes and changes["pp"] < pp:
        new_pp = changes["pp"]
        merged, e = merge_edit(workload.replace_graphs(graphs), maps, (pp, new_pp))
        graphs = list(merged.graphs)
        maps = [find_layers(g) for g in graphs]
        edits.append(e)
        pp = new_pp
    shape_changes = {k: v for k, v in changes.items() if k in _SHAPE_KEYS}
    act_ratio = 1.0
    old_dims = base.dims()
    if any(getattr(old_dims, k) != v for k, v in shape_changes.items()):
        require(workload, base, shape_changes)
        new_dims = _new_dims(old_dims, shape_changes)
        model = workload._cache.get("shape_model")
        if model is None:
            model = workload._cache["shape_model"] = fit_shape_model(list(workload.graphs))
        dev_model = workload._cache.get("device_model")
        if dev_model is None:
            dev_model = workload._cache["device_model"] = fit_device_model(list(workload.graphs))
        retimed = []
        stats_all = {"retimed": 0, "kept_no_shapes": 0, "ambiguous_dims": 0, "device_retimed": 0,
                     "device_kept": 0}  # fmt: skip
        for g, lm in zip(graphs, maps, strict=True):
            layer = lm.task_layer(g.num_tasks)
            indptr, perm = g.processor_order()
            params = marked(g, OPTIMIZER_PATTERN, indptr, perm)
            dur, stats = retime(g, old_dims, new_dims, model, layer >= 0, params)
            dur, dev_stats = retime_device(g, dur, old_dims, new_dims, dev_model, layer, params)
            delay, n_delays = retime_spans(g, old_dims, new_dims, model, layer, params,
                                           keep=launching_spans(g))  # fmt: skip
            for k in stats_all:
                stats_all[k] += stats.get(k, 0) + dev_stats.get(k, 0)
            stats_all["retimed"] += n_delays + dev_stats["device_retimed"]
            g2 = g.with_durations(dur).replace(edges=g.edges.replace(delay_ns=delay))
            g2, n_mem = resize_memory(g2, old_dims, new_dims, layer >= 0, params)
            stats_all["memory_resized"] = stats_all.get("memory_resized", 0) + n_mem
            retimed.append(g2)
        graphs = retimed
        detail = (f"{stats_all['kept_no_shapes']} tasks without shapes kept their time; "
                  f"{stats_all.get('memory_resized', 0)} allocations resized; "
                  f"{stats_all['ambiguous_dims']} dimensions resolved by role")  # fmt: skip
        fitted = f"a + c x work per op, fitted on {len(model.fits)} op names of the trace"
        if stats_all["device_retimed"] or dev_model.fits:
            detail += (f"; {stats_all['device_retimed']} GPU tasks re-timed with the op that "
                       f"launched them, {stats_all['device_kept']} kept; host time of ops that "
                       "launch GPU work kept (dispatch)")  # fmt: skip
            fitted += f" (device time: {len(dev_model.fits)} op names)"
        edits.append(Edit(
            name=", ".join(f"{k} {getattr(old_dims, k)} -> {v}" for k, v in shape_changes.items()),
            tasks_retimed=stats_all["retimed"], model=fitted, detail=detail,
        ))  # fmt: skip
        layers_ratio = changes.get("layers", old_layers) / old_layers if old_layers > 0 else 1.0
        param_ratio = _param_ratio(workload, base, layers_ratio, new_dims)
        # p2p messages carry (tokens, hidden) activations; an unknown hidden is unchanged
        act_ratio = new_dims.tokens / old_dims.tokens
        if old_dims.hidden > 0:
            act_ratio *= new_dims.hidden / old_dims.hidden
    if param_ratio != 1.0 or act_ratio != 1.0:
        graphs, e = resize_comms(graphs, param_ratio, act_ratio)
        edits.append(e)
    layers_ratio = changes.get("layers", old_layers) / old_layers if old_layers > 0 else 1.0
    if pp != base.values.get("pp", 1) and any(g.memory is not None for g in graphs):
        # re-staged graphs mix several stages' tasks: their memory is not modelled (unknown,
        # not wrong)
        graphs = [g.replace(memory=None) for g in graphs]
        edits.append(Edit(name="memory unknown", model="pipeline stages changed",
                          detail="memory is not modelled across re-staged pipelines"))  # fmt: skip
    elif any(g.memory is not None for g in graphs) and (layers_ratio != 1.0 or shape_changes):
        old_dims = base.dims()
        new_dims = _new_dims(old_dims, shape_changes)
        # read on the baseline's graphs (the edited ones hold the added layers already), with
        # the layer blocks found on them
        ratios = [resident_ratio(g, old_dims, new_dims, layers_ratio, lm)
                  for g, lm in zip(workload.graphs, base_maps, strict=True)]  # fmt: skip
        graphs = [scale_resident(g, r) for g, r in zip(graphs, ratios, strict=True)]
        edits.append(Edit(name="resident memory", model="weights, gradients and optimizer "
                          "state in proportion to the parameters the forward reads",
                          detail="parameters x" + ", x".join(f"{r:.3f}" for r in ratios)))  # fmt: skip
    out = workload.replace_graphs(graphs)
    if schedule == "interleaved":
        v = chunks or 2
        layers = changes.get("layers", base.need("layers"))
        out, e = interleave_edit(out, maps, layers, v)
        edits.append(e)
    elif schedule is not None:
        out, batched = reschedule(out, schedule)
        detail = "the traced ops and dependencies, in the schedule's order"
        if batched:
            detail += f"; {batched} sends issued together with the receive after them"
        edits.append(Edit(name=f"schedule {schedule}", model="micro-batch blocks re-ordered",
                          detail=detail))  # fmt: skip
    return out, edits


def _new_dims(old: Dims, ch: Mapping[str, int]) -> Dims:
    """``old`` (completed) with the changes ``ch``; a size it does not know stays unknown
    (:func:`~lumos.estimate.needs.require` has checked that every one that changes is
    known)."""
    hidden = ch.get("hidden", old.hidden)
    # Megatron's default: the FFN follows the hidden size unless it is given
    ffn = ch.get("ffn", old.ffn * hidden // old.hidden if old.ffn > 0 else old.ffn)
    heads = ch.get("heads", old.heads)
    if hidden > 0 and heads > 0 and hidden % heads:
        raise ConfigError(f"hidden={hidden} is not a multiple of heads={heads}")
    b = ch.get("microbatch_size", old.microbatch_size)
    s = ch.get("seq", old.seq)
    return Dims(microbatch_size=b, seq=s, hidden=hidden, ffn=ffn, heads=heads,
                vocab=old.vocab, tokens=b * s if b > 0 and s > 0 else old.tokens)  # fmt: skip


def _resize(graphs, maps, level, new_count):
    out, added, removed = [], 0, 0
    for g, lm in zip(graphs, maps, strict=True):
        # an optimizer repeat of another count is not per-layer work (a multi-tensor optimizer
        # repeats per parameter group or per op): :func:`scale_optimizer` takes it
        groups = [x for x in lm.groups if x.level == level
                  and (x.phase != "optimizer" or level != "layer" or _per_layer(x, lm))]  # fmt: skip
        g2, st = resize_groups(g, groups, [new_count(x.count) for x in groups])
        out.append(g2)
        added += st.tasks_added
        removed += st.tasks_removed
    return out, Edit(name=level, tasks_added=added, tasks_removed=removed,
                     model="copies of the traced blocks")  # fmt: skip


def _param_ratio(
    workload: Workload, base: Baseline, layers_ratio: float, new: Dims | None
) -> float:
    """New over old parameter count of rank 0's model part (its forward's weights,
    :func:`~lumos.estimate.params.forward_params`), the layers ``layers_ratio`` times as
    many."""
    g = workload.graphs[0]
    lm = base.layer_maps[0] if base.layer_maps else find_layers(g)
    return forward_params(g, lm, base.dims(), new).ratio(layers_ratio)


def resize_comms(graphs: list[ExecGraph], param_ratio: float, act_ratio: float):
    """``graphs`` with gradient collectives carrying ``param_ratio`` times their bytes and
    point-to-point messages ``act_ratio`` times theirs, each re-timed by ``transfer = a + c x
    bytes`` fitted per collective kind (or in proportion, sizes unknown); waits kept.

    Gradient buckets filled to a cap (DDP's ``bucket_cap_mb``: most of a kind's collectives
    within 5 % of their median size) keep their size and change in number with the parameters, so
    their transfer time is re-timed in proportion (each traced bucket stands for
    ``param_ratio`` buckets of its size), not along the line, and so is the op that issued each
    of them from another thread (its time, waits included, recurs once per bucket)."""
    out, n = [], 0
    capped_kinds: set[int] = set()
    for g in graphs:
        c, t = g.comms, g.tasks
        size = c.size_bytes.astype(np.float64)
        factor = np.ones(len(c))
        factor[np.isin(c.kind, _GRAD)] = param_ratio
        factor[np.isin(c.kind, _P2P)] = act_ratio
        new_size = np.rint(size * factor).astype(np.int64)
        dur = t.dur_ns.copy()
        has = np.flatnonzero(t.comm_idx >= 0)
        ci = t.comm_idx[has]
        for kind in np.unique(c.kind[ci]).tolist():
            sel = has[c.kind[ci] == kind]
            cs = t.comm_idx[sel]
            transfer = np.maximum(dur[sel] - c.wait_ns[cs], 0).astype(np.float64)
            a, slope = _comm_line(size[cs], transfer)
            if kind in _GRAD and param_ratio != 1.0 and _capped(size[cs]):
                a, slope = 0.0, 1.0
                capped_kinds.add(kind)
                issuers = _issuers(g, sel)
                dur[issuers] = np.rint(dur[issuers] * param_ratio).astype(np.int64)
                n += len(issuers)
            old_cost = a + slope * size[cs]
            new_cost = a + slope * new_size[cs]
            ok = (old_cost > 0) & (size[cs] > 0)
            # a collective of unknown size moves bytes in proportion to what it carries
            scaled = np.where(ok, transfer * new_cost / np.where(ok, old_cost, 1),
                              transfer * factor[cs])  # fmt: skip
            dur[sel] = c.wait_ns[cs] + np.rint(scaled).astype(np.int64)
            n += int((ok | (factor[cs] != 1.0)).sum())
        out.append(g.replace(comms=c.replace(size_bytes=new_size)).with_durations(dur))
    detail = f"gradient bytes x{param_ratio:.3f}, activations x{act_ratio:.3f}"
    if capped_kinds:
        names = ", ".join(CommType(k).name.lower() for k in sorted(capped_kinds))
        detail += f"; capped gradient buckets ({names}) change in number, not size"
    return out, Edit(name="communication re-sized", tasks_retimed=n,
                     model="transfer = a + c x bytes fitted per collective kind on the trace",
                     detail=detail)  # fmt: skip


def _issuers(g: ExecGraph, comm_tasks: NDArray[np.int64]) -> NDArray[np.int64]:
    """The ops that handed ``comm_tasks`` to another thread (``c10d::allreduce_`` on the main
    thread for a gloo worker's ``gloo:all_reduce``): one per bucket, so they change in number
    with the buckets."""
    e, t = g.edges, g.tasks
    into = np.zeros(g.num_tasks, dtype=bool)
    into[comm_tasks] = True
    src = e.src[(e.kind == int(DepKind.INTER_THREAD)) & into[e.dst]]
    issuer = np.fromiter((is_comm_issuer(x) for x in g.names), bool, len(g.names))
    src = src[(t.kind[src] == int(TaskKind.CPU_OP)) & issuer[t.name_idx[src]]]
    return np.unique(src)


def _capped(size: NDArray[np.float64]) -> bool:
    """Whether collectives of these sizes are buckets filled to a cap: at least two of known
    size, most within 5 % of their median (a parameter larger than the cap makes one bucket
    larger; the first bucket and the last are often smaller)."""
    known = size[size > 0]
    if len(known) < 2:
        return False
    return bool(np.mean(np.abs(known - np.median(known)) <= 0.05 * np.median(known)) >= 0.5)


def _per_layer(group, lm) -> bool:
    """A repeat is per-layer work when it repeats once per layer (an optimizer's per-parameter
    updates of a layer are; a multi-tensor optimizer's repeats are not)."""
    return bool(group.count == lm.num_layers)


def scale_optimizer(graphs: list[ExecGraph], maps, ratio: float) -> tuple[list[ExecGraph], int]:
    """``graphs`` with the optimizer work of ranks whose optimizer has no per-layer blocks (a
    multi-tensor or fused optimizer updates every parameter from one op, ``_foreach_*``)
    re-timed by ``ratio``, the new over old parameter count: its ops outside the layer blocks,
    the overhead between them and the kernels they launch. Ranks with per-layer optimizer
    blocks (copied with the layers) are kept. Returns the graphs and how many tasks changed."""
    out, n = [], 0
    for g, lm in zip(graphs, maps, strict=True):
        per_layer = any(x.phase == "optimizer" and _per_layer(x, lm) for x in lm.layer_groups())
        if per_layer or ratio == 1.0 or lm.num_layers < 1:
            out.append(g)
            continue
        indptr, perm = g.processor_order()
        opt = marked(g, OPTIMIZER_PATTERN, indptr, perm)
        for x in lm.layer_groups():
            if x.phase != "optimizer":  # an optimizer repeat here is not per layer: scaled
                for b in x.blocks:
                    opt[b] = False
        e = g.edges
        launched = e.dst[(e.kind == int(DepKind.LAUNCH)) & opt[e.src]]
        opt[launched] = True
        dur = g.tasks.dur_ns.copy()
        dur[opt] = np.rint(dur[opt] * ratio).astype(np.int64)
        inner = (e.kind == int(DepKind.INTRA_THREAD)) & opt[e.src] & opt[e.dst]
        delay = np.where(inner, np.rint(e.delay_ns * ratio).astype(np.int64), e.delay_ns)
        out.append(g.with_durations(dur).replace(edges=e.replace(delay_ns=delay)))
        n += int(opt.sum())
    return out, n


def _comm_line(size, transfer):
    """``(a, c)`` of ``transfer = a + c x bytes`` over the collectives of known size, or the
    proportional ``(0, 1)`` when they do not come in sizes far enough apart."""
    ok = size > 0
    x, y = size[ok], transfer[ok]
    if len(np.unique(x)) >= 2 and x.max() >= 1.5 * x.min():
        a, c = fit_line(x, y)
        if c > 0:
            return a, c
    return 0.0, 1.0
