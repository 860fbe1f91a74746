"""Re-time ops for other model sizes: new shapes from the recorded ones, cost fitted on the trace.

Three steps, each on the trace's own evidence:

1. **What each recorded dimension means.** A dimension is matched by value against the baseline
   configuration's known quantities (:class:`Dims`): ``tokens`` (micro-batch size x
   sequence), ``b``, ``s``, ``heads``, ``h``, ``3h``, ``f``, ``2f``, ``hd`` (h / heads),
   ``vocab``; an unknown one matches nothing, so its dimensions are kept. Where two
   quantities share a value (``tokens == f`` is common), the tensor's role decides: the leading
   dimensions of an activation are token-like, its last one and every dimension of a weight
   are feature-like; inside a layer ``f`` wins over ``vocab``, outside it ``vocab`` does. A
   3-D or 4-D activation whose leading dimensions are ``(b, s)`` or ``(b, heads, s)`` is read
   by position (``b`` and ``s`` unknown: any pair whose product is ``tokens``, kept as
   recorded). Choices that remained ambiguous are counted.
2. **How much work an op does** with the old and the new shapes: ``2 M K N`` for matrix
   products (``mm``, ``addmm``, ``bmm``, ``baddbmm``), ``4 B H Sq Sk D`` for attention, the
   number of input elements for everything else (matrix-product FLOPs as
   :func:`lumos.ingest.op_work.op_work` counts them for the analysis tables). Views and allocations (no data touched) keep
   their time.
3. **What work costs**: per op name, ``dur = a + c * work`` fitted by least squares over the
   trace's own instances when they come in at least two sizes (a GEMM of a transformer layer
   does: QKV, projection, the two MLP products, their backwards); otherwise the trace's dispatch
   floor (the median duration of its view and allocation ops) as ``a`` and the rest proportional to work.

An op is re-timed as ``dur * cost(new) / cost(old)``, so whatever the trace recorded beyond the
model (cache effects, a slow instance) scales along.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.model import AnnotationKind, DepKind, ExecGraph
from lumos.ingest.op_work import op_work

__all__ = ["Dims", "ShapeModel", "fit_line", "fit_shape_model", "map_dims", "work_of"]

_GEMM = re.compile(r"^aten::(mm|addmm|bmm|baddbmm)$")  # the products lumos.ingest.op_work counts
_ATTN = re.compile(r"scaled_dot_product|flash_attention|efficient_attention|_attention_")
_NO_DATA = re.compile(
    r"^(aten::)?(view|_unsafe_view|reshape|as_strided|transpose|t|permute|expand|slice|select|"
    r"narrow|split|split_with_sizes|unsqueeze|squeeze|empty|empty_like|empty_strided|detach|"
    r"alias|resolve_conj|resolve_neg|unbind|chunk|_reshape_alias|lift_fresh|numel|size|"
    r"stride|is_nonzero|item|_local_scalar_dense|resize_)$"
)
_TOKEN_ORDER = ("tokens", "b*heads", "b", "s", "heads")
_FEATURE_IN = ("h", "3h", "f", "2f", "hd", "s", "vocab")
_FEATURE_OUT = ("h", "vocab", "3h", "f", "2f", "hd", "s")


@dataclass(frozen=True)
class Dims:
    """Model sizes in users' words: micro-batch size, sequence, hidden, FFN, heads, vocab, and
    ``tokens`` (micro-batch size x sequence, read from the shapes as a whole). ``-1``: not
    known. :meth:`complete` derives what the others imply (``tokens = b x s``, ``s = tokens /
    b``, ``b = tokens / s``); an unknown quantity matches no dimension, so it is kept."""

    microbatch_size: int = -1
    seq: int = -1
    hidden: int = -1
    ffn: int = -1
    heads: int = -1
    vocab: int = -1
    tokens: int = -1

    def complete(self) -> Dims:
        """These sizes with ``tokens``, ``seq`` and ``microbatch_size`` derived from each
        other where two of them are known."""
        b, s, t = self.microbatch_size, self.seq, self.tokens
        if t <= 0 and b > 0 and s > 0:
            t = b * s
        if t > 0 and b > 0 and s <= 0 and t % b == 0:
            s = t // b
        if t > 0 and s > 0 and b <= 0 and t % s == 0:
            b = t // s
        return replace(self, microbatch_size=b, seq=s, tokens=t)

    def quantities(self) -> dict[str, int]:
        """Each known quantity's value (see the module docstring)."""
        d = self.complete()
        b, s, h, f, n = d.microbatch_size, d.seq, d.hidden, d.ffn, d.heads
        q = {"tokens": d.tokens, "b*heads": b * n if b > 0 and n > 0 else -1, "b": b, "s": s,
             "heads": n, "h": h, "3h": 3 * h if h > 0 else -1, "f": f,
             "2f": 2 * f if f > 0 else -1, "hd": h // n if h > 0 and n > 0 else -1,
             "vocab": d.vocab}  # fmt: skip
        return {k: v for k, v in q.items() if v > 0}


def _prod(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


class _Mapper:
    """Maps one tensor's dimensions from the old configuration to the new one."""

    def __init__(self, old: Dims, new: Dims) -> None:
        self.old, self.new = old.quantities(), new.quantities()
        self.ambiguous = 0

    def value(self, x: int, role: str, inside: bool) -> int:
        orders = {
            "token": (_TOKEN_ORDER, _FEATURE_IN if inside else _FEATURE_OUT),
            "feature": (_FEATURE_IN if inside else _FEATURE_OUT, _TOKEN_ORDER),
        }[role]
        for order in orders:
            hits = [k for k in order if self.old.get(k) == x]
            if hits:
                if len({self.new.get(k, x) for k in hits}) > 1:
                    self.ambiguous += 1
                return self.new.get(hits[0], x)
        return x

    def is_token(self, x: int) -> bool:
        """Whether ``x`` equals a token-like quantity of the old configuration."""
        return any(self.old.get(k) == x for k in _TOKEN_ORDER)

    def shape(self, shape: list[int], weight: bool, inside: bool) -> list[int]:
        if not shape:
            return shape
        if not weight and len(shape) >= 3:
            lead = self._by_position(shape, inside)
            if lead is not None:
                return lead
        if weight:
            return [self.value(x, "feature", inside) for x in shape]
        return [self.value(x, "token", inside) for x in shape[:-1]] + [
            self.value(shape[-1], "feature", inside)
        ]

    def _by_position(self, shape: list[int], inside: bool) -> list[int] | None:
        """An activation read by position, ``(b, s, ...)`` or ``(b, heads, s, x)``: ``b``
        and ``s`` are the micro-batch size and the sequence where both are known, else any
        pair whose product is the token count, kept as recorded (a what-if that changes
        either needs both: :mod:`lumos.estimate.needs`). None for other shapes."""
        o, n = self.old, self.new
        known = "b" in o and "s" in o
        if not known and "tokens" not in o:
            return None

        def lead(x: int, y: int) -> list[int] | None:
            if known:
                return [n["b"], n["s"]] if (x, y) == (o["b"], o["s"]) else None
            return [x, y] if x * y == o["tokens"] else None

        bs = lead(shape[0], shape[1])
        if bs is not None:
            return bs + [self.value(x, "feature", inside) for x in shape[2:]]
        bs = lead(shape[0], shape[2]) if len(shape) == 4 else None
        if bs is None:
            return None
        # a mask broadcast over the heads (one head) stays one
        heads = n.get("heads", shape[1]) if shape[1] == o.get("heads") else shape[1]
        return [bs[0], heads, bs[1], self.value(shape[3], "feature", inside)]


def map_dims(
    name: str, dims: list[Any], mapper: _Mapper, inside: bool, params: bool = False
) -> list[Any]:
    """``dims`` ("Input Dims" of op ``name``) in the new configuration; with ``params`` every
    tensor is a parameter (the optimizer's ops), all of its dimensions feature-like."""
    if params:
        return [
            [mapper.shape(x, True, inside) for x in d] if d and isinstance(d[0], list)
            else mapper.shape(d, True, inside) if isinstance(d, list) and d else d
            for d in dims
        ]  # fmt: skip
    gemm = bool(_GEMM.search(name))
    if name in ("aten::mm", "aten::addmm"):
        mapped = _map_product(name, dims, mapper, inside)
        if mapped is not None:
            return mapped
    out: list = []
    first_tensor = True
    for i, shape in enumerate(dims):
        if shape and isinstance(shape[0], list):  # a tensor list (foreach ops): weights
            out.append([mapper.shape(s, True, inside) for s in shape])
            continue
        if not isinstance(shape, list) or not shape:
            out.append(shape)
            continue
        weight = gemm and not first_tensor and len(shape) == 2
        if name == "aten::addmm" and i == 0:
            weight = True  # the bias
        if gemm and name == "aten::addmm" and i == 1:
            weight = False
        out.append(mapper.shape(shape, weight or len(shape) == 1, inside))
        if not (name == "aten::addmm" and i == 0):
            first_tensor = False
    return out


def _map_product(name: str, dims: list[Any], mapper: _Mapper, inside: bool) -> list[Any] | None:
    """A 2-D product ``A[M, K] @ B[K, N]`` (``addmm``: bias first) mapped as one: the token
    dimension is ``M`` (forward and input-gradient products: activations times a weight) when
    ``M`` reads as a token count, else ``K`` (weight-gradient products: an activation's gradient
    transposed times the activation); the other two are weight dimensions, and ``K`` maps the
    same in both operands. None for other layouts."""
    i = 1 if name == "aten::addmm" else 0
    if len(dims) < i + 2:
        return None
    a, b = dims[i], dims[i + 1]
    if not (_matrix(a) and _matrix(b)) or a[1] != b[0]:
        return None
    m, k, n = a[0], a[1], b[1]
    if mapper.is_token(m):
        nm, nk = mapper.value(m, "token", inside), mapper.value(k, "feature", inside)
    else:
        nm, nk = mapper.value(m, "feature", inside), mapper.value(k, "token", inside)
    out = list(dims)
    out[i], out[i + 1] = [nm, nk], [nk, mapper.value(n, "feature", inside)]
    if i == 1 and isinstance(dims[0], list) and dims[0]:
        out[0] = mapper.shape(dims[0], True, inside)
    return out


def _matrix(x: Any) -> bool:
    return isinstance(x, list) and len(x) == 2 and all(isinstance(v, int) for v in x)


def work_of(name: str, dims: list) -> float:
    """Work of one op (see the module docstring); 0 for ops that touch no data."""
    tensors = [d for d in dims if isinstance(d, list) and d and not isinstance(d[0], list)]
    if _NO_DATA.search(name):
        return 0.0
    if _GEMM.search(name):
        flops, _ = op_work(name, dims, [])
        if flops:
            return float(flops)
    if _ATTN.search(name) and tensors and len(tensors[0]) == 4:
        q = tensors[0]
        k = tensors[1] if len(tensors) > 1 and len(tensors[1]) == 4 else q
        return 4.0 * q[0] * q[1] * q[2] * k[2] * q[3]
    total = 0
    for d in dims:
        if isinstance(d, list) and d and isinstance(d[0], list):
            total += sum(_prod(s) for s in d if isinstance(s, list))
        elif isinstance(d, list) and d:
            total += _prod(d)
    return float(total)


@dataclass
class ShapeModel:
    """Fitted ``dur = a + c * work`` per op name (see the module docstring)."""

    fits: dict[str, tuple[float, float]] = field(default_factory=dict)
    floor_ns: float = 0.0

    def scaled(self, name: str, base_ns: float, work_old: float, work_new: float) -> float:
        """A task that took ``base_ns`` for ``work_old``: its time for ``work_new``."""
        fit = self.fits.get(name)
        if fit is not None:
            a, c = fit
            old = a + c * work_old
            return base_ns * (a + c * work_new) / old if old > 0 else base_ns
        a = min(self.floor_ns, base_ns)
        return a + (base_ns - a) * work_new / work_old


def decoded_dims(g: ExecGraph) -> list[list | None]:
    """Every distinct "Input Dims" of ``g``, decoded (None where not a list)."""
    out: list[list | None] = []
    for text in g.dims:
        try:
            v = json.loads(text)
        except ValueError:
            v = None
        out.append(v if isinstance(v, list) else None)
    return out


def fit_shape_model(graphs: list[ExecGraph]) -> ShapeModel:
    """Fit the per-name cost lines on every task and parent op with shapes in ``graphs``."""
    by_name: dict[str, list[tuple[float, float]]] = {}
    views: list[float] = []
    for g in graphs:
        if g.task_dims_idx is None:
            continue
        dec = decoded_dims(g)
        a = g.annotations
        spans = np.flatnonzero(a.dims_idx >= 0)
        tasks = np.flatnonzero(g.task_dims_idx >= 0)
        name_idx = np.concatenate([a.name_idx[spans], g.tasks.name_idx[tasks]]).astype(np.int64)
        dims_idx = np.concatenate([a.dims_idx[spans], g.task_dims_idx[tasks]]).astype(np.int64)
        dur = np.concatenate([a.dur_ns[spans], g.tasks.dur_ns[tasks]]).astype(np.float64)
        is_task = np.concatenate([np.zeros(len(spans), bool), np.ones(len(tasks), bool)])
        key = name_idx * (len(g.dims) + 1) + dims_idx
        uniq, inv = np.unique(key, return_inverse=True)
        for k, u in enumerate(uniq.tolist()):
            name, d = g.names[u // (len(g.dims) + 1)], dec[u % (len(g.dims) + 1)]
            sel = inv == k
            w = work_of(name, d) if d is not None else 0.0
            if w <= 0:
                if _NO_DATA.search(name):
                    views += dur[sel & is_task].tolist()
                continue
            by_name.setdefault(name, []).extend((w, x) for x in dur[sel].tolist())
    return fitted_model(by_name, float(np.median(views)) if views else 0.0)


def fitted_model(by_name: dict[str, list[tuple[float, float]]], floor_ns: float) -> ShapeModel:
    """A :class:`ShapeModel` with a line ``a + c x work`` per name whose ``(work, ns)`` points
    come in at least two sizes (the largest 1.5x the smallest) and slope up; ``floor_ns``
    for the others."""
    model = ShapeModel(floor_ns=floor_ns)
    for name, pts in by_name.items():
        arr = np.asarray(pts)
        x, y = arr[:, 0], arr[:, 1]
        if len(np.unique(x)) >= 2 and x.max() >= 1.5 * x.min():
            icpt, slope = fit_line(x, y)
            if slope > 0:
                model.fits[name] = (icpt, slope)
    return model


def fit_line(x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
    """Least-squares ``y = a + c x`` with ``a, c >= 0`` (medians per distinct x first)."""
    xs = np.unique(x)
    ym = np.array([np.median(y[x == v]) for v in xs])
    if len(xs) < 2:
        return 0.0, float(ym[0] / xs[0]) if xs[0] > 0 else 0.0
    c, a = np.polyfit(xs, ym, 1, w=1.0 / np.maximum(ym, 1.0))
    if a < 0:
        c, a = float(np.sum(xs * ym) / np.sum(xs * xs)), 0.0
    return float(max(a, 0.0)), float(max(c, 0.0))


def _ratios(
    g: ExecGraph,
    name_idx: NDArray[np.int64],
    dims_idx: NDArray[np.int64],
    inside: NDArray[np.int64],
    base_ns: NDArray[np.int64],
    mapper: _Mapper,
    model: ShapeModel,
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """New-over-old time of each op (1 where it cannot tell), and which ops had data to scale.
    ``inside``: 0 outside the layers, 1 inside one, 2 an optimizer op (its tensors are
    parameters). Work is computed once per distinct (name, shapes, context)."""
    dec = decoded_dims(g)
    key = (name_idx * (len(g.dims) + 1) + dims_idx) * 3 + inside
    uniq, inv = np.unique(key, return_inverse=True)
    w_old = np.zeros(len(uniq))
    w_new = np.zeros(len(uniq))
    names: list[str] = []
    for k, u in enumerate(uniq.tolist()):
        ctx, rest = u % 3, u // 3
        name, d = g.names[rest // (len(g.dims) + 1)], dec[rest % (len(g.dims) + 1)]
        names.append(name)
        if d is None:
            continue
        w_old[k] = work_of(name, d)
        if w_old[k] > 0:
            w_new[k] = work_of(name, map_dims(name, d, mapper, ctx >= 1, params=ctx == 2))
    ratio = np.ones(len(name_idx))
    has = w_old[inv] > 0
    for i in np.flatnonzero(has).tolist():
        k = int(inv[i])
        b = float(base_ns[i])
        ratio[i] = model.scaled(names[k], b, w_old[k], w_new[k]) / b if b > 0 else 1.0
    return ratio, has


def retime(
    g: ExecGraph,
    old: Dims,
    new: Dims,
    model: ShapeModel,
    inside_layer: NDArray[np.bool_],
    params: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.int64], dict[str, int]]:
    """New durations of ``g``'s tasks for configuration ``new`` (``params``: tasks whose
    tensors are parameters, the optimizer's), and counts of what happened
    (``retimed``, ``kept_no_shapes``, ``kept_no_data``, ``ambiguous_dims``)."""
    dur = g.tasks.dur_ns.astype(np.int64).copy()
    stats = {"retimed": 0, "kept_no_shapes": 0, "kept_no_data": 0, "ambiguous_dims": 0}
    if g.task_dims_idx is None:
        stats["kept_no_shapes"] = g.num_tasks
        return dur, stats
    dims = g.task_dims_idx.astype(np.int64)
    with_dims = np.flatnonzero(dims >= 0)
    stats["kept_no_shapes"] = g.num_tasks - len(with_dims)
    mapper = _Mapper(old, new)
    ctx = inside_layer.astype(np.int64)
    if params is not None:
        ctx[params] = 2
    ratio, has = _ratios(g, g.tasks.name_idx[with_dims].astype(np.int64), dims[with_dims],
                         ctx[with_dims], dur[with_dims], mapper, model)  # fmt: skip
    sel = with_dims[has]
    dur[sel] = np.rint(dur[sel] * ratio[has]).astype(np.int64)
    stats["retimed"] = int(has.sum())
    stats["kept_no_data"] = int((~has).sum())
    stats["ambiguous_dims"] = mapper.ambiguous
    return dur, stats


def retime_spans(
    g: ExecGraph,
    old: Dims,
    new: Dims,
    model: ShapeModel,
    task_layer: NDArray[np.int32],
    params: NDArray[np.bool_] | None = None,
    keep: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.int64], int]:
    """New intra-thread delays of ``g``: the untraced time of a parent op (an ``aten::addmm``
    whose children are only ``expand`` and ``copy_``: the product itself runs between them)
    scaled like the op. Each delay belongs to the innermost op with shapes around it (by the
    middle of its recorded gap; ops nest like a call stack). ``keep`` (per annotation): spans
    whose time stays as recorded (on a GPU trace, those that launched device work: their host
    time is dispatch). Returns the delays (one per edge) and how many changed."""
    e, t, a = g.edges, g.tasks, g.annotations
    delay = e.delay_ns.copy()
    intra = np.flatnonzero(e.kind == int(DepKind.INTRA_THREAD))
    if not len(intra) or g.task_dims_idx is None:
        return delay, 0
    spans = np.flatnonzero(
        (a.kind == int(AnnotationKind.USER)) & (a.dims_idx >= 0) & (a.dur_ns > 0)
    )
    if not len(spans):
        return delay, 0
    first = a.first_task_idx[spans]
    inside = ((first >= 0) & (task_layer[np.maximum(first, 0)] >= 0)).astype(np.int64)
    if params is not None:
        inside[(first >= 0) & params[np.maximum(first, 0)]] = 2
    ratio, _ = _ratios(g, a.name_idx[spans].astype(np.int64), a.dims_idx[spans].astype(np.int64),
                       inside, a.dur_ns[spans], _Mapper(old, new), model)  # fmt: skip
    if keep is not None:
        ratio[keep[spans]] = 1.0
    mid = (t.ts_ns[e.src[intra]] + t.dur_ns[e.src[intra]] + t.ts_ns[e.dst[intra]]) // 2
    proc = t.processor_idx[e.src[intra]]
    owner_ratio = np.ones(len(intra))
    for p in np.unique(a.processor_idx[spans]).tolist():
        on_p = spans[a.processor_idx[spans] == p]
        r_p = ratio[a.processor_idx[spans] == p]
        order = np.lexsort((-a.dur_ns[on_p], a.ts_ns[on_p]))  # by start, outer first
        s0 = a.ts_ns[on_p][order]
        s1 = s0 + a.dur_ns[on_p][order]
        r_p = r_p[order]
        parent = _parents(s0, s1)
        sel = np.flatnonzero(proc == p)
        k = np.searchsorted(s0, mid[sel], side="right") - 1
        # walk up from the latest-starting span to the first one that contains the point
        # (however deep the nesting: a parent comes before its child, so each step ends)
        while True:
            out = (k >= 0) & (s1[np.maximum(k, 0)] <= mid[sel])
            if not out.any():
                break
            k = np.where(out, parent[np.maximum(k, 0)], k)
        hit = k >= 0
        owner_ratio[sel[hit]] = r_p[k[hit]]
    changed = owner_ratio != 1.0
    delay[intra[changed]] = np.rint(delay[intra[changed]] * owner_ratio[changed]).astype(np.int64)
    return delay, int(changed.sum())


def _parents(s0: NDArray[np.int64], s1: NDArray[np.int64]) -> NDArray[np.int64]:
    """Enclosing span of each span (sorted by start, outer first), -1 at the top."""
    parent = np.full(len(s0), -1, dtype=np.int64)
    stack: list[int] = []
    ends = s1.tolist()
    for i, start in enumerate(s0.tolist()):
        while stack and ends[stack[-1]] <= start:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return parent
