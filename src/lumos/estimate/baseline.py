"""The configuration a trace was recorded with, found in the trace, each value with its evidence.

==================  ========================================================================
key                 found from
==================  ========================================================================
``layers``          the repeated blocks of each rank (:mod:`lumos.estimate.layers`), summed
                    over pipeline stages, when the job's verdict accepts them
                    (:mod:`lumos.estimate.layer_verdict`: one count on every rank, as many
                    backward as forward blocks, a plausible share of the step)
``hidden``          the most common last dimension of the 3-D activations inside layers
``seq``,            the leading dimensions ``(b, s)`` of those activations
``microbatch_size``
``tokens``          tokens per micro-batch: ``b x s`` of those activations
``ffn``             the largest other last dimension of a 3-D activation inside a layer
                    (not ``3 x hidden``, the fused QKV)
``heads``           4-D attention tensors ``(b, heads, s, hidden / heads)``
(flattened)         layers whose activations are flattened to ``(tokens, width)`` (no 3-D
                    activation, or 3-D ones whose first dimension alone is the products'
                    rows: vLLM's ``(tokens, heads, head width)``): ``tokens`` from the rows
                    of the layers' forward matrix products ``[tokens, K] @ [K, N]`` (a
                    weight is never their left operand, so a token count equal to the FFN
                    is read right), ``hidden`` their most common ``K``, ``ffn`` the widest
                    ``N`` of a product from ``hidden`` wider than it (not ``3 x hidden``);
                    ``heads``, ``microbatch_size`` and ``seq`` from 4-D attention tensors
                    whose ``b x s`` is ``tokens``, not found without
``vocab``           the last dimension of the logits (the input of the log-softmax)
``microbatches``    micro-batch blocks (one send or receive each) per step
``pp``              ranks that exchange point-to-point messages (1 when none do)
``dp``              the recorded degree of data parallelism: the size of the process group
                    of the gradient collectives (all-reduce, reduce-scatter, all-gather) when
                    the trace lists its ranks and they all have one size, else the world
                    size over ``pp``; absent when the trace states neither a world size
                    above one nor a process group's ranks
==================  ========================================================================

``hidden`` to ``tokens`` are read inside the layer blocks: when the verdict declines the
layers they are withheld too (a what-if that needs them refuses), unless ``--baseline
layers=N`` accepts the blocks. ``--baseline KEY=VALUE`` overrides any value; of ``tokens``,
``microbatch_size`` and ``seq``, one not given follows from the two others. Which values a
what-if needs is :mod:`lumos.estimate.needs`'s; one that is needed but was not found is a
:class:`~lumos.errors.ConfigError` naming that flag.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from lumos.errors import ConfigError
from lumos.estimate.layer_verdict import LayerVerdict, judge_layers
from lumos.estimate.layers import LayerMap, find_layers
from lumos.estimate.shapes import Dims, decoded_dims
from lumos.graph.kinds import CommType
from lumos.graph.model import Workload

__all__ = ["Baseline", "detect_baseline"]

_LOGITS = ("aten::_log_softmax", "aten::log_softmax", "aten::_softmax_backward_data",
           "aten::_log_softmax_backward_data")  # fmt: skip
_PRODUCTS = ("aten::mm", "aten::addmm", "aten::linear")

KEYS = ("layers", "hidden", "ffn", "heads", "seq", "microbatch_size", "tokens", "microbatches",
        "vocab", "pp", "dp")  # fmt: skip
#: Model sizes read inside the layer blocks (the ones ``--set`` changes).
IN_LAYERS = ("hidden", "ffn", "heads", "seq", "microbatch_size")
#: Values withheld when the layers are declined.
_WITHHELD = (*IN_LAYERS, "tokens")
_DIM_KEYS = ("microbatch_size", "seq", "hidden", "ffn", "heads", "vocab", "tokens")
_GRADIENT = (int(CommType.ALL_REDUCE), int(CommType.REDUCE_SCATTER), int(CommType.ALL_GATHER))


@dataclass
class Baseline:
    """Detected (or given) values and how each was found; ``layer_maps`` per graph and the
    job's ``verdict`` on them."""

    values: dict[str, int]
    how: dict[str, str]
    layer_maps: tuple[LayerMap, ...] = field(default=())
    verdict: LayerVerdict | None = None
    #: Keys read inside layer blocks the verdict declined, and so left out of ``values``.
    withheld: tuple[str, ...] = ()

    def need(self, key: str) -> int:
        """The value of ``key``, or a ConfigError naming ``--baseline key=...`` (and
        ``--baseline layers=N`` for a value withheld because the layers were declined)."""
        v = self.values.get(key, -1)
        if v <= 0:
            fix = f"give --baseline {key}=N"
            if key in self.withheld:
                fix = (f"give --baseline layers=N to accept the repeated blocks `lumos layers` "
                       f"lists, or --baseline {key}=N")  # fmt: skip
            raise ConfigError(f"the baseline's {key} could not be found in the trace "
                              f"({self.how.get(key, 'no evidence')}); {fix}")  # fmt: skip
        return v

    def dims(self) -> Dims:
        """The model sizes known (given or found), ``-1`` for the others, completed
        (:meth:`~lumos.estimate.shapes.Dims.complete`); which a what-if needs is
        :func:`lumos.estimate.needs.require`'s to say."""
        v = self.values
        return Dims(**{k: v.get(k, -1) for k in _DIM_KEYS}).complete()

    def to_dict(self) -> dict[str, object]:
        return {k: {"value": self.values.get(k, -1), "how": self.how.get(k, "")} for k in KEYS}


def _activations(
    workload: Workload, maps: tuple[LayerMap, ...]
) -> tuple[list[list[int]], list[tuple[int, int, int]], list[list[int]]]:
    """Shapes of the tensors of forward-layer tasks; ``(M, K, N)`` of the forward layers' 2-D
    matrix products (``mm``, ``addmm``: ops or spans); shapes of the
    logits."""
    inside: list[list[int]] = []
    products: list[tuple[int, int, int]] = []
    embed: list[list[int]] = []
    for g, lm in zip(workload.graphs, maps, strict=True):
        if g.task_dims_idx is None:
            continue
        dec = decoded_dims(g)
        forward = np.zeros(g.num_tasks, dtype=bool)
        for grp in lm.layer_groups():
            if grp.phase != "forward":
                continue
            for t in np.concatenate(grp.blocks).tolist():
                forward[t] = True
                d = dec[g.task_dims_idx[t]] if g.task_dims_idx[t] >= 0 else None
                for s in d or []:
                    if isinstance(s, list) and s and all(isinstance(x, int) for x in s):
                        inside.append(s)
        products += _products(g, dec, forward)
        for t in np.flatnonzero(g.task_dims_idx >= 0).tolist():
            if g.task_name(t) in _LOGITS:
                d = dec[g.task_dims_idx[t]]
                if d and isinstance(d[0], list) and len(d[0]) >= 2:
                    embed.append(d[0])
    return inside, products, embed


def _products(g, dec: list, forward: np.ndarray) -> list[tuple[int, int, int]]:
    """``(M, K, N)`` of each 2-D matrix product (``mm``, ``addmm``; ``linear`` on a trace
    without those, whose products run in kernels it launched) starting in a ``forward``
    task."""
    a = g.annotations
    ops = [(g.names[a.name_idx[i]], int(a.dims_idx[i])) for i in np.flatnonzero(
        (a.dims_idx >= 0) & (a.first_task_idx >= 0) & forward[np.maximum(a.first_task_idx, 0)]
    ).tolist()]  # fmt: skip
    ops += [(g.task_name(t), int(g.task_dims_idx[t]))
            for t in np.flatnonzero(forward & (g.task_dims_idx >= 0)).tolist()]  # fmt: skip
    out: dict[bool, list[tuple[int, int, int]]] = {True: [], False: []}
    for name, di in ops:
        if name not in _PRODUCTS or not (d := dec[di]):
            continue
        mats = [x for x in d if isinstance(x, list) and len(x) == 2
                and all(isinstance(v, int) for v in x)]  # fmt: skip
        if len(mats) < 2:
            continue
        x, w = mats[0], mats[1]
        linear = name == "aten::linear"
        if x[1] == w[int(linear)]:  # linear's weight is (out, in)
            out[linear].append((x[0], x[1], w[1 - int(linear)]))
    return out[False] or out[True]


def detect_baseline(workload: Workload, given: Mapping[str, int] | None = None) -> Baseline:
    """The baseline configuration of ``workload`` (see the module docstring)."""
    maps = tuple(find_layers(g) for g in workload.graphs)
    verdict = judge_layers(workload, maps)
    given = dict(given or {})
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise ConfigError(f"--baseline {unknown[0]}=...: unknown key (known: {', '.join(KEYS)})")
    values: dict[str, int] = {}
    how: dict[str, str] = {}
    withheld: list[str] = []
    _model_dims(workload, maps, values, how)
    p2p_ranks = {
        g.rank for g in workload.graphs
        if np.isin(g.comms.kind, [int(CommType.SEND), int(CommType.RECV)]).any()
    }  # fmt: skip
    pp = max(len(p2p_ranks), 1)
    values["pp"], how["pp"] = pp, (
        f"{len(p2p_ranks)} ranks exchange point-to-point messages" if p2p_ranks
        else "no point-to-point messages"
    )  # fmt: skip
    dp, how["dp"] = recorded_dp(workload, given.get("pp", pp))
    if dp > 0:
        values["dp"] = dp
    if verdict.layers is not None:
        found = ("forward calls of " + maps[0].how.split("(", 1)[1].rstrip(")")
                 if maps[0].how.startswith("module annotations") else "repeated blocks")  # fmt: skip
        values["layers"] = verdict.layers * pp
        how["layers"] = (f"{', '.join(str(r.layers) for r in verdict.ranks)} {found} per rank "
                         f"x pp {pp}")  # fmt: skip
    else:
        how["layers"] = f"not detected: {verdict.reason}"
        if "layers" not in given:
            for k in _WITHHELD:
                if values.pop(k, None) is not None:
                    withheld.append(k)
                    how[k] = ("read inside layer blocks the detection declined (see "
                              "`lumos layers`)")  # fmt: skip
    mbs = [lm.num_microbatches for lm in maps]
    values["microbatches"] = max(mbs) if mbs else 1
    how["microbatches"] = ("micro-batch blocks (one send/receive each) per step"
                           if max(mbs, default=1) > 1 else "no micro-batch blocks")  # fmt: skip
    for k, v in given.items():
        values[k], how[k] = int(v), "given (--baseline)"
    _derive_tokens(values, how, given)
    return Baseline(values, how, maps, verdict, tuple(k for k in withheld if k not in given))


def _derive_tokens(values: dict[str, int], how: dict[str, str], given: Mapping[str, int]) -> None:
    """``tokens = microbatch_size x seq`` and each of the three from the other two, where the
    third is not known or not given while the others are."""
    b, s, t = (values.get(k, -1) for k in ("microbatch_size", "seq", "tokens"))
    if (
        b > 0
        and s > 0
        and "tokens" not in given
        and (t <= 0 or given.keys() & {"seq", "microbatch_size"})
    ):
        values["tokens"], how["tokens"] = b * s, "microbatch_size x seq"
    elif t > 0 and s > 0 and b <= 0 and t % s == 0:
        values["microbatch_size"], how["microbatch_size"] = t // s, "tokens / seq"
    elif t > 0 and b > 0 and s <= 0 and t % b == 0:
        values["seq"], how["seq"] = t // b, "tokens / microbatch_size"


def _model_dims(
    workload: Workload, maps: tuple[LayerMap, ...], values: dict[str, int], how: dict[str, str]
) -> None:
    """``hidden``, ``tokens``, ``seq``, ``microbatch_size``, ``ffn``, ``heads`` and ``vocab``
    from the shapes of the layers' forward ops and of the logits, into ``values`` and ``how``
    (see the module docstring)."""
    inside, products, embed = _activations(workload, maps)
    acts = [s for s in inside if len(s) == 3]
    if acts and products:
        # 3-D tensors whose first dimension alone is the products' row count are (tokens,
        # heads, head width) of flattened layers (vLLM's attention), not (b, s, hidden)
        rows = Counter(m for m, _, _ in products).most_common(1)[0][0]
        lead = Counter((s[0], s[1]) for s in acts).most_common(1)[0][0]
        if rows == lead[0] != lead[0] * lead[1]:
            acts = []
    if acts:
        h, n = Counter(s[-1] for s in acts).most_common(1)[0]
        values["hidden"], how["hidden"] = h, f"last dimension of {n} layer activations"
        lead = Counter((s[0], s[1]) for s in acts if s[-1] == h).most_common(1)[0][0]
        values["microbatch_size"], values["seq"] = lead
        how["microbatch_size"] = how["seq"] = f"activations (b, s, hidden) = {list(lead)}+[{h}]"
        values["tokens"], how["tokens"] = lead[0] * lead[1], "b x s of the activations"
        others = sorted({s[-1] for s in acts if s[:2] == list(lead)} - {h, 3 * h})
        if others:
            values["ffn"], how["ffn"] = others[-1], "widest other layer activation"
        heads = Counter(
            s[1] for s in inside if len(s) == 4 and s[0] == lead[0] and s[2] == lead[1]
            and s[1] * s[3] == h
        )  # fmt: skip
        if heads:
            values["heads"] = heads.most_common(1)[0][0]
            how["heads"] = "attention tensors (b, heads, s, hidden/heads)"
    elif products:
        _flat_dims(inside, products, values, how)
    if "hidden" in values:
        how.setdefault("ffn", "no layer activation or product output wider than hidden")
        how.setdefault("heads", "no attention tensor (b, heads, s, hidden / heads)")
    if embed:
        values["vocab"] = Counter(e[-1] for e in embed).most_common(1)[0][0]
        how["vocab"] = "last dimension of the logits (log-softmax input)"


def _flat_dims(
    inside: list[list[int]],
    products: list[tuple[int, int, int]],
    values: dict[str, int],
    how: dict[str, str],
) -> None:
    """Sizes of layers whose activations are flattened to ``(tokens, width)``: the forward
    matrix products ``[tokens, K] @ [K, N]`` give the token count (their rows: a weight is
    never the left operand of a forward product, so a token count equal to the FFN width is
    read right), ``hidden`` is the most common ``K``, ``ffn`` the widest ``N`` of a product
    from ``hidden`` wider than it (not ``3 x hidden``); 4-D attention tensors ``(b, heads, s, hidden / heads)`` whose
    ``b x s`` is the token count give the heads, the micro-batch size and the sequence."""
    t, n = Counter(m for m, _, _ in products).most_common(1)[0]
    values["tokens"], how["tokens"] = t, f"rows of {n} forward matrix products (tokens, K)"
    rows = [(k, w) for m, k, w in products if m == t]
    h, n = Counter(k for k, _ in rows).most_common(1)[0]
    values["hidden"], how["hidden"] = h, f"inner dimension of {n} forward matrix products"
    wider = sorted(w for k, w in rows if k == h and w > h and w != 3 * h)
    if wider:
        values["ffn"], how["ffn"] = (
            wider[-1],
            "widest output (not 3 x hidden) of a product from hidden",
        )
    att = Counter(
        (s[0], s[1], s[2]) for s in inside
        if len(s) == 4 and s[0] * s[2] == t and s[1] * s[3] == h
    )  # fmt: skip
    if not att:
        how["seq"] = how["microbatch_size"] = (
            f"activations flattened to (tokens, width), {t} tokens: the sequence and the "
            "micro-batch size are not shown apart"
        )
    else:
        b, heads, seq = att.most_common(1)[0][0]
        values["heads"], values["microbatch_size"], values["seq"] = heads, b, seq
        how["heads"] = how["microbatch_size"] = how["seq"] = (
            f"attention tensors (b, heads, s, hidden/heads) = [{b}, {heads}, {seq}, {h // heads}]"
        )


def recorded_dp(workload: Workload, pp: int) -> tuple[int, str]:
    """The data-parallel degree the trace states, and how it was read; ``(-1, why)`` when it
    states none (a world size of one, or none, and no process group that lists its ranks)."""
    graphs = workload.graphs
    world = max((g.world_size for g in graphs), default=1)
    if world <= 1 and not any(pg.ranks for g in graphs for pg in g.process_groups):
        has_comms = any(len(g.comms) for g in graphs)
        return -1, ("the trace has collectives but states no world size or process group ranks"
                    if has_comms else "the trace states no world size or process group")  # fmt: skip
    sizes: set[int] = set()
    for g in graphs:
        pgs = g.comms.pg_idx[np.isin(g.comms.kind, _GRADIENT) & (g.comms.pg_idx >= 0)]
        sizes |= {len(g.process_groups[i].ranks) for i in np.unique(pgs).tolist()}
    sizes.discard(0)
    if len(sizes) == 1 and (size := sizes.pop()) != max(world // pp, 1):
        return size, (f"the gradient collectives' process group has {size} ranks "
                      f"(world size {world})")  # fmt: skip
    return max(world // pp, 1), f"world size {world} / pp {pp}"
